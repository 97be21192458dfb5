//! Checks of the house itself, read from the source tree: which module of a crate uses which
//! (`tests/layering.rs`, against the floors ARCHITECTURE.md declares), and whether the paths and
//! symbols ARCHITECTURE.md names still exist (`tests/architecture.rs`).
//!
//! A plain text scan, no Rust parser: `crate::` and `super::` paths outside comments. That is
//! enough for a house whose modules import each other with `use crate::…` (rustfmt keeps those
//! at the start of a line or inside an expression, never split across lines).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root (this crate lives in `tests/house`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The module path of a file relative to `src`: `exec/graph.rs` → `[exec, graph]`,
/// `exec/mod.rs` → `[exec]`, `lib.rs` → `[]`.
pub fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" && stem != "main" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// The code of a file without its comments (line, doc and nested block comments). String
/// literals are followed so that `"s3://…"` stays code; `'"'` is read as the character it is.
pub fn strip_comments(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let (mut i, mut block, mut string) = (0usize, 0usize, false);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if block > 0 {
            match (c, next) {
                ('*', Some('/')) => (block, i) = (block - 1, i + 2),
                ('/', Some('*')) => (block, i) = (block + 1, i + 2),
                ('\n', _) => {
                    out.push('\n');
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        if string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(n) = next {
                        out.push(n);
                    }
                    i += 2;
                }
                '"' => {
                    string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        match (c, next) {
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => (block, i) = (1, i + 2),
            ('\'', Some('"')) if chars.get(i + 2) == Some(&'\'') => {
                out.push_str("'\"'");
                i += 3;
            }
            ('"', _) => {
                string = true;
                out.push(c);
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn ident_at(s: &str) -> Option<&str> {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// The first names after `crate::` (or `super::…` that reaches the crate root) in `code`:
/// `crate::exec::Task` → `exec`; `crate::{io::Loc, os}` → `io`, `os`.
pub fn crate_references(code: &str, module: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        if boundary && rest.starts_with("crate::") {
            collect_after(&rest["crate::".len()..], &mut out);
            i += "crate::".len();
            continue;
        }
        if boundary && rest.starts_with("super::") {
            let mut depth = 0;
            let mut r = rest;
            while let Some(x) = r.strip_prefix("super::") {
                depth += 1;
                r = x;
            }
            // `super` from a file module is its parent; reaching the root names a top module.
            if depth >= module.len() {
                collect_after(r, &mut out);
            } else if let Some(top) = module.first() {
                out.push(top.clone());
            }
            i += rest.len() - r.len();
            continue;
        }
        i += rest.chars().next().map(char::len_utf8).unwrap_or(1);
    }
    out
}

fn collect_after(s: &str, out: &mut Vec<String>) {
    if let Some(group) = s.strip_prefix('{') {
        let mut depth = 1;
        let mut start = 0;
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    if let Some(id) = ident_at(group[start..k].trim_start()) {
                        out.push(id.to_string());
                    }
                    if c == '}' {
                        return;
                    }
                    start = k + 1;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
    } else if let Some(id) = ident_at(s) {
        out.push(id.to_string());
    }
}

/// A crate's floors, as ARCHITECTURE.md declares them: module name → floor (0 lowest).
pub struct Floors {
    pub krate: String,
    pub floor: BTreeMap<String, usize>,
}

/// Every `floors <crate>: \`a b\` → \`c\` → …` line of ARCHITECTURE.md.
pub fn declared_floors(architecture: &str) -> Vec<Floors> {
    let mut all = Vec::new();
    for line in architecture.lines() {
        let Some(rest) = line.trim_start().strip_prefix("- floors ") else { continue };
        let Some((krate, levels)) = rest.split_once(':') else { continue };
        let mut floor = BTreeMap::new();
        for (k, level) in levels.split('→').enumerate() {
            for name in level.trim().trim_matches('`').split_whitespace() {
                floor.insert(name.to_string(), k);
            }
        }
        all.push(Floors { krate: krate.trim().to_string(), floor });
    }
    all
}

/// Names a crate root re-exports (`pub use module::{A, B}` in `lib.rs`): name → module.
pub fn reexports(lib_rs: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let code = strip_comments(lib_rs);
    for stmt in code.split(';') {
        let stmt = stmt.trim();
        let Some(path) = stmt.strip_prefix("pub use ") else { continue };
        let Some((module, names)) = path.split_once("::") else { continue };
        let module = module.trim();
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for n in names.split(',') {
            let n = n.trim();
            let last = n.rsplit("::").next().unwrap_or(n).trim();
            if !last.is_empty() {
                out.insert(last.to_string(), module.to_string());
            }
        }
    }
    out
}

/// One use of a module on a higher floor (or of a module no floor lists).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub file: String,
    pub from: String,
    pub to: String,
    pub why: String,
}

/// Check every file of `src` (the crate at `folder`) against its floors. `skip`: top-level
/// files or folders that are not part of the library (the binary's own modules).
pub fn check_crate(src: &Path, floors: &Floors, skip: &[&str]) -> (Vec<Violation>, BTreeSet<(String, String)>) {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let reexported = reexports(&lib);
    let mut violations = Vec::new();
    let mut edges = BTreeSet::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).unwrap_or(&file).to_path_buf();
        let first = rel.iter().next().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).unwrap_or_default();
        if first == "lib" || skip.contains(&first.as_str()) {
            continue;
        }
        let module = module_path(&rel);
        let Some(from) = module.first().cloned() else { continue };
        let shown = rel.display().to_string();
        let Some(&from_floor) = floors.floor.get(&from) else {
            violations.push(Violation { file: shown, from: from.clone(), to: String::new(), why: "module on no floor".into() });
            continue;
        };
        let code = std::fs::read_to_string(&file).unwrap_or_default();
        let code = strip_comments(&code);
        // An inline `mod tests { … }` (at the end of the file, by convention) is one level
        // deeper: its `super::` is the file's module.
        let (body, tests) = match code.find("mod tests {") {
            Some(k) => code.split_at(k),
            None => (code.as_str(), ""),
        };
        let mut inner = module.clone();
        inner.push("tests".into());
        let names = crate_references(body, &module).into_iter().chain(crate_references(tests, &inner));
        for name in names {
            let to = if floors.floor.contains_key(&name) {
                name
            } else if let Some(m) = reexported.get(&name) {
                m.clone()
            } else if name.chars().next().is_some_and(|c| c.is_ascii_uppercase()) || name == "self" {
                continue;
            } else {
                violations.push(Violation { file: shown.clone(), from: from.clone(), to: name, why: "module on no floor".into() });
                continue;
            };
            if to == from {
                continue;
            }
            edges.insert((from.clone(), to.clone()));
            let Some(&to_floor) = floors.floor.get(&to) else { continue };
            if to_floor > from_floor {
                violations.push(Violation {
                    file: shown.clone(),
                    from: from.clone(),
                    to: to.clone(),
                    why: format!("floor {from_floor} uses floor {to_floor}"),
                });
            }
        }
    }
    violations.sort();
    violations.dedup();
    (violations, edges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_found_in_paths_groups_and_supers() {
        let m = vec!["exec".to_string(), "graph".to_string()];
        let code = "use crate::io::Loc;\nuse crate::{plan::Plan, os};\nlet x = super::super::dedup::f();\nuse super::Ctx;";
        assert_eq!(crate_references(code, &m), vec!["io", "plan", "os", "dedup", "exec"]);
    }

    #[test]
    fn comments_do_not_count_but_urls_in_strings_stay_code() {
        let code = "// crate::exec\nlet u = \"s3://b\"; /* crate::plan */ crate::io::f(); /// crate::x\n";
        let stripped = strip_comments(code);
        assert_eq!(crate_references(&stripped, &["a".to_string()]), vec!["io"]);
        assert!(stripped.contains("s3://b"));
    }

    #[test]
    fn floors_are_read_from_the_declaration_lines() {
        let text = "x\n  - floors host: `os gpu` → `io` → `plan exec`\n";
        let f = declared_floors(text);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].krate, "host");
        assert_eq!(f[0].floor["gpu"], 0);
        assert_eq!(f[0].floor["exec"], 2);
    }

    #[test]
    fn an_upward_use_is_a_violation() {
        let dir = std::env::temp_dir().join(format!("curator-house-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("io")).unwrap();
        std::fs::write(dir.join("lib.rs"), "pub mod io; pub mod plan; pub use plan::Plan;").unwrap();
        std::fs::write(dir.join("io/mod.rs"), "use crate::Plan;\n").unwrap();
        std::fs::write(dir.join("plan.rs"), "use crate::io::x;\n").unwrap();
        let floors = declared_floors("- floors t: `io` → `plan`");
        let (v, edges) = check_crate(&dir, &floors[0], &[]);
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].from.as_str(), v[0].to.as_str()), ("io", "plan"));
        assert!(edges.contains(&("plan".to_string(), "io".to_string())));
    }
}
