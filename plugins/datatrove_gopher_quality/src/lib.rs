//! datatrove's `GopherQualityFilter` as a stage: Gopher's quality rules (Rae et al. 2021,
//! table A1) with datatrove's parameters, defaults and order of checks. A threshold of 0
//! turns its check off. Words are English words as spaCy splits them (see
//! `curator_heuristics::en_words`).

use curator_heuristics::datatrove::GopherQuality;
use curator_sdk::prelude::*;

/// Drops documents outside Gopher's quality bounds.
#[stage(name = "gopher_quality_filter", cpus = 1.0, memory_mb = 128)]
pub struct GopherQualityFilter {
    /// Fewest words that are not only punctuation.
    #[param(default = 50)]
    pub min_doc_words: f64,
    /// Most words that are not only punctuation.
    #[param(default = 100000)]
    pub max_doc_words: f64,
    /// Shortest mean word length.
    #[param(default = 3)]
    pub min_avg_word_length: f64,
    /// Longest mean word length.
    #[param(default = 10)]
    pub max_avg_word_length: f64,
    /// Largest ratio of `#` or of ellipses to words.
    #[param(default = 0.1)]
    pub max_symbol_word_ratio: f64,
    /// Largest share of lines starting with a bullet (`•` or `-`).
    #[param(default = 0.9)]
    pub max_bullet_lines_ratio: f64,
    /// Largest share of lines ending with an ellipsis.
    #[param(default = 0.3)]
    pub max_ellipsis_lines_ratio: f64,
    /// Smallest share of words with a letter (datatrove's name, kept for compatibility).
    #[param(default = 0.8)]
    pub max_non_alpha_words_ratio: f64,
    /// Fewest distinct stop words present.
    #[param(default = 2)]
    pub min_stop_words: f64,
    /// The stop words (default: Gopher's eight).
    #[param(default = ["the", "be", "to", "of", "and", "that", "have", "with"])]
    pub stop_words: Vec<String>,
    /// The rules, built from the params once.
    #[state]
    rules: GopherQuality,
}

impl Filter for GopherQualityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = GopherQuality {
            min_doc_words: Some(self.min_doc_words),
            max_doc_words: Some(self.max_doc_words),
            min_avg_word_length: Some(self.min_avg_word_length),
            max_avg_word_length: Some(self.max_avg_word_length),
            max_symbol_word_ratio: Some(self.max_symbol_word_ratio),
            max_bullet_lines_ratio: Some(self.max_bullet_lines_ratio),
            max_ellipsis_lines_ratio: Some(self.max_ellipsis_lines_ratio),
            max_non_alpha_words_ratio: Some(self.max_non_alpha_words_ratio),
            min_stop_words: Some(self.min_stop_words),
            stop_words: self.stop_words.clone(),
        };
        Ok(())
    }

    fn keep(&self, doc: &Doc<'_>) -> bool {
        self.rules.check(doc.text()).is_ok()
    }
}
