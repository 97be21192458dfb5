//! NeMo Curator's `PythonCommentToCodeFilter` as a stage; the scoring lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::code;
use curator_sdk::prelude::*;

/// Keeps Python files whose comments and docstrings make up between 1 % and 85 % of the characters.
#[stage(name = "python_comment_to_code_filter", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct PythonCommentToCodeFilter {
    /// Smallest share kept.
    #[param(default = 0.01)]
    pub min_comment_to_code_ratio: f64,
    /// Largest share kept.
    #[param(default = 0.85)]
    pub max_comment_to_code_ratio: f64,
}

curator_heuristics::score_stage!(PythonCommentToCodeFilter,
    score(_s, text) { code::python_comment_ratio(text) },
    keep(s, v) { s.min_comment_to_code_ratio <= v && v <= s.max_comment_to_code_ratio });
