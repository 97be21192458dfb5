//! `run`: a checked plan from start to summary. Compiles the stages, starts the side threads
//! (progress, metrics), runs the graph once (streaming) or once per stage (batch mode,
//! through spill directories), then writes each sink's manifest.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use curator_core::pipeline::{ExecutionMode, WriteMode};
use curator_core::shard::Phase;

use super::graph::{Sink, Source, run_graph};
use super::progress::spawn_status;
use super::summary::RunSummary;
use super::{Ctx, Loaded, RunError, RunOptions, StopOnDrop};
use crate::io::IoError;
use crate::io::journal::{Journal, remove_stale_spools};
use crate::io::writer::{OutputManifest, WrittenFile};
use crate::metrics::RunMetrics;
use crate::plan::{Plan, merged_manifest};
use crate::task::SpillDir;
use crate::task::SpillReplay;
use crate::wasm::WasmRuntime;

/// Run a checked plan.
pub fn run(plan: &Plan, runtime: &WasmRuntime, opts: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    // A shard (or a phase sharded over partitions) owns its partitions' outputs only; the
    // other phases of a dedup step leave the output directories alone.
    if plan.phase.is_none_or(|(p, _)| p.over_partitions()) {
        let owned: Option<Vec<String>> = plan
            .shard
            .map(|_| plan.partitions.iter().map(|p| p.output_rel.rsplit('/').next().unwrap_or(&p.output_rel).to_string()).collect());
        remove_stale_spools(&plan.output_dir, owned.as_deref());
        for b in &plan.branches {
            remove_stale_spools(&b.dir, owned.as_deref());
        }
    }
    let compiled = Arc::new(super::compile(plan, runtime)?);
    let cached_plugins = compiled
        .iter()
        .filter(|c| matches!(c, Loaded::Wasm(c) if c.from_cache) || matches!(c, Loaded::WasmWorker { from_cache: true }))
        .count();
    let capacity = crate::plan::capacity::capacity(plan, opts.workers);
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
    let peak_rss = Arc::new(AtomicU64::new(0));
    spawn_status(&metrics, &stop_side_threads, plan.spec.execution.logging_interval_s, queue_capacity, &peak_rss);
    let mut branches_of = vec![Vec::new(); plan.stages.len()];
    for (b, br) in plan.branches.iter().enumerate() {
        branches_of[br.stage].push((b, br.kind));
    }
    let allowed_cpus = crate::os::allowed_cpus();
    let cache_dir: Option<PathBuf> = runtime.cache_dir().map(Into::into);
    // One context per scheduling step (a dedup step runs several over different partitions);
    // counters are shared by all of them.
    let new_ctx = |plan: Plan| {
        Arc::new(Ctx {
            gpu_slots: plan.stages.iter().map(|s| Mutex::new(s.gpu.clone())).collect(),
            plan,
            compiled: compiled.clone(),
            allowed_cpus: allowed_cpus.clone(),
            cache_dir: cache_dir.clone(),
            metrics: metrics.clone(),
            strict: opts.strict,
            branches_of: branches_of.clone(),
            cancel: AtomicBool::new(false),
            stop_sources: AtomicBool::new(false),
            failure: Mutex::new(None),
            docs_seen: AtomicU64::new(0),
            docs_failed: AtomicU64::new(0),
            queue_capacity,
        })
    };
    let ctx = new_ctx(plan.clone());
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
    let mut dedup = None;
    let (read, written) = match (&plan.dedup, policy.execution_mode) {
        (Some(d), _) => {
            let b = match plan.phase {
                Some(phase) => super::barrier::run_phase(plan, d, phase, &new_ctx, &capacity, started, &mut scaling)?,
                None => super::barrier::run_with_dedup(plan, d, &new_ctx, &capacity, started, &mut scaling)?,
            };
            dedup = Some((b.stats, b.work));
            (b.read, b.written)
        }
        (None, ExecutionMode::Batch) if plan.stages.len() > 1 => {
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
                let journal =
                    if last { Mutex::new(Journal::open_for_append(&plan.output_dir, &plan.journal_name())?) } else { Mutex::new(None) };
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
            let journal = Mutex::new(Journal::open_for_append(&plan.output_dir, &plan.journal_name())?);
            run_graph(&ctx, Source::Read, &all, Sink::Write(&journal), &capacity, started, &mut scaling)?
        }
    };
    let (docs_in, rejected) = read;
    let mut entries = written.entries;
    entries.sort_by_key(|(pi, _)| *pi);
    let docs_out = written.docs_out;
    let failed = ctx.docs_failed.load(Ordering::Relaxed);

    let outputs: Vec<WrittenFile> = entries.iter().map(|(_, e)| e.file.clone()).filter(|f| !f.is_empty()).collect();
    let mut all_main = plan.resumed.clone();
    all_main.extend(outputs.iter().cloned());
    // A phase before `output` writes only into the shared work directory (and `_duplicates/`).
    let writes_sink = plan.phase.is_none_or(|(p, _)| p == Phase::Output);
    // Each branch sink's files: this run's, and with those of a resumed run.
    let mut branch_outputs = Vec::with_capacity(plan.branches.len());
    let mut branch_all = Vec::with_capacity(plan.branches.len());
    for (b, br) in plan.branches.iter().enumerate().filter(|_| writes_sink) {
        let files: Vec<WrittenFile> = entries.iter().filter_map(|(_, e)| e.branches.get(b).cloned()).filter(|f| !f.is_empty()).collect();
        let mut all = br.resumed.clone();
        all.extend(files.iter().cloned());
        branch_outputs.push(files);
        branch_all.push(all.into_iter().filter(|f| !f.is_empty()).collect::<Vec<_>>());
    }
    if !writes_sink {
    } else if let Some(shard) = plan.shard {
        // Shards share the directories: each records what it wrote; `merge` writes the
        // manifests, the main sink's and each branch sink's.
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
            documents_in: docs_in,
            documents_out: docs_out,
            rejected,
            failed: ctx.docs_failed.load(Ordering::Relaxed),
        };
        record.save(&plan.output_dir)?;
    } else {
        finish_sink(&plan.output_dir, &plan.prior_manifest, plan.spec.sink.mode, all_main)?;
        for (br, all) in plan.branches.iter().zip(branch_all) {
            finish_sink(&br.dir, &br.prior_manifest, br.sink.mode, all)?;
        }
    }
    // A shard keeps its journal until `merge`: a requeued shard then skips all it finished.
    if plan.shard.is_none() && writes_sink {
        Journal::remove(&plan.output_dir, &plan.journal_name());
    }
    // The work directory of a phased step is shared by every job; remove it after `merge`.
    let dedup = dedup.map(|(stats, work)| {
        if plan.phase.is_none() {
            work.remove();
        }
        stats
    });

    let stage_stats = super::summary::stage_stats(plan, &metrics, &scaling);
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
        peak_rss_mb: (peak_rss.load(Ordering::Relaxed).max(crate::os::tree_rss_bytes()).max(crate::os::own_peak_rss_bytes())) as f64
            / (1u64 << 20) as f64,
        stages: stage_stats,
        outputs,
        branch_outputs,
        cached_plugins,
        scaling,
        dedup,
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
