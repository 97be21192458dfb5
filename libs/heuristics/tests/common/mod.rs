//! What the parity tests share: reading the repository's fixture and reference files.

/// A file of the repository (path relative to its root).
pub fn repo_file(path: &str) -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    std::fs::read_to_string(format!("{root}{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The JSON lines of a repository file (split on `\n` only: a reference may hold U+2028).
pub fn jsonl(path: &str) -> Vec<serde_json::Value> {
    repo_file(path).split('\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}
