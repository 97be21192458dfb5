//! NeMo Curator's `MarkdownRemover` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::modifiers;
use curator_sdk::prelude::*;

/// Removes Markdown bold, italic and underline marks; a link becomes its URL (as NeMo Curator does).
#[stage(name = "markdown_remover", cpus = 1.0, memory_mb = 128)]
pub struct MarkdownRemover {}

impl Map for MarkdownRemover {
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        modifiers::markdown_remover(doc.text())
    }
}
