//! Nemotron-CC's post-processing of an LLM's answers, as NeMo Curator applies it
//! (`nemo_curator.stages.synthetic.nemotron_cc`: `DiverseQAPostProcessingStage` and
//! `KnowledgeListPostProcessingStage`). Lines split on `\n` and stripped as Python strips.
//!
//! NeMo shuffles and samples the question–answer pairs with Python's global, unseeded
//! `random`, so no two of its runs agree; here the draws come from a seed and the document's
//! text, so a rerun or a resumed run writes the same pairs.

use curator_sdk::shingle::{mix64, shingle_hash};

use crate::py;

/// NeMo's `DiverseQAStage.prefix`: the line the prompt asks the model to begin with.
pub const DIVERSE_QA_PREFIX: &str = "Here are the questions and answers based on the provided text:";

/// The question–answer pairs of a Diverse-QA answer, in the model's order: lines stripped,
/// empty ones dropped, a leading `- ` removed, the prefix line skipped, and every line that
/// does not start with `Question:` joined (after `\n`) to the pair before it. `None` when a
/// line comes before the first question (NeMo then writes an empty string) or there is none.
pub fn diverse_qa_pairs(generated: &str, prefix: &str) -> Option<Vec<String>> {
    let mut lines = generated.split('\n').map(py::strip).filter(|l| !l.is_empty()).map(|l| match l.strip_prefix("- ") {
        Some(rest) => py::strip(rest),
        None => l,
    });
    let mut pairs: Vec<String> = Vec::new();
    let first = lines.next()?;
    for line in (first != prefix).then_some(first).into_iter().chain(lines) {
        if line.starts_with("Question:") {
            pairs.push(line.to_string());
        } else {
            let last = pairs.last_mut()?;
            last.push('\n');
            last.push_str(line);
        }
    }
    (!pairs.is_empty()).then_some(pairs)
}

/// How many pairs at most a document keeps: `max_num_pairs`, or, given its token count,
/// `max(1, int(max_num_pairs * tokens / 150))` (NeMo's rule: about one pair per 15 tokens of
/// text for the default 10).
pub fn diverse_qa_cap(max_num_pairs: usize, tokens: Option<u64>) -> usize {
    match tokens {
        Some(t) => ((max_num_pairs as f64 * t as f64 / 150.0) as usize).max(1),
        None => max_num_pairs.max(1),
    }
}

/// NeMo's Diverse-QA result: the document's text, a blank line, then between 1 and `cap` of
/// its pairs (shuffled; the number drawn uniformly) separated by blank lines. Empty when the
/// answer has no well-formed pairs.
pub fn diverse_qa(text: &str, generated: &str, prefix: &str, cap: usize, seed: u64) -> String {
    let Some(mut pairs) = diverse_qa_pairs(generated, prefix) else { return String::new() };
    let mut rng = SplitMix64::new(seed ^ shingle_hash(text.as_bytes()) ^ shingle_hash(generated.as_bytes()).rotate_left(17));
    // Fisher–Yates from the end, as `random.shuffle` walks.
    for i in (1..pairs.len()).rev() {
        pairs.swap(i, rng.below(i as u64 + 1) as usize);
    }
    // `random.randint(1, cap)`, then the first that many.
    let keep = 1 + rng.below(cap.max(1) as u64) as usize;
    pairs.truncate(keep);
    format!("{text}\n\n{}", pairs.join("\n\n"))
}

/// NeMo's knowledge-list clean-up: a first line that does not start with `-` (the model's
/// preamble) is dropped; lines starting with two spaces or `- ` lose those two characters and
/// are stripped; other lines stay as they are.
pub fn knowledge_list(generated: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for (i, line) in generated.split('\n').enumerate() {
        if i == 0 && !line.starts_with('-') {
            continue;
        }
        if line.starts_with("  ") || line.starts_with("- ") {
            out.push(py::strip(&line[2..]));
        } else {
            out.push(line);
        }
    }
    out.join("\n")
}

