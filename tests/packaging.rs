//! How kairos is shipped: `Dockerfile`, `compose.yaml` and `deploy/systemd/kairos.service`.
//!
//! No image is built here, so the container files are parsed and held to what the workspace
//! really is: the Dockerfile copies the binary `cargo build --release` makes of the package it
//! builds (read from `cargo metadata`), runs it as a user that is not root, and checks
//! `/healthz` on the port it exposes and binds; `compose.yaml` (Compose Specification, no
//! `version`) runs PostgreSQL 15 and NATS with JetStream, and its kairos service depends on
//! services that exist and have health checks, and is configured only through
//! `KAIROS_<SECTION>__<KEY>` variables that name settings of `config/default.toml`. The
//! systemd unit is hardened and `systemd-analyze verify` (Debian package `systemd`, which
//! scripts/test installs) accepts it without a warning; a missing tool fails, never skips.
//! The README's install and release-build commands name the package of the `kairos` binary.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

// ---------------------------------------------------------------------------------------
// Dockerfile

/// One instruction: its keyword (upper case) and the rest of its (joined) lines.
#[derive(Debug, Clone)]
struct Instruction {
    keyword: String,
    args: String,
}

/// One build stage: `FROM image [AS name]` and what follows until the next `FROM`.
#[derive(Debug)]
struct Stage {
    image: String,
    name: Option<String>,
    instructions: Vec<Instruction>,
}

impl Stage {
    fn all<'a>(&'a self, keyword: &str) -> impl Iterator<Item = &'a Instruction> + 'a {
        let keyword = keyword.to_owned();
        self.instructions
            .iter()
            .filter(move |instruction| instruction.keyword == keyword)
    }

    fn last(&self, keyword: &str) -> Option<&Instruction> {
        self.all(keyword).last()
    }

    /// The stage's working directory (the last `WORKDIR`; `/` without one).
    fn workdir(&self) -> String {
        self.last("WORKDIR")
            .map_or_else(|| "/".to_owned(), |instruction| instruction.args.clone())
    }

    /// Every `KEY=value` of the stage's `ENV` instructions.
    fn env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for instruction in self.all("ENV") {
            for word in instruction.args.split_whitespace() {
                let (key, value) = word
                    .split_once('=')
                    .unwrap_or_else(|| panic!("ENV {:?}: write KEY=value", instruction.args));
                env.insert(key.to_owned(), value.trim_matches('"').to_owned());
            }
        }
        env
    }
}

/// Parses a Dockerfile: comments and parser directives are dropped, `\` continues a line.
/// Panics on an instruction before the first `FROM` (other than `ARG`) or an empty file.
fn parse_dockerfile(text: &str) -> Vec<Stage> {
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if !current.is_empty() && trimmed.starts_with('#') {
            continue; // a comment inside a continued instruction
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim());
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    assert!(
        current.is_empty(),
        "the Dockerfile ends inside a continued line"
    );
    let mut stages: Vec<Stage> = Vec::new();
    for line in logical {
        let (keyword, args) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let keyword = keyword.to_ascii_uppercase();
        let args = args.trim().to_owned();
        if keyword == "FROM" {
            let words: Vec<&str> = args
                .split_whitespace()
                .filter(|word| !word.starts_with("--"))
                .collect();
            let name = match words.as_slice() {
                [_image] => None,
                [_image, as_, name] if as_.eq_ignore_ascii_case("as") => Some((*name).to_owned()),
                _ => panic!("FROM {args:?}: write FROM image [AS name]"),
            };
            stages.push(Stage {
                image: words[0].to_owned(),
                name,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push(Instruction { keyword, args });
        } else {
            assert_eq!(keyword, "ARG", "{keyword} before the first FROM");
        }
    }
    assert!(!stages.is_empty(), "the Dockerfile has no FROM");
    stages
}

/// The exec form (`["a", "b"]`) of CMD, ENTRYPOINT or HEALTHCHECK CMD; the shell form is
/// refused, since signals and arguments then go to a shell instead of kairos.
fn exec_form(what: &str, args: &str) -> Vec<String> {
    let value: Json = serde_json::from_str(args)
        .unwrap_or_else(|e| panic!("{what} {args:?}: use the exec form [\"…\"] ({e})"));
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} {args:?}: use the exec form [\"…\"]"))
        .iter()
        .map(|item| {
            item.as_str()
                .unwrap_or_else(|| panic!("{what}: {item} is not a string"))
                .to_owned()
        })
        .collect()
}

