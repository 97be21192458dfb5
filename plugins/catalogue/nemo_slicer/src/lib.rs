//! NeMo Curator's `Slicer` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::modifiers::{self, Bound};
use curator_sdk::prelude::*;
use curator_sdk::serde::Deserialize;

/// One end of the slice: a character index (negative: from the end) or a marker string.
#[derive(Debug, Clone, Deserialize)]
#[serde(crate = "curator_sdk::serde", untagged)]
pub enum End {
    Index(i64),
    Text(String),
}

fn bound(end: &Option<End>) -> Bound {
    match end {
        Some(End::Index(i)) => Bound::Index(*i),
        Some(End::Text(s)) => Bound::Text(s.clone()),
        None => Bound::None,
    }
}

/// Keeps the part of each document between `left` and `right`.
#[stage(name = "slicer", cpus = 1.0, memory_mb = 128)]
pub struct Slicer {
    /// Start: a character index, or the first occurrence of a string (missing: the document becomes empty).
    #[param(default = 0)]
    pub left: Option<End>,
    /// End: a character index (exclusive), or the last occurrence of a string; none: the end.
    pub right: Option<End>,
    /// Keep the `left` string itself.
    #[param(default = true)]
    pub include_left: bool,
    /// Keep the `right` string itself.
    #[param(default = true)]
    pub include_right: bool,
    /// Strip whitespace from the result.
    #[param(default = true)]
    pub strip: bool,
    /// The slicer, built from the params once.
    #[state]
    slicer: Option<modifiers::Slicer>,
}

impl Map for Slicer {
    fn init(&mut self) -> Result<(), StageError> {
        self.slicer = Some(modifiers::Slicer {
            left: bound(&self.left),
            right: bound(&self.right),
            include_left: self.include_left,
            include_right: self.include_right,
            strip: self.strip,
        });
        Ok(())
    }

    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        match &self.slicer {
            Some(s) => s.apply(doc.text()),
            None => Cow::Borrowed(doc.text()),
        }
    }
}
