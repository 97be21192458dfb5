//! datatrove's `FineWebQualityFilter` as a stage: FineWeb's own rules (share of lines
//! ending in punctuation, share of short lines, characters in duplicated lines, newlines per
//! word) with datatrove's parameters and defaults.

use curator_sdk::prelude::*;

// The params (names, types, defaults, docs) are the library's: `curator_heuristics::datatrove`.
curator_heuristics::datatrove_stage!(FineWebQuality,
    /// Drops documents that look like lists, menus or boilerplate.
    #[stage(name = "fineweb_quality_filter", cpus = 1.0, memory_mb = 128)]
    pub struct FineWebQualityFilter);

impl Filter for FineWebQualityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = self.rules_from_params();
        Ok(())
    }

    fn keep(&self, doc: &Doc<'_>) -> bool {
        self.rules.check(doc.text()).is_ok()
    }
}
