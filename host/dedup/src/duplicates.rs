//! `_duplicates/` beside a dedup step's output: one Parquet row per document `remove` drops
//! (the `parquet` feature; `duplicates_absent.rs` stands in without it).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt64Builder};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use super::index::{Index, IndexedFile, utf8};
use super::output::Verdict;
use super::{DedupError, DedupStats};
use crate::io::Loc;
use crate::io::writer::Spool;
use crate::task::SpillDir;

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
