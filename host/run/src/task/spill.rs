//! Batch mode's spill directory: every batch a stage finished, as an Arrow IPC file, with its
//! place in the run (partition, sequence, dead letters so far) in the schema metadata, so
//! the next stage replays exactly what streaming mode would have passed it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::Schema;
use curator_core::TaskMeta;

use crate::io::IoError;

use super::{DeadLetter, Replay, Resident, Task};

/// Schema-metadata key of a spilled batch's task description.
const KEY: &str = "curator.task";

#[derive(serde::Serialize, serde::Deserialize)]
struct Spilled {
    meta: TaskMeta,
    dead: Vec<DeadLetter>,
    /// Branch index of each side file, in file order.
    side: Vec<usize>,
    #[serde(default)]
    source_columns: bool,
}

/// What a spill keeps of a batch whose source columns are intact (`Task::source_columns`).
pub type Lean = Box<dyn Fn(&RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> + Send + Sync>;

/// One stage's output in batch mode, or the documents in front of a dedup step.
pub struct SpillDir {
    path: PathBuf,
    /// The run-wide index of each partition the writing graph knows by its position (a
    /// graph over a subset of the partitions still spills under stable names).
    global: Option<Vec<usize>>,
    lean: Option<Lean>,
    /// Where a copy of each batch spilled is kept in memory, as far as it has room.
    resident: Option<Arc<Resident>>,
    /// Told each partition (run-wide index) once it is marked done.
    on_done: Option<OnDone>,
}

/// What a spill tells of each partition it marks done (its run-wide index), from the thread
/// that spilled the partition's last batch.
pub type OnDone = Arc<dyn Fn(usize) + Send + Sync>;

fn werr(path: &Path, e: impl std::fmt::Display) -> IoError {
    IoError::Write { path: path.display().to_string(), source: std::io::Error::other(e.to_string()) }
}

fn rerr(path: &Path, e: impl std::fmt::Display) -> IoError {
    IoError::Line { at: path.display().to_string(), message: format!("cannot read spilled batch: {e}") }
}

fn write_ipc(path: &Path, batch: &RecordBatch, extra: Option<String>) -> Result<(), IoError> {
    let mut metadata = batch.schema().metadata().clone();
    if let Some(x) = extra {
        metadata.insert(KEY.to_string(), x);
    }
    let schema = Arc::new(Schema::new_with_metadata(batch.schema().fields().clone(), metadata));
    let batch = RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).map_err(|e| werr(path, e))?;
    let tmp = path.with_extension("arrow.tmp");
    let file = std::fs::File::create(&tmp).map_err(|e| werr(&tmp, e))?;
    let mut w = arrow_ipc::writer::FileWriter::try_new(std::io::BufWriter::new(file), &schema).map_err(|e| werr(&tmp, e))?;
    w.write(&batch).map_err(|e| werr(&tmp, e))?;
    w.finish().map_err(|e| werr(&tmp, e))?;
    drop(w);
    std::fs::rename(&tmp, path).map_err(|e| werr(path, e))
}

/// The batch in an IPC file and the task description it carried (removed from the schema);
/// with `columns`, only those of them the file has are decoded (the others are not checked
/// or built: a text column costs its UTF-8 validation).
fn read_ipc(path: &Path, columns: Option<&[&str]>) -> Result<(RecordBatch, Option<String>), IoError> {
    let open = || std::fs::File::open(path).map(std::io::BufReader::new).map_err(|e| rerr(path, e));
    let projection = match columns {
        None => None,
        Some(names) => {
            // The footer and schema first (no batch is read), to number the columns.
            let schema = arrow_ipc::reader::FileReader::try_new(open()?, None).map_err(|e| rerr(path, e))?.schema();
            Some((0..schema.fields().len()).filter(|&i| names.contains(&schema.field(i).name().as_str())).collect())
        }
    };
    let reader = arrow_ipc::reader::FileReader::try_new(open()?, projection).map_err(|e| rerr(path, e))?;
    let schema = reader.schema();
    let mut batches = Vec::new();
    for b in reader {
        batches.push(b.map_err(|e| rerr(path, e))?);
    }
    let mut metadata = schema.metadata().clone();
    let extra = metadata.remove(KEY);
    let clean = Arc::new(Schema::new_with_metadata(schema.fields().clone(), metadata));
    let batch = match batches.as_slice() {
        [] => RecordBatch::new_empty(clean),
        // The row count is kept when the projection names no column the file has (a batch of
        // rejected lines only never got the columns stages add).
        [one] => RecordBatch::try_new_with_options(
            clean,
            one.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(one.num_rows())),
        )
        .map_err(|e| rerr(path, e))?,
        _ => return Err(rerr(path, "more than one batch")),
    };
    Ok((batch, extra))
}

