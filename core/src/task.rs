//! Where a batch came from: enough to name it in an error, a dead-letter record or a journal.

use std::fmt;

/// Metadata carried with every batch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskMeta {
    /// Sequence number of the batch within its partition, from 0 (the order the partition's
    /// output is written in).
    pub seq: u64,
    /// Index of the batch's partition among the partitions the reading graph processes (a
    /// graph over a subset of them, such as a dedup step's output, numbers its own).
    pub partition: usize,
    /// The part of a source file the batch was read from, as the user named the file
    /// (`file`, `file bytes a..b` or `file row groups a..b`).
    pub source: String,
    /// First document of the batch, counted from 0 within `source`.
    pub first_row: u64,
    /// Number of documents the batch started with.
    pub num_rows: u64,
    /// Whether this is the last batch of its partition.
    pub last_of_partition: bool,
}

impl TaskMeta {
    /// The half-open row range `first..end` of the batch in `source`.
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
