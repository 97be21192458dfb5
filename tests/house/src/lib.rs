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

/// Every crate folder of the workspace with a `src/` (the members of the root `Cargo.toml`,
/// globs expanded), sorted.
pub fn workspace_crates(root: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let mut out = BTreeSet::new();
    let Some(start) = manifest.find("members = [") else { return Vec::new() };
    let list = &manifest[start..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    for line in list.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        for member in line.split('"').skip(1).step_by(2) {
            let expanded: Vec<PathBuf> = match member.strip_suffix("/*") {
                Some(dir) => std::fs::read_dir(root.join(dir)).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default(),
                None => vec![root.join(member)],
            };
            for dir in expanded {
                if dir.join("src").is_dir() {
                    out.insert(dir);
                }
            }
        }
    }
    out.into_iter().collect()
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

/// One use of a module on a higher floor (or of a module no floor lists).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub file: String,
    pub from: String,
    pub to: String,
    pub why: String,
}

/// Check every use between the top modules of the crate whose source root is `src` against
/// its floors (the uses the [`ModuleGraph`] finds: paths through `crate::`, `super::` and
/// `self::`, re-exports followed). `skip`: top-level files or folders that are not part of the
/// library (the binary's own modules). Returns the violations and the edges between top
/// modules.
pub fn check_crate(src: &Path, floors: &Floors, skip: &[&str]) -> (Vec<Violation>, BTreeSet<(String, String)>) {
    let graph = ModuleGraph::read(src, skip);
    let mut violations = Vec::new();
    for module in &graph.modules {
        if let Some(top) = module.first()
            && !floors.floor.contains_key(top)
        {
            violations.push(Violation { file: top.clone(), from: top.clone(), to: String::new(), why: "module on no floor".into() });
        }
    }
    let mut edges = BTreeSet::new();
    for (from, to, file) in &graph.uses {
        let (Some(from), Some(to)) = (from.first(), to.first()) else { continue };
        if from == to {
            continue;
        }
        edges.insert((from.clone(), to.clone()));
        let (Some(&from_floor), Some(&to_floor)) = (floors.floor.get(from), floors.floor.get(to)) else { continue };
        if to_floor > from_floor {
            violations.push(Violation {
                file: file.clone(),
                from: from.clone(),
                to: to.clone(),
                why: format!("floor {from_floor} uses floor {to_floor}"),
            });
        }
    }
    violations.sort();
    violations.dedup();
    (violations, edges)
}

/// Every module of a crate, its `pub use` re-exports, and which module's code names which.
///
/// Modules are files (`dedup/lean.rs` is `dedup::lean`); a test module (`tests.rs`, or the
/// inline `mod tests { … }` at the end of a file) is not part of the graph: a test may use
/// anything its module can reach.
pub struct ModuleGraph {
    /// Every module path of the crate (the root is `[]`).
    pub modules: BTreeSet<Vec<String>>,
    /// `pub use` re-exports: module → (name → the path it names, absolute).
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    /// `(from, to, file)`: the code of `from` (shown as `file`) names module `to`.
    pub uses: Vec<(Vec<String>, Vec<String>, String)>,
}