impl SpillDir {
    /// An empty spill directory at `path` (anything there before is removed).
    pub fn create(path: PathBuf) -> Result<SpillDir, IoError> {
        let _ = std::fs::remove_dir_all(&path);
        Self::open(path, None)
    }

    /// The spill directory at `path`, keeping what it holds (a resumed dedup step). Tasks are
    /// written under `global[meta.partition]` when given.
    pub fn open(path: PathBuf, global: Option<Vec<usize>>) -> Result<SpillDir, IoError> {
        std::fs::create_dir_all(&path).map_err(|e| werr(&path, e))?;
        Ok(SpillDir { path, global, lean: None, resident: None, on_done: None })
    }

    /// This spill, keeping only `lean(batch)` of the batches whose source columns are intact
    /// (their text can be read from the source again).
    pub fn lean(self, lean: Lean) -> SpillDir {
        SpillDir { lean: Some(lean), ..self }
    }

    /// This spill, also offering each batch it writes (whole, as the stages gave it) to
    /// `resident`.
    pub fn keeping(self, resident: Arc<Resident>) -> SpillDir {
        SpillDir { resident: Some(resident), ..self }
    }

    /// This spill, calling `f` with each partition's run-wide index once the partition is
    /// marked done.
    pub fn on_done(self, f: OnDone) -> SpillDir {
        SpillDir { on_done: Some(f), ..self }
    }

    /// A spilled batch's file name.
    pub fn file_name(partition: usize, seq: u64) -> String {
        format!("{}.arrow", Self::stem_of(partition, seq))
    }

    fn stem_of(partition: usize, seq: u64) -> String {
        format!("{partition:08}-{seq:010}")
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn stem(meta: &TaskMeta) -> String {
        Self::stem_of(meta.partition, meta.seq)
    }

    /// The marker of a partition whose every batch is spilled.
    pub fn done_marker(&self, partition: usize) -> PathBuf {
        self.path.join(format!("{partition:08}.done"))
    }

    /// Mark `partition` (the writing graph's index) complete: all its batches are on disk.
    pub fn mark_done(&self, partition: usize) -> Result<(), IoError> {
        let global = self.global.as_ref().and_then(|g| g.get(partition).copied()).unwrap_or(partition);
        let marker = self.done_marker(global);
        std::fs::write(&marker, b"").map_err(|e| werr(&marker, e))?;
        crate::os::crash_point(&format!("spill-{global}"));
        if let Some(f) = &self.on_done {
            f(global);
        }
        Ok(())
    }

    /// Remove the batches of a partition that was not completed (before it is redone).
    pub fn clear_partition(&self, partition: usize) -> Result<(), IoError> {
        let prefix = format!("{partition:08}-");
        for e in std::fs::read_dir(&self.path).map_err(|e| rerr(&self.path, e))?.flatten() {
            if e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)) {
                std::fs::remove_file(e.path()).map_err(|err| werr(&e.path(), err))?;
            }
        }
        Ok(())
    }

    /// Spill one finished task.
    pub fn write(&self, task: &Task) -> Result<(), IoError> {
        let mut meta = task.meta.clone();
        if let Some(g) = &self.global {
            meta.partition = g.get(meta.partition).copied().unwrap_or(meta.partition);
        }
        let stem = Self::stem(&meta);
        for (k, (_, side)) in task.side.iter().enumerate() {
            write_ipc(&self.path.join(format!("{stem}.b{k}.arrow")), side, None)?;
        }
        let desc = Spilled {
            meta,
            dead: task.dead.clone(),
            side: task.side.iter().map(|(b, _)| *b).collect(),
            source_columns: task.source_columns,
        };
        let desc = serde_json::to_string(&desc).map_err(|e| werr(&self.path, e))?;
        let path = self.path.join(format!("{stem}.arrow"));
        let lean = match &self.lean {
            Some(lean) if task.source_columns => {
                let lean = lean(&task.batch).map_err(|e| werr(&path, e))?;
                write_ipc(&path, &lean, Some(desc))?;
                Some(lean)
            }
            _ => {
                write_ipc(&path, &task.batch, Some(desc))?;
                None
            }
        };
        if let Some(r) = &self.resident {
            r.keep_with(format!("{stem}.arrow"), task, lean);
        }
        Ok(())
    }

    /// The spilled tasks' files, in partition and sequence order.
    pub fn list(&self) -> Result<Vec<PathBuf>, IoError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.path)
            .map_err(|e| rerr(&self.path, e))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".arrow") && !n.contains(".b")))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Read back a spilled task.
    pub fn read(&self, path: &Path) -> Result<Task, IoError> {
        self.read_task(path, None)
    }

    /// Read back the `columns` of a spilled task's batch (those it has), without its branch
    /// batches.
    pub fn read_columns(&self, path: &Path, columns: &[&str]) -> Result<Task, IoError> {
        self.read_task(path, Some(columns))
    }

    fn read_task(&self, path: &Path, columns: Option<&[&str]>) -> Result<Task, IoError> {
        let (batch, desc) = read_ipc(path, columns)?;
        let desc = desc.ok_or_else(|| rerr(path, "no task description"))?;
        let d: Spilled = serde_json::from_str(&desc).map_err(|e| rerr(path, e))?;
        let stem = Self::stem(&d.meta);
        let mut side = Vec::with_capacity(d.side.len());
        for (k, b) in d.side.iter().enumerate().filter(|_| columns.is_none()) {
            side.push((*b, read_ipc(&self.path.join(format!("{stem}.b{k}.arrow")), None)?.0));
        }
        Ok(Task { meta: d.meta, batch, dead: d.dead, side, source_columns: d.source_columns })
    }

    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A spill directory's tasks, in partition and sequence order.
