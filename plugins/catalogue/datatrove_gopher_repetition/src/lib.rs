//! datatrove's `GopherRepetitionFilter` as a stage: Gopher's repetition rules (duplicate
//! lines and paragraphs, most frequent 2–4-grams, repeated 5–10-grams) with datatrove's
//! parameters and defaults. A fraction of 0 turns its check off.

use curator_sdk::prelude::*;

// The params (names, types, defaults, docs) are the library's: `curator_heuristics::datatrove`.
curator_heuristics::datatrove_stage!(GopherRepetition,
    /// Drops documents with too much repeated text.
    #[stage(name = "gopher_repetition_filter", cpus = 1.0, memory_mb = 128)]
    pub struct GopherRepetitionFilter);

impl Filter for GopherRepetitionFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = self.rules_from_params();
        Ok(())
    }

    fn keep(&self, doc: &Doc<'_>) -> bool {
        self.rules.check(doc.text()).is_ok()
    }
}