fn dockerfile() -> Vec<Stage> {
    parse_dockerfile(&read("Dockerfile"))
}

/// The runtime stage: the last one.
fn runtime(stages: &[Stage]) -> &Stage {
    stages.last().expect("a stage")
}

/// What `cargo metadata` says about the workspace package `name`: its binary targets.
fn binaries_of(name: &str) -> Vec<String> {
    let package = package_metadata(name);
    package["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .filter(|target| {
            target["kind"]
                .as_array()
                .expect("kind")
                .contains(&"bin".into())
        })
        .map(|target| target["name"].as_str().expect("name").to_owned())
        .collect()
}

/// The `cargo metadata` entry of the workspace package `name`.
fn package_metadata(name: &str) -> Json {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Json = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|package| package["name"] == name)
        .unwrap_or_else(|| panic!("package {name:?} is not in the workspace"))
        .clone()
}

/// The package a `cargo build` command line builds (`-p NAME`, `--package NAME`, `-pNAME`).
fn package_built(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.iter().enumerate().find_map(|(i, word)| match *word {
        "-p" | "--package" => words.get(i + 1).map(|name| (*name).to_owned()),
        _ => word
            .strip_prefix("--package=")
            .or_else(|| word.strip_prefix("-p").filter(|rest| !rest.is_empty()))
            .map(str::to_owned),
    })
}

fn join(dir: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{path}", dir.trim_end_matches('/'))
    }
}

#[test]
fn the_image_ships_the_release_binary_of_the_package_it_builds() {
    let stages = dockerfile();
    assert!(stages.len() >= 2, "a build stage and a runtime stage");
    let runtime = runtime(&stages);

    // The runtime stage copies one file from an earlier stage into /usr/local/bin.
    let copy = runtime
        .all("COPY")
        .find(|copy| copy.args.starts_with("--from="))
        .expect("the runtime stage copies the binary from the build stage (COPY --from=…)");
    let words: Vec<&str> = copy.args.split_whitespace().collect();
    let [from, source, destination] = words.as_slice() else {
        panic!(
            "COPY {:?}: write COPY --from=STAGE SOURCE DESTINATION",
            copy.args
        )
    };
    let from = from.trim_start_matches("--from=");
    let build = stages
        .iter()
        .find(|stage| stage.name.as_deref() == Some(from))
        .unwrap_or_else(|| panic!("COPY --from={from}: no stage of that name"));
    assert!(
        build.image.starts_with("rust:"),
        "the build stage is an official Rust image, not {}",
        build.image
    );

    // The build stage runs a release build of one package, from the lock file.
    let cargo_build = build
        .all("RUN")
        .map(|run| run.args.as_str())
        .find(|run| run.contains("cargo build"))
        .expect("the build stage runs cargo build");
    assert!(
        cargo_build.contains("--release"),
        "{cargo_build:?}: a --release build"
    );
    assert!(
        cargo_build.contains("--locked"),
        "{cargo_build:?}: --locked, so the image builds what Cargo.lock pins"
    );
    let package = package_built(cargo_build)
        .unwrap_or_else(|| panic!("{cargo_build:?}: name the package with -p"));
    let binaries = binaries_of(&package);
    assert_eq!(
        binaries,
        ["kairos"],
        "package {package} must build exactly the `kairos` binary"
    );

    // What it copies is where that build puts the binary.
    let expected = join(&build.workdir(), &format!("target/release/{}", binaries[0]));
    assert_eq!(
        join(&build.workdir(), source),
        expected,
        "COPY --from={from} must take the binary cargo build --release -p {package} makes"
    );
    assert_eq!(*destination, "/usr/local/bin/kairos");

    // And runs it: `kairos serve`.
    let entrypoint = exec_form(
        "ENTRYPOINT",
        &runtime.last("ENTRYPOINT").expect("an ENTRYPOINT").args,
    );
    assert_eq!(entrypoint, [*destination, "serve"]);
    let cmd = exec_form("CMD", &runtime.last("CMD").expect("a CMD").args);
    if let Some(at) = cmd.iter().position(|arg| arg == "--config") {
        let config = cmd.get(at + 1).expect("--config names a file");
        let made = runtime
            .all("RUN")
            .chain(runtime.all("COPY"))
            .any(|instruction| instruction.args.contains(config.as_str()));
        assert!(
            made,
            "CMD passes --config {config}, which no RUN or COPY creates"
        );
    }
    assert!(
        runtime.image.starts_with("debian:") && runtime.image.contains("slim"),
        "a small runtime image, not {}",
        runtime.image
    );
    let installs = runtime
        .all("RUN")
        .map(|run| run.args.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        installs.contains("ca-certificates"),
        "the runtime image has the CA bundle (TLS to NATS and collectors)"
    );
}

