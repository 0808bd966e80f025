//! ARCHITECTURE.md names only what exists. Each `code span` outside fenced blocks is a token,
//! and the first rule that fits it must hold:
//! 1. `kairos <command>`: a variant of crates/kairos-cli/src/main.rs (`serve` is `Serve`).
//! 2. `/path` or `POST /path`: a string literal of crates/kairos-api/src.
//! 3. several words (`for update skip locked`): found in crates/*/src or migrations/, case and
//!    spacing aside.
//! 4. a path (with `/` or a file extension): exists from the repository root or, in a section
//!    whose heading names `crates/<crate>`, from that crate or its `src/`.
//! 5. `kairos-<name>`: the directory crates/kairos-<name>.
//! 6. an item (`Foo`, `foo()`, `foo!`, `Foo::bar`): each segment is defined (fn, struct, enum,
//!    variant, field, trait, type, const, static, mod, macro, `pub use`) in crates/*/src; after
//!    `kairos_<crate>`, modules are files and the next segment is defined in the last one
//!    (`kairos_store::status::lock`). Else a status (a literal of kairos-core's `run.rs`), a
//!    `KAIROS_*` literal, or a lowercase literal, SQL name or Cargo.toml key (dependency).
//! 7. anything else (`key:dlq:<attempt>`, `nats.duplicate_window_s`): verbatim in
//!    crates/*/src or migrations/.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

const EXTENSIONS: [&str; 6] = [".rs", ".sql", ".md", ".toml", ".json", ".yaml"];
const KEYWORDS: &str = " fn struct enum trait type const static mod macro_rules ";

#[test]
fn architecture_names_only_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = Repo::load(fs::canonicalize(root).expect("the repository root"));
    let doc = fs::read_to_string(repo.root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let (mut section, mut fenced, mut unresolved) = (None, false, Vec::new());
    for (i, line) in doc.lines().enumerate() {
        fenced ^= line.starts_with("```");
        if fenced || line.starts_with("```") {
            continue;
        }
        if line.starts_with("## ") || line.starts_with("### ") {
            let named = line.split('`').find(|t| t.starts_with("crates/"));
            section = named.map(|t| repo.root.join(t));
        }
        let spans: Vec<&str> = line.split('`').collect();
        if line.matches('`').count() % 2 == 1 {
            unresolved.push(format!("line {}: a code span is not closed", i + 1));
        }
        for token in spans.iter().skip(1).step_by(2) {
            if !repo.resolves(token.trim(), section.as_deref()) {
                unresolved.push(format!("line {}: `{token}`", i + 1));
            }
        }
    }
    let list = unresolved.join("\n");
    assert!(list.is_empty(), "ARCHITECTURE.md names:\n{list}");
}

type Source = (PathBuf, String, HashSet<String>);

#[derive(Default)]
struct Repo {
    root: PathBuf,
    /// Each Rust file of crates/*/src: its path, its text, what it defines or re-exports.
    sources: Vec<Source>,
    /// The words of migrations/ outside comments, and the keys of every Cargo.toml.
    names: HashSet<String>,
    /// All of crates/*/src and migrations/.
    text: String,
}

impl Repo {
    fn load(root: PathBuf) -> Repo {
        let mut repo = Repo {
            root,
            ..Repo::default()
        };
        let mut files = walk(&repo.root.join("crates"));
        files.push(repo.root.join("Cargo.toml"));
        for file in files {
            let (source, rust) = (read(&file), file.extension().is_some_and(|e| e == "rs"));
            if file.ends_with("Cargo.toml") {
                let keys = source.lines().map(|line| before(before(line, "="), "."));
                repo.names.extend(keys.map(|key| key.trim().to_string()));
            } else if rust && file.to_string_lossy().contains("/src/") {
                repo.text += &source;
                let defs = definitions(&source);
                repo.sources.push((file, source, defs));
            }
        }
        for file in walk(&repo.root.join("migrations")) {
            let source = read(&file);
            let code = source.lines().map(|line| before(line, "--"));
            repo.names.extend(code.flat_map(words).map(str::to_string));
            repo.text += &source;
        }
        repo
    }

    fn resolves(&self, token: &str, section: Option<&Path>) -> bool {
        let words: Vec<&str> = token.split_whitespace().collect();
        let methods = ["GET", "POST", "PUT", "DELETE", "PATCH"];
        let route = match words[..] {
            [method, path] if methods.contains(&method) => path.strip_prefix('/'),
            _ => token.strip_prefix('/'),
        };
        let plain = |c: char| c.is_ascii_alphanumeric() || "_.-/".contains(c);
        let extension = EXTENSIONS.iter().any(|e| token.ends_with(e));
        if words.len() > 1 && words[0] == "kairos" {
            let main = self.root.join("crates/kairos-cli/src/main.rs");
            let command = words[1][..1].to_uppercase() + &words[1][1..];
            words.len() == 2 && self.defines(&main, &command)
        } else if let Some(route) = route {
            let quoted = format!("\"/{}\"", before(route, "?"));
            self.quoted(&self.root.join("crates/kairos-api/src"), &quoted)
        } else if words.len() > 1 {
            normalize(&self.text).contains(&normalize(token))
        } else if token.chars().all(plain) && (token.contains('/') || extension) {
            let in_crate = section.map(|c| [c.to_path_buf(), c.join("src")]);
            let mut bases = in_crate.into_iter().flatten().chain([self.root.clone()]);
            bases.any(|base| base.join(token).exists())
        } else if token.starts_with("kairos-") && !token.contains(['/', '.']) {
            self.root.join("crates").join(token).is_dir()
        } else if let Some(segments) = item_path(token) {
            self.item(&segments)
        } else {
            self.text.contains(token)
        }
    }

