//! Every library crate says in its `[lib]` table whether it has unit tests and doc examples
//! (`test = false`, `doctest = false` where it has none), and says it truly: a crate without
//! them builds no empty test binary and runs no rustdoc pass (on a 2-core CI machine, 53
//! empty test binaries and 85 empty doc-test passes took about two minutes), and a crate
//! whose first test or doc example is added fails here until its flag is taken out, so no
//! test is ever skipped in silence.

use std::path::Path;

use curator_house::{repo_root, rust_files, strip_comments, workspace_crates};

/// rustdoc runs a fenced block of a doc comment as a test unless its info string names
/// another language; these are the words that keep it Rust.
const RUST_FENCES: &[&str] = &[
    "rust",
    "ignore",
    "should_panic",
    "no_run",
    "compile_fail",
    "test_harness",
    "edition2015",
    "edition2018",
    "edition2021",
    "edition2024",
];

/// Whether the crate's `src/` holds a unit test (`#[test]`, or a `cfg` naming `test`).
fn has_unit_tests(src: &Path) -> bool {
    rust_files(src).iter().any(|f| {
        let code = strip_comments(&std::fs::read_to_string(f).unwrap_or_default());
        code.contains("#[test]")
            || code
                .lines()
                .any(|l| l.trim_start().starts_with("#[cfg(") && l.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == "test"))
    })
}

/// Whether a doc comment of the crate's `src/` holds a block rustdoc would run (or the crate
/// takes its docs from a file, which may).
fn has_doc_examples(src: &Path) -> bool {
    rust_files(src).iter().any(|f| {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        if text.contains("#![doc = include_str!") {
            return true;
        }
        let mut fenced = false;
        for line in text.lines() {
            let line = line.trim_start();
            let Some(body) = line.strip_prefix("///").or_else(|| line.strip_prefix("//!")) else {
                fenced = false;
                continue;
            };
            let Some(info) = body.trim().strip_prefix("```") else { continue };
            if fenced {
                fenced = false;
                continue;
            }
            fenced = true;
            if info.trim().is_empty() || info.split(',').all(|w| RUST_FENCES.contains(&w.trim())) {
                return true;
            }
        }
        false
    })
}

/// `key = false` in the manifest's `[lib]` table.
fn lib_flag_off(manifest: &str, key: &str) -> bool {
    let Some(start) = manifest.find("\n[lib]") else { return false };
    let table = &manifest[start + 6..];
    let table = &table[..table.find("\n[").unwrap_or(table.len())];
    table.lines().any(|l| l.split('#').next().unwrap_or("").replace(' ', "") == format!("{key}=false"))
}

#[test]
fn every_library_says_truly_whether_it_has_tests_and_doc_examples() {
    let root = repo_root();
    let mut wrong = Vec::new();
    let crates = workspace_crates(&root);
    assert!(crates.len() > 50, "found only {} crates", crates.len());
    for dir in crates {
        let src = dir.join("src");
        if !src.join("lib.rs").exists() {
            continue;
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        let name = dir.strip_prefix(&root).unwrap_or(&dir).display().to_string();
        for (key, has, what) in [("test", has_unit_tests(&src), "unit tests"), ("doctest", has_doc_examples(&src), "doc examples")] {
            match (lib_flag_off(&manifest, key), has) {
                (true, true) => wrong.push(format!("{name}: has {what}: take `{key} = false` out of its [lib] table")),
                (false, false) => wrong.push(format!("{name}: has no {what}: add `{key} = false` to its [lib] table")),
                _ => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_scan_finds_tests_and_doc_examples_and_reads_the_flags() {
    let dir = std::env::temp_dir().join(format!("curator-house-targets-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("lib.rs"), "//! ```text\n//! not rust\n//! ```\n// #[test] in a comment\npub fn f() {}\n").unwrap();
    assert!(!has_unit_tests(&src) && !has_doc_examples(&src));
    std::fs::write(src.join("lib.rs"), "/// ```\n/// f();\n/// ```\npub fn f() {}\n#[cfg(all(test, unix))]\nmod t {}\n").unwrap();
    assert!(has_unit_tests(&src) && has_doc_examples(&src));
    std::fs::write(src.join("lib.rs"), "/// ```no_run,edition2021\n/// f();\n/// ```\npub fn f() {}\n").unwrap();
    assert!(has_doc_examples(&src));
    let _ = std::fs::remove_dir_all(&dir);
    let manifest = "[package]\nname = \"x\"\n\n[lib]\ncrate-type = [\"rlib\"]\ntest = false # none\n\n[dependencies]\ndoctest = false\n";
    assert!(lib_flag_off(manifest, "test"));
    assert!(!lib_flag_off(manifest, "doctest"), "a key of another table");
}
