//! Deterministic text for benchmarks, and what the benches share.

// Each bench uses part of it.
#[allow(dead_code)]
pub mod measure;

const WORDS: &[&str] = &[
    "the",
    "data",
    "curation",
    "pipeline",
    "reads",
    "shards",
    "of",
    "text",
    "and",
    "filters",
    "documents",
    "by",
    "quality",
    "heuristics",
    "language",
    "identification",
    "deduplication",
    "Übergröße",
    "naïve",
    "café",
    "résumé",
    "模型",
    "training",
    "tokens",
    "a",
    "is",
];

/// Documents of 20..400 words, `target_bytes` of text in all.
pub fn corpus(target_bytes: usize) -> Vec<String> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut docs = Vec::new();
    let mut total = 0;
    while total < target_bytes {
        let n = 20 + (next() % 380) as usize;
        let mut d = String::new();
        for i in 0..n {
            if i > 0 {
                d.push(if next() % 12 == 0 { '\n' } else { ' ' });
            }
            d.push_str(WORDS[(next() % WORDS.len() as u64) as usize]);
        }
        total += d.len();
        docs.push(d);
    }
    docs
}
