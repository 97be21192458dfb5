//! NeMo Curator's `AlphaFilter` as a stage; the scoring lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::code;
use curator_sdk::prelude::*;

/// Drops files with few letters (tensors or tables stored as text, StarCoder).
#[stage(name = "alpha_filter", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct AlphaFilter {
    /// Smallest share of alphabetic characters kept.
    #[param(default = 0.25)]
    pub min_alpha_ratio: f64,
}

curator_heuristics::score_stage!(AlphaFilter,
    score(_s, text) { code::alpha_ratio(text) },
    keep(s, v) { v >= s.min_alpha_ratio });
