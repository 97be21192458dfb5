//! The local executor: a pool of workers per stage, bounded queues between them, readers in
//! front and writers behind.
//!
//! ```text
//! readers × R ─▶ [q0] ─▶ stage 0 × w0 ─▶ [q1] ─▶ stage 1 × w1 ─▶ … ─▶ [qW] ─▶ writers × W
//!                bounded queues: a full queue blocks the thread in front of it (backpressure)
//! ```
//!
//! Worker counts come from `curator_core::scaling::allocate`: at the start every stage gets
//! the same share of the cores (fixed `num_workers` win), then the autoscaler moves workers to
//! the stage that needed the most busy time. Each worker owns one instance of its stage.
//! Writers own partitions (partition index mod W), so each file is written in batch order.
//! `execution_mode: batch` runs the same graph one stage at a time through a spill directory.

pub mod bench;
mod read;
mod spill;
mod stage;
mod write;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{Array, RecordBatch, StringArray};
use crossbeam_channel::{Sender, bounded};

use curator_core::TaskMeta;
use curator_core::pipeline::{ExecutionMode, WriteMode};
use curator_core::scaling::{Capacity, StageLoad, allocate};

use crate::columns::InvalidOutput;
use crate::io::IoError;
use crate::io::writer::{OutputManifest, WrittenFile};
use crate::metrics::RunMetrics;
use crate::native::NativeError;
use crate::plan::{BranchKind, Journal, Plan, PlannedStage, merged_manifest};
use crate::wasm::{CompiledPlugin, WasmError, WasmRuntime};
use curator_core::PluginKind;
use curator_core::placement::{Assignment, GpuRequest, StageGpuRequest};

use spill::SpillDir;
use stage::Pool;
use write::Written;

/// Knobs of one run that are not in the pipeline file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Cores given to stage workers; default: this machine's usable cores (affinity and
    /// cgroup aware) × `cpu_allocation_percentage`.
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
    Start { label: String, plugin: PathBuf, source: Box<StartFailure> },
    #[error(transparent)]
    Placement(#[from] curator_core::placement::PlacementError),
    #[error(transparent)]
    Stage(Box<StageFailed>),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("a worker thread panicked: {0}")]
    Panic(String),
    #[error("stopping: {failed} of {seen} documents failed, more than max_failed_fraction ({max})")]
    TooManyFailures { failed: u64, seen: u64, max: f64 },
    #[error("bench: stage {label:?} failed: {message}")]
    Bench { label: String, message: String },
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