/// The paths written after `prefix` (one path, or a `{…}` group of them, nested groups too):
/// `a::b::{c, d::{e, f}}` → `[a,b,c]`, `[a,b,d,e]`, `[a,b,d,f]`. `self` in a group is the
/// group's own path.
pub fn use_paths(s: &str) -> Vec<Vec<String>> {
    fn parse(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
        let mut path = prefix.to_vec();
        let mut i = 0;
        loop {
            let rest = &s[i..];
            let trimmed = rest.trim_start();
            i += rest.len() - trimmed.len();
            if let Some(group) = trimmed.strip_prefix('{') {
                i += 1;
                let mut inner = group;
                loop {
                    let used = parse(inner, &path, out);
                    i += used;
                    inner = &inner[used..];
                    let t = inner.trim_start();
                    i += inner.len() - t.len();
                    match t.chars().next() {
                        Some(',') => {
                            i += 1;
                            inner = &t[1..];
                            if inner.trim_start().starts_with('}') {
                                let t2 = inner.trim_start();
                                i += inner.len() - t2.len() + 1;
                                return i;
                            }
                        }
                        Some('}') => return i + 1,
                        _ => return i,
                    }
                }
            }
            match ident_at(trimmed) {
                Some(id) => {
                    i += id.len();
                    if id != "self" {
                        path.push(id.to_string());
                    }
                    if s[i..].starts_with("::") {
                        i += 2;
                        continue;
                    }
                    if path.len() > prefix.len() || id == "self" {
                        out.push(path);
                    }
                    return i;
                }
                None => {
                    if path.len() > prefix.len() {
                        out.push(path);
                    }
                    return i;
                }
            }
        }
    }
    let mut out = Vec::new();
    parse(s, &[], &mut out);
    out
}

/// The absolute paths `code` (of module `module`) names through `crate::`, `super::` and
/// `self::`.
pub fn absolute_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        let start: Option<(Vec<String>, usize)> = if !boundary {
            None
        } else if let Some(r) = rest.strip_prefix("crate::") {
            Some((Vec::new(), rest.len() - r.len()))
        } else if rest.starts_with("super::") {
            let mut base = module.to_vec();
            let mut r = rest;
            while let Some(x) = r.strip_prefix("super::") {
                base.pop();
                r = x;
            }
            Some((base, rest.len() - r.len()))
        } else {
            rest.strip_prefix("self::").map(|r| (module.to_vec(), rest.len() - r.len()))
        };
        match start {
            Some((base, skip)) => {
                for p in use_paths(&rest[skip..]) {
                    let mut full = base.clone();
                    full.extend(p);
                    out.push(full);
                }
                i += skip;
            }
            None => i += rest.chars().next().map(char::len_utf8).unwrap_or(1),
        }
    }
    out
}

/// The code of a file without its trailing inline test module.
fn without_tests(code: &str) -> &str {
    match code.find("mod tests {") {
        Some(k) => &code[..k],
        None => code,
    }
}

