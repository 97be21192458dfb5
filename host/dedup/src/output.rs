//! What a dedup step decided, applied: the documents replayed from the spill to the stages
//! after the barrier (duplicates dropped, or marked); `_duplicates/` beside the output is
//! `duplicates.rs`'s.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{BooleanArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use curator_core::DedupAction;

use super::index::{Index, IndexedFile};
use crate::io::IoError;
use crate::task::{Resident, SpillDir, Task};

/// Every document in a group of two or more, with its group's survivor, by position.
pub struct Verdict {
    groups: Vec<(u32, u32)>,
}

impl Verdict {
    pub fn new(mut groups: Vec<(u32, u32)>) -> Verdict {
        groups.sort_unstable();
        Verdict { groups }
    }

    /// The survivor of `doc`'s group, if it is in one.
    pub fn survivor(&self, doc: u32) -> Option<u32> {
        self.groups.binary_search_by_key(&doc, |g| g.0).ok().map(|i| self.groups[i].1)
    }

    pub fn groups(&self) -> u64 {
        self.groups.iter().filter(|(d, r)| d == r).count() as u64
    }

    pub fn duplicates(&self) -> u64 {
        self.groups.iter().filter(|(d, r)| d != r).count() as u64
    }

    /// Whether any document at positions `base..base + rows` is in a group.
    pub fn any_in(&self, base: u32, rows: u32) -> bool {
        let i = self.groups.partition_point(|g| g.0 < base);
        self.groups.get(i).is_some_and(|g| (g.0 as u64) < base as u64 + rows as u64)
    }

    pub fn largest_group(&self) -> u64 {
        let mut size: HashMap<u32, u64> = HashMap::new();
        for (_, r) in &self.groups {
            *size.entry(*r).or_default() += 1;
        }
        size.values().copied().max().unwrap_or(0)
    }
}

/// The spilled documents replayed to the stages after a dedup step, in source order, with
/// the verdict applied. Partitions the output already holds (a resumed run) are skipped.
pub struct DedupReplay<'a> {
    pub docs: &'a SpillDir,
    pub index: &'a Index,
    pub verdict: &'a Verdict,
    pub action: DedupAction,
    /// Run-wide partition index → index among the partitions to write.
    pub local: HashMap<usize, usize>,
    /// Columns only the dedup needed (the signatures).
    pub drop: Vec<&'static str>,
    /// The documents phase's batches kept in memory: replayed from there, not from the
    /// spill or the source.
    pub resident: Option<&'a Resident>,
}

impl DedupReplay<'_> {
    fn apply(&self, f: &IndexedFile, batch: RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let mut batch = batch;
        for name in &self.drop {
            if let Ok(i) = batch.schema().index_of(name) {
                batch.remove_column(i);
            }
        }
        let n = batch.num_rows();
        let survivors: Vec<Option<u32>> = (0..n).map(|r| self.verdict.survivor(f.base + r as u32)).collect();
        match self.action {
            DedupAction::Remove | DedupAction::Identify => {
                let keep: BooleanArray =
                    survivors.iter().enumerate().map(|(r, s)| Some(s.is_none_or(|s| s == f.base + r as u32))).collect();
                arrow_select::filter::filter_record_batch(&batch, &keep)
            }
            DedupAction::Mark => {
                let group: Int64Array = survivors.iter().map(|s| s.map(|s| s as i64)).collect();
                let dup: BooleanArray =
                    survivors.iter().enumerate().map(|(r, s)| Some(s.is_some_and(|s| s != f.base + r as u32))).collect();
                let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
                let mut cols = batch.columns().to_vec();
                fields.push(Field::new("duplicate_group", DataType::Int64, true));
                cols.push(Arc::new(group));
                fields.push(Field::new("is_duplicate", DataType::Boolean, false));
                cols.push(Arc::new(dup));
                RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
            }
        }
    }
}

/// The output reading the source again (`lean.rs`): each batch read is matched with the one
/// the documents phase spilled for the same partition and sequence; a lean one gives back
/// its rows and added columns, one spilled whole replaces what was read.
impl crate::task::Rejoin for DedupReplay<'_> {
    fn rejoin(&self, partition: usize, task: Task) -> Result<Task, IoError> {
        let name = SpillDir::file_name(partition, task.meta.seq);
        let at = self.docs.path().join(&name).display().to_string();
        let data = |message: String| IoError::Line { at: at.clone(), message };
        let Some(f) = self.index.file(&name) else {
            return Err(data(format!(
                "the dedup step's documents phase spilled no batch for {} (did the source change since it ran?)",
                task.meta
            )));
        };
        let spilled = self.docs.read(&self.index.path(self.docs, f))?;
        let verdict = |b| self.apply(f, b).map_err(|e| data(format!("cannot apply the dedup verdict: {e}")));
        let batch = if super::lean::is_lean(&spilled.batch) {
            let (s, r) = (&spilled.meta, &task.meta);
            if (s.source.as_str(), s.first_row, s.num_rows) != (r.source.as_str(), r.first_row, r.num_rows) {
                return Err(data(format!("the source changed since the dedup step read it: it spilled {s}, the source now gives {r}")));
            }
            let join = |spilled: &RecordBatch| super::lean::join(&task.batch, spilled, r.first_row, &at).map_err(|e| data(e.to_string()));
            match self.action {
                // Rows dropped from the small spilled batch first: the text is copied once.
                DedupAction::Remove | DedupAction::Identify => join(&verdict(spilled.batch)?)?,
                DedupAction::Mark => verdict(join(&spilled.batch)?)?,
            }
        } else {
            verdict(spilled.batch)?
        };
        Ok(Task { meta: task.meta, batch, dead: spilled.dead, side: spilled.side, source_columns: false })
    }

    fn resident(&self, partition: usize) -> Result<Option<Vec<Task>>, IoError> {
        let Some(r) = self.resident else { return Ok(None) };
        let files = self.index.partition_files(partition);
        if files.is_empty() {
            return Ok(None);
        }
        let Some(tasks) = r.take_all(files.iter().map(|f| f.name.as_str())) else { return Ok(None) };
        let tasks = tasks.into_iter().zip(files).map(|(t, f)| {
            let batch = self
                .apply(f, t.batch)
                .map_err(|e| IoError::Line { at: t.meta.to_string(), message: format!("cannot apply the dedup verdict: {e}") })?;
            Ok(Task { batch, source_columns: false, ..t })
        });
        tasks.collect::<Result<Vec<_>, IoError>>().map(Some)
    }
}

impl crate::task::Replay for DedupReplay<'_> {
    fn len(&self) -> usize {
        self.index.files.len()
    }

    fn task(&self, i: usize) -> Result<Option<Task>, IoError> {
        let f = &self.index.files[i];
        let Some(&local) = self.local.get(&f.partition) else { return Ok(None) };
        let mut task = match self.resident.and_then(|r| r.take(&f.name)) {
            Some(t) => t,
            None => self.docs.read(&self.index.path(self.docs, f))?,
        };
        task.meta.partition = local;
        task.batch = self
            .apply(f, task.batch)
            .map_err(|e| IoError::Line { at: task.meta.to_string(), message: format!("cannot apply the dedup verdict: {e}") })?;
        Ok(Some(task))
    }
}