/// Why a stage instance could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartFailure {
    #[error(transparent)]
    Wasm(#[from] WasmError),
    #[error(transparent)]
    Native(#[from] NativeError),
}

/// What went wrong inside a stage call.
#[derive(Debug, thiserror::Error)]
pub enum StageFailure {
    #[error(transparent)]
    Wasm(#[from] WasmError),
    #[error(transparent)]
    Native(#[from] NativeError),
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
    /// Documents the stage filtered out (`docs_in - docs_out - failed`).
    pub dropped: u64,
    /// Documents dead-lettered by this stage.
    pub failed: u64,
    pub batches: u64,
    /// Seconds the stage's workers spent processing.
    pub busy_s: f64,
    /// Seconds the stage's workers were alive but waiting.
    pub idle_s: f64,
    /// Documents per second of busy time, summed over workers.
    pub docs_per_s: f64,
    /// Workers at the end of the run, and the most it had.
    pub workers: usize,
    pub max_workers: usize,
}

/// A re-allocation of workers by the autoscaler.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScaleEvent {
    /// Seconds since the run started.
    pub at_s: f64,
    /// Workers per stage after the change.
    pub workers: Vec<usize>,
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
    pub execution_mode: ExecutionMode,
    /// Cores given to workers.
    pub capacity_cpus: f64,
    /// Most stage workers alive at once.
    pub workers: usize,
    pub elapsed_s: f64,
    /// Peak resident memory of the process, in MiB (Linux; 0 elsewhere).
    pub peak_rss_mb: f64,
    pub stages: Vec<StageStats>,
    pub outputs: Vec<WrittenFile>,
    /// Files written by branch sinks (`rejected:` / `tee:`), per branch in stage order.
    pub branch_outputs: Vec<Vec<WrittenFile>>,
    /// Stages whose compiled artifact came from the on-disk cache.
    pub cached_plugins: usize,
    /// Worker re-allocations (the first entry is the initial allocation).
    pub scaling: Vec<ScaleEvent>,
}

/// Peak resident set size of this process (VmHWM), in MiB.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Documents a stage could not process (with `ignore_failures: true`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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

/// Usable cores: affinity and cgroup quota aware (std's `available_parallelism`).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Memory the machine can give workers, MiB: `MemAvailable`, capped by a cgroup v2 limit.
pub fn available_memory_mb() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let avail_kb: u64 = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let mut mb = avail_kb / 1024;
    if let Ok(limit) = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        && let Ok(bytes) = limit.trim().parse::<u64>()
    {
        let used = std::fs::read_to_string("/sys/fs/cgroup/memory.current").ok().and_then(|u| u.trim().parse::<u64>().ok()).unwrap_or(0);
        mb = mb.min(bytes.saturating_sub(used) >> 20);
    }
    Some(mb)
}

/// Share of available memory that worker instances may reserve (their `memory_mb` caps);
/// the rest is for queued batches, readers and writers.
const WORKER_MEMORY_SHARE: f64 = 0.8;

/// What the machine offers the stage workers of a run.
pub fn capacity(plan: &Plan, opts: &RunOptions) -> Capacity {
    let cpus = match opts.workers {
        Some(n) => n.max(1) as f64,
        None => available_cores() as f64 * plan.spec.execution.cpu_allocation_percentage,
    };
    Capacity { cpus, memory_mb: available_memory_mb().map(|m| (m as f64 * WORKER_MEMORY_SHARE) as u64) }
}

fn load(stage: &PlannedStage, spec: &curator_core::StageSpec, gpu_fixed: Option<usize>, busy_s: Option<f64>) -> StageLoad {
    StageLoad {
        cpus: stage.resources.cpus,
        memory_mb: stage.resources.memory_mb_or_default(),
        busy_s,
        fixed: spec.num_workers.or(gpu_fixed),
    }
}

/// Workers per stage before anything is measured (streaming mode).
pub fn initial_workers(plan: &Plan, opts: &RunOptions) -> Vec<usize> {
    let loads: Vec<StageLoad> = plan.stages.iter().zip(&plan.spec.stages).map(|(s, spec)| load(s, spec, None, None)).collect();
    allocate(&capacity(plan, opts), &loads, plan.spec.execution.max_workers_per_stage)
}

/// A batch on its way through the stages.
pub(crate) struct Task {
    pub meta: TaskMeta,
    pub batch: RecordBatch,
    /// Documents that failed so far (with `ignore_failures: true`).
    pub dead: Vec<DeadLetter>,
    /// Documents for branch sinks: (branch index, batch).
    pub side: Vec<(usize, RecordBatch)>,
}

impl Task {
    pub fn new(meta: TaskMeta, batch: RecordBatch) -> Task {
        Task { meta, batch, dead: Vec::new(), side: Vec::new() }
    }
}

/// Where a thread sends finished tasks.
#[derive(Clone)]
pub(crate) enum Outlet {
    /// The input queue of a stage (its index, for the queue-depth gauge).
    Stage(usize, Sender<Task>),
    /// Sink threads, one queue each: a partition always goes to the same one, which keeps
    /// its batches in order.
    Sinks(Vec<Sender<Task>>),
}

impl Outlet {
    /// Blocks while the queue is full (backpressure). Fails only once nobody receives.
    pub fn send(&self, t: Task, metrics: &RunMetrics) -> Result<(), ()> {
        let (gauge, tx) = match self {
            Outlet::Stage(i, tx) => (&metrics.stages[*i].queued, tx),
            Outlet::Sinks(txs) => (&metrics.sink_queued, &txs[t.meta.file_index % txs.len()]),
        };
        gauge.fetch_add(1, Ordering::Relaxed);
        tx.send(t).map_err(|_| {
            gauge.fetch_sub(1, Ordering::Relaxed);
        })
    }
}

/// What every thread of a run shares.
pub(crate) struct Ctx {
    pub plan: Plan,
    pub compiled: Vec<Loaded>,
    /// Worker counts of GPU stages, fixed by placement.
    pub gpu_fixed: Vec<Option<usize>>,
    /// Free GPU assignments per stage: a worker takes one for its life.
    pub gpu_slots: Vec<Mutex<Vec<Assignment>>>,
    /// CPUs this process may use (native workers are pinned to a share of them).
    pub allowed_cpus: Vec<usize>,
    /// The compiled-artifact cache WASM workers load from.
    pub cache_dir: Option<std::path::PathBuf>,
    pub metrics: Arc<RunMetrics>,
    pub strict: bool,
    /// Branches fed by each stage: (branch index, kind).
    pub branches_of: Vec<Vec<(usize, BranchKind)>>,
    cancel: AtomicBool,
    /// Sources stop reading (after a read error), but what was read is still processed.
    stop_sources: AtomicBool,
    failure: Mutex<Option<RunError>>,
    pub docs_seen: AtomicU64,
    pub docs_failed: AtomicU64,
    queue_capacity: usize,
}

impl Ctx {
    /// Record the run's first failure and make every thread wind down.
    pub fn fail(&self, e: RunError) {
        if let Ok(mut f) = self.failure.lock()
            && f.is_none()
        {
            *f = Some(e);
        }
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// A source failed: record it and stop reading, but let what was read be processed and
    /// written, so that finished partitions are kept.
    pub fn fail_source(&self, e: RunError) {
        if let Ok(mut f) = self.failure.lock()
            && f.is_none()
        {
            *f = Some(e);
        }
        self.stop_sources.store(true, Ordering::Relaxed);
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Whether sources should stop reading.
    pub fn sources_stopped(&self) -> bool {
        self.cancelled() || self.stop_sources.load(Ordering::Relaxed)
    }

    fn take_failure(&self) -> Option<RunError> {
        self.failure.lock().ok().and_then(|mut f| f.take())
    }
}

/// A stage ready to instantiate: a compiled WASM component, or a native library (loaded
/// only by its worker processes).
pub(crate) enum Loaded {
    Wasm(Box<CompiledPlugin>),
    /// A WASM stage served by worker processes (`isolation: process`); compiled here once
    /// (as the workers compile it) so each worker loads the cached artifact.
    WasmWorker {
        from_cache: bool,
    },
    Native,
}

/// Per stage: the worker count placement fixed (GPU stages only), and the assignments.
type GpuPlan = (Vec<Option<usize>>, Vec<Vec<Assignment>>);

/// Place the GPU stages' workers on this machine's GPUs: as many as fit (or `num_workers`).
/// Fails before any data is read when a stage needs a GPU that is not there.
fn place_gpu_stages(plan: &Plan) -> Result<GpuPlan, RunError> {
    let n = plan.stages.len();
    let requests: Vec<(usize, GpuRequest)> =
        plan.stages.iter().enumerate().filter_map(|(i, s)| GpuRequest::from_resources(&s.resources).map(|r| (i, r))).collect();
    if requests.is_empty() {
        return Ok((vec![None; n], vec![Vec::new(); n]));
    }
    let inventory = crate::gpu::discover();
    let gpus = inventory.gpus;
    let mut counts: Vec<usize> = requests
        .iter()
        .map(|(i, r)| plan.spec.stages[*i].num_workers.unwrap_or_else(|| curator_core::placement::max_workers(&gpus, *r).max(1)))
        .collect();
    loop {
        let reqs: Vec<StageGpuRequest> = requests
            .iter()
            .zip(&counts)
            .map(|((i, r), c)| StageGpuRequest { stage: plan.stages[*i].label.clone(), request: *r, workers: *c })
            .collect();
        match curator_core::placement::place(&gpus, &reqs) {
            Ok(assignments) => {
                let mut fixed = vec![None; n];
                let mut slots = vec![Vec::new(); n];
                for (((i, _), c), a) in requests.iter().zip(&counts).zip(assignments) {
                    fixed[*i] = Some(*c);
                    slots[*i] = a;
                }
                return Ok((fixed, slots));
            }
            Err(curator_core::placement::PlacementError::Full { .. })
                if counts.iter().zip(&requests).any(|(c, (i, _))| *c > 1 && plan.spec.stages[*i].num_workers.is_none()) =>
            {
                // Shrink the largest autoscaled GPU pool and try again.
                let k = (0..counts.len())
                    .filter(|k| counts[*k] > 1 && plan.spec.stages[requests[*k].0].num_workers.is_none())
                    .max_by_key(|k| counts[*k])
                    .unwrap_or(0);
                counts[k] -= 1;
            }
            Err(curator_core::placement::PlacementError::NoGpus { stage, needs, .. }) => {
                let detail = inventory.note.unwrap_or_default();
                return Err(curator_core::placement::PlacementError::NoGpus { stage, needs, detail }.into());
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Where the tasks of one scheduling step come from and go to.
enum Source<'a> {
    Read,
    Spill(&'a SpillDir),
}

enum Sink<'a> {
    Write(&'a Mutex<Option<Journal>>),
    Spill(&'a SpillDir),
}

/// Run a checked plan.
pub fn run(plan: &Plan, runtime: &WasmRuntime, opts: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    crate::plan::remove_stale_spools(&plan.output_dir);
    for b in &plan.branches {
        crate::plan::remove_stale_spools(&b.dir);
    }
    let mut compiled = Vec::new();
    for s in &plan.stages {
        if s.plugin.manifest.kind == PluginKind::Native {
            compiled.push(Loaded::Native);
            continue;
        }
        let start_error = |source: crate::wasm::WasmError| RunError::Start {
            label: s.label.clone(),
            plugin: s.plugin.path.clone(),
            source: Box::new(source.into()),
        };
        if s.isolation == curator_core::Isolation::Process {
            let c = crate::wasm_worker::compile(&s.plugin.path, s.plugin.manifest.clone(), runtime.cache_dir().map(Into::into))
                .map_err(start_error)?;
            compiled.push(Loaded::WasmWorker { from_cache: c.from_cache });
            continue;
        }
        let c = runtime.load(&s.plugin.path, s.plugin.manifest.clone()).map_err(start_error)?;
        compiled.push(Loaded::Wasm(Box::new(c)));
    }
    let cached_plugins = compiled
        .iter()
        .filter(|c| matches!(c, Loaded::Wasm(c) if c.from_cache) || matches!(c, Loaded::WasmWorker { from_cache: true }))
        .count();
    // GPU stages: placed before anything is read; their worker counts are fixed by placement.
    let (gpu_fixed, gpu_slots) = place_gpu_stages(plan)?;
    let capacity = capacity(plan, opts);
    let cores = capacity.cpus.ceil().max(1.0) as usize;
    let gpus = opts.metrics_addr.is_some() && !crate::gpu::discover().gpus.is_empty();
    let metrics = Arc::new(RunMetrics::new(plan.stages.iter().map(|s| s.label.clone()), gpus));
    let queue_capacity = 2 * cores + 2;
    let stop_side_threads = Arc::new(AtomicBool::new(false));
    let _stop_guard = StopOnDrop(stop_side_threads.clone());
    if let Some(addr) = opts.metrics_addr {
        let bound = crate::metrics::serve(addr, metrics.clone(), stop_side_threads.clone())
            .map_err(|e| RunError::Io(IoError::Open { path: format!("metrics address {addr}"), source: e }))?;
        tracing::info!("serving Prometheus metrics on http://{bound}/metrics");
    }
    spawn_status(&metrics, &stop_side_threads, plan.spec.execution.logging_interval_s, queue_capacity);
    let mut branches_of = vec![Vec::new(); plan.stages.len()];
    for (b, br) in plan.branches.iter().enumerate() {
        branches_of[br.stage].push((b, br.kind));
    }
    let ctx = Arc::new(Ctx {
        plan: plan.clone(),
        compiled,
        gpu_fixed,
        gpu_slots: gpu_slots.into_iter().map(Mutex::new).collect(),
        allowed_cpus: crate::native::allowed_cpus(),
        cache_dir: runtime.cache_dir().map(Into::into),
        metrics: metrics.clone(),
        strict: opts.strict,
        branches_of,
        cancel: AtomicBool::new(false),
        stop_sources: AtomicBool::new(false),
        failure: Mutex::new(None),
        docs_seen: AtomicU64::new(0),
        docs_failed: AtomicU64::new(0),
        queue_capacity,
    });
    let policy = &plan.spec.execution;
    tracing::info!(
        cores = capacity.cpus,
        stages = plan.stages.len(),
        partitions = plan.partitions.len(),
        mode = ?policy.execution_mode,
        "starting run"
    );
    let mut scaling = Vec::new();
    let all: Vec<usize> = (0..plan.stages.len()).collect();
    let (read, written) = match policy.execution_mode {
        ExecutionMode::Batch if plan.stages.len() > 1 => {
            let root = match (&policy.spill_dir, &plan.output_dir) {
                (Some(d), _) => PathBuf::from(d),
                (None, crate::io::Loc::Local(d)) => d.join("_spill"),
                (None, _) => std::env::temp_dir().join(format!("curator-spill-{}", std::process::id())),
            };
            let mut read = (0, 0);
            let mut previous: Option<SpillDir> = None;
            let mut written = None;
            for k in 0..plan.stages.len() {
                let last = k + 1 == plan.stages.len();
                let here = if last { None } else { Some(SpillDir::create(root.join(format!("stage-{k:03}")))?) };
                let journal = if last { Mutex::new(Journal::open_for_append(&plan.output_dir)?) } else { Mutex::new(None) };
                let source = previous.as_ref().map(Source::Spill).unwrap_or(Source::Read);
                let sink = match &here {
                    Some(d) => Sink::Spill(d),
                    None => Sink::Write(&journal),
                };
                tracing::info!(stage = %plan.stages[k].label, "batch mode: stage {} of {}", k + 1, plan.stages.len());
                let out = run_graph(&ctx, source, &[k], sink, &capacity, started, &mut scaling);
                if let Some(p) = previous.take() {
                    p.remove();
                }
                let (r, w) = match out {
                    Ok(x) => x,
                    Err(e) => {
                        if let Some(h) = here {
                            h.remove();
                        }
                        let _ = std::fs::remove_dir(&root);
                        return Err(e);
                    }
                };
                if k == 0 {
                    read = r;
                }
                previous = here;
                written = Some(w);
            }
            let _ = std::fs::remove_dir(&root);
            (read, written.unwrap_or_default())
        }
        _ => {
            let journal = Mutex::new(Journal::open_for_append(&plan.output_dir)?);
            run_graph(&ctx, Source::Read, &all, Sink::Write(&journal), &capacity, started, &mut scaling)?
        }
    };
    let (docs_in, rejected) = read;
    let mut entries = written.entries;
    entries.sort_by_key(|(pi, _)| *pi);
    let docs_out = written.docs_out;
    let failed = ctx.docs_failed.load(Ordering::Relaxed);

    let outputs: Vec<WrittenFile> = entries.iter().map(|(_, e)| e.file.clone()).collect();
    let mut all_main = plan.resumed.clone();
    all_main.extend(outputs.iter().cloned());
    finish_sink(&plan.output_dir, &plan.prior_manifest, plan.spec.sink.mode, all_main)?;
    let mut branch_outputs = Vec::with_capacity(plan.branches.len());
    for (b, br) in plan.branches.iter().enumerate() {
        let files: Vec<WrittenFile> = entries.iter().filter_map(|(_, e)| e.branches.get(b).cloned()).collect();
        let mut all = br.resumed.clone();
        all.extend(files.iter().cloned());
        finish_sink(&br.dir, &br.prior_manifest, br.sink.mode, all)?;
        branch_outputs.push(files);
    }
    crate::plan::Journal::remove(&plan.output_dir);

    let stage_stats = plan
        .stages
        .iter()
        .zip(metrics.stages.iter())
        .map(|(s, c)| {
            let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
            let (docs_in, docs_out, failed) = (load(&c.docs_in), load(&c.docs_out), load(&c.failed));
            let busy_s = load(&c.busy_ns) as f64 / 1e9;
            StageStats {
                label: s.label.clone(),
                plugin: s.plugin.path.display().to_string(),
                docs_in,
                docs_out,
                dropped: docs_in.saturating_sub(docs_out + failed),
                failed,
                batches: load(&c.batches),
                busy_s,
                idle_s: (load(&c.alive_ns) as f64 / 1e9 - busy_s).max(0.0),
                docs_per_s: if busy_s > 0.0 { docs_in as f64 / busy_s } else { 0.0 },
                workers: scaling.last().and_then(|e: &ScaleEvent| e.workers.get(s.index).copied()).unwrap_or(0),
                max_workers: scaling.iter().filter_map(|e| e.workers.get(s.index).copied()).max().unwrap_or(0),
            }
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
        execution_mode: policy.execution_mode,
        capacity_cpus: capacity.cpus,
        workers: (metrics.max_workers.load(Ordering::Relaxed) as usize)
            .max(scaling.iter().map(|e| e.workers.iter().sum()).max().unwrap_or(0)),
        elapsed_s: started.elapsed().as_secs_f64(),
        peak_rss_mb: peak_rss_mb(),
        stages: stage_stats,
        outputs,
        branch_outputs,
        cached_plugins,
        scaling,
    })
}

/// Write a sink's manifest and delete what `overwrite` replaced.
fn finish_sink(dir: &crate::io::Loc, prior: &OutputManifest, mode: WriteMode, files: Vec<WrittenFile>) -> Result<(), RunError> {
    let (manifest, stale) = merged_manifest(prior, mode, files);
    for path in stale {
        let loc = dir.join(&path);
        if loc.exists() {
            loc.delete()?;
        }
    }
    manifest.save(dir)?;
    Ok(())
}

/// Run `stages` (indices into the plan) from `source` to `sink`: sources, one pool per
/// stage, sinks, bounded queues between them, and (streaming, several stages) the autoscaler.
fn run_graph(
    ctx: &Arc<Ctx>,
    source: Source,
    stages: &[usize],
    sink: Sink,
    capacity: &Capacity,
    t0: Instant,
    scaling: &mut Vec<ScaleEvent>,
) -> Result<((u64, u64), Written), RunError> {
    let plan = &ctx.plan;
    let cores = capacity.cpus.ceil().max(1.0) as usize;
    let parallel_parts = plan.partitions.len().max(1);
    let sinks = cores.min(parallel_parts).max(1);
    let mut sink_txs = Vec::with_capacity(sinks);
    let mut sink_rxs = Vec::with_capacity(sinks);
    for _ in 0..sinks {
        let (tx, rx) = bounded::<Task>(ctx.queue_capacity);
        sink_txs.push(tx);
        sink_rxs.push(rx);
    }
    // Pools from the last stage back, each sending to the next one's queue.
    let mut next = Outlet::Sinks(sink_txs);
    let mut pools: Vec<Arc<Pool>> = Vec::with_capacity(stages.len());
    for &i in stages.iter().rev() {
        let (tx, rx) = bounded::<Task>(ctx.queue_capacity);
        pools.push(Pool::new(i, plan.spec.stages[i].num_workers.or(ctx.gpu_fixed[i]), rx, next));
        next = Outlet::Stage(i, tx);
    }
    pools.reverse();
    let first = next;

    // Every worker sets up its instance before any data is read.
    let loads: Vec<StageLoad> = stages.iter().map(|&i| load(&plan.stages[i], &plan.spec.stages[i], ctx.gpu_fixed[i], None)).collect();
    let counts = allocate(capacity, &loads, plan.spec.execution.max_workers_per_stage);
    record_scaling(ctx, scaling, t0, &pools, &counts, "initial allocation");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut expected = 0;
    for (pool, n) in pools.iter().zip(&counts) {
        expected += pool.scale_to(ctx, *n, Some(&ready_tx));
    }
    drop(ready_tx);
    let mut startup_error = None;
    for _ in 0..expected {
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
        // Nothing has been read: close every pool (the workers that did start see their
        // input close and leave) and report the first error.
        ctx.fail(e);
        for p in &pools {
            p.close();
        }
        drop(first);
        drop(sink_rxs);
        for p in &pools {
            p.join();
        }
        return Err(ctx.take_failure().unwrap_or_else(|| RunError::Panic("a worker failed to start".into())));
    }

    let next_item = AtomicUsize::new(0);
    let spilled = match &source {
        Source::Spill(dir) => match dir.list() {
            Ok(files) => files,
            Err(e) => {
                ctx.fail(e.into());
                Vec::new()
            }
        },
        Source::Read => Vec::new(),
    };
    let stop_scaler = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut sink_handles = Vec::new();
        for (k, rx) in sink_rxs.into_iter().enumerate() {
            let ctx = &**ctx;
            let h = match &sink {
                Sink::Write(journal) => std::thread::Builder::new()
                    .name(format!("curator-writer-{k}"))
                    .spawn_scoped(scope, move || write::write_loop(ctx, rx, journal)),
                Sink::Spill(dir) => std::thread::Builder::new()
                    .name(format!("curator-spill-{k}"))
                    .spawn_scoped(scope, move || write::spill_loop(ctx, rx, dir)),
            };
            match h {
                Ok(h) => sink_handles.push(h),
                Err(e) => ctx.fail(RunError::Panic(format!("cannot start a writer: {e}"))),
            }
        }
        // Partitions are independent: several readers take them in turn. A `limit` needs the
        // documents in input order, so it reads with one.
        let readers = if plan.spec.source.limit.is_some() { 1 } else { cores.min(parallel_parts).max(1) };
        let mut source_handles = Vec::new();
        for r in 0..readers {
            let (ctx, out, next_item, spilled) = (&**ctx, first.clone(), &next_item, &spilled);
            let h = match &source {
                Source::Read => std::thread::Builder::new().name(format!("curator-reader-{r}")).spawn_scoped(scope, move || {
                    read::read_partitions(ctx, next_item, out).unwrap_or_else(|e| {
                        ctx.fail_source(e);
                        (0, 0)
                    })
                }),
                Source::Spill(dir) => std::thread::Builder::new().name(format!("curator-unspill-{r}")).spawn_scoped(scope, move || {
                    loop {
                        let i = next_item.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = spilled.get(i) else { break };
                        if ctx.sources_stopped() {
                            break;
                        }
                        match dir.read(path) {
                            Ok(task) => {
                                if out.send(task, &ctx.metrics).is_err() {
                                    break;
                                }
                            }
                            Err(e) => {
                                ctx.fail_source(e.into());
                                break;
                            }
                        }
                    }
                    (0, 0)
                }),
            };
            match h {
                Ok(h) => source_handles.push(h),
                Err(e) => ctx.fail(RunError::Panic(format!("cannot start a reader: {e}"))),
            }
        }
        drop(first);

        let autoscale =
            plan.spec.execution.execution_mode == ExecutionMode::Streaming && pools.iter().filter(|p| p.fixed.is_none()).count() > 1;
        let scaler = autoscale
            .then(|| {
                let (pools, stop) = (&pools, &stop_scaler);
                std::thread::Builder::new()
                    .name("curator-autoscaler".into())
                    .spawn_scoped(scope, move || autoscaler(ctx, pools, capacity, t0, stop))
                    .ok()
            })
            .flatten();

        let mut read: (u64, u64) = (0, 0);
        for h in source_handles {
            match h.join() {
                Ok((a, b)) => {
                    read.0 += a;
                    read.1 += b;
                }
                Err(_) => ctx.fail(RunError::Panic("a reader thread panicked".into())),
            }
        }
        let mut written = Written::default();
        for h in sink_handles {
            match h.join() {
                Ok(w) => {
                    written.entries.extend(w.entries);
                    written.docs_out += w.docs_out;
                }
                Err(_) => ctx.fail(RunError::Panic("a writer thread panicked".into())),
            }
        }
        stop_scaler.store(true, Ordering::Relaxed);
        if let Some(h) = scaler
            && let Ok(events) = h.join()
        {
            scaling.extend(events);
        }
        for p in &pools {
            p.join();
        }
        match ctx.take_failure() {
            Some(e) => Err(e),
            None => Ok((read, written)),
        }
    })
}

fn record_scaling(ctx: &Ctx, scaling: &mut Vec<ScaleEvent>, t0: Instant, pools: &[Arc<Pool>], counts: &[usize], why: &str) {
    let mut workers = vec![0; ctx.plan.stages.len()];
    for (p, n) in pools.iter().zip(counts) {
        workers[p.stage] = *n;
    }
    let shown: Vec<String> = pools.iter().zip(counts).map(|(p, n)| format!("{} {n}", ctx.plan.stages[p.stage].label)).collect();
    tracing::info!("workers ({why}): {}", shown.join(", "));
    scaling.push(ScaleEvent { at_s: t0.elapsed().as_secs_f64(), workers });
}

/// Every `autoscale_interval_s` (and once as soon as every stage has been measured), give
/// the workers to the stages by the busy time each needed since the last change.
fn autoscaler(ctx: &Arc<Ctx>, pools: &[Arc<Pool>], capacity: &Capacity, t0: Instant, stop: &AtomicBool) -> Vec<ScaleEvent> {
    let plan = &ctx.plan;
    let interval = Duration::from_secs_f64(plan.spec.execution.autoscale_interval_s);
    let busy = |p: &Pool| ctx.metrics.stages[p.stage].busy_ns.load(Ordering::Relaxed);
    let batches = |p: &Pool| ctx.metrics.stages[p.stage].batches.load(Ordering::Relaxed);
    let mut last_busy: Vec<u64> = pools.iter().map(|p| busy(p)).collect();
    let mut last = Instant::now();
    let mut measured_once = false;
    let mut events = Vec::new();
    while !stop.load(Ordering::Relaxed) && !ctx.cancelled() {
        std::thread::sleep(Duration::from_millis(50));
        let due = if measured_once {
            last.elapsed() >= interval
        } else {
            // The first change: as soon as every stage has a few batches behind it.
            (pools.iter().all(|p| batches(p) >= 4) && last.elapsed() >= Duration::from_millis(200)) || last.elapsed() >= interval
        };
        if !due {
            continue;
        }
        let now: Vec<u64> = pools.iter().map(|p| busy(p)).collect();
        let loads: Vec<StageLoad> = pools
            .iter()
            .zip(now.iter().zip(&last_busy))
            .map(|(p, (n, l))| {
                load(&plan.stages[p.stage], &plan.spec.stages[p.stage], ctx.gpu_fixed[p.stage], Some(n.saturating_sub(*l) as f64 / 1e9))
            })
            .collect();
        last_busy = now;
        last = Instant::now();
        measured_once = true;
        let counts = allocate(capacity, &loads, plan.spec.execution.max_workers_per_stage);
        if pools.iter().zip(&counts).all(|(p, n)| p.target() == *n) {
            continue;
        }
        for (p, n) in pools.iter().zip(&counts) {
            p.scale_to(ctx, *n, None);
        }
        record_scaling(ctx, &mut events, t0, pools, &counts, "autoscaler");
    }
    events
}

/// Progress: one line per stage on a terminal, status lines in the log otherwise.
fn spawn_status(metrics: &Arc<RunMetrics>, stop: &Arc<AtomicBool>, interval_s: f64, queue_capacity: usize) {
    let (metrics, stop) = (metrics.clone(), stop.clone());
    let every = Duration::from_secs_f64(interval_s.max(0.1));
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = std::thread::Builder::new().name("curator-status".into()).spawn(move || {
        let t0 = Instant::now();
        let bars = terminal.then(|| {
            let multi = indicatif::MultiProgress::new();
            let style =
                indicatif::ProgressStyle::with_template("{spinner} {msg}").unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
            let bars: Vec<indicatif::ProgressBar> =
                (0..metrics.stages.len()).map(|_| multi.add(indicatif::ProgressBar::new_spinner().with_style(style.clone()))).collect();
            (multi, bars)
        });
        let mut next = every;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            metrics.sample_workers();
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

pub(crate) fn stage_error(stage: &PlannedStage, task: &TaskMeta, source: StageFailure) -> RunError {
    RunError::Stage(Box::new(StageFailed { label: stage.label.clone(), plugin: stage.plugin.path.clone(), task: task.clone(), source }))
}

/// Bytes of text in a batch.
pub(crate) fn text_bytes(batch: &RecordBatch) -> u64 {
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
