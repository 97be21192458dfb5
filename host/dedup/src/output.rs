//! What a dedup step decided, applied: the documents replayed from the spill to the stages
//! after the barrier (duplicates dropped, or marked), and `_duplicates/` beside the output.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt64Builder};
use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use curator_core::DedupAction;

use super::index::{Index, IndexedFile, utf8};
use super::{DedupError, DedupStats};
use crate::io::writer::Spool;
use crate::io::{IoError, Loc};
use crate::task::{SpillDir, Task};

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
}

impl crate::task::Replay for DedupReplay<'_> {
    fn len(&self) -> usize {
        self.index.files.len()
    }

    fn task(&self, i: usize) -> Result<Option<Task>, IoError> {
        let f = &self.index.files[i];
        let Some(&local) = self.local.get(&f.partition) else { return Ok(None) };
        let mut task = self.docs.read(&self.index.path(self.docs, f))?;
        task.meta.partition = local;
        task.batch = self
            .apply(f, task.batch)
            .map_err(|e| IoError::Line { at: task.meta.to_string(), message: format!("cannot apply the dedup verdict: {e}") })?;
        Ok(Some(task))
    }
}

/// Write `_duplicates/part-00000.parquet` (id, group, kept_id, source, row: one row per
/// document `remove` drops, in source order) and `_duplicates/summary.json` (`stats`, with
/// this phase's time added) into `out`.
pub fn write_duplicates(
    out: &Loc,
    docs: &SpillDir,
    index: &Index,
    verdict: &Verdict,
    stats: &mut DedupStats,
    clock: super::PhaseClock,
) -> Result<u64, DedupError> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("group", DataType::UInt64, false),
        Field::new("kept_id", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("row", DataType::Int64, false),
    ]));
    let target = out.join("_duplicates/part-00000.parquet");
    let (spool, w) = Spool::create(&target, Default::default())?;
    let werr = |e: parquet::errors::ParquetError| DedupError::Io { path: target.display(), source: std::io::Error::other(e.to_string()) };
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
        // Row groups of 64 Ki rows: the writer buffers one, so memory stays flat.
        .set_max_row_group_row_count(Some(1 << 16))
        .set_dictionary_enabled(false)
        .build();
    let mut writer = parquet::arrow::ArrowWriter::try_new(w, schema.clone(), Some(props)).map_err(werr)?;
    // The survivors' ids first (a survivor may sit in any earlier file), then each file's
    // rows, a window of files at a time; both passes on every core.
    let grouped = |f: &IndexedFile| verdict.any_in(f.base, f.rows);
    let kept_ids: HashMap<u32, String> = index
        .par_each(docs, grouped, &[crate::io::ID], |f, task| {
            let ids = utf8(task, crate::io::ID, &f.name)?;
            Ok((0..ids.len())
                .filter(|&r| verdict.survivor(f.base + r as u32) == Some(f.base + r as u32))
                .map(|r| (f.base + r as u32, ids.value(r).to_string()))
                .collect::<Vec<_>>())
        })?
        .into_iter()
        .flatten()
        .collect();
    let mut written = 0u64;
    let window = crate::os::available_cores().max(1) * 4;
    for files in index.files.chunks(window) {
        let (lo, hi) = (files[0].base, files[files.len() - 1].base as u64 + files[files.len() - 1].rows as u64);
        let in_window = |f: &IndexedFile| f.base >= lo && (f.base as u64 + f.rows as u64) <= hi && grouped(f);
        let batches = index.par_each(docs, in_window, &[crate::io::ID, crate::io::ROW], |f, task| {
            let ids = utf8(task, crate::io::ID, &f.name)?;
            let rows = task.batch.column_by_name(crate::io::ROW).and_then(|c| c.as_any().downcast_ref::<Int64Array>());
            let (mut id, mut group, mut kept, mut source, mut row) =
                (StringBuilder::new(), UInt64Builder::new(), StringBuilder::new(), StringBuilder::new(), Int64Builder::new());
            for r in 0..ids.len() {
                let doc = f.base + r as u32;
                let Some(root) = verdict.survivor(doc).filter(|&root| root != doc) else { continue };
                id.append_value(ids.value(r));
                group.append_value(root as u64);
                kept.append_value(kept_ids.get(&root).map(String::as_str).unwrap_or(""));
                source.append_value(&task.meta.source);
                row.append_value(rows.map(|a| a.value(r)).unwrap_or(task.meta.first_row as i64 + r as i64));
            }
            let cols: Vec<ArrayRef> = vec![
                Arc::new(id.finish()),
                Arc::new(group.finish()),
                Arc::new(kept.finish()),
                Arc::new(source.finish()),
                Arc::new(row.finish()),
            ];
            RecordBatch::try_new(schema.clone(), cols).map_err(|e| DedupError::Data { path: target.display(), message: e.to_string() })
        })?;
        for batch in batches.into_iter().filter(|b| b.num_rows() > 0) {
            written += batch.num_rows() as u64;
            writer.write(&batch).map_err(werr)?;
        }
    }
    let w = writer.into_inner().map_err(werr)?;
    spool.commit(w)?;
    clock.finish(stats, false);
    let summary = serde_json::to_vec_pretty(stats).map_err(|e| DedupError::Data { path: "summary.json".into(), message: e.to_string() })?;
    crate::io::writer::write_small(&out.join("_duplicates/summary.json"), &summary)?;
    Ok(written)
}
