//! `duplicates.rs` in a build without the `parquet` feature: no `_duplicates/` writer, so
//! planning refuses a dedup step first (`curator_host::plan`, with [`NO_PARQUET`](super::NO_PARQUET)).

use super::index::Index;
use super::output::Verdict;
use super::{DedupError, DedupStats};
use crate::io::Loc;
use crate::task::SpillDir;

/// Not reached from a pipeline: planning refuses the step first.
pub fn write_duplicates(
    out: &Loc,
    _docs: &SpillDir,
    _index: &Index,
    _verdict: &Verdict,
    _stats: &mut DedupStats,
    _clock: super::PhaseClock,
) -> Result<u64, DedupError> {
    Err(DedupError::Data { path: out.join("_duplicates").display(), message: super::NO_PARQUET.into() })
}
