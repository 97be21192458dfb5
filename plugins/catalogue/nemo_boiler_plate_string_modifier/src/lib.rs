//! NeMo Curator's `BoilerPlateStringModifier` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::modifiers;
use curator_sdk::prelude::*;

/// Removes privacy-policy/cookie/terms-of-use paragraphs at the top or bottom; empties documents with boilerplate elsewhere or "lorem ipsum".
#[stage(name = "boiler_plate_string_modifier", cpus = 1.0, memory_mb = 128)]
pub struct BoilerPlateStringModifier {
    /// Remove boilerplate paragraphs found only at the top or bottom (else empty the document).
    #[param(default = true)]
    pub remove_if_at_top_or_bottom: bool,
}

impl Map for BoilerPlateStringModifier {
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        modifiers::boiler_plate_string(doc.text(), self.remove_if_at_top_or_bottom)
    }
}
