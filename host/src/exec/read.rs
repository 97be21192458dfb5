//! Sources: reader threads that take input partitions in turn and cut them into numbered
//! batches, and (in batch mode) spill readers that replay the batches a stage left.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::{ArrayRef, Int64Array, RecordBatch};

use curator_core::TaskMeta;

use crate::io::format::ReadPart;
use crate::io::records::reader_schema;
use crate::io::writer::RecordWriter;
use crate::io::{IoError, Reject};

use super::{Ctx, Outlet, RunError, Task};
use crate::task::Rejoin;

/// How a partition's parts are read: one after another, except the files of a format that
/// reads them together (a folder's images: their batches span the files; `_row` counts the
/// partition's images).
fn read_groups<'p>(plan: &crate::plan::Plan, parts: &'p [curator_core::partition::Part]) -> Vec<&'p [curator_core::partition::Part]> {
    let together = |p: &curator_core::partition::Part| plan.inputs[p.file].format.reads_files_together();
    match parts.iter().all(together) {
        true if !parts.is_empty() => vec![parts],
        _ => parts.chunks(1).collect(),
    }
}

/// Add the `_row` column: each document's row in its source part.
fn with_row_numbers(batch: RecordBatch, first_row: u64) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = batch.num_rows();
    let rows: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| (first_row + i as u64) as i64)));
    let mut fields: Vec<arrow_schema::Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(arrow_schema::Field::new(crate::io::ROW, arrow_schema::DataType::Int64, false));
    let mut cols = batch.columns().to_vec();
    cols.push(rows);
    RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), cols)
}

/// Take partitions in turn and read each into batches; returns documents read and lines
/// rejected. Rejected lines go to `<output>/_rejected/<partition output>.jsonl`.
///
/// With `again`, the source is being read a second time (a dedup step's output): every batch
/// goes through `again` before it is sent, and rejects, which the first reading already
/// wrote, are not written or counted again.
pub(crate) fn read_partitions(ctx: &Ctx, next: &AtomicUsize, out: Outlet, again: Option<&dyn Rejoin>) -> Result<(u64, u64), RunError> {
    let plan = &ctx.plan;
    let metrics = &ctx.metrics;
    // Whether the task was passed on (false: nobody receives any more).
    let send = |t: Task| -> Result<bool, RunError> {
        let t = match again {
            Some(j) => j.rejoin(plan.partitions[t.meta.partition].index, t)?,
            None => {
                metrics.docs_read.fetch_add(t.meta.num_rows, Ordering::Relaxed);
                t
            }
        };
        Ok(out.send(t, metrics).is_ok())
    };
    let src = &plan.spec.source;
    let opts = plan.read_options(ctx.strict);
    let batch_size = plan.read_batch_size();
    let mut total = 0u64;
    let mut rejected = 0u64;
    loop {
        let pi = next.fetch_add(1, Ordering::Relaxed);
        let Some(partition) = plan.partitions.get(pi) else { break };
        // Read again, but kept in memory by the first reading: nothing to read.
        if let Some(tasks) = again.map(|j| j.resident(partition.index)).transpose()?.flatten() {
            for mut t in tasks {
                total += t.meta.num_rows;
                t.meta.partition = pi;
                if ctx.sources_stopped() || out.send(t, metrics).is_err() {
                    return Ok((total, rejected));
                }
            }
            continue;
        }
        let mut rejects: Option<RecordWriter> = None;
        let mut pending: Option<Task> = None;
        let mut seq = 0u64;
        for group in read_groups(plan, &partition.parts) {
            let part = &group[0];
            let input = &plan.inputs[part.file];
            let source = match group {
                [_, _, ..] => {
                    let last = plan.describe_part(&group[group.len() - 1]);
                    format!("{} … {last} ({} files)", plan.describe_part(part), group.len())
                }
                _ => plan.describe_part(part),
            };
            let files: Vec<_> = group.iter().map(|p| plan.inputs[p.file].clone()).collect();
            let mut reader = input.format.open(&ReadPart { files: &files, extent: part.extent, opts: &opts, batch_size })?;
            let mut row = 0u64;
            let mut part_rejects = (0u64, None::<Reject>);
            loop {
                if ctx.sources_stopped() {
                    return Ok((total, rejected));
                }
                // Only one reader runs when there is a limit, so `total` is the run's count.
                let remaining = src.limit.map(|l| l.saturating_sub(total) as usize).unwrap_or(usize::MAX);
                let next = if remaining == 0 { None } else { reader.next_batch(batch_size.min(remaining))? };
                for r in reader.take_rejects() {
                    if again.is_some() {
                        continue;
                    }
                    part_rejects.0 += 1;
                    part_rejects.1.get_or_insert_with(|| r.clone());
                    let w = match rejects.as_mut() {
                        Some(w) => w,
                        None => rejects
                            .insert(RecordWriter::create(&plan.output_dir.join(&format!("_rejected/{}.jsonl", partition.output_rel)))?),
                    };
                    w.write(&r)?;
                }
                let Some(mut batch) = next else { break };
                if batch.num_rows() > remaining {
                    batch = batch.slice(0, remaining);
                }
                let n = batch.num_rows() as u64;
                total += n;
                // Send the previous batch now that we know it was not the partition's last.
                if let Some(t) = pending.take()
                    && !send(t)?
                {
                    return Ok((total, rejected));
                }
                let meta = TaskMeta { seq, partition: pi, source: source.clone(), first_row: row, num_rows: n, last_of_partition: false };
                // Number the rows so failures and branches can be traced to the source.
                let batch = with_row_numbers(batch, row)
                    .map_err(|e| RunError::Io(IoError::Line { at: meta.to_string(), message: format!("cannot number rows: {e}") }))?;
                seq += 1;
                row += n;
                pending = Some(Task::new(meta, batch));
            }
            if let (0, (n @ 1.., Some(first))) = (row, &part_rejects) {
                // Under --strict the first reject already failed the run.
                let hint = crate::io::formats::no_documents_hint(input, &opts);
                tracing::warn!(
                    "{source}: no document could be read from it ({n} rejected; the first, at {}: {}){hint}",
                    first.at(),
                    first.reason,
                );
            }
        }
        let mut last = pending.unwrap_or_else(|| {
            let source = partition.parts.first().map(|p| plan.describe_part(p)).unwrap_or_default();
            let meta = TaskMeta { seq, partition: pi, source, first_row: 0, num_rows: 0, last_of_partition: true };
            Task::new(meta, RecordBatch::new_empty(reader_schema()))
        });
        last.meta.last_of_partition = true;
        if let Some(w) = rejects {
            let n = w.finish()?;
            rejected += n;
            metrics.rejected.fetch_add(n, Ordering::Relaxed);
            tracing::warn!(
                "{n} bad input line(s) of partition {} quarantined in {}",
                partition.index,
                plan.output_dir.join("_rejected").display()
            );
        }
        if !send(last)? {
            return Ok((total, rejected));
        }
    }
    Ok((total, rejected))
}
