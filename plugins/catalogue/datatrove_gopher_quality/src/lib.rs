//! datatrove's `GopherQualityFilter` as a stage: Gopher's quality rules (Rae et al. 2021,
//! table A1) with datatrove's parameters, defaults and order of checks. A threshold of 0
//! turns its check off. Words are English words as spaCy splits them (see
//! `curator_heuristics::en_words`).

use curator_sdk::prelude::*;

// The params (names, types, defaults, docs) are the library's: `curator_heuristics::datatrove`.
curator_heuristics::datatrove_stage!(GopherQuality,
    /// Drops documents outside Gopher's quality bounds.
    #[stage(name = "gopher_quality_filter", cpus = 1.0, memory_mb = 128)]
    pub struct GopherQualityFilter);

impl Filter for GopherQualityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = self.rules_from_params();
        Ok(())
    }

    fn keep(&self, doc: &Doc<'_>) -> bool {
        self.rules.check(doc.text()).is_ok()
    }
}
