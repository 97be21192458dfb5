//! What a finished run reports: per-stage counters, worker re-allocations, dead letters,
//! the files written. Serialized as `_summary.json`.

use std::sync::atomic::{AtomicU64, Ordering};

use curator_core::pipeline::ExecutionMode;

use crate::io::writer::WrittenFile;
use crate::metrics::RunMetrics;
use crate::plan::Plan;

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
    /// CPU seconds the stage's calls used (in the host's threads or its worker processes);
    /// for GPU stages, wall seconds inside calls (their work is on the device). Unlike wall
    /// time, this does not grow when workers outnumber cores and wait for one.
    pub busy_s: f64,
    /// Wall-clock seconds the stage's workers spent inside calls, summed over workers.
    pub wall_busy_s: f64,
    /// Seconds the stage's workers were alive but waiting.
    pub idle_s: f64,
    /// Documents per busy second (`docs_in / busy_s`): what one core (or one GPU worker) does.
    pub docs_per_s: f64,
    /// Workers at the end of the run, and the most it had.
    pub workers: usize,
    pub max_workers: usize,
    /// Totals of the columns its manifest names in `sums` (tokens a model server counted).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sums: std::collections::BTreeMap<String, i64>,
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
    /// Peak resident memory of the host and its worker processes together, in MiB (sampled;
    /// Linux, 0 elsewhere).
    pub peak_rss_mb: f64,
    pub stages: Vec<StageStats>,
    pub outputs: Vec<WrittenFile>,
    /// Files written by branch sinks (`rejected:` / `tee:`), per branch in stage order.
    pub branch_outputs: Vec<Vec<WrittenFile>>,
    /// Stages whose compiled artifact came from the on-disk cache.
    pub cached_plugins: usize,
    /// Worker re-allocations (the first entry is the initial allocation).
    pub scaling: Vec<ScaleEvent>,
    /// The dedup step's statistics, when the pipeline has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dedup: Option<crate::dedup::DedupStats>,
}

impl RunSummary {
    /// Token ids a tokenized sink wrote in this run (its files list them per file).
    pub fn tokens(&self) -> Option<u64> {
        self.outputs.iter().filter_map(|f| f.tokens).reduce(|a, b| a + b)
    }
}

/// Per-stage counters at the end of a run.
pub(crate) fn stage_stats(plan: &Plan, metrics: &RunMetrics, scaling: &[ScaleEvent]) -> Vec<StageStats> {
    plan.stages
        .iter()
        .zip(metrics.stages.iter())
        .enumerate()
        .map(|(k, (s, c))| {
            let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
            let (docs_in, docs_out, failed) = (load(&c.docs_in), load(&c.docs_out), load(&c.failed));
            let wall_busy_s = load(&c.busy_ns) as f64 / 1e9;
            let busy_s = if s.resources.needs_gpu() { wall_busy_s } else { load(&c.cpu_ns) as f64 / 1e9 };
            StageStats {
                label: s.label.clone(),
                plugin: s.plugin.path.display().to_string(),
                docs_in,
                docs_out,
                dropped: docs_in.saturating_sub(docs_out + failed),
                failed,
                batches: load(&c.batches),
                busy_s,
                wall_busy_s,
                idle_s: (load(&c.alive_ns) as f64 / 1e9 - wall_busy_s).max(0.0),
                docs_per_s: if busy_s > 0.0 { docs_in as f64 / busy_s } else { 0.0 },
                workers: scaling.last().and_then(|e| e.workers.get(k).copied()).unwrap_or(0),
                max_workers: scaling.iter().filter_map(|e| e.workers.get(k).copied()).max().unwrap_or(0),
                sums: c.sums.lock().map(|m| m.clone()).unwrap_or_default(),
            }
        })
        .collect()
}