#[test]
fn the_readme_installs_and_builds_the_package_of_the_kairos_binary() {
    let readme = read("README.md");
    let install = readme
        .lines()
        .find(|line| line.starts_with("cargo install"))
        .expect("README: a cargo install command");
    let words: Vec<&str> = install.split_whitespace().collect();
    let path = words
        .iter()
        .position(|word| *word == "--path")
        .and_then(|at| words.get(at + 1))
        .unwrap_or_else(|| panic!("{install:?}: cargo install --path DIR"));
    let package = package_metadata("kairos-cli");
    let manifest = Path::new(package["manifest_path"].as_str().expect("manifest_path"));
    assert_eq!(
        manifest.parent().expect("a directory"),
        root().join(path),
        "{install:?} installs the package whose binary is kairos"
    );
    assert_eq!(binaries_of("kairos-cli"), ["kairos"]);
    let build = readme
        .lines()
        .find(|line| line.starts_with("cargo build --release"))
        .expect("README: the release build");
    assert_eq!(
        package_built(build).as_deref(),
        Some("kairos-cli"),
        "{build:?}: at the workspace root a bare cargo build builds only the root package"
    );
}

#[test]
fn the_image_runs_as_a_user_that_is_not_root() {
    let stages = dockerfile();
    let runtime = runtime(&stages);
    let user = runtime
        .last("USER")
        .expect("the runtime stage sets USER")
        .args
        .clone();
    let (name, group) = user.split_once(':').unwrap_or((&user, ""));
    for id in [name, group] {
        assert!(
            !matches!(id, "root" | "0"),
            "USER {user}: kairos needs no privileges"
        );
    }
    // A named user must exist in the image: created by a RUN of the runtime stage.
    if name.parse::<u32>().is_err() {
        let created = runtime.all("RUN").any(|run| {
            run.args.contains("useradd") && run.args.split_whitespace().last() == Some(name)
        });
        assert!(
            created,
            "USER {name}: no RUN of the runtime stage creates it (useradd)"
        );
    }
    // USER comes before ENTRYPOINT, so the service itself runs as that user.
    let position = |keyword: &str| {
        runtime
            .instructions
            .iter()
            .rposition(|instruction| instruction.keyword == keyword)
    };
    assert!(position("USER") < position("ENTRYPOINT"));
}

