//! NeMo Curator's `SubstringFilter` as a stage; the scoring lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::code;
use curator_sdk::prelude::*;

/// Keeps documents that contain `substring` at `position`.
#[stage(name = "substring_filter", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct SubstringFilter {
    /// The text to look for.
    pub substring: String,
    /// Where: prefix, suffix or any.
    #[param(one_of = ["prefix", "suffix", "any"])]
    pub position: String,
}

curator_heuristics::score_stage!(SubstringFilter,
    score(s, text) { f64::from(u8::from(code::has_substring(text, &s.substring, &s.position))) },
    keep(_s, v) { v == 1.0 });