impl ModuleGraph {
    /// Read the crate whose source root is `src`. `skip`: top-level files or folders that are
    /// not part of the library (a binary's own modules).
    pub fn read(src: &Path, skip: &[&str]) -> ModuleGraph {
        let mut files = Vec::new();
        for file in rust_files(src) {
            let rel = file.strip_prefix(src).unwrap_or(&file).to_path_buf();
            let first = rel.iter().next().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).unwrap_or_default();
            if skip.contains(&first.as_str()) || first == "bin" {
                continue;
            }
            let module = module_path(&rel);
            if module.iter().any(|m| m == "tests") {
                continue;
            }
            let code = strip_comments(&std::fs::read_to_string(&file).unwrap_or_default());
            files.push((module, rel.display().to_string(), without_tests(&code).to_string()));
        }
        let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _, _)| m.clone()).collect();
        let mut reexports = BTreeMap::new();
        for (module, _, code) in &files {
            let mut names = BTreeMap::new();
            for stmt in code.split(';') {
                let stmt = stmt.trim();
                let Some(body) =
                    ["pub use ", "pub(crate) use ", "pub(super) use "].iter().find_map(|p| stmt.rsplit_once(p).map(|(_, b)| b))
                else {
                    continue;
                };
                for p in use_paths(body) {
                    let Some(name) = p.last().cloned() else { continue };
                    let abs = match p.first().map(String::as_str) {
                        Some("crate") => p[1..].to_vec(),
                        Some("super") => {
                            let mut base = module.clone();
                            let mut k = 0;
                            while p.get(k).map(String::as_str) == Some("super") {
                                base.pop();
                                k += 1;
                            }
                            base.extend(p[k..].iter().cloned());
                            base
                        }
                        Some(first) => {
                            let mut child = module.clone();
                            child.push(first.to_string());
                            if !modules.contains(&child) {
                                continue;
                            }
                            let mut abs = module.clone();
                            abs.extend(p.iter().cloned());
                            abs
                        }
                        None => continue,
                    };
                    names.insert(name, abs);
                }
            }
            reexports.insert(module.clone(), names);
        }
        let mut graph = ModuleGraph { modules, reexports, uses: Vec::new() };
        for (module, shown, code) in &files {
            for p in absolute_paths(code, module) {
                let to = graph.resolve(&p, 0);
                graph.uses.push((module.clone(), to, shown.clone()));
            }
        }
        graph
    }

    /// The module an absolute path ends in, following re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Vec<String> {
        let mut cur: Vec<String> = Vec::new();
        for seg in path {
            let mut next = cur.clone();
            next.push(seg.clone());
            if self.modules.contains(&next) {
                cur = next;
                continue;
            }
            if depth < 8
                && let Some(target) = self.reexports.get(&cur).and_then(|r| r.get(seg))
            {
                return self.resolve(target, depth + 1);
            }
            break;
        }
        cur
    }

    /// Cycles between sibling modules: for each module, the strongly connected groups (two or
    /// more) among its children, where child `a` uses child `b` when any file under `a` names
    /// anything under `b`. A module's use of its own ancestors or descendants is not an edge.
    /// Each cycle is reported with one file per edge.
    pub fn sibling_cycles(&self) -> Vec<String> {
        let mut groups: BTreeMap<Vec<String>, BTreeMap<(String, String), String>> = BTreeMap::new();
        for (from, to, file) in &self.uses {
            let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue;
            }
            let parent = from[..common].to_vec();
            groups.entry(parent).or_default().entry((from[common].clone(), to[common].clone())).or_insert_with(|| file.clone());
        }
        let mut out = Vec::new();
        for (parent, edges) in &groups {
            for scc in strongly_connected(edges.keys()) {
                let shown_parent = if parent.is_empty() { "(crate root)".to_string() } else { parent.join("::") };
                let mut lines = Vec::new();
                for ((a, b), file) in edges {
                    if scc.contains(a) && scc.contains(b) {
                        lines.push(format!("{a} → {b} ({file})"));
                    }
                }
                out.push(format!("in {shown_parent}: {{{}}}: {}", scc.iter().cloned().collect::<Vec<_>>().join(", "), lines.join("; ")));
            }
        }
        out
    }
}