#[test]
fn the_image_health_check_asks_healthz_on_the_port_it_exposes_and_binds() {
    let stages = dockerfile();
    let runtime = runtime(&stages);
    let exposed: BTreeSet<u16> = runtime
        .all("EXPOSE")
        .flat_map(|expose| expose.args.split_whitespace())
        .map(|port| {
            port.trim_end_matches("/tcp")
                .parse()
                .unwrap_or_else(|e| panic!("EXPOSE {port}: {e}"))
        })
        .collect();
    let bind: SocketAddr = runtime
        .env()
        .get("KAIROS_HTTP__BIND")
        .expect("ENV KAIROS_HTTP__BIND: the default bind is loopback, unreachable from outside")
        .parse()
        .expect("KAIROS_HTTP__BIND is an address:port");
    assert!(
        bind.ip().is_unspecified(),
        "bind {bind}: every interface of the container"
    );
    assert_eq!(
        exposed,
        BTreeSet::from([bind.port()]),
        "EXPOSE the port kairos binds"
    );

    let healthcheck = runtime
        .last("HEALTHCHECK")
        .expect("a HEALTHCHECK")
        .args
        .clone();
    let (options, command) = healthcheck
        .split_once("CMD ")
        .unwrap_or_else(|| panic!("HEALTHCHECK {healthcheck:?}: HEALTHCHECK [OPTIONS] CMD [...]"));
    for option in options.split_whitespace() {
        let (name, value) = option.split_once('=').expect("--option=value");
        assert!(
            ["--interval", "--timeout", "--start-period", "--retries"].contains(&name),
            "HEALTHCHECK option {name}"
        );
        assert!(!value.is_empty());
    }
    let command = exec_form("HEALTHCHECK CMD", command);
    let url = command
        .iter()
        .find(|arg| arg.starts_with("http://"))
        .expect("the health check calls a URL");
    assert_eq!(
        *url,
        format!("http://127.0.0.1:{}/healthz", bind.port()),
        "the health check asks /healthz where kairos listens"
    );
    // The tool it runs is installed in the runtime stage and fails on an HTTP error.
    let tool = &command[0];
    let installed = runtime
        .all("RUN")
        .any(|run| run.args.contains("apt-get install") && run.args.contains(tool.as_str()));
    assert!(installed, "{tool} is not installed in the runtime stage");
    if tool == "curl" {
        assert!(
            command.iter().any(|arg| arg == "--fail" || arg == "-f"),
            "curl without --fail exits 0 on a 500"
        );
    }
}

// ---------------------------------------------------------------------------------------
// compose.yaml and the configuration

/// The settings `config/default.toml` names: `section.key` for every key set there or shown
/// commented out (optional keys such as `nats.tls_ca` and `auth.tokens`), and for
/// `[[auth.tokens]]` the keys of one token.
struct Settings {
    keys: BTreeSet<String>,
    token_keys: BTreeSet<String>,
}

fn settings() -> Settings {
    let mut keys = BTreeSet::new();
    let mut token_keys = BTreeSet::new();
    let mut section = String::new();
    for line in read("config/default.toml").lines() {
        let line = line.trim();
        let text = line.trim_start_matches('#').trim();
        if let Some(header) = text.strip_prefix("[[").and_then(|t| t.strip_suffix("]]")) {
            section = header.to_owned();
            if let Some((parent, key)) = header.split_once('.') {
                keys.insert(format!("{parent}.{key}"));
            }
            continue;
        }
        if let Some(header) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            if !line.starts_with('#') {
                section = header.to_owned();
            }
            continue;
        }
        let Some((key, _value)) = text.split_once(" = ") else {
            continue;
        };
        if section.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            continue;
        }
        if section == "auth.tokens" {
            token_keys.insert(key.to_owned());
        } else {
            keys.insert(format!("{section}.{key}"));
        }
    }
    Settings { keys, token_keys }
}

/// Checks one environment variable against the settings; returns `section.key` for a
/// `KAIROS_` setting, `None` for a variable that is not kairos configuration.
fn setting_of(name: &str, value: &str, settings: &Settings) -> Option<String> {
    let rest = name.strip_prefix("KAIROS_")?;
    let (section, key) = rest.split_once("__").unwrap_or_else(|| {
        panic!("{name}: a setting is KAIROS_<SECTION>__<KEY> (double underscore)")
    });
    let setting = format!(
        "{}.{}",
        section.to_ascii_lowercase(),
        key.to_ascii_lowercase()
    );
    assert!(
        settings.keys.contains(&setting),
        "{name}: config/default.toml has no setting {setting}"
    );
    if setting == "auth.tokens" {
        check_tokens(name, value, settings);
    }
    Some(setting)
}

