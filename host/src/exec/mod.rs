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

mod autoscale;
mod barrier;
pub mod bench;
mod error;
mod graph;
pub(crate) mod instance;
mod progress;
mod read;
mod route;
mod run;
pub mod services;
mod stage;
mod stream_dedup;
mod summary;
pub mod warm;
mod write;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, RecordBatch, StringArray};
use crossbeam_channel::Sender;

use curator_core::PluginKind;
use curator_core::placement::Assignment;

use crate::metrics::RunMetrics;
use crate::plan::{BranchKind, Plan};
use crate::wasm::{CompiledPlugin, WasmRuntime};

pub use crate::task::DeadLetter;
pub(crate) use crate::task::Task;
pub use error::RunError;
pub use instance::check_setup;
pub use run::run;
pub use summary::{RunSummary, ScaleEvent, StageStats};

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
    /// Keep the stage instances for the next run (a serving host: `curator-host serve`), and
    /// start this one's from those kept by the last.
    pub warm: Option<Arc<warm::WarmPool>>,
}

/// What the scheduling steps of one run share (a dedup step runs several, batch mode one per
/// stage): what the machine offers the workers, when the run started, the worker
/// re-allocations so far (for the summary), and how a step gets its context.
pub(crate) struct Schedule<'a> {
    pub capacity: curator_core::scaling::Capacity,
    pub started: std::time::Instant,
    pub scaling: Vec<ScaleEvent>,
    /// A fresh context for a step over `plan` (counters and metrics shared by all steps).
    pub new_ctx: &'a dyn Fn(Plan) -> Arc<Ctx>,
}

/// Where a thread sends finished tasks.
#[derive(Clone)]
pub(crate) enum Outlet {
    /// The input queue of a stage (its index, for the queue-depth gauge).
    Stage(usize, Sender<Task>),
    /// Sink threads, one queue each: a partition always goes to the same one, which keeps
    /// its batches in order (`route.rs`).
    Sinks(Arc<route::SinkRoutes>),
}

impl Outlet {
    /// Blocks while the queue is full (backpressure). Fails only once nobody receives.
    pub fn send(&self, t: Task, metrics: &RunMetrics) -> Result<(), ()> {
        let (gauge, tx) = match self {
            Outlet::Stage(i, tx) => (&metrics.stages[*i].queued, tx),
            Outlet::Sinks(routes) => (&metrics.sink_queued, routes.sender(&t)),
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
    pub compiled: Arc<Vec<Loaded>>,
    /// Free GPU assignments per stage (placed by the planner): a worker takes one for its life.
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
    /// When the run started (its first batch at the sink is logged against it).
    pub started: std::time::Instant,
    /// The instances a serving host keeps between runs, and this run's number among them.
    pub warm: Option<Arc<warm::WarmPool>>,
    pub run_number: u64,
}

impl Ctx {
    /// Cores that no stage reserves (`cpus` × its configured workers, one if autoscaled).
    pub fn idle_cores(&self) -> usize {
        let reserved: f64 = self.plan.stages.iter().map(|s| s.resources.cpus * s.num_workers.unwrap_or(1) as f64).sum();
        self.allowed_cpus.len().saturating_sub(reserved.ceil() as usize)
    }

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
    /// A stage the host carries out; `remove_ids` holds its id set, shared by its workers.
    RemoveIds(Arc<std::collections::HashSet<String>>),
}

/// Compile every stage once, before workers start: in-process WASM stages for this process,
/// process-isolated ones into the artifact cache their workers load from.
pub(crate) fn compile(plan: &Plan, runtime: &WasmRuntime) -> Result<Vec<Loaded>, RunError> {
    let mut compiled = Vec::new();
    for s in &plan.stages {
        if let Some(crate::plan::Builtin::RemoveIds { paths, field }) = &s.builtin {
            let ids = crate::stage::remove_ids::load_ids(paths, field)?;
            tracing::info!(stage = %s.label, "{} id(s) to remove", ids.len());
            compiled.push(Loaded::RemoveIds(Arc::new(ids)));
            continue;
        }
        if s.plugin.manifest.kind == PluginKind::Native {
            compiled.push(Loaded::Native);
            continue;
        }
        if s.isolation == curator_core::Isolation::Process {
            let c = crate::worker::compile_wasm(&s.plugin.path, s.plugin.manifest.clone(), runtime).map_err(|e| RunError::start(s, e))?;
            compiled.push(Loaded::WasmWorker { from_cache: c.from_cache });
            continue;
        }
        let c = runtime.load(&s.plugin.path, s.plugin.manifest.clone()).map_err(|e| RunError::start(s, e.into()))?;
        compiled.push(Loaded::Wasm(Box::new(c)));
    }
    Ok(compiled)
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
