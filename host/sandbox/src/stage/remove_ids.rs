//! `- remove_ids: {path, field}`: drop the documents whose id is listed, as NeMo Curator's
//! removal workflow does with the ids its identification step wrote. A built-in stage (the
//! planner gives it its manifest, `plan/stages.rs`): the ids (Parquet, e.g. a `_duplicates/` directory, or JSONL) are read once when the run
//! starts and held in one set shared by its workers.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{Array, BooleanArray, StringArray};

use super::{Keep, StageCall, StageFailure, StageOutput};
use crate::io::{IoError, Loc};

fn bad(path: &str, message: impl std::fmt::Display) -> IoError {
    IoError::Line { at: path.to_string(), message: format!("cannot read ids: {message}") }
}

/// Every id listed in `paths` (files, or directories read recursively: `.parquet` files by
/// column, anything else as JSONL by field). Hidden and `_`-prefixed summaries are skipped.
pub fn load_ids(paths: &[Loc], field: &str) -> Result<HashSet<String>, IoError> {
    let mut ids = HashSet::new();
    for loc in paths {
        for (name, file, _) in loc.list_files()? {
            let base = name.rsplit('/').next().unwrap_or(&name);
            if base.starts_with('.') || base.ends_with(".json") {
                continue;
            }
            let shown = file.display();
            if base.ends_with(".parquet") {
                parquet_ids(&file, &shown, field, &mut ids)?;
            } else {
                let raw = file.read_range(0, file.size()?)?;
                let mut text = Vec::new();
                std::io::Read::read_to_end(&mut crate::io::decoded(Box::new(std::io::Cursor::new(raw.to_vec())), &shown)?, &mut text)
                    .map_err(|e| bad(&shown, e))?;
                for (k, line) in text.split(|&b| b == b'\n').enumerate() {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| bad(&format!("{shown}:{}", k + 1), e))?;
                    match v.get(field) {
                        Some(serde_json::Value::String(s)) => {
                            ids.insert(s.clone());
                        }
                        Some(serde_json::Value::Number(n)) => {
                            ids.insert(n.to_string());
                        }
                        _ => return Err(bad(&format!("{shown}:{}", k + 1), format!("no string field {field:?}"))),
                    }
                }
            }
        }
    }
    Ok(ids)
}

/// The ids in column `field` of the Parquet file `file`.
#[cfg(feature = "parquet")]
fn parquet_ids(file: &Loc, shown: &str, field: &str, ids: &mut HashSet<String>) -> Result<(), IoError> {
    let bytes = file.read_range(0, file.size()?)?;
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes).and_then(|b| b.build()).map_err(|e| bad(shown, e))?;
    for batch in reader {
        let batch = batch.map_err(|e| bad(shown, e))?;
        let col = batch.column_by_name(field).ok_or_else(|| bad(shown, format!("no column {field:?}")))?;
        let col = col
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .ok_or_else(|| bad(shown, format!("column {field:?} is not a string column")))?;
        ids.extend((0..col.len()).filter(|&r| col.is_valid(r)).map(|r| col.value(r).to_string()));
    }
    Ok(())
}

#[cfg(not(feature = "parquet"))]
fn parquet_ids(_file: &Loc, shown: &str, _field: &str, _ids: &mut HashSet<String>) -> Result<(), IoError> {
    Err(bad(shown, concat!("a Parquet file: ", curator_io::not_built!("parquet"))))
}

/// A worker's instance: the shared id set.
pub struct RemoveIds {
    pub ids: Arc<HashSet<String>>,
}

impl StageCall for RemoveIds {
    fn call(&mut self, input: &arrow_array::RecordBatch) -> Result<StageOutput, StageFailure> {
        let ids = input
            .column_by_name(crate::io::ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| StageFailure::Failed("remove_ids: the batch has no utf8 id column".into()))?;
        let keep: BooleanArray = (0..ids.len()).map(|r| Some(ids.is_null(r) || !self.ids.contains(ids.value(r)))).collect();
        Ok(StageOutput::Selection(Keep::Mask(keep)))
    }

    fn memory_bytes(&self) -> usize {
        0
    }

    fn teardown(self: Box<Self>) {}
}
