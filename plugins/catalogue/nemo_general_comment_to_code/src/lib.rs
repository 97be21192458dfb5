//! NeMo Curator's `GeneralCommentToCodeFilter` as a stage; the scoring lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::code;
use curator_sdk::prelude::*;

/// Keeps source files whose comment text makes up between 1 % and 85 % of the characters (9999 when a comment is unterminated).
#[stage(name = "general_comment_to_code_filter", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct GeneralCommentToCodeFilter {
    /// MIME type of the language: text/x-c, text/x-c++, text/x-java(-source), application/javascript, text/x-go, text/x-shellscript, text/html, text/xml, text/x-ruby, text/x-python.
    #[param(one_of = ["text/x-c", "text/x-c++", "text/x-java", "text/x-java-source", "application/javascript", "text/x-javascript", "text/x-go", "text/x-shellscript", "text/html", "text/xml", "text/x-ruby", "text/x-python", "text/x-script.python"])]
    pub language: String,
    /// Smallest share kept.
    #[param(default = 0.01)]
    pub min_comment_to_code_ratio: f64,
    /// Largest share kept.
    #[param(default = 0.85)]
    pub max_comment_to_code_ratio: f64,
}

curator_heuristics::score_stage!(GeneralCommentToCodeFilter,
    score(s, text) { code::comment_ratio(text, &s.language) },
    keep(s, v) { s.min_comment_to_code_ratio <= v && v <= s.max_comment_to_code_ratio });
