//! Why a run failed.

use std::path::PathBuf;

use curator_core::TaskMeta;

use crate::io::IoError;
use crate::plan::PlannedStage;
use crate::stage::StageFailure;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("stage {label:?} (plugin {plugin}) failed to start: {source}")]
    Start { label: String, plugin: PathBuf, source: StageFailure },
    /// A stage call failed on a batch (after retries), and failures are not ignored.
    #[error("stage {label:?} (plugin {plugin}) failed on {task}: {source}")]
    Stage { label: String, plugin: PathBuf, task: Box<TaskMeta>, source: StageFailure },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Dedup(#[from] crate::dedup::DedupError),
    #[error(transparent)]
    Service(#[from] super::services::ServiceError),
    #[error("a worker thread panicked: {0}")]
    Panic(String),
    #[error("stopping: {failed} of {seen} documents failed, more than max_failed_fraction ({max})")]
    TooManyFailures { failed: u64, seen: u64, max: f64 },
}

impl RunError {
    pub(crate) fn start(stage: &PlannedStage, source: StageFailure) -> RunError {
        RunError::Start { label: stage.label.clone(), plugin: stage.plugin.path.clone(), source }
    }

    pub(crate) fn stage(stage: &PlannedStage, task: &TaskMeta, source: StageFailure) -> RunError {
        RunError::Stage { label: stage.label.clone(), plugin: stage.plugin.path.clone(), task: Box::new(task.clone()), source }
    }
}
