//! NeMo Curator's `NewlineNormalizer` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::modifiers;
use curator_sdk::prelude::*;

/// Replaces 3 or more newlines (or CRLFs) in a row with 2.
#[stage(name = "newline_normalizer", cpus = 1.0, memory_mb = 128)]
pub struct NewlineNormalizer {}

impl Map for NewlineNormalizer {
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        modifiers::newline_normalizer(doc.text())
    }
}
