//! Sinks: writer threads, each owning the partitions routed to it. A partition's batches are
//! written in their order (several partitions may be open at once), its file committed when
//! the last batch is written, then its branch files, its dead letters, then a journal line
//! (so a killed run resumes after it). A file is only created for a partition that has
//! documents for it: a partition that produces nothing writes nothing, and its journal line
//! says `documents: 0` (the output manifest lists only files that exist).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use crossbeam_channel::Receiver;

use curator_core::SinkSpec;

use crate::io::format::SinkContext;
use crate::io::journal::{Journal, JournalEntry};
use crate::io::writer::{OutputWriter, RecordWriter, WrittenFile};
use crate::io::{InputFile, IoError, Loc};

use super::{Ctx, DeadLetter, RunError, Task};
use crate::task::SpillDir;

/// What a writer thread committed: (partition index, entry) pairs and documents written.
#[derive(Default)]
pub(crate) struct Written {
    pub entries: Vec<(usize, JournalEntry)>,
    pub docs_out: u64,
}

/// The writer of partition `pi`'s output at `loc` (a Parquet sink keeps the column types of
/// the partition's Parquet inputs).
fn open_writer(ctx: &Ctx, sink: &SinkSpec, loc: &Loc, pi: usize) -> Result<Box<dyn OutputWriter>, IoError> {
    // Planning refused a sink whose format is not one.
    let format = crate::io::formats::sink(&sink.format)
        .map_err(|message| IoError::Write { path: loc.display(), source: std::io::Error::other(message) })?;
    let cx = SinkContext { text_field: &ctx.plan.spec.source.text_field, idle_cores: ctx.idle_cores(), inputs: partition_inputs(ctx, pi) };
    format.create(loc, sink, &cx)
}

/// The journal, begun before the first output file is opened (see [`Journal::begin`]).
fn begin_journal(journal: &Mutex<Option<Journal>>) -> Result<(), RunError> {
    if let Ok(mut j) = journal.lock()
        && let Some(j) = j.as_mut()
    {
        j.begin()?;
    }
    Ok(())
}

/// The input files partition `pi` reads.
fn partition_inputs(ctx: &Ctx, pi: usize) -> Vec<&InputFile> {
    ctx.plan.partitions[pi].parts.iter().map(|p| &ctx.plan.inputs[p.file]).collect()
}

struct OpenOutput {
    /// Opened at the partition's first document.
    main: Option<Box<dyn OutputWriter>>,
    branches: Vec<Option<Box<dyn OutputWriter>>>,
    next_seq: u64,
    early: BTreeMap<u64, Task>,
    dead: Vec<DeadLetter>,
}

/// Count a task's documents and failures; stop the run when too many failed.
fn account(ctx: &Ctx, task: &Task) -> Result<(), RunError> {
    let seen = ctx.docs_seen.fetch_add(task.meta.num_rows, Ordering::Relaxed) + task.meta.num_rows;
    if seen == task.meta.num_rows && seen > 0 {
        tracing::info!("first batch at the sink {:.2}s after the run started", ctx.started.elapsed().as_secs_f64());
    }
    let new_failed: u64 = task.dead.iter().map(|d| d.documents).sum();
    let failed = ctx.docs_failed.fetch_add(new_failed, Ordering::Relaxed) + new_failed;
    let max = ctx.plan.spec.execution.max_failed_fraction;
    if failed > 0 && seen >= 1000 && failed as f64 > max * seen as f64 {
        return Err(RunError::TooManyFailures { failed, seen, max });
    }
    Ok(())
}

/// Write the tasks of `rx` until it closes. After a failure elsewhere it goes on writing what
/// arrives, so that partitions finished before the failure are committed (workers stop
/// passing tasks on, so unfinished partitions stay uncommitted).
pub(crate) fn write_loop(ctx: &Ctx, rx: Receiver<Task>, journal: &Mutex<Option<Journal>>) -> Written {
    let mut open: BTreeMap<usize, OpenOutput> = BTreeMap::new();
    let mut written = Written::default();
    for task in rx.iter() {
        ctx.metrics.sink_queued.fetch_sub(1, Ordering::Relaxed);
        if let Err(e) = write_task(ctx, task, &mut open, &mut written, journal) {
            ctx.fail(e);
        }
    }
    written
}

/// Partitions written outside a sink thread's loop, task by task (a dedup step's output
/// streamed during its documents phase, `stream_dedup.rs`), as `write_loop` writes them.
#[derive(Default)]
pub(crate) struct PartitionWriter {
    open: BTreeMap<usize, OpenOutput>,
    pub written: Written,
}

impl PartitionWriter {
    /// Write `task` (its partition numbered as in `ctx`'s plan); the partition is committed
    /// and journaled with its last task.
    pub(crate) fn write(&mut self, ctx: &Ctx, task: Task, journal: &Mutex<Option<Journal>>) -> Result<(), RunError> {
        write_task(ctx, task, &mut self.open, &mut self.written, journal)
    }
}

