//! Run a stage in-process, natively: for unit tests of stage logic and for benchmarks
//! against the same stage compiled to WASM.

use crate::batch::{Batch, Output};
use crate::runner::{Runner, StageDef, StageError};

#[cfg(not(target_arch = "wasm32"))]
pub use crate::context::{ServiceContext, WorkerContext, context};

/// A stage instance running natively.
pub struct NativeStage {
    runner: Box<dyn Runner>,
}

impl NativeStage {
    /// Build stage `T` from params JSON (what the host would pass to `setup`).
    pub fn new<T: StageDef>(params_json: &str) -> Result<NativeStage, StageError> {
        Ok(NativeStage { runner: T::build(params_json)? })
    }

    /// Process one batch.
    pub fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        self.runner.process(batch)
    }

    /// Convenience for tests: the texts of `texts` that a filter keeps, the rewritten texts of
    /// a map, or the rewritten texts a rewrite keeps.
    pub fn run_texts(&mut self, texts: &[&str]) -> Result<Vec<String>, StageError> {
        let batch = Batch { num_rows: texts.len() as u32, columns: vec![crate::Column::utf8("text", texts.iter().copied())] };
        match self.process(batch)? {
            Output::Selection(keep) => Ok(keep.iter().map(|&i| texts[i as usize].to_string()).collect()),
            // A rewrite answers the new text of every row beside the rows it keeps.
            Output::Scored { columns, keep } => match columns.iter().find(|c| c.name == "text") {
                Some(text) => {
                    let s = text.strings()?;
                    Ok(keep.iter().map(|&i| s.get(i as usize).unwrap_or_default().to_string()).collect())
                }
                None => Ok(keep.iter().map(|&i| texts[i as usize].to_string()).collect()),
            },
            Output::Columns(cols) => {
                let text = cols.iter().find(|c| c.name == "text").ok_or_else(|| StageError::Failed("no text column in output".into()))?;
                let s = text.strings()?;
                Ok((0..s.len()).map(|i| s.get(i).unwrap_or_default().to_string()).collect())
            }
            Output::Batch(b) => {
                let s = b.column("text")?.strings()?;
                Ok((0..s.len()).map(|i| s.get(i).unwrap_or_default().to_string()).collect())
            }
        }
    }
}

/// Parse params JSON into `T`, turning a serde error into [`StageError::InvalidParams`].
pub fn parse_params<T: serde::de::DeserializeOwned>(params_json: &str) -> Result<T, StageError> {
    serde_json::from_str(params_json).map_err(|e| StageError::InvalidParams(e.to_string()))
}