/// `KAIROS_AUTH__TOKENS='[{name = "…", role = "…", sha256 = "…"}, …]'`: every token names
/// exactly the keys of `[[auth.tokens]]`, with a known role.
fn check_tokens(name: &str, value: &str, settings: &Settings) {
    let tokens = parse_tables(name, &interpolate(value));
    assert!(!tokens.is_empty(), "{name}: at least one token");
    for token in tokens {
        let role = token.get("role").map(String::as_str).unwrap_or_default();
        assert!(
            ["deployer", "executor", "reader"].contains(&role),
            "{name}: role {role:?} is not deployer, executor or reader"
        );
        let keys: BTreeSet<String> = token.into_keys().collect();
        assert_eq!(
            keys, settings.token_keys,
            "{name}: a token has the keys of [[auth.tokens]]"
        );
    }
}

/// Compose's interpolation: `${NAME}`, `${NAME:?message}`, `${NAME:-default}` become
/// `<NAME>`, the value the variable will have.
fn interpolate(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('}').expect("${…} is closed") + at;
        let variable = &rest[at + 2..end];
        let variable_name = variable.split([':', '-', '?']).next().unwrap_or_default();
        out.push_str(&format!("<{variable_name}>"));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The array of tables figment reads from a `KAIROS_*` value starting with `[`:
/// `[{key = "text", key = bare}, …]`. Panics naming `name` on anything else.
fn parse_tables(name: &str, value: &str) -> Vec<BTreeMap<String, String>> {
    let chars: Vec<char> = value.trim().chars().collect();
    let mut at = 0;
    let skip = |at: &mut usize| {
        while *at < chars.len() && chars[*at].is_whitespace() {
            *at += 1;
        }
    };
    let expect = |at: &mut usize, c: char| {
        skip(at);
        assert_eq!(
            chars.get(*at),
            Some(&c),
            "{name}: expected {c:?} at {at} in {value}"
        );
        *at += 1;
    };
    let mut tables = Vec::new();
    expect(&mut at, '[');
    loop {
        skip(&mut at);
        if chars.get(at) == Some(&']') {
            break;
        }
        expect(&mut at, '{');
        let mut table = BTreeMap::new();
        loop {
            skip(&mut at);
            let start = at;
            while at < chars.len() && (chars[at].is_ascii_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            let key: String = chars[start..at].iter().collect();
            assert!(!key.is_empty(), "{name}: expected a key at {at} in {value}");
            expect(&mut at, '=');
            skip(&mut at);
            let text: String = if chars.get(at) == Some(&'"') {
                let start = at + 1;
                at = start;
                while at < chars.len() && chars[at] != '"' {
                    at += 1;
                }
                expect(&mut at, '"');
                chars[start..at - 1].iter().collect()
            } else {
                let start = at;
                while at < chars.len() && !matches!(chars[at], ',' | '}') {
                    at += 1;
                }
                chars[start..at]
                    .iter()
                    .collect::<String>()
                    .trim()
                    .to_owned()
            };
            assert!(
                table.insert(key.clone(), text).is_none(),
                "{name}: {key} twice in one table"
            );
            skip(&mut at);
            match chars.get(at) {
                Some(',') => at += 1,
                Some('}') => {
                    at += 1;
                    break;
                }
                other => panic!("{name}: expected ',' or '}}' at {at}, found {other:?}"),
            }
        }
        tables.push(table);
        skip(&mut at);
        if chars.get(at) == Some(&',') {
            at += 1;
        }
    }
    expect(&mut at, ']');
    skip(&mut at);
    assert_eq!(at, chars.len(), "{name}: text after the closing ']'");
    tables
}

fn compose() -> Yaml {
    serde_yaml::from_str(&read("compose.yaml")).expect("compose.yaml is YAML")
}

fn service<'a>(compose: &'a Yaml, name: &str) -> &'a Yaml {
    let service = &compose["services"][name];
    assert!(service.is_mapping(), "compose.yaml has no service {name:?}");
    service
}

