//! No row type leaves the store (ARCHITECTURE.md): a `pub struct` of kairos-store is a plain
//! value, decoded inside the store from a private row struct, a `rows.rs` row or a tuple. This
//! reads the store's sources and fails on every `pub struct` that derives `sqlx::FromRow`; a
//! private or `pub(crate)` struct may derive it.

use std::fs;
use std::path::{Path, PathBuf};

#[test]
fn no_public_struct_derives_from_row() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for path in rust_files(&src) {
        let text = fs::read_to_string(&path).expect("a source file of kairos-store");
        for line in public_row_structs(&text) {
            found.push(format!("{}:{line}", path.display()));
        }
    }
    assert!(
        found.is_empty(),
        "these pub structs derive sqlx::FromRow; decode them from a private row struct \
         instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_derives_and_skips_private_structs() {
    let text = "\
/// A value.
#[derive(Debug, Clone,
    sqlx::FromRow)]
#[allow(dead_code)]
/// More docs.
pub struct Leaks {
    pub a: i64,
}

#[derive(sqlx::FromRow)]
struct Private(i64);

#[derive(FromRow)]
pub(crate) struct CrateRow(i64);

#[derive(Debug)]
pub struct Plain;
";
    assert_eq!(public_row_structs(text), vec![6]);
}

/// The 1-based lines of the `pub struct`s in `text` that derive `FromRow`.
fn public_row_structs(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("#[derive(") {
            i += 1;
            continue;
        }
        // A derive may span lines: read it to its closing `)]`.
        let mut derive = lines[i].to_string();
        while !derive.ends_with(")]") && i + 1 < lines.len() {
            i += 1;
            derive.push_str(lines[i]);
        }
        i += 1;
        if !derive.contains("FromRow") {
            continue;
        }
        // The item it applies to follows any further attributes and doc comments.
        while i < lines.len()
            && (lines[i].starts_with("#[") || lines[i].starts_with("//") || lines[i].is_empty())
        {
            i += 1;
        }
        if lines
            .get(i)
            .is_some_and(|item| item.starts_with("pub struct "))
        {
            found.push(i + 1);
        }
    }
    found
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("a source directory of kairos-store") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}
