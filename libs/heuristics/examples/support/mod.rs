//! What the benchmark examples share.

/// The `text` of every record of the JSONL file named by the first argument (`usage` when
/// there is none).
pub fn texts_from_arg(usage: &str) -> Vec<String> {
    let path = std::env::args().nth(1).expect(usage);
    let text = std::fs::read_to_string(&path).expect("cannot read the file");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("bad JSON")["text"].as_str().unwrap_or_default().to_string())
        .collect()
}
