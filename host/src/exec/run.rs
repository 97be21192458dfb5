//! `run`: a checked plan from start to summary. Compiles the stages, starts the side threads
//! (progress, metrics), runs the graph once (streaming) or once per stage (batch mode,
//! through spill directories), then writes each sink's manifest.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use curator_core::pipeline::{ExecutionMode, WriteMode};
use curator_core::placement::start_waves;
use curator_core::shard::Phase;

use super::graph::{Sink, Source, run_graph};
use super::progress::spawn_status;
use super::summary::RunSummary;
use super::write::Written;
use super::{Ctx, Loaded, RunError, RunOptions, Schedule, StopOnDrop};
use crate::dedup::DedupStats;
use crate::dedup::work::Work;
use crate::io::IoError;
use crate::io::journal::{Journal, remove_stale_spools};
use crate::io::writer::{OutputManifest, WrittenFile};
use crate::metrics::RunMetrics;
use crate::plan::{Plan, merged_manifest};
use crate::task::SpillDir;
use crate::task::SpillReplay;
use crate::wasm::WasmRuntime;

/// Removes the services' shared in-flight limit files when a run that is not a serving
/// host's ends (a serving host's kept workers still map theirs).
struct LimitFiles(Vec<PathBuf>);

impl Drop for LimitFiles {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Ends a serving host's run in its pool of kept instances when dropped.
struct EndOfRun(Arc<super::warm::WarmPool>, u64);

impl Drop for EndOfRun {
    fn drop(&mut self) {
        self.0.end(self.1);
    }
}

/// Run a checked plan.
pub fn run(plan: &Plan, runtime: &WasmRuntime, opts: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    // The services first (a model server takes long to load); stopped when this returns.
    let (_services, with_urls) = super::services::Services::start(plan, opts.warm.as_deref().map(|w| &w.services))?;
    let plan = with_urls.as_ref().unwrap_or(plan);
    let _limit_files = opts
        .warm
        .is_none()
        .then(|| LimitFiles(plan.stages.iter().filter_map(|s| s.service.as_ref()?.limit_file.as_ref().map(PathBuf::from)).collect()));
    remove_stale_outputs(plan);
    let compiled = Arc::new(super::compile(plan, runtime)?);
    let cached_plugins = compiled
        .iter()
        .filter(|c| matches!(c, Loaded::Wasm(c) if c.from_cache) || matches!(c, Loaded::WasmWorker { from_cache: true }))
        .count();
    let capacity = crate::plan::capacity::capacity(plan, opts.workers);
    let queue_capacity = 2 * capacity.cpus.ceil().max(1.0) as usize + 2;
    let side = SideThreads::start(plan, opts, queue_capacity)?;
    let mut branches_of = vec![Vec::new(); plan.stages.len()];
    for (b, br) in plan.branches.iter().enumerate() {
        branches_of[br.stage].push((b, br.kind));
    }
    let allowed_cpus = crate::os::allowed_cpus();
    let cache_dir: Option<PathBuf> = runtime.cache_dir().map(Into::into);
    // A serving host: stop the kept instances this run cannot use before its own start, and
    // those it did not take back when it ends, however it ends.
    let run_number = opts.warm.as_ref().map_or(0, |pool| pool.begin(super::instance::wanted(plan, &allowed_cpus, cache_dir.as_deref())));
    let _end_of_run = opts.warm.clone().map(|pool| EndOfRun(pool, run_number));
    // One context per scheduling step (a dedup step runs several over different partitions);
    // counters are shared by all of them.
    let new_ctx = |plan: Plan| {
        Arc::new(Ctx {
            // Workers take their card from the end: the start order, reversed.
            gpu_slots: plan.stages.iter().map(|s| Mutex::new(start_waves(&s.gpu).0.into_iter().rev().collect())).collect(),
            plan,
            compiled: compiled.clone(),
            allowed_cpus: allowed_cpus.clone(),
            cache_dir: cache_dir.clone(),
            metrics: side.metrics.clone(),
            strict: opts.strict,
            branches_of: branches_of.clone(),
            cancel: AtomicBool::new(false),
            stop_sources: AtomicBool::new(false),
            failure: Mutex::new(None),
            docs_seen: AtomicU64::new(0),
            docs_failed: AtomicU64::new(0),
            queue_capacity,
            started,
            warm: opts.warm.clone(),
            run_number,
        })
    };
    let ctx = new_ctx(plan.clone());
    tracing::info!(
        cores = capacity.cpus,
        stages = plan.stages.len(),
        partitions = plan.partitions.len(),
        mode = ?plan.spec.execution.execution_mode,
        "starting run"
    );
    let mut sched = Schedule { capacity, started, scaling: Vec::new(), new_ctx: &new_ctx };
    let (read, written, dedup) = run_steps(plan, &ctx, &mut sched)?;
    let (docs_in, rejected) = read;
    let docs_out = written.docs_out;
    let failed = ctx.docs_failed.load(Ordering::Relaxed);
    let counts = Counts { docs_in, docs_out, rejected, failed };
    let (outputs, branch_outputs) = finish_outputs(plan, written, counts, dedup.as_ref().map(|(stats, _)| stats))?;
    // The work directory of a phased step is shared by every job; remove it after `merge`.
    let dedup = dedup.map(|(stats, work)| {
        if plan.phase.is_none() {
            work.remove();
        }
        stats
    });
    let Schedule { capacity, scaling, .. } = sched;
    let metrics = &side.metrics;
    Ok(RunSummary {
        partitions: plan.partitions.len(),
        skipped_partitions: plan.skipped,
        docs_in,
        docs_out,
        rejected,
        failed,
        resumed_partitions: plan.resumed.len(),
        execution_mode: plan.spec.execution.execution_mode,
        capacity_cpus: capacity.cpus,
        workers: (metrics.max_workers.load(Ordering::Relaxed) as usize)
            .max(scaling.iter().map(|e| e.workers.iter().sum()).max().unwrap_or(0)),
        elapsed_s: started.elapsed().as_secs_f64(),
        peak_rss_mb: side.peak_rss_bytes() as f64 / (1u64 << 20) as f64,
        stages: super::summary::stage_stats(plan, metrics, &scaling),
        outputs,
        branch_outputs,
        cached_plugins,
        scaling,
        dedup,
    })
}

/// Temp files an interrupted earlier run left in the sinks' directories. A shard (or a phase
/// sharded over partitions) owns its partitions' outputs only; the other phases of a dedup
/// step leave the output directories alone.
fn remove_stale_outputs(plan: &Plan) {
    if plan.phase.is_some_and(|(p, _)| !p.over_partitions()) {
        return;
    }
    let owned: Option<Vec<String>> =
        plan.shard.map(|_| plan.partitions.iter().map(|p| p.output_rel.rsplit('/').next().unwrap_or(&p.output_rel).to_string()).collect());
    remove_stale_spools(&plan.output_dir, owned.as_deref());
    for b in &plan.branches {
        remove_stale_spools(&b.dir, owned.as_deref());
    }
}

/// The run's side threads (progress lines, Prometheus metrics) and what they measure; they
/// stop when this is dropped, however the run ends.
struct SideThreads {
    metrics: Arc<RunMetrics>,
    peak_rss: Arc<AtomicU64>,
    _stop: StopOnDrop,
}

impl SideThreads {
    fn start(plan: &Plan, opts: &RunOptions, queue_capacity: usize) -> Result<SideThreads, RunError> {
        let gpus = opts.metrics_addr.is_some() && !crate::gpu::discover().gpus.is_empty();
        let metrics = Arc::new(RunMetrics::new(plan.stages.iter().map(|s| s.label.clone()), gpus));
        let stop = Arc::new(AtomicBool::new(false));
        let guard = StopOnDrop(stop.clone());
        if let Some(addr) = opts.metrics_addr {
            let bound = crate::metrics::serve(addr, metrics.clone(), stop.clone())
                .map_err(|e| RunError::Io(IoError::Open { path: format!("metrics address {addr}"), source: e }))?;
            tracing::info!("serving Prometheus metrics on http://{bound}/metrics");
        }
        let peak_rss = Arc::new(AtomicU64::new(0));
        spawn_status(&metrics, &stop, plan.spec.execution.logging_interval_s, queue_capacity, &peak_rss);
        Ok(SideThreads { metrics, peak_rss, _stop: guard })
    }

