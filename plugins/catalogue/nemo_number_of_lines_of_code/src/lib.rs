//! NeMo Curator's `NumberOfLinesOfCodeFilter` as a stage; the scoring lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::code;
use curator_sdk::prelude::*;

/// Keeps files with between `min_lines` and `max_lines` lines.
#[stage(name = "number_of_lines_of_code_filter", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct NumberOfLinesOfCodeFilter {
    /// Fewest lines kept.
    #[param(default = 10)]
    pub min_lines: usize,
    /// Most lines kept.
    #[param(default = 20000)]
    pub max_lines: usize,
}

curator_heuristics::score_stage!(NumberOfLinesOfCodeFilter,
    score(_s, text) { code::number_of_lines(text) as f64 },
    keep(s, v) { s.min_lines as f64 <= v && v <= s.max_lines as f64 });
