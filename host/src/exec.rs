//! The local executor (foundation version): reader threads that take partitions in turn,
//! a pool of workers that each own one instance of every stage, and the calling thread
//! writing each partition's output in order.
//!
//! ```text
//! readers × R ──(bounded queue: backpressure)──▶ workers × N ──▶ writer (per-partition order)
//! ```
//!
//! Workers are sized by the stages' `cpus`: N = min over stages of ⌊cores / cpus⌋; readers
//! R = min(N, partitions) (one when a `limit` asks for the first documents in order).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};

use curator_core::TaskMeta;
use curator_core::pipeline::{ExecutionSpec, Format};

use crate::columns::{self, InvalidOutput};
use crate::io::jsonl::{JsonlReader, JsonlWriter, ReadOptions, reader_schema};
use crate::io::parquet::{ParquetReader, ParquetWriter};
use crate::io::writer::{OutputWriter, RecordWriter, WrittenFile};
use crate::io::{IoError, Reject};
use crate::metrics::{RunMetrics, StageCounters};
use crate::plan::{Plan, PlannedStage, merged_manifest};
use crate::wasm::{CompiledPlugin, InstanceLimits, StageInstance, WasmError, WasmRuntime};

/// Knobs of one run that are not in the pipeline file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Worker count; default: as many as the stages' `cpus` allow on this machine.
    pub workers: Option<usize>,
    /// Stop at the first bad input line instead of quarantining it.
    pub strict: bool,
    /// Serve Prometheus metrics on this address during the run.
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("stage {label:?} (plugin {plugin}) failed to start: {source}")]
    Start { label: String, plugin: PathBuf, source: WasmError },
    #[error(transparent)]
    Stage(Box<StageFailed>),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("a worker thread panicked: {0}")]
    Panic(String),
    #[error("stopping: {failed} of {seen} documents failed, more than max_failed_fraction ({max})")]
    TooManyFailures { failed: u64, seen: u64, max: f64 },
}

/// A stage call failed: which stage, plugin and batch, and why.
#[derive(Debug, thiserror::Error)]
#[error("stage {label:?} (plugin {plugin}) failed on {task}: {source}")]
pub struct StageFailed {
    pub label: String,
    pub plugin: PathBuf,
    pub task: TaskMeta,
    pub source: StageFailure,
}

/// What went wrong inside a stage call.
#[derive(Debug, thiserror::Error)]
pub enum StageFailure {
    #[error(transparent)]
    Wasm(#[from] WasmError),
    #[error(transparent)]
    Output(#[from] InvalidOutput),
}

/// Counters of one stage.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StageStats {
    pub label: String,
    pub plugin: String,
    pub docs_in: u64,
    pub docs_out: u64,
    /// Documents dead-lettered by this stage.
    pub failed: u64,
    pub batches: u64,
    pub busy_s: f64,
}

/// What a finished run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSummary {
    pub partitions: usize,
    /// Partitions not run because their output existed (`mode: ignore`).
    pub skipped_partitions: usize,
    pub docs_in: u64,
    pub docs_out: u64,
    /// Input lines quarantined under `_rejected/`.
    pub rejected: u64,
    /// Documents dead-lettered under `_dead_letter/` (`ignore_failures: true`).
    pub failed: u64,
    /// Partitions finished by an earlier, interrupted run of the same pipeline.
    pub resumed_partitions: usize,
    pub workers: usize,
    pub elapsed_s: f64,
    /// Peak resident memory of the process, in MiB (Linux; 0 elsewhere).
    pub peak_rss_mb: f64,
    pub stages: Vec<StageStats>,
    pub outputs: Vec<WrittenFile>,
    /// Stages whose compiled artifact came from the on-disk cache.
    pub cached_plugins: usize,
}

/// Peak resident set size of this process (VmHWM), in MiB.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

struct Task {
    meta: TaskMeta,
    batch: RecordBatch,
}

/// Documents a stage could not process (with `ignore_failures: true`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeadLetter {
    pub stage: String,
    pub plugin: String,
    pub source: String,
    /// Rows `[start, end)` of the source part, when known (a stage that returned a whole new
    /// batch upstream loses the correspondence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<[u64; 2]>,
    pub documents: u64,
    pub error: String,
    pub ids: Vec<String>,
}