    fn item(&self, segments: &[&str]) -> bool {
        let crates = self.root.join("crates");
        let Some(krate) = segments[0].strip_prefix("kairos_") else {
            let known = |name: &&str| self.defines(&crates, name) || self.named(name);
            return segments.iter().all(known);
        };
        let src = crates.join(format!("kairos-{}/src", krate.replace('_', "-")));
        let (mut dir, mut scope) = (src.clone(), Some(src.join("lib.rs")));
        for segment in &segments[1..] {
            let files = [".rs", "/mod.rs"].map(|end| dir.join(format!("{segment}{end}")));
            match (scope.take(), files.into_iter().find(|file| file.exists())) {
                (Some(_), Some(module)) => (dir, scope) = (dir.join(segment), Some(module)),
                // A type: its methods, variants and constants may be anywhere in the crate.
                (Some(file), None) if self.defines(&file, segment) => {}
                (None, _) if self.defines(&src, segment) => {}
                _ => return false,
            }
        }
        true
    }

    /// A name that is no Rust item: a status, a `KAIROS_*` name, a policy or a role, a SQL
    /// name, a dependency.
    fn named(&self, name: &str) -> bool {
        let (quoted, crates) = (format!("\"{name}\""), self.root.join("crates"));
        if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            let run = self.root.join("crates/kairos-core/src/run.rs");
            let kairos = name.starts_with("KAIROS_") && self.quoted(&crates, &quoted);
            self.quoted(&run, &quoted) || kairos
        } else {
            self.names.contains(name) || self.quoted(&crates, &quoted)
        }
    }

    fn defines(&self, path: &Path, name: &str) -> bool {
        self.under(path).any(|(_, _, defs)| defs.contains(name))
    }

    fn quoted(&self, path: &Path, text: &str) -> bool {
        self.under(path).any(|(_, source, _)| source.contains(text))
    }

    /// The Rust files under `path`, a directory or one file.
    fn under<'r>(&'r self, path: &'r Path) -> impl Iterator<Item = &'r Source> {
        self.sources.iter().filter(move |s| s.0.starts_with(path))
    }
}

/// What a source file defines, declares as a variant or a field, or re-exports.
fn definitions(source: &str) -> HashSet<String> {
    let code: Vec<&str> = source.lines().map(|line| before(line, "//")).collect();
    let code = code.join("\n");
    let tokens: Vec<&str> = words(&code).collect();
    let keyword = |pair: &&[&str]| KEYWORDS.contains(&format!(" {} ", pair[0]));
    let pairs = tokens.windows(2).filter(keyword);
    let mut defs: HashSet<String> = pairs.map(|pair| pair[1].to_string()).collect();
    for line in code.lines() {
        let line = line.trim_start().trim_start_matches("pub ");
        let name = line.split(|c| !identifier(c)).next().unwrap_or("");
        let rest = line[name.len()..].trim_start();
        let variant = name.starts_with(char::is_uppercase)
            && (rest.is_empty() || rest.starts_with([',', '(', '{', '=']));
        let field = name.starts_with(char::is_lowercase) && rest.starts_with(": ");
        if variant || field {
            defs.insert(name.to_string());
        }
    }
    for export in ["pub use ", "pub(crate) use "] {
        for statement in code.split(export).skip(1) {
            defs.extend(words(before(statement, ";")).map(str::to_string));
        }
    }
    defs
}

/// `Foo::bar`, `foo()` or `foo!` → its segments; `None` when the token is no item path.
fn item_path(token: &str) -> Option<Vec<&str>> {
    let bare = token.strip_suffix("()").or(token.strip_suffix('!'));
    let segments: Vec<&str> = bare.unwrap_or(token).split("::").collect();
    let ident = |s: &&str| s.starts_with(char::is_alphabetic) && words(s).eq([*s]);
    segments.iter().all(ident).then_some(segments)
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c| !identifier(c)).filter(|w| !w.is_empty())
}

fn identifier(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn before<'t>(text: &'t str, marker: &str) -> &'t str {
    text.split(marker).next().unwrap_or("")
}

fn normalize(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.join(" ").to_lowercase()
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let entries = fs::read_dir(dir).into_iter().flatten().flatten();
    let (dirs, mut files): (Vec<_>, Vec<_>) = entries.map(|e| e.path()).partition(|p| p.is_dir());
    files.extend(dirs.iter().flat_map(|dir| walk(dir)));
    files
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}