    /// Peak resident memory of the host and its worker processes (sampled), in bytes.
    fn peak_rss_bytes(&self) -> u64 {
        self.peak_rss.load(Ordering::Relaxed).max(crate::os::tree_rss_bytes()).max(crate::os::own_peak_rss_bytes())
    }
}

/// What the scheduling steps read and wrote, and the dedup step's statistics and work
/// directory when the pipeline has one.
type Steps = ((u64, u64), Written, Option<(DedupStats, Work)>);

/// The run's scheduling steps: around a dedup step, once per stage (batch mode), or one
/// streaming graph.
fn run_steps(plan: &Plan, ctx: &Arc<Ctx>, sched: &mut Schedule<'_>) -> Result<Steps, RunError> {
    if let Some(d) = &plan.dedup {
        let b = match plan.phase {
            Some(phase) => super::barrier::run_phase(plan, d, phase, sched)?,
            None => super::barrier::run_with_dedup(plan, d, sched)?,
        };
        return Ok((b.read, b.written, Some((b.stats, b.work))));
    }
    if plan.spec.execution.execution_mode == ExecutionMode::Batch && plan.stages.len() > 1 {
        let (read, written) = run_batch_mode(plan, ctx, sched)?;
        return Ok((read, written, None));
    }
    let journal = Mutex::new(Journal::open_for_append(&plan.output_dir, &plan.journal_name())?);
    let all: Vec<usize> = (0..plan.stages.len()).collect();
    let (read, written) = run_graph(ctx, Source::Read, &all, Sink::Write(&journal), sched)?;
    Ok((read, written, None))
}

/// Batch mode: the graph once per stage, each stage's output spilled for the next one.
fn run_batch_mode(plan: &Plan, ctx: &Arc<Ctx>, sched: &mut Schedule<'_>) -> Result<((u64, u64), Written), RunError> {
    let root = &plan.workdirs.batch_spill;
    let mut read = (0, 0);
    let mut previous: Option<SpillDir> = None;
    let mut written = None;
    for k in 0..plan.stages.len() {
        let last = k + 1 == plan.stages.len();
        let here = if last { None } else { Some(SpillDir::create(root.join(format!("stage-{k:03}")))?) };
        let journal = if last { Mutex::new(Journal::open_for_append(&plan.output_dir, &plan.journal_name())?) } else { Mutex::new(None) };
        let replay = match &previous {
            Some(p) => Some(SpillReplay { dir: p, files: p.list()? }),
            None => None,
        };
        let source = replay.as_ref().map(|r| Source::Replay(r)).unwrap_or(Source::Read);
        let sink = match &here {
            Some(d) => Sink::Spill(d),
            None => Sink::Write(&journal),
        };
        tracing::info!(stage = %plan.stages[k].label, "batch mode: stage {} of {}", k + 1, plan.stages.len());
        let out = run_graph(ctx, source, &[k], sink, sched);
        if let Some(p) = previous.take() {
            p.remove();
        }
        let (r, w) = match out {
            Ok(x) => x,
            Err(e) => {
                if let Some(h) = here {
                    h.remove();
                }
                let _ = std::fs::remove_dir(root);
                return Err(e);
            }
        };
        if k == 0 {
            read = r;
        }
        previous = here;
        written = Some(w);
    }
    let _ = std::fs::remove_dir(root);
    Ok((read, written.unwrap_or_default()))
}

/// A run's document counts, for a shard's record.
struct Counts {
    docs_in: u64,
    docs_out: u64,
    rejected: u64,
    failed: u64,
}

/// The files this run wrote (main sink, and per branch sink), and what makes them one
/// output: each sink's manifest (or, for a shard, its record for `merge`), then the journal
/// removed. A phase before `output` writes only into the shared work directory.
fn finish_outputs(
    plan: &Plan,
    written: Written,
    counts: Counts,
    dedup: Option<&DedupStats>,
) -> Result<(Vec<WrittenFile>, Vec<Vec<WrittenFile>>), RunError> {
    let mut entries = written.entries;
    entries.sort_by_key(|(pi, _)| *pi);
    let outputs: Vec<WrittenFile> = entries.iter().map(|(_, e)| e.file.clone()).filter(|f| !f.is_empty()).collect();
    if plan.phase.is_some_and(|(p, _)| p != Phase::Output) {
        return Ok((outputs, Vec::new()));
    }
    let mut all_main = plan.resumed.clone();
    all_main.extend(outputs.iter().cloned());
    // Each branch sink's files: this run's, and with those of a resumed run.
    let mut branch_outputs = Vec::with_capacity(plan.branches.len());
    let mut branch_all = Vec::with_capacity(plan.branches.len());
    for (b, br) in plan.branches.iter().enumerate() {
        let files: Vec<WrittenFile> = entries.iter().filter_map(|(_, e)| e.branches.get(b).cloned()).filter(|f| !f.is_empty()).collect();
        let mut all = br.resumed.clone();
        all.extend(files.iter().cloned());
        branch_outputs.push(files);
        branch_all.push(all.into_iter().filter(|f| !f.is_empty()).collect::<Vec<_>>());
    }
    if let Some(shard) = plan.shard {
        // Shards share the directories: each records what it wrote; `merge` writes the
        // manifests, the main sink's and each branch sink's. A shard keeps its journal until
        // `merge`: a requeued shard then skips all it finished.
        let record = crate::io::shards::ShardRecord {
            shard,
            fingerprint: plan.fingerprint.clone(),
            files: all_main.into_iter().filter(|f| !f.is_empty()).collect(),
            branches: plan
                .branches
                .iter()
                .zip(branch_all)
                .map(|(br, files)| crate::io::shards::BranchRecord::new(&br.dir, files))
                .collect(),
            documents_in: counts.docs_in,
            documents_out: counts.docs_out,
            rejected: counts.rejected,
            failed: counts.failed,
            dedup: dedup.and_then(|s| serde_json::to_value(s).ok()),
        };
        record.save(&plan.output_dir)?;
    } else {
        finish_sink(&plan.output_dir, &plan.prior_manifest, plan.spec.sink.mode, all_main)?;
        for (br, all) in plan.branches.iter().zip(branch_all) {
            finish_sink(&br.dir, &br.prior_manifest, br.sink.mode, all)?;
        }
        Journal::remove(&plan.output_dir, &plan.journal_name());
    }
    Ok((outputs, branch_outputs))
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
