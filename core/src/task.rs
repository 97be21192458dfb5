//! Where a batch came from: enough to name it in an error, a dead-letter record or a journal.

use std::fmt;

/// Metadata carried with every batch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskMeta {
    /// Sequence number of the batch in the run (the order outputs are written in).
    pub seq: u64,
    /// Index of the source file in the run's input list.
    pub file_index: usize,
    /// Source file, as the user named it.
    pub source: String,
    /// First document of the batch, counted from 0 within the source file.
    pub first_row: u64,
    /// Number of documents the batch started with.
    pub num_rows: u64,
    /// Whether this is the last batch of its source file.
    pub last_of_file: bool,
}

impl TaskMeta {
    /// The half-open row range `first..end` of the batch in its source file.
    pub fn row_range(&self) -> std::ops::Range<u64> {
        self.first_row..self.first_row + self.num_rows
    }
}

impl fmt::Display for TaskMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.row_range();
        write!(f, "{} rows {}..{}", self.source, r.start, r.end)
    }
}
