//! datatrove's `GopherRepetitionFilter` as a stage: Gopher's repetition rules (duplicate
//! lines and paragraphs, most frequent 2–4-grams, repeated 5–10-grams) with datatrove's
//! parameters and defaults. A fraction of 0 turns its check off.

use curator_heuristics::datatrove::GopherRepetition;
use curator_sdk::prelude::*;

/// Drops documents with too much repeated text.
#[stage(name = "gopher_repetition_filter", cpus = 1.0, memory_mb = 128)]
pub struct GopherRepetitionFilter {
    /// Largest share of lines that repeat an earlier line.
    #[param(default = 0.3)]
    pub dup_line_frac: f64,
    /// Largest share of paragraphs that repeat an earlier paragraph.
    #[param(default = 0.3)]
    pub dup_para_frac: f64,
    /// Largest share of characters in repeated lines.
    #[param(default = 0.2)]
    pub dup_line_char_frac: f64,
    /// Largest share of characters in repeated paragraphs.
    #[param(default = 0.2)]
    pub dup_para_char_frac: f64,
    /// `[n, fraction]` pairs: the most frequent n-gram's largest share of characters.
    #[param(default = [[2, 0.2], [3, 0.18], [4, 0.16]])]
    pub top_n_grams: Vec<(usize, f64)>,
    /// `[n, fraction]` pairs: the largest share of characters in repeated n-grams.
    #[param(default = [[5, 0.15], [6, 0.14], [7, 0.13], [8, 0.12], [9, 0.11], [10, 0.10]])]
    pub dup_n_grams: Vec<(usize, f64)>,
    /// The rules, built from the params once.
    #[state]
    rules: GopherRepetition,
}

impl Filter for GopherRepetitionFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = GopherRepetition {
            dup_line_frac: Some(self.dup_line_frac),
            dup_para_frac: Some(self.dup_para_frac),
            dup_line_char_frac: Some(self.dup_line_char_frac),
            dup_para_char_frac: Some(self.dup_para_char_frac),
            top_n_grams: self.top_n_grams.clone(),
            dup_n_grams: self.dup_n_grams.clone(),
        };
        Ok(())
    }

    fn keep(&self, doc: &Doc<'_>) -> bool {
        self.rules.check(doc.text()).is_ok()
    }
}