/// A processed batch and what failed in it.
struct Outcome {
    meta: TaskMeta,
    batch: RecordBatch,
    dead: Vec<DeadLetter>,
}

type Done = Result<Outcome, RunError>;

/// Leak detection: an instance whose linear memory grew in `LEAK_GROWTHS` of the last
/// `LEAK_WINDOW` batches is replaced (WASM memory never shrinks, so steady growth is a leak).
const LEAK_WINDOW: usize = 10;
const LEAK_GROWTHS: usize = 8;

/// Usable cores: affinity and cgroup quota aware (std's `available_parallelism`).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Worker count for a plan: each worker holds one instance of every stage.
pub fn worker_count(plan: &Plan, opts: &RunOptions) -> usize {
    if let Some(n) = opts.workers {
        return n.max(1);
    }
    let capacity = available_cores() as f64 * plan.spec.execution.cpu_allocation_percentage;
    plan.stages.iter().map(|s| s.resources.workers_on_capacity(capacity)).min().unwrap_or(1).max(1)
}

fn limits(stage: &PlannedStage) -> InstanceLimits {
    InstanceLimits { memory_mb: stage.resources.memory_mb_or_default(), timeout: stage.timeout, grants: stage.grants.clone() }
}

/// Run a checked plan.
pub fn run(plan: &Plan, runtime: &WasmRuntime, opts: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    crate::plan::remove_stale_spools(&plan.output_dir);
    let mut compiled = Vec::new();
    for s in &plan.stages {
        let c = runtime.load(&s.plugin.path, s.plugin.manifest.clone()).map_err(|source| RunError::Start {
            label: s.label.clone(),
            plugin: s.plugin.path.clone(),
            source,
        })?;
        compiled.push(c);
    }
    let cached_plugins = compiled.iter().filter(|c| c.from_cache).count();
    let compiled = Arc::new(compiled);
    let stages = Arc::new(plan.stages.clone());
    let workers = worker_count(plan, opts);
    let gpus = opts.metrics_addr.is_some() && !crate::gpu::discover().gpus.is_empty();
    let metrics = Arc::new(RunMetrics::new(plan.stages.iter().map(|s| s.label.clone()), gpus));
    metrics.workers.store(workers as u64, Ordering::Relaxed);
    let stop_side_threads = Arc::new(AtomicBool::new(false));
    let _stop_guard = StopOnDrop(stop_side_threads.clone());
    if let Some(addr) = opts.metrics_addr {
        let bound = crate::metrics::serve(addr, metrics.clone(), stop_side_threads.clone())
            .map_err(|e| RunError::Io(IoError::Open { path: format!("metrics address {addr}"), source: e }))?;
        tracing::info!("serving Prometheus metrics on http://{bound}/metrics");
    }
    {
        let (metrics, stop) = (metrics.clone(), stop_side_threads.clone());
        let every = Duration::from_secs_f64(plan.spec.execution.logging_interval_s.max(0.1));
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let queue_capacity = workers * 2;
        let _ = std::thread::Builder::new().name("curator-status".into()).spawn(move || {
            let t0 = Instant::now();
            // On a terminal: one progress line per stage. Otherwise: status lines in the log.
            let bars = terminal.then(|| {
                let multi = indicatif::MultiProgress::new();
                let style = indicatif::ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
                let bars: Vec<indicatif::ProgressBar> =
                    (0..metrics.stages.len()).map(|_| multi.add(indicatif::ProgressBar::new_spinner().with_style(style.clone()))).collect();
                (multi, bars)
            });
            let mut next = every;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                match &bars {
                    Some((_, bars)) => {
                        for (i, bar) in bars.iter().enumerate() {
                            bar.set_message(metrics.stage_line(i, t0.elapsed(), queue_capacity));
                            bar.tick();
                        }
                    }
                    None if t0.elapsed() >= next => {
                        tracing::info!("{}", metrics.status_line(t0.elapsed()));
                        next += every;
                    }
                    None => {}
                }
            }
            if let Some((_, bars)) = bars {
                for (i, bar) in bars.iter().enumerate() {
                    bar.finish_with_message(metrics.stage_line(i, t0.elapsed(), queue_capacity));
                }
            }
        });
    }
    let cancel = Arc::new(AtomicBool::new(false));
    tracing::info!(workers, stages = plan.stages.len(), partitions = plan.partitions.len(), "starting run");

    let (task_tx, task_rx) = mpsc::sync_channel::<Task>(workers * 2);
    let task_rx = Arc::new(Mutex::new(task_rx));
    // Bounded too: when writing is the slow part, workers wait instead of piling up results.
    let (done_tx, done_rx) = mpsc::sync_channel::<Done>(workers * 2);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), RunError>>();

    let mut handles = Vec::new();
    for w in 0..workers {
        let (compiled, stages, metrics, cancel) = (compiled.clone(), stages.clone(), metrics.clone(), cancel.clone());
        let (task_rx, done_tx, ready_tx) = (task_rx.clone(), done_tx.clone(), ready_tx.clone());
        let policy = plan.spec.execution.clone();
        let h = std::thread::Builder::new()
            .name(format!("curator-worker-{w}"))
            .spawn(move || worker(&compiled, &stages, &metrics, &policy, &cancel, &task_rx, &done_tx, &ready_tx))
            .map_err(|e| RunError::Panic(format!("cannot start worker: {e}")))?;
        handles.push(h);
    }
    drop(ready_tx);
    // Only workers hold the task queue: when they have all gone, readers stop instead of
    // waiting on a full queue.
    drop(task_rx);
    drop(done_tx);

    // Every worker must have set up every stage before any data is read.
    let mut startup_error = None;
    for _ in 0..workers {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                startup_error.get_or_insert(e);
            }
            Err(_) => {
                startup_error.get_or_insert(RunError::Panic("a worker exited during setup".into()));
            }
        }
    }
    if let Some(e) = startup_error {
        cancel.store(true, Ordering::Relaxed);
        drop(task_tx);
        join_all(handles);
        return Err(e);
    }

    // Partitions are independent: several readers take them in turn, so reading scales with
    // the workers. A `limit` needs the documents in input order, so it reads with one.
    let readers = if plan.spec.source.limit.is_some() { 1 } else { workers.min(plan.partitions.len()).max(1) };
    let next_partition = Arc::new(AtomicUsize::new(0));
    let mut reader_handles = Vec::new();
    for r in 0..readers {
        let plan = plan.clone();
        let (cancel, next, tx, metrics) = (cancel.clone(), next_partition.clone(), task_tx.clone(), metrics.clone());
        let strict = opts.strict;
        let h = std::thread::Builder::new()
            .name(format!("curator-reader-{r}"))
            .spawn(move || read_partitions(&plan, strict, &cancel, &next, tx, &metrics))
            .map_err(|e| RunError::Panic(format!("cannot start reader: {e}")))?;
        reader_handles.push(h);
    }
    drop(task_tx);

    let written = write_all(plan, &done_rx, &metrics);
    if written.is_err() {
        cancel.store(true, Ordering::Relaxed);
    }
    drop(done_rx);
    let mut read: Result<(u64, u64), RunError> = Ok((0, 0));
    for h in reader_handles {
        let r = h.join().unwrap_or_else(|_| Err(RunError::Panic("a reader thread panicked".into())));
        read = match (read, r) {
            (Ok((a, b)), Ok((c, d))) => Ok((a + c, b + d)),
            (Err(e), _) | (Ok(_), Err(e)) => Err(e),
        };
    }
    join_all(handles);
    // A read error explains a short write, so it is reported first.
    let (docs_in, rejected) = read?;
    let (outputs, docs_out, failed) = written?;
    let mut all = plan.resumed.clone();
    all.extend(outputs.iter().cloned());
    let (manifest, stale) = merged_manifest(plan, all);
    for path in stale {
        let loc = plan.output_dir.join(&path);
        if loc.exists() {
            loc.delete()?;
        }
    }
    manifest.save(&plan.output_dir)?;
    crate::plan::Journal::remove(&plan.output_dir);

    let stage_stats = plan
        .stages
        .iter()
        .zip(metrics.stages.iter())
        .map(|(s, c)| StageStats {
            label: s.label.clone(),
            plugin: s.plugin.path.display().to_string(),
            docs_in: c.docs_in.load(Ordering::Relaxed),
            docs_out: c.docs_out.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            busy_s: c.busy_ns.load(Ordering::Relaxed) as f64 / 1e9,
        })
        .collect();
    Ok(RunSummary {
        partitions: plan.partitions.len(),
        skipped_partitions: plan.skipped,
        docs_in,
        docs_out,
        rejected,
        failed,
        resumed_partitions: plan.resumed.len(),
        workers,
        elapsed_s: started.elapsed().as_secs_f64(),
        peak_rss_mb: peak_rss_mb(),
        stages: stage_stats,
        outputs,
        cached_plugins,
    })
}

