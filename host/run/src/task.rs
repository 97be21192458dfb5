//! The run's shared types: a batch on its way through the stages ([`Task`]), the documents a
//! stage could not process ([`DeadLetter`]), tasks kept on disk between scheduling steps
//! ([`SpillDir`]) and the tasks an earlier step replays ([`Replay`]). The executor and the
//! dedup step both use them; neither owns them.

mod resident;
mod spill;

use arrow_array::RecordBatch;
use curator_core::TaskMeta;

use crate::io::IoError;

pub use resident::Resident;
pub use spill::{OnDone, SpillDir, SpillReplay};

/// A batch on its way through the stages.
pub struct Task {
    pub meta: TaskMeta,
    pub batch: RecordBatch,
    /// Documents that failed so far (with `ignore_failures: true`).
    pub dead: Vec<DeadLetter>,
    /// Documents for branch sinks: (branch index, batch).
    pub side: Vec<(usize, RecordBatch)>,
    /// Whether `id`, `text`, `_meta` and `_row` are still the source's: every stage so far
    /// only kept rows or added other columns. A dedup step's documents spill then drops the
    /// text, and its output reads it from the source again (`dedup::lean`).
    pub source_columns: bool,
}

impl Task {
    /// A batch as the source read it.
    pub fn new(meta: TaskMeta, batch: RecordBatch) -> Task {
        Task { meta, batch, dead: Vec::new(), side: Vec::new(), source_columns: true }
    }
}

/// Documents a stage could not process (with `ignore_failures: true`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DeadLetter {
    pub stage: String,
    pub plugin: String,
    pub source: String,
    /// Rows `[start, end)` of the source part, when known (a stage that returned a whole new
    /// batch upstream loses the correspondence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<[u64; 2]>,
    pub documents: u64,
    pub error: String,
    pub ids: Vec<String>,
}

/// Tasks an earlier step left on disk: a spill directory, or the documents behind a dedup
/// step (with its verdict applied).
pub trait Replay: Sync {
    /// How many items there are.
    fn len(&self) -> usize;
    /// Whether there is nothing to replay.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Item `i` as a task, or `None` when it is not replayed.
    fn task(&self, i: usize) -> Result<Option<Task>, IoError>;
}

/// What a batch read again from the source becomes before the stages see it (a dedup step's
/// output reading its source a second time: the rows and columns its documents phase kept,
/// the verdict applied).
pub trait Rejoin: Sync {
    /// `task`, read from the partition with run-wide index `partition`, as it goes on.
    fn rejoin(&self, partition: usize, task: Task) -> Result<Task, IoError>;

    /// The tasks of the partition with run-wide index `partition`, as they go on, when they
    /// are all held in memory (`Resident`): then the source is not read for it.
    fn resident(&self, _partition: usize) -> Result<Option<Vec<Task>>, IoError> {
        Ok(None)
    }
}
