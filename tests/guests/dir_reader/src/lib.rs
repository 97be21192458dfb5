//! A stage that requests one read-only directory, `data`, and reads (or writes) a file there.

use curator_sdk::prelude::*;

/// Adds column `content` holding the text of file `file` (opened as given, e.g. `/data/x`).
#[stage(name = "dir_reader", cpus = 1.0, memory_mb = 64, dir = "data", outputs = ["content"])]
pub struct DirReader {
    /// Path to read, as the guest sees it.
    pub file: String,
    /// Write to `file` instead of reading it.
    #[param(default = false)]
    pub write: bool,
}

impl Stage for DirReader {
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let content = if self.write {
            std::fs::write(&self.file, b"overwritten").map_err(|e| StageError::Failed(format!("cannot write {}: {e}", self.file)))?;
            "written".to_string()
        } else {
            std::fs::read_to_string(&self.file).map_err(|e| StageError::Failed(format!("cannot open {}: {e}", self.file)))?
        };
        Ok(Output::Columns(vec![Column::utf8("content", std::iter::repeat_n(content.as_str(), batch.len()))]))
    }
}