fn join_all(handles: Vec<std::thread::JoinHandle<()>>) {
    for h in handles {
        let _ = h.join();
    }
}

/// A reader over one part of a partition.
enum PartReader {
    Jsonl(JsonlReader),
    Parquet(ParquetReader),
}

impl PartReader {
    fn next_batch(&mut self, n: usize) -> Result<Option<RecordBatch>, IoError> {
        match self {
            PartReader::Jsonl(r) => r.next_batch(n),
            PartReader::Parquet(r) => r.next_batch(),
        }
    }
    fn take_rejects(&mut self) -> Vec<Reject> {
        match self {
            PartReader::Jsonl(r) => r.take_rejects(),
            PartReader::Parquet(_) => Vec::new(),
        }
    }
}

/// Take partitions in turn and read each into batches; returns documents read and lines
/// rejected. Rejected lines go to `<output>/_rejected/<partition output>.jsonl`.
fn read_partitions(
    plan: &Plan,
    strict: bool,
    cancel: &AtomicBool,
    next: &AtomicUsize,
    tx: SyncSender<Task>,
    metrics: &RunMetrics,
) -> Result<(u64, u64), RunError> {
    let send = |t: Task| {
        metrics.queued.fetch_add(1, Ordering::Relaxed);
        metrics.docs_read.fetch_add(t.meta.num_rows, Ordering::Relaxed);
        tx.send(t)
    };
    let src = &plan.spec.source;
    let opts = ReadOptions {
        text_field: src.text_field.clone(),
        id_field: src.id_field.clone(),
        fields: src.fields.clone(),
        max_line_bytes: plan.max_line_bytes(),
        strict,
    };
    let batch_size = plan.spec.batch_size();
    let mut total = 0u64;
    let mut rejected = 0u64;
    loop {
        let pi = next.fetch_add(1, Ordering::Relaxed);
        let Some(partition) = plan.partitions.get(pi) else { break };
        let mut rejects: Option<RecordWriter> = None;
        let mut pending: Option<Task> = None;
        let mut seq = 0u64;
        for part in &partition.parts {
            let input = &plan.inputs[part.file];
            let source = plan.describe_part(part);
            let mut reader = match input.format {
                Format::Jsonl => PartReader::Jsonl(JsonlReader::open(input, part.extent, opts.clone())?),
                Format::Parquet => PartReader::Parquet(ParquetReader::open(input, part.extent, opts.clone(), batch_size)?),
            };
            let mut row = 0u64;
            loop {
                if cancel.load(Ordering::Relaxed) {
                    return Ok((total, rejected));
                }
                // Only one reader runs when there is a limit, so `total` is the run's count.
                let remaining = src.limit.map(|l| l.saturating_sub(total) as usize).unwrap_or(usize::MAX);
                let next = if remaining == 0 { None } else { reader.next_batch(batch_size.min(remaining))? };
                for r in reader.take_rejects() {
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
                    && send(t).is_err()
                {
                    return Ok((total, rejected));
                }
                let meta = TaskMeta { seq, file_index: pi, source: source.clone(), first_row: row, num_rows: n, last_of_file: false };
                seq += 1;
                row += n;
                pending = Some(Task { meta, batch });
            }
        }
        let mut last = pending.unwrap_or_else(|| {
            let source = partition.parts.first().map(|p| plan.describe_part(p)).unwrap_or_default();
            let meta = TaskMeta { seq, file_index: pi, source, first_row: 0, num_rows: 0, last_of_file: true };
            Task { meta, batch: RecordBatch::new_empty(reader_schema()) }
        });
        last.meta.last_of_file = true;
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
        if send(last).is_err() {
            return Ok((total, rejected));
        }
    }
    Ok((total, rejected))
}

/// Set up one instance of every stage, then process tasks until the queue closes.
#[allow(clippy::too_many_arguments)]
fn worker(
    compiled: &[CompiledPlugin],
    stages: &[PlannedStage],
    metrics: &RunMetrics,
    policy: &ExecutionSpec,
    cancel: &AtomicBool,
    tasks: &Mutex<Receiver<Task>>,
    done: &SyncSender<Done>,
    ready: &mpsc::Sender<Result<(), RunError>>,
) {
    let mut instances: Vec<StageInstance> = Vec::with_capacity(stages.len());
    for (stage, plugin) in stages.iter().zip(compiled) {
        match plugin.instantiate(&stage.label, &stage.params, &limits(stage)) {
            Ok(i) => instances.push(i),
            Err(source) => {
                let _ = ready.send(Err(RunError::Start { label: stage.label.clone(), plugin: stage.plugin.path.clone(), source }));
                return;
            }
        }
    }
    let _ = ready.send(Ok(()));
    let mut born = Instant::now();
    let mut batches = 0u64;
    // Per instance: did its linear memory grow in each of the last batches? (leak detection)
    let mut grew: Vec<std::collections::VecDeque<bool>> = vec![Default::default(); stages.len()];
    let mut last_mem: Vec<usize> = instances.iter().map(StageInstance::memory_bytes).collect();
    loop {
        let task = match tasks.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(task) = task else { break };
        metrics.queued.fetch_sub(1, Ordering::Relaxed);
        if cancel.load(Ordering::Relaxed) {
            continue; // drain so the reader is not left blocked
        }
        let result = run_chain(&mut instances, compiled, stages, &metrics.stages, policy, task);
        if result.is_err() {
            cancel.store(true, Ordering::Relaxed);
        }
        if done.send(result).is_err() {
            break;
        }
        batches += 1;
        let lifetime_over = policy.worker_max_lifetime_m.is_some_and(|m| born.elapsed().as_secs_f64() > m * 60.0);
        let batches_over = policy.max_batches_per_worker.is_some_and(|n| batches >= n);
        let mut recycle: Vec<usize> = Vec::new();
        if lifetime_over || batches_over {
            tracing::info!("recycling a worker after {batches} batches and {:.0}s", born.elapsed().as_secs_f64());
            recycle.extend(0..stages.len());
            born = Instant::now();
            batches = 0;
        } else {
            for (i, inst) in instances.iter().enumerate() {
                let mem = inst.memory_bytes();
                let window = &mut grew[i];
                window.push_back(mem > last_mem[i]);
                last_mem[i] = mem;
                if window.len() > LEAK_WINDOW {
                    window.pop_front();
                }
                if window.len() == LEAK_WINDOW && window.iter().filter(|g| **g).count() >= LEAK_GROWTHS {
                    tracing::warn!(
                        stage = %stages[i].label,
                        "linear memory grew in {LEAK_GROWTHS}+ of the last {LEAK_WINDOW} batches (now {} MiB): recycling the instance (leak?)",
                        mem >> 20
                    );
                    recycle.push(i);
                }
            }
        }
        for i in recycle {
            match compiled[i].instantiate(&stages[i].label, &stages[i].params, &limits(&stages[i])) {
                Ok(fresh) => {
                    let old = std::mem::replace(&mut instances[i], fresh);
                    old.teardown();
                    grew[i].clear();
                    last_mem[i] = instances[i].memory_bytes();
                }
                Err(source) => {
                    let _ =
                        done.send(Err(RunError::Start { label: stages[i].label.clone(), plugin: stages[i].plugin.path.clone(), source }));
                    cancel.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
    for inst in instances {
        inst.teardown();
    }
}

fn stage_error(stage: &PlannedStage, task: &TaskMeta, source: StageFailure) -> RunError {
    RunError::Stage(Box::new(StageFailed { label: stage.label.clone(), plugin: stage.plugin.path.clone(), task: task.clone(), source }))
}

/// One call of a stage on one batch.
fn call_stage(inst: &mut StageInstance, stage: &PlannedStage, batch: &RecordBatch) -> Result<RecordBatch, StageFailure> {
    let input = columns::to_wit(batch, &stage.plugin.manifest.input_columns);
    let out = inst.process(&input)?;
    Ok(columns::apply_output(batch, out)?)
}

/// Run a stage on `batch` with retries; a batch that runs out of memory is split in half and
/// retried, down to single documents. Successful parts go to `ok`, failed ones to `failed`.
fn call_resilient(
    slot: &mut StageInstance,
    plugin: &CompiledPlugin,
    stage: &PlannedStage,
    batch: RecordBatch,
    attempts: u32,
    ok: &mut Vec<RecordBatch>,
    failed: &mut Vec<(RecordBatch, StageFailure)>,
) -> Result<(), RunError> {
    let mut tries = 0;
    loop {
        let err = match call_stage(slot, stage, &batch) {
            Ok(b) => {
                ok.push(b);
                return Ok(());
            }
            Err(e) => e,
        };
        // After a trap the instance's state is unknown: replace it.
        if matches!(err, StageFailure::Wasm(WasmError::Timeout(_) | WasmError::OutOfMemory { .. } | WasmError::Trap { .. })) {
            *slot = plugin.instantiate(&stage.label, &stage.params, &limits(stage)).map_err(|source| RunError::Start {
                label: stage.label.clone(),
                plugin: stage.plugin.path.clone(),
                source,
            })?;
        }
        let n = batch.num_rows();
        if matches!(err, StageFailure::Wasm(WasmError::OutOfMemory { .. })) && n > 1 {
            tracing::warn!(stage = %stage.label, "a batch of {n} documents ran out of memory; retrying it as two halves");
            let half = n / 2;
            call_resilient(slot, plugin, stage, batch.slice(0, half), attempts, ok, failed)?;
            return call_resilient(slot, plugin, stage, batch.slice(half, n - half), attempts, ok, failed);
        }
        tries += 1;
        if tries < attempts {
            tracing::warn!(stage = %stage.label, "attempt {tries} of {attempts} failed: {err}; retrying");
            continue;
        }
        failed.push((batch, err));
        return Ok(());
    }
}

/// Rows `[min, max + 1)` of the `_row` column, and the ids, of a failed part.
fn failed_rows(batch: &RecordBatch) -> (Option<[u64; 2]>, Vec<String>) {
    let rows = batch.column_by_name(crate::io::ROW).and_then(|c| c.as_any().downcast_ref::<Int64Array>()).and_then(|r| {
        let (lo, hi) = (r.values().iter().min()?, r.values().iter().max()?);
        Some([*lo as u64, *hi as u64 + 1])
    });
    let ids = batch
        .column_by_name(crate::io::ID)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .map(|a| (0..a.len()).map(|i| a.value(i).to_string()).collect())
        .unwrap_or_default();
    (rows, ids)
}

fn run_chain(
    instances: &mut [StageInstance],
    compiled: &[CompiledPlugin],
    stages: &[PlannedStage],
    counters: &[StageCounters],
    policy: &ExecutionSpec,
    task: Task,
) -> Done {
    // Number the rows so failures can be located in the source after filters have run.
    let mut batch = with_row_numbers(task.batch, task.meta.first_row)
        .map_err(|e| RunError::Io(IoError::Line { at: task.meta.to_string(), message: format!("cannot number rows: {e}") }))?;
    let mut dead = Vec::new();
    for (((inst, plugin), stage), c) in instances.iter_mut().zip(compiled).zip(stages).zip(counters) {
        if batch.num_rows() == 0 {
            break;
        }
        let started = Instant::now();
        let rows = batch.num_rows();
        c.bytes_in.fetch_add(text_bytes(&batch), Ordering::Relaxed);
        let chunk = stage.batch_size.unwrap_or(rows).max(1);
        let mut ok = Vec::with_capacity(rows.div_ceil(chunk));
        let mut failed = Vec::new();
        for start in (0..rows).step_by(chunk) {
            let part = batch.slice(start, chunk.min(rows - start));
            call_resilient(inst, plugin, stage, part, policy.num_run_attempts, &mut ok, &mut failed)?;
        }
        let mut failed_docs = 0u64;
        for (part, err) in failed {
            let (range, ids) = failed_rows(&part);
            if !policy.ignore_failures {
                let mut meta = task.meta.clone();
                if let Some([a, b]) = range {
                    meta.first_row = a;
                    meta.num_rows = b - a;
                }
                return Err(stage_error(stage, &meta, err));
            }
            failed_docs += part.num_rows() as u64;
            dead.push(DeadLetter {
                stage: stage.label.clone(),
                plugin: stage.plugin.path.display().to_string(),
                source: task.meta.source.clone(),
                rows: range,
                documents: part.num_rows() as u64,
                error: err.to_string(),
                ids,
            });
        }
        batch = match ok.len() {
            0 => batch.slice(0, 0),
            1 => ok.pop().unwrap_or_else(|| batch.slice(0, 0)),
            _ => {
                let schema = ok[0].schema();
                arrow_select::concat::concat_batches(&schema, &ok).map_err(|e| {
                    stage_error(stage, &task.meta, StageFailure::Output(InvalidOutput(format!("chunks disagree on schema: {e}"))))
                })?
            }
        };
        c.docs_in.fetch_add(rows as u64, Ordering::Relaxed);
        c.docs_out.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
        c.failed.fetch_add(failed_docs, Ordering::Relaxed);
        c.batches.fetch_add(1, Ordering::Relaxed);
        c.busy_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    Ok(Outcome { meta: task.meta, batch, dead })
}

/// Bytes of text in a batch.
fn text_bytes(batch: &RecordBatch) -> u64 {
    batch
        .column_by_name(crate::io::TEXT)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .map(|a| {
            let o = a.value_offsets();
            (o[o.len() - 1] - o[0]) as u64
        })
        .unwrap_or(0)
}

/// Sets a flag when dropped: stops the side threads (status, metrics) however `run` ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
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

/// An output file being written: its writer, the next batch it expects, the batches that
/// arrived early, and its dead letters.
struct OpenOutput {
    writer: Box<dyn OutputWriter>,
    next_seq: u64,
    early: BTreeMap<u64, Outcome>,
    dead: Vec<DeadLetter>,
}

/// Write results: one output file per partition, batches in their order within it (several
/// partitions may be open at once, one per reader), each file committed when its last batch
/// is written, then its dead letters, then a journal line (so a killed run resumes after it).
/// Returns the files (in partition order), the documents written and the documents failed.
fn write_all(plan: &Plan, done: &Receiver<Done>, metrics: &RunMetrics) -> Result<(Vec<WrittenFile>, u64, u64), RunError> {
    let mut open: BTreeMap<usize, OpenOutput> = BTreeMap::new();
    let mut outputs = Vec::new();
    let (mut docs_out, mut docs_seen, mut docs_failed) = (0u64, 0u64, 0u64);
    let sink = &plan.spec.sink;
    let policy = &plan.spec.execution;
    let mut journal = crate::plan::Journal::open_for_append(&plan.output_dir)?;
    while let Ok(result) = done.recv() {
        let outcome = result?;
        docs_seen += outcome.meta.num_rows;
        docs_failed += outcome.dead.iter().map(|d| d.documents).sum::<u64>();
        if docs_failed > 0 && docs_seen >= 1000 && docs_failed as f64 > policy.max_failed_fraction * docs_seen as f64 {
            return Err(RunError::TooManyFailures { failed: docs_failed, seen: docs_seen, max: policy.max_failed_fraction });
        }
        let pi = outcome.meta.file_index;
        let partition = &plan.partitions[pi];
        let out = match open.entry(pi) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let writer: Box<dyn OutputWriter> = match sink.format {
                    Format::Jsonl => Box::new(JsonlWriter::create(&partition.output, sink.compression(), &plan.spec.source.text_field)?),
                    Format::Parquet => Box::new(ParquetWriter::create(
                        &partition.output,
                        sink.compression(),
                        sink.row_group_size.unwrap_or(65536),
                        &plan.spec.source.text_field,
                    )?),
                };
                e.insert(OpenOutput { writer, next_seq: 0, early: BTreeMap::new(), dead: Vec::new() })
            }
        };
        out.early.insert(outcome.meta.seq, outcome);
        let mut finished = false;
        while let Some(o) = out.early.remove(&out.next_seq) {
            out.next_seq += 1;
            if o.batch.num_rows() > 0 {
                out.writer.write_batch(&o.batch)?;
            }
            out.dead.extend(o.dead);
            finished |= o.meta.last_of_file;
        }
        if finished && let Some(o) = open.remove(&pi) {
            let c = o.writer.finish()?;
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
            docs_out += c.documents;
            metrics.docs_written.fetch_add(c.documents, Ordering::Relaxed);
            let file = WrittenFile {
                path: partition.output_rel.clone(),
                documents: c.documents,
                bytes: c.bytes,
                sha256: c.sha256,
                sources: plan.sources(partition),
            };
            if let Some(j) = journal.as_mut() {
                j.record(&file)?;
            }
            outputs.push((pi, file));
        }
    }
    outputs.sort_by_key(|(pi, _)| *pi);
    Ok((outputs.into_iter().map(|(_, w)| w).collect(), docs_out, docs_failed))
}
