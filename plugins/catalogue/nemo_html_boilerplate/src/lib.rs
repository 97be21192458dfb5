//! NeMo Curator's `HTMLBoilerplateFilter` as a stage; the scoring lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::code;
use curator_sdk::prelude::*;

/// Drops HTML that is mostly markup: visible text under `min_lang_content_ratio` of the file or under `min_lang_content_num_chars` characters.
#[stage(name = "html_boilerplate_filter", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct HTMLBoilerplateFilter {
    /// Smallest share of visible text kept.
    #[param(default = 0.2)]
    pub min_lang_content_ratio: f64,
    /// Fewest characters of visible text (else the score is 0).
    #[param(default = 100)]
    pub min_lang_content_num_chars: usize,
}

curator_heuristics::score_stage!(HTMLBoilerplateFilter,
    score(s, text) { code::html_content_ratio(text, s.min_lang_content_num_chars) },
    keep(s, v) { v >= s.min_lang_content_ratio });
