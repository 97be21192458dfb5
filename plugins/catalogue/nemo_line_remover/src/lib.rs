//! NeMo Curator's `LineRemover` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::modifiers;
use curator_sdk::prelude::*;

/// Removes the lines equal to one of `patterns`.
#[stage(name = "line_remover", cpus = 1.0, memory_mb = 128)]
pub struct LineRemover {
    /// Whole lines to remove (exact match; "" removes empty lines).
    pub patterns: Vec<String>,
}

impl Map for LineRemover {
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        modifiers::line_remover(doc.text(), &self.patterns)
    }
}