fn strings(value: &Yaml) -> Vec<String> {
    match value {
        Yaml::String(text) => text.split_whitespace().map(str::to_owned).collect(),
        Yaml::Sequence(items) => items
            .iter()
            .map(|item| item.as_str().expect("a string").to_owned())
            .collect(),
        _ => Vec::new(),
    }
}

/// A service's environment, in either of its two Compose forms.
fn environment(service: &Yaml) -> BTreeMap<String, String> {
    match &service["environment"] {
        Yaml::Mapping(map) => map
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    Yaml::String(text) => text.clone(),
                    other => serde_yaml::to_string(other)
                        .expect("yaml")
                        .trim()
                        .to_owned(),
                };
                (key.as_str().expect("a name").to_owned(), value)
            })
            .collect(),
        Yaml::Sequence(items) => items
            .iter()
            .map(|item| {
                let (key, value) = item.as_str().expect("NAME=value").split_once('=').unwrap();
                (key.to_owned(), value.to_owned())
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// `scheme://[user[:password]@]host:port[/…]` → (host, port).
fn host_port(url: &str) -> (String, u16) {
    let (_scheme, rest) = url.split_once("://").expect("scheme://");
    let authority = rest.split('/').next().unwrap();
    let authority = authority.rsplit('@').next().unwrap();
    let (host, port) = authority.rsplit_once(':').expect("host:port");
    (host.to_owned(), port.parse().expect("a port"))
}

#[test]
fn compose_runs_postgres_15_and_nats_with_jetstream_beside_kairos() {
    let compose = compose();
    assert!(
        compose.get("version").is_none(),
        "the Compose Specification has no `version` key"
    );
    let postgres = service(&compose, "postgres");
    let image = postgres["image"].as_str().expect("postgres image");
    assert!(
        image.starts_with("postgres:15"),
        "PostgreSQL 15, not {image}"
    );
    let nats = service(&compose, "nats");
    assert!(nats["image"]
        .as_str()
        .expect("nats image")
        .starts_with("nats:"));
    let command = strings(&nats["command"]);
    assert!(
        command
            .iter()
            .any(|arg| arg == "-js" || arg == "--jetstream"),
        "nats runs with JetStream (-js): {command:?}"
    );
    let kairos = service(&compose, "kairos");
    assert_eq!(
        kairos["build"].as_str(),
        Some("."),
        "kairos is built from the Dockerfile at the workspace root"
    );
}

#[test]
fn compose_kairos_depends_on_healthy_services_that_exist() {
    let compose = compose();
    let kairos = service(&compose, "kairos");
    let depends_on = kairos["depends_on"]
        .as_mapping()
        .expect("kairos: depends_on with conditions");
    let names: BTreeSet<&str> = depends_on
        .keys()
        .map(|name| name.as_str().expect("a service name"))
        .collect();
    assert_eq!(names, BTreeSet::from(["nats", "postgres"]));
    for (name, condition) in depends_on {
        let name = name.as_str().unwrap();
        let dependency = service(&compose, name);
        assert_eq!(
            condition["condition"].as_str(),
            Some("service_healthy"),
            "kairos waits for {name} to be healthy, not just started"
        );
        let test = strings(&dependency["healthcheck"]["test"]);
        assert!(
            matches!(test.first().map(String::as_str), Some("CMD" | "CMD-SHELL")),
            "{name} has a health check (healthcheck.test)"
        );
    }
    // And kairos's own: /healthz on the port it binds.
    let test = strings(&kairos["healthcheck"]["test"]);
    let bind: SocketAddr = environment(kairos)["KAIROS_HTTP__BIND"]
        .parse()
        .expect("KAIROS_HTTP__BIND is address:port");
    assert!(
        test.contains(&format!("http://127.0.0.1:{}/healthz", bind.port())),
        "kairos's health check asks /healthz on its port: {test:?}"
    );
}

#[test]
fn compose_configures_kairos_only_with_settings_it_has() {
    let settings = settings();
    // The parser itself: what every environment below is held to.
    for known in [
        "database.url",
        "nats.url",
        "http.bind",
        "auth.mode",
        "auth.tokens",
    ] {
        assert!(
            settings.keys.contains(known),
            "config/default.toml: {known}"
        );
    }
    let compose = compose();
    let kairos = service(&compose, "kairos");
    let env = environment(kairos);
    let configured: BTreeSet<String> = env
        .iter()
        .filter_map(|(name, value)| setting_of(name, value, &settings))
        .collect();
    for needed in ["database.url", "nats.url", "http.bind"] {
        assert!(configured.contains(needed), "compose sets {needed}");
    }

    // The URLs name the services, on the ports those images listen on.
    let (host, port) = host_port(&env["KAIROS_DATABASE__URL"]);
    assert_eq!((host.as_str(), port), ("postgres", 5432));
    let postgres = environment(service(&compose, "postgres"));
    let database = env["KAIROS_DATABASE__URL"].rsplit('/').next().unwrap();
    assert_eq!(
        postgres.get("POSTGRES_DB").map(String::as_str),
        Some(database)
    );
    let (host, port) = host_port(&env["KAIROS_NATS__URL"]);
    assert_eq!((host.as_str(), port), ("nats", 4222));

    // Off loopback, kairos refuses auth.mode = none: compose must pick tokens or jwt.
    let bind: SocketAddr = env["KAIROS_HTTP__BIND"].parse().expect("address:port");
    if !bind.ip().is_loopback() {
        let mode = env.get("KAIROS_AUTH__MODE").map(String::as_str);
        assert!(
            matches!(mode, Some("tokens" | "jwt")),
            "bind {bind} needs KAIROS_AUTH__MODE tokens or jwt, not {mode:?}"
        );
        if mode == Some("tokens") {
            assert!(env.contains_key("KAIROS_AUTH__TOKENS"));
        }
    }
    // The published port is the one kairos binds.
    let ports = strings(&kairos["ports"]);
    assert!(
        ports
            .iter()
            .all(|mapping| mapping.ends_with(&format!(":{}", bind.port()))),
        "published ports {ports:?} map to the bind port {}",
        bind.port()
    );
}

#[test]
fn a_setting_that_does_not_exist_is_caught() {
    // The check the compose and systemd environments pass is not vacuous.
    let settings = settings();
    for (name, value) in [
        ("KAIROS_HTTP__BINDS", "0.0.0.0:8080"),
        ("KAIROS_DATABASE_URL", "postgres://x"),
        (
            "KAIROS_AUTH__TOKENS",
            "[{name = \"a\", role = \"root\", sha256 = \"00\"}]",
        ),
        ("KAIROS_AUTH__TOKENS", "[{name = \"a\", role = \"reader\"}]"),
    ] {
        let caught = std::panic::catch_unwind(|| setting_of(name, value, &settings));
        assert!(caught.is_err(), "{name}={value} was accepted");
    }
    assert_eq!(
        setting_of(
            "KAIROS_AUTH__TOKENS",
            "[{name = \"a\", role = \"reader\", sha256 = \"00\"}]",
            &settings
        ),
        Some("auth.tokens".to_owned())
    );
    assert_eq!(setting_of("DATABASE_URL", "postgres://x", &settings), None);
}

// ---------------------------------------------------------------------------------------
// systemd

/// `key=value` lines of a unit's `[Service]` section, in order (a key may repeat).
fn service_section(unit: &str) -> Vec<(String, String)> {
    let mut in_service = false;
    let mut lines = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service && !line.is_empty() && !line.starts_with(['#', ';']) {
            let (key, value) = line.split_once('=').expect("key=value");
            lines.push((key.to_owned(), value.to_owned()));
        }
    }
    lines
}

const UNIT: &str = "deploy/systemd/kairos.service";

#[test]
fn the_systemd_unit_is_hardened() {
    let unit = read(UNIT);
    let service = service_section(&unit);
    let value = |key: &str| {
        service
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(value("ExecStart"), ["/usr/local/bin/kairos serve"]);
    for (key, expected) in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("CapabilityBoundingSet", ""),
        ("MemoryDenyWriteExecute", "yes"),
        ("LockPersonality", "yes"),
        ("RestrictNamespaces", "yes"),
        ("RestrictRealtime", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectControlGroups", "yes"),
        ("SystemCallArchitectures", "native"),
        ("Restart", "on-failure"),
    ] {
        assert_eq!(value(key), [expected], "{UNIT}: {key}={expected}");
    }
    assert_eq!(
        value("SystemCallFilter").first().copied(),
        Some("@system-service")
    );
    let families: BTreeSet<&str> = value("RestrictAddressFamilies")
        .iter()
        .flat_map(|v| v.split_whitespace())
        .collect();
    assert_eq!(
        families,
        BTreeSet::from(["AF_INET", "AF_INET6", "AF_UNIX"]),
        "IP for PostgreSQL, NATS and the API; Unix sockets for a local PostgreSQL"
    );
    assert!(!value("User").contains(&"root"));

    // Its settings: the example environment file holds only settings kairos has.
    let settings = settings();
    let env_file = value("EnvironmentFile");
    assert_eq!(env_file, ["/etc/kairos/kairos.env"]);
    let example = read("deploy/systemd/kairos.env.example");
    let mut configured = BTreeSet::new();
    for line in example.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line.split_once('=').expect("NAME=value");
        configured.extend(setting_of(name, value, &settings));
    }
    for needed in ["database.url", "nats.url", "http.bind"] {
        assert!(configured.contains(needed), "the example sets {needed}");
    }
}

/// A copy of the unit whose `ExecStart` runs an executable that exists (verify checks it).
fn unit_with_executable(dir: &Path, unit: &str) -> PathBuf {
    let executable = dir.join("kairos");
    std::fs::write(&executable, "#!/bin/sh\nexit 0\n").expect("write");
    let mut permissions = std::fs::metadata(&executable).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&executable, permissions).expect("chmod");
    let rewritten = unit.replace(
        "ExecStart=/usr/local/bin/kairos ",
        &format!("ExecStart={} ", executable.display()),
    );
    assert_ne!(rewritten, unit, "ExecStart=/usr/local/bin/kairos …");
    let path = dir.join("kairos.service");
    std::fs::write(&path, rewritten).expect("write unit");
    path
}