pub struct SpillReplay<'a> {
    pub dir: &'a SpillDir,
    pub files: Vec<std::path::PathBuf>,
}

impl Replay for SpillReplay<'_> {
    fn len(&self) -> usize {
        self.files.len()
    }
    fn task(&self, i: usize) -> Result<Option<Task>, IoError> {
        Ok(Some(self.dir.read(&self.files[i])?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array, StringArray};

    #[test]
    fn round_trip_keeps_batch_schema_and_task() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillDir::create(dir.path().join("s")).unwrap();
        let schema = Arc::new(Schema::new_with_metadata(
            vec![arrow_schema::Field::new("text", arrow_schema::DataType::Utf8, false)],
            std::collections::HashMap::from([("k".to_string(), "v".to_string())]),
        ));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef]).unwrap();
        let side = RecordBatch::try_new(
            Arc::new(Schema::new(vec![arrow_schema::Field::new("_row", arrow_schema::DataType::Int64, false)])),
            vec![Arc::new(Int64Array::from(vec![7])) as ArrayRef],
        )
        .unwrap();
        let meta = TaskMeta { seq: 3, partition: 12, source: "a.jsonl".into(), first_row: 40, num_rows: 3, last_of_partition: true };
        let dead = DeadLetter {
            stage: "s".into(),
            plugin: "p".into(),
            source: "a.jsonl".into(),
            rows: Some([41, 42]),
            documents: 1,
            error: "e".into(),
            ids: vec!["x".into()],
        };
        let task = Task { meta: meta.clone(), batch: batch.clone(), dead: vec![dead], side: vec![(2, side.clone())], source_columns: true };
        spill.write(&task).unwrap();
        let files = spill.list().unwrap();
        assert_eq!(files.len(), 1);
        let back = spill.read(&files[0]).unwrap();
        assert_eq!(back.meta, meta);
        assert_eq!(back.batch, batch);
        assert_eq!(back.dead.len(), 1);
        assert_eq!(back.side, vec![(2, side)]);
        assert!(back.source_columns);
        let text_only = spill.read_columns(&files[0], &["text", "none"]).unwrap();
        assert_eq!(text_only.batch.num_columns(), 1);
        assert_eq!(text_only.batch.num_rows(), 2);
        assert!(text_only.side.is_empty());
        // A projection that names no column of the file keeps the row count.
        let none = spill.read_columns(&files[0], &["_signature"]).unwrap();
        assert_eq!((none.batch.num_columns(), none.batch.num_rows()), (0, 2));
    }
}
