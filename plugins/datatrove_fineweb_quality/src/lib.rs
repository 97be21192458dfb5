//! datatrove's `FineWebQualityFilter` as a stage: FineWeb's own rules (share of lines
//! ending in punctuation, share of short lines, characters in duplicated lines, newlines per
//! word) with datatrove's parameters and defaults.

use curator_heuristics::datatrove::FineWebQuality;
use curator_sdk::prelude::*;

/// Drops documents that look like lists, menus or boilerplate.
#[stage(name = "fineweb_quality_filter", cpus = 1.0, memory_mb = 128)]
pub struct FineWebQualityFilter {
    /// Smallest share of lines ending in a stop character.
    #[param(default = 0.12)]
    pub line_punct_thr: f64,
    /// Keep documents where no line ends in a stop character.
    #[param(default = false)]
    pub line_punct_exclude_zero: bool,
    /// What ends a punctuated line (default: datatrove's terminal punctuation, many scripts).
    pub stop_chars: Option<Vec<String>>,
    /// Largest share of short lines.
    #[param(default = 0.67)]
    pub short_line_thr: f64,
    /// A line this long (in characters) or shorter is short.
    #[param(default = 30)]
    pub short_line_length: usize,
    /// Largest share of characters in duplicated lines.
    #[param(default = 0.01)]
    pub char_duplicates_ratio: f64,
    /// Largest ratio of newlines to words.
    #[param(default = 0.3)]
    pub new_line_ratio: f64,
    /// The rules, built from the params once.
    #[state]
    rules: FineWebQuality,
}

impl Filter for FineWebQualityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = FineWebQuality {
            line_punct_thr: self.line_punct_thr,
            line_punct_exclude_zero: self.line_punct_exclude_zero,
            stop_chars: self.stop_chars.clone(),
            short_line_thr: self.short_line_thr,
            short_line_length: self.short_line_length,
            char_duplicates_ratio: self.char_duplicates_ratio,
            new_line_ratio: self.new_line_ratio,
        };
        Ok(())
    }

    fn keep(&self, doc: &Doc<'_>) -> bool {
        self.rules.check(doc.text()).is_ok()
    }
}
