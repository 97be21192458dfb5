//! NeMo Curator's `UrlRemover` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::modifiers;
use curator_sdk::prelude::*;

/// Removes URLs (`http://…`, `https://…`, `www.…`).
#[stage(name = "url_remover", cpus = 1.0, memory_mb = 128)]
pub struct UrlRemover {}

impl Map for UrlRemover {
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        modifiers::url_remover(doc.text())
    }
}
