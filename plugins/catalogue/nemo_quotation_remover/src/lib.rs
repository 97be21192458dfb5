//! NeMo Curator's `QuotationRemover` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::modifiers;
use curator_sdk::prelude::*;

/// Removes double quotes wrapping a whole document.
#[stage(name = "quotation_remover", cpus = 1.0, memory_mb = 128)]
pub struct QuotationRemover {}

impl Map for QuotationRemover {
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        modifiers::quotation_remover(doc.text())
    }
}
