//! ARCHITECTURE.md names files and symbols; each must still exist. A file is found exactly: by
//! its path from the repository root, or, inside a crate's section (`### name · \`folder/\``),
//! from that crate's folder or its `src/` (`exec/run.rs` in the host's section is
//! `host/src/exec/run.rs`); never by a suffix that several files could end with. A symbol (`StageOutput::apply`, `exec::check_setup`,
//! `worker/ffi.rs::Library`, `SpillDir`) by its last name defined in the Rust sources (in the
//! named file, when there is one).

use std::collections::BTreeSet;
use std::path::Path;

use curator_house::{repo_root, strip_comments};

/// Every file of the repository that git would track: skips build outputs and hidden folders.
fn repo_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let p = e.path();
            if name.starts_with('.') || name == "target" || name == "node_modules" || name == "__pycache__" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.display().to_string());
            }
        }
    }
    out
}

/// The backticked spans of a Markdown text, each with the folders of the crate section it is
/// in (the folders its `###` heading names; none outside a crate's section).
fn section_spans(text: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut bases: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("## ") {
            bases.clear();
        }
        if let Some(heading) = line.strip_prefix("### ") {
            bases = code_spans(heading)
                .into_iter()
                .filter(|s| s.ends_with('/') && !s.contains(['<', '*']))
                .map(|s| s.trim_end_matches('/').to_string())
                .collect();
        }
        out.extend(code_spans(line).into_iter().map(|s| (bases.clone(), s)));
    }
    out
}

/// The backticked spans of a Markdown text.
fn code_spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut parts = line.split('`');
        parts.next();
        while let (Some(code), Some(_)) = (parts.next(), parts.next()) {
            out.push(code.to_string());
        }
        // An odd count leaves the last span open: it is not code.
    }
    out
}

const FILE_ENDINGS: [&str; 14] =
    [".rs", ".md", ".sh", ".py", ".wit", ".h", ".c", ".cu", ".toml", ".yaml", ".json", ".gz", ".jsonl", ".txt"];

/// A span that names a file or folder of the repository (not an output path, a URL, a
/// command line or a placeholder).
fn names_a_path(span: &str) -> bool {
    let placeholder = span.contains(['<', '{', ' ', '*', '$', '@', '='])
        || span.contains("://")
        || span.starts_with(['_', '.', '/', '~'])
        || span.starts_with("target/");
    !placeholder && (span.contains('/') || FILE_ENDINGS.iter().any(|e| span.ends_with(e)))
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// `a::b::C`, `Type::method` or `file.rs::Symbol`: (the file, when named; the last name).
fn names_a_symbol(span: &str) -> Option<(Option<&str>, &str)> {
    let (head, last) = span.rsplit_once("::")?;
    if !is_ident(last) {
        return None;
    }
    if head.ends_with(".rs") {
        return Some((Some(head), last));
    }
    head.split("::").all(is_ident).then_some((None, last))
}

fn defines(code: &str, name: &str) -> bool {
    let words = ["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "macro_rules!"];
    if words.iter().any(|w| code.contains(&format!("{w} {name}"))) {
        return true;
    }
    // Enum variants and fields: the name followed by what follows a variant or field.
    [",", " {", "(", ":", " =>", "\n"].iter().any(|tail| code.contains(&format!(" {name}{tail}")))
}

#[test]
fn architecture_names_only_what_exists() {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let files = repo_files(&root);
    let rust: Vec<(String, String)> = files
        .iter()
        .filter(|f| f.ends_with(".rs"))
        .map(|f| (f.clone(), strip_comments(&std::fs::read_to_string(root.join(f)).unwrap_or_default())))
        .collect();
    let exists = |bases: &[String], p: &str| {
        let p = p.trim_end_matches('/');
        root.join(p).exists() || bases.iter().any(|b| root.join(b).join(p).exists() || root.join(b).join("src").join(p).exists())
    };
    let mut missing = BTreeSet::new();
    let (mut paths, mut symbols) = (0, 0);
    for (bases, span) in section_spans(&text) {
        if let Some((file, name)) = names_a_symbol(&span) {
            symbols += 1;
            let found = match file {
                Some(f) => rust.iter().filter(|(p, _)| p.ends_with(f)).any(|(_, code)| defines(code, name)),
                None => rust.iter().any(|(_, code)| defines(code, name)),
            };
            if !found {
                missing.insert(format!("symbol `{span}`"));
            }
        } else if names_a_path(&span) {
            paths += 1;
            if !exists(&bases, &span) {
                missing.insert(format!("path `{span}`"));
            }
        }
    }
    assert!(paths > 100 && symbols > 20, "the scan found only {paths} paths and {symbols} symbols: is it still reading ARCHITECTURE.md?");
    assert!(missing.is_empty(), "ARCHITECTURE.md names what no longer exists:\n{}", missing.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn spans_are_told_apart() {
    assert!(names_a_path("host/src/exec/run.rs") && names_a_path("plan/") && names_a_path("kernels.cu"));
    assert!(!names_a_path("_duplicates/") && !names_a_path("s3://b") && !names_a_path("<work>/docs/") && !names_a_path("run --phase"));
    assert_eq!(names_a_symbol("worker/ffi.rs::Library"), Some((Some("worker/ffi.rs"), "Library")));
    assert_eq!(names_a_symbol("core::scaling::allocate"), Some((None, "allocate")));
    assert_eq!(names_a_symbol("a b::c"), None);
    assert!(defines("pub fn allocate(x: u8)", "allocate") && defines("enum E { A, Docs, }", "Docs"));
    assert!(!defines("let allocated = 1;", "allocate"));
}