fn write_task(
    ctx: &Ctx,
    task: Task,
    open: &mut BTreeMap<usize, OpenOutput>,
    written: &mut Written,
    journal: &Mutex<Option<Journal>>,
) -> Result<(), RunError> {
    account(ctx, &task)?;
    let plan = &ctx.plan;
    let pi = task.meta.partition;
    let partition = &plan.partitions[pi];
    let out = match open.entry(pi) {
        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::btree_map::Entry::Vacant(e) => e.insert(OpenOutput {
            main: None,
            branches: plan.branches.iter().map(|_| None).collect(),
            next_seq: 0,
            early: BTreeMap::new(),
            dead: Vec::new(),
        }),
    };
    out.early.insert(task.meta.seq, task);
    let mut finished = false;
    while let Some(t) = out.early.remove(&out.next_seq) {
        out.next_seq += 1;
        if t.batch.num_rows() > 0 {
            if out.main.is_none() {
                begin_journal(journal)?;
                out.main = Some(open_writer(ctx, &plan.spec.sink, &partition.output, pi)?);
            }
            if let Some(w) = out.main.as_mut() {
                w.write_batch(&t.batch)?;
            }
        }
        for (b, side) in &t.side {
            if side.num_rows() > 0 {
                let slot = &mut out.branches[*b];
                if slot.is_none() {
                    begin_journal(journal)?;
                    let br = &plan.branches[*b];
                    *slot = Some(open_writer(ctx, &br.sink, &br.outputs[pi].1, pi)?);
                }
                if let Some(w) = slot.as_mut() {
                    w.write_batch(side)?;
                }
            }
        }
        out.dead.extend(t.dead);
        finished |= t.meta.last_of_partition;
    }
    if !finished {
        return Ok(());
    }
    let Some(o) = open.remove(&pi) else { return Ok(()) };
    let closing = std::time::Instant::now();
    let sources = plan.sources(partition);
    let finish = |w: Option<Box<dyn OutputWriter>>, path: &str| -> Result<WrittenFile, RunError> {
        let (documents, bytes, checksum, tokens) = match w {
            Some(w) => {
                let c = w.finish()?;
                (c.documents, c.bytes, c.checksum, c.tokens)
            }
            None => (0, 0, String::new(), None),
        };
        Ok(WrittenFile { path: path.to_string(), documents, bytes, checksum, sources: sources.clone(), tokens })
    };
    let main = finish(o.main, &partition.output_rel)?;
    let mut branch_files = Vec::with_capacity(o.branches.len());
    for (w, b) in o.branches.into_iter().zip(&plan.branches) {
        branch_files.push(finish(w, &b.outputs[pi].0)?);
    }
    if !o.dead.is_empty() {
        let target = plan.output_dir.join(&format!("_dead_letter/{}.jsonl", partition.output_rel));
        let mut w = RecordWriter::create(&target)?;
        for d in &o.dead {
            w.write(d)?;
        }
        w.finish()?;
        tracing::warn!(
            "{} document(s) of partition {} dead-lettered in {}",
            o.dead.iter().map(|d| d.documents).sum::<u64>(),
            partition.index,
            target.display()
        );
    }
    let main_docs = main.documents;
    written.docs_out += main.documents;
    ctx.metrics.docs_written.fetch_add(main.documents, Ordering::Relaxed);
    let entry = JournalEntry { file: main, branches: branch_files };
    if let Ok(mut j) = journal.lock()
        && let Some(j) = j.as_mut()
    {
        j.record(&entry)?;
        crate::os::crash_point("output-partition");
    }
    tracing::debug!(
        "partition {} written ({} documents), its files closed in {:.3}s, {:.2}s after the run started",
        partition.index,
        main_docs,
        closing.elapsed().as_secs_f64(),
        ctx.started.elapsed().as_secs_f64()
    );
    written.entries.push((pi, entry));
    Ok(())
}

/// Spill the tasks of `rx` until it closes (batch mode, or the documents in front of a dedup
/// step). A partition is marked done once all its batches are on disk, whatever order they
/// came in.
pub(crate) fn spill_loop(ctx: &Ctx, rx: Receiver<Task>, dir: &SpillDir) -> Written {
    // Per partition: batches written, and how many there are once the last one was seen.
    let mut progress: BTreeMap<usize, (u64, Option<u64>)> = BTreeMap::new();
    let mut written = Written::default();
    for task in rx.iter() {
        ctx.metrics.sink_queued.fetch_sub(1, Ordering::Relaxed);
        if ctx.cancelled() {
            continue;
        }
        if let Err(e) = dir.write(&task) {
            ctx.fail(e.into());
            continue;
        }
        written.docs_out += task.batch.num_rows() as u64;
        let pi = task.meta.partition;
        let p = progress.entry(pi).or_insert((0, None));
        p.0 += 1;
        if task.meta.last_of_partition {
            p.1 = Some(task.meta.seq + 1);
        }
        if p.1 == Some(p.0) {
            progress.remove(&pi);
            if let Err(e) = dir.mark_done(pi) {
                ctx.fail(e.into());
            }
        }
    }
    written
}