/// `systemd-analyze verify`: (success, everything it printed).
fn verify(unit: &Path) -> (bool, String) {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .expect("systemd-analyze runs (apt-get install systemd; scripts/test installs it)");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), printed)
}

/// A scratch directory under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("kairos-packaging-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn systemd_analyze_verifies_the_unit_without_a_warning() {
    let scratch = Scratch::new("verify");
    let unit = unit_with_executable(&scratch.0, &read(UNIT));
    let (success, printed) = verify(&unit);
    assert!(success && printed.trim().is_empty(), "{UNIT}:\n{printed}");
}

#[test]
fn systemd_analyze_catches_a_broken_unit() {
    // What the check above relies on: a misspelt directive or a bad value is printed (verify
    // still exits 0 for those), and a missing executable fails.
    let scratch = Scratch::new("broken");
    let shipped = read(UNIT);
    for broken in [
        shipped.replace("LockPersonality=yes", "LockPersonalty=yes"),
        shipped.replace(
            "RestrictAddressFamilies=AF_INET",
            "RestrictAddressFamilies=AF_NOPE",
        ),
    ] {
        let unit = unit_with_executable(&scratch.0, &broken);
        let (success, printed) = verify(&unit);
        assert!(
            !(success && printed.trim().is_empty()),
            "not caught: {broken}"
        );
    }
    let missing = scratch.0.join("missing");
    let unit = scratch.0.join("missing.service");
    let text = shipped.replace(
        "ExecStart=/usr/local/bin/kairos ",
        &format!("ExecStart={} ", missing.display()),
    );
    std::fs::write(&unit, text).expect("write unit");
    let (success, printed) = verify(&unit);
    assert!(
        !success,
        "verify must fail on a missing executable: {printed}"
    );
}