/// The strongly connected components of two or more nodes of a directed graph (Tarjan).
pub fn strongly_connected<'a>(edges: impl Iterator<Item = &'a (String, String)>) -> Vec<BTreeSet<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default();
    }
    struct State<'s> {
        index: BTreeMap<&'s str, usize>,
        low: BTreeMap<&'s str, usize>,
        stack: Vec<&'s str>,
        on_stack: BTreeSet<&'s str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'s>(v: &'s str, adj: &BTreeMap<&'s str, Vec<&'s str>>, st: &mut State<'s>) {
        st.index.insert(v, st.next);
        st.low.insert(v, st.next);
        st.next += 1;
        st.stack.push(v);
        st.on_stack.insert(v);
        for &w in adj.get(v).map(Vec::as_slice).unwrap_or(&[]) {
            if !st.index.contains_key(w) {
                visit(w, adj, st);
                let lw = st.low[w];
                let lv = st.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if st.on_stack.contains(w) {
                let iw = st.index[w];
                let lv = st.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut scc = BTreeSet::new();
            while let Some(w) = st.stack.pop() {
                st.on_stack.remove(w);
                scc.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                st.out.push(scc);
            }
        }
    }
    let mut st =
        State { index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on_stack: BTreeSet::new(), next: 0, out: Vec::new() };
    for &v in adj.keys() {
        if !st.index.contains_key(v) {
            visit(v, &adj, &mut st);
        }
    }
    st.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_found_in_groups_and_supers() {
        let m = vec!["exec".to_string(), "graph".to_string()];
        let code = "use crate::io::Loc;\nuse crate::{plan::Plan, os};\nlet x = super::super::dedup::f();\nuse super::Ctx;";
        let firsts: Vec<String> = absolute_paths(code, &m).iter().map(|p| p[0].clone()).collect();
        assert_eq!(firsts, vec!["io", "plan", "os", "dedup", "exec"]);
    }

    #[test]
    fn comments_do_not_count_but_urls_in_strings_stay_code() {
        let code = "// crate::exec\nlet u = \"s3://b\"; /* crate::plan */ crate::io::f(); /// crate::x\n";
        let stripped = strip_comments(code);
        assert_eq!(absolute_paths(&stripped, &["a".to_string()]), vec![vec!["io".to_string(), "f".to_string()]]);
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

    /// A temporary crate source tree: `files` are (path under src, contents).
    fn planted(tag: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("curator-house-{tag}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        for (path, code) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, code).unwrap();
        }
        dir
    }

    #[test]
    fn a_cycle_between_two_sibling_modules_is_found_with_its_files() {
        let dir = planted(
            "cycle",
            &[
                ("lib.rs", "pub mod dedup;"),
                ("dedup/mod.rs", "mod a; mod b; pub use a::Thing;"),
                ("dedup/a.rs", "use super::b::helper;\npub struct Thing;"),
                ("dedup/b.rs", "pub fn helper() {}\nfn f(_: crate::dedup::Thing) {}"),
            ],
        );
        let cycles = ModuleGraph::read(&dir, &[]).sibling_cycles();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert!(cycles[0].starts_with("in dedup: {a, b}"), "{}", cycles[0]);
        assert!(cycles[0].contains("a → b (dedup/a.rs)") && cycles[0].contains("b → a (dedup/b.rs)"), "{}", cycles[0]);
    }

    #[test]
    fn a_loop_of_three_and_a_cycle_at_the_root_are_found_and_parents_are_not_cycles() {
        let dir = planted(
            "loop",
            &[
                ("lib.rs", "pub mod x; pub mod y; pub mod io;"),
                ("x.rs", "use crate::y::f;"),
                ("y.rs", "pub fn f() { crate::x::g() }"),
                // io's children use their parent, and the parent uses them: no cycle.
                ("io/mod.rs", "pub mod p; pub mod q; pub mod r; pub const ID: &str = \"id\"; pub use p::P;"),
                ("io/p.rs", "use super::ID; use super::q::Q; pub struct P;"),
                ("io/q.rs", "use super::{r::R, ID}; pub struct Q;"),
                ("io/r.rs", "use crate::io::P; pub struct R;"),
            ],
        );
        let cycles = ModuleGraph::read(&dir, &[]).sibling_cycles();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(cycles.len(), 2, "{cycles:?}");
        assert!(cycles.iter().any(|c| c.starts_with("in (crate root): {x, y}")), "{cycles:?}");
        assert!(cycles.iter().any(|c| c.starts_with("in io: {p, q, r}")), "{cycles:?}");
    }

    #[test]
    fn a_test_module_may_use_anything() {
        let dir = planted(
            "tests",
            &[
                ("lib.rs", "pub mod a; pub mod b;"),
                ("a.rs", "pub fn f() {}\nmod tests { use crate::b::g; }"),
                ("b.rs", "pub fn g() { crate::a::f() }"),
            ],
        );
        let cycles = ModuleGraph::read(&dir, &[]).sibling_cycles();
        std::fs::remove_dir_all(&dir).ok();
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn use_paths_expand_nested_groups() {
        let p = use_paths("a::b::{c, d::{e, f}, self};");
        let s: Vec<String> = p.iter().map(|x| x.join("::")).collect();
        assert_eq!(s, ["a::b::c", "a::b::d::e", "a::b::d::f", "a::b"]);
    }
}
