//! NeMo Curator's `XMLHeaderFilter` as a stage; the scoring lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::code;
use curator_sdk::prelude::*;

/// Drops files that start with an XML declaration (mislabelled XML, StarCoder).
#[stage(name = "xml_header_filter", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct XMLHeaderFilter {
    /// Characters searched for `<?xml version=`.
    #[param(default = 100)]
    pub char_prefix_search_length: usize,
}

curator_heuristics::score_stage!(XMLHeaderFilter,
    score(s, text) { code::xml_header(text, s.char_prefix_search_length) },
    keep(_s, v) { v != 1.0 });
