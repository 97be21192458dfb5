//! Why a stage call (or the start of a stage instance) failed, and what the executor does
//! about it. One classification for every back-end, used by retries, out-of-memory splits
//! and dead letters alike.

use std::time::Duration;

/// A stage instance could not start or a call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StageFailure {
    /// The stage refused its params (at setup).
    #[error("rejected its params: {0}")]
    InvalidParams(String),
    /// The stage said this call (or setup) failed.
    #[error("returned an error: {0}")]
    Failed(String),
    /// The stage said the batch did not fit (e.g. CUDA out of memory).
    #[error("ran out of memory: {0}")]
    OutOfMemory(String),
    /// A WASM instance tried to grow its linear memory past the cap.
    #[error("exceeded its memory cap of {cap_mb} MiB (tried to grow linear memory to {wanted_mb} MiB)")]
    MemoryCap { cap_mb: u64, wanted_mb: u64 },
    #[error("exceeded its time limit of {0:?} per call")]
    Timeout(Duration),
    /// The watchdog stopped a worker whose call ran past the time limit.
    #[error("exceeded its time limit of {0:?} per call (worker stopped)")]
    WorkerTimeout(Duration),
    /// A WASM instance trapped (its state is unknown).
    #[error("trapped: {0}")]
    Trap(String),
    #[error("worker process died ({0})")]
    WorkerDied(String),
    /// The watchdog stopped the worker; `memory`: for using more RAM or GPU memory than its budget.
    #[error("worker stopped by the watchdog: {reason}")]
    Watchdog { reason: String, memory: bool },
    #[error("worker protocol error: {0}")]
    Protocol(String),
    #[error("stage returned an invalid batch: {0}")]
    InvalidOutput(String),
    /// A column the stage reads cannot be given to it from these documents.
    #[error("cannot give the stage its input: {0}")]
    InvalidInput(String),
    /// The plugin cannot be loaded or instantiated at all.
    #[error("{0}")]
    Load(String),
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The instance is gone or in an unknown state: replace it, then retry the batch.
    LostWorker,
    /// The batch did not fit: (replace the instance if it is gone, then) retry it in halves.
    OutOfMemory,
    /// Retry the batch on the same instance, up to `num_run_attempts`.
    Retryable,
    /// Retrying cannot help: fail the batch now (or dead-letter it).
    Fatal,
}

impl StageFailure {
    pub fn class(&self) -> FailureClass {
        match self {
            StageFailure::OutOfMemory(_) | StageFailure::MemoryCap { .. } | StageFailure::Watchdog { memory: true, .. } => {
                FailureClass::OutOfMemory
            }
            StageFailure::Timeout(_)
            | StageFailure::WorkerTimeout(_)
            | StageFailure::Trap(_)
            | StageFailure::WorkerDied(_)
            | StageFailure::Watchdog { memory: false, .. }
            | StageFailure::Protocol(_) => FailureClass::LostWorker,
            StageFailure::Failed(_) | StageFailure::InvalidOutput(_) => FailureClass::Retryable,
            StageFailure::InvalidParams(_) | StageFailure::Load(_) | StageFailure::InvalidInput(_) => FailureClass::Fatal,
        }
    }

    /// Whether the instance that failed must be replaced before the next call: it is gone
    /// (a dead or stopped worker) or its state is unknown (a trap, a call cut short, a
    /// linear memory that hit its cap).
    pub fn instance_lost(&self) -> bool {
        match self.class() {
            FailureClass::LostWorker => true,
            FailureClass::OutOfMemory => !matches!(self, StageFailure::OutOfMemory(_)),
            FailureClass::Retryable | FailureClass::Fatal => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        use FailureClass::*;
        let cases = [
            (StageFailure::OutOfMemory("cuda".into()), OutOfMemory, false),
            (StageFailure::MemoryCap { cap_mb: 1, wanted_mb: 2 }, OutOfMemory, true),
            (StageFailure::Watchdog { reason: "rss".into(), memory: true }, OutOfMemory, true),
            (StageFailure::Watchdog { reason: "?".into(), memory: false }, LostWorker, true),
            (StageFailure::Timeout(Duration::from_secs(1)), LostWorker, true),
            (StageFailure::WorkerDied("SIGSEGV".into()), LostWorker, true),
            (StageFailure::Trap("unreachable".into()), LostWorker, true),
            (StageFailure::Failed("no".into()), Retryable, false),
            (StageFailure::InvalidOutput("bad".into()), Retryable, false),
            (StageFailure::InvalidParams("bad".into()), Fatal, false),
            (StageFailure::InvalidInput("ragged".into()), Fatal, false),
        ];
        for (f, class, lost) in cases {
            assert_eq!(f.class(), class, "{f}");
            assert_eq!(f.instance_lost(), lost, "{f}");
        }
    }
}