/// SplitMix64 (Steele, Lea and Flood): a small generator for per-document draws, its
/// finaliser the SDK's `mix64`; here rather than a crate every WASM guest would carry.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (`n` ≥ 1), without modulo bias (Lemire's multiply-shift with rejection).
    fn below(&mut self, n: u64) -> u64 {
        loop {
            let m = u128::from(self.next()) * u128::from(n);
            if (m as u64) >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = "Here are the questions and answers based on the provided text:\n\
        - Question: What is X? Answer: A letter.\n\
        \n\
        - Question: Is Y a letter?\n  Answer: Yes.\n\
        - Question: Which comes first? A) X B) Y\n\
        Answer: A) X";

    #[test]
    fn pairs_are_parsed_as_nemo_parses_them() {
        let pairs = diverse_qa_pairs(ANSWER, DIVERSE_QA_PREFIX).unwrap();
        assert_eq!(
            pairs,
            [
                "Question: What is X? Answer: A letter.",
                "Question: Is Y a letter?\nAnswer: Yes.",
                "Question: Which comes first? A) X B) Y\nAnswer: A) X"
            ]
        );
        // Without the prefix line, the same pairs; a line before the first question: nothing.
        assert_eq!(diverse_qa_pairs(ANSWER.split_once('\n').unwrap().1, DIVERSE_QA_PREFIX).unwrap(), pairs);
        assert_eq!(diverse_qa_pairs("Sure!\nQuestion: a? Answer: b", DIVERSE_QA_PREFIX), None);
        assert_eq!(diverse_qa_pairs(" \n\n", DIVERSE_QA_PREFIX), None);
        assert_eq!(diverse_qa_pairs(DIVERSE_QA_PREFIX, DIVERSE_QA_PREFIX), None);
        // `- ` is removed once, then the rest stripped (Python's whitespace, no-break space too).
        assert_eq!(diverse_qa_pairs("- \u{a0}Question: q", "").unwrap(), ["Question: q"]);
    }

    #[test]
    fn the_result_is_the_text_and_some_of_its_pairs_the_same_on_every_run() {
        let out = diverse_qa("The text.", ANSWER, DIVERSE_QA_PREFIX, 10, 7);
        assert_eq!(out, diverse_qa("The text.", ANSWER, DIVERSE_QA_PREFIX, 10, 7));
        let (text, pairs) = out.split_once("\n\n").unwrap();
        assert_eq!(text, "The text.");
        let all = diverse_qa_pairs(ANSWER, DIVERSE_QA_PREFIX).unwrap();
        let kept: Vec<&str> = pairs.split("\n\n").collect();
        assert!((1..=3).contains(&kept.len()));
        assert!(kept.iter().all(|p| all.iter().any(|a| a == p)));
        // A cap of one keeps one pair; every pair and every count turn up over seeds.
        assert_eq!(diverse_qa("t", ANSWER, DIVERSE_QA_PREFIX, 1, 3).matches("Question:").count(), 1);
        let mut counts = [0; 4];
        let mut firsts = std::collections::BTreeSet::new();
        for seed in 0..300 {
            let o = diverse_qa("t", ANSWER, DIVERSE_QA_PREFIX, 3, seed);
            counts[o.matches("Question:").count()] += 1;
            firsts.insert(o.split("\n\n").nth(1).unwrap().to_string());
        }
        assert_eq!(counts[0], 0);
        assert!(counts[1..].iter().all(|&c| c > 60), "{counts:?}");
        assert_eq!(firsts.len(), 3);
        assert_eq!(diverse_qa("t", "no pairs here", DIVERSE_QA_PREFIX, 10, 1), "");
    }

    #[test]
    fn the_cap_follows_the_texts_length() {
        assert_eq!(diverse_qa_cap(10, None), 10);
        assert_eq!(diverse_qa_cap(10, Some(0)), 1);
        assert_eq!(diverse_qa_cap(10, Some(14)), 1);
        assert_eq!(diverse_qa_cap(10, Some(150)), 10);
        assert_eq!(diverse_qa_cap(10, Some(449)), 29);
    }

    #[test]
    fn knowledge_lists_lose_the_preamble_and_bullets() {
        let answer = "Here is the list:\n- Fact one.\n  - sub point \nplain line\n- Fact two.";
        assert_eq!(knowledge_list(answer), "Fact one.\n- sub point\nplain line\nFact two.");
        // A first line that is a bullet stays.
        assert_eq!(knowledge_list("- a\n- b"), "a\nb");
        assert_eq!(knowledge_list("-a"), "-a");
        assert_eq!(knowledge_list(""), "");
    }

    #[test]
    fn draws_are_uniform_enough() {
        let mut r = SplitMix64::new(1);
        let mut hits = [0u32; 5];
        for _ in 0..50_000 {
            hits[r.below(5) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| (9_000..11_000).contains(&h)), "{hits:?}");
    }
}
