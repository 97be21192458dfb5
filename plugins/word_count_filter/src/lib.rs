//! `word_count_filter`: NeMo Curator's `WordCountFilter` as a curator stage. The rule (and
//! the check of its params) is `curator_heuristics::nemo::WordCountFilter`, the one the
//! heuristic chains run under the same name.
//!
//! Words are counted as Python's `len(text.split())` counts them.

use curator_heuristics::nemo::Heuristic;
use curator_sdk::prelude::*;

// The params (names, types, defaults, docs) are the library's: `curator_heuristics::nemo`.
curator_heuristics::nemo_stage!(WordCountFilter,
    /// Keeps documents whose word count lies in [min_words, max_words].
    #[stage(name = "word_count_filter", cpus = 1.0, memory_mb = 256)]
    pub struct WordCountFilter);

impl Filter for WordCountFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.heuristic().check().map_err(StageError::InvalidParams)
    }

    fn keep(&self, doc: &Doc<'_>) -> bool {
        self.heuristic().keep(doc.words() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::native::NativeStage;

    #[test]
    fn keeps_in_range() {
        let mut s = NativeStage::new::<WordCountFilter>(r#"{"min_words": 2, "max_words": 3}"#).unwrap();
        let kept = s.run_texts(&["one", "one two", "one two three", "one two three four", "  a\u{3000}b  "]).unwrap();
        assert_eq!(kept, vec!["one two", "one two three", "  a\u{3000}b  "]);
    }

    #[test]
    fn defaults_apply() {
        let mut s = NativeStage::new::<WordCountFilter>("{}").unwrap();
        let long = "word ".repeat(50);
        assert_eq!(s.run_texts(&["short text", &long]).unwrap(), vec![long.clone()]);
    }

    #[test]
    fn bad_params_refused() {
        let e = NativeStage::new::<WordCountFilter>(r#"{"min_words": 5, "max_words": 1}"#).err().unwrap();
        assert!(matches!(e, StageError::InvalidParams(_)));
        let e = NativeStage::new::<WordCountFilter>(r#"{"min_word": 5}"#).err().unwrap();
        assert!(e.to_string().contains("unknown field `min_word`"), "{e}");
    }

    #[test]
    fn manifest_is_valid() {
        use curator_sdk::StageDef;
        let m: curator_sdk::serde_json::Value = curator_sdk::serde_json::from_str(WordCountFilter::MANIFEST).unwrap();
        assert_eq!(m["name"], "word_count_filter");
        assert_eq!(m["params_schema"]["properties"]["min_words"]["default"], 50);
        assert_eq!(m["resources"]["cpus"], 1.0);
    }
}
