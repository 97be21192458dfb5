//! A pipeline's dedup step at planning: where its barrier falls, its work directory, the
//! corpus estimated and the capacity planned for this machine's memory, and which
//! `--phase` / `--shard` combinations it accepts.

use std::path::PathBuf;

use curator_core::{PipelineSpec, SpecError};

use super::{PlanError, PlanOptions, PlannedPartition};
use crate::dedup::human;
use crate::io::{InputFile, Loc};

/// A dedup step: where its barrier falls and how it will run on this machine.
#[derive(Debug, Clone)]
pub struct PlannedDedup {
    /// Index of the step in the pipeline's `stages`.
    pub step: usize,
    pub label: String,
    pub spec: curator_core::DedupSpec,
    /// Planned stages in front of the barrier (`stages[..before]`); the rest run after it.
    pub before: usize,
    /// Every partition of the input (the step needs all of them, even those a resumed run
    /// already wrote out).
    pub all_partitions: Vec<PlannedPartition>,
    /// Local directory of the step's spill and checkpoints (for a phase that exchanges its
    /// work through an object store, its scratch copy).
    pub work_dir: PathBuf,
    /// The object-store prefix the phases exchange their work through (`dedup::exchange`).
    pub exchange: Option<Loc>,
    /// The corpus as estimated from file sizes and a sample.
    pub corpus: curator_core::dedup::Corpus,
    /// Bands per iteration, partitions, memory and disk of each phase.
    pub capacity: curator_core::dedup::DedupPlan,
    /// The memory the capacity was planned for, in bytes.
    pub memory_bytes: u64,
}

impl PlannedDedup {
    /// What the step's phases need of it.
    pub fn step_plan(&self) -> crate::dedup::StepPlan<'_> {
        crate::dedup::StepPlan { spec: &self.spec, capacity: &self.capacity }
    }
}

/// The dedup step in front of planned stage `before`, checked against this machine's memory
/// (or `opts.memory_bytes`). `all_partitions`: every partition of the input.
pub(super) fn plan_dedup_step(
    spec: &PipelineSpec,
    label: &str,
    before: usize,
    all_partitions: Vec<PlannedPartition>,
    inputs: &[InputFile],
    output_dir: &Loc,
    opts: PlanOptions<'_>,
) -> Result<Option<PlannedDedup>, PlanError> {
    let Some((step, d)) = spec.dedup() else { return Ok(None) };
    if cfg!(not(feature = "parquet")) {
        return Err(SpecError::new(label, format!("stages[{step}].dedup"), crate::dedup::NO_PARQUET).into());
    }
    let memory = opts.memory_bytes.unwrap_or_else(crate::os::available_memory_bytes);
    let super::workdirs::WorkPlace { local: work_dir, exchange } = super::workdirs::dedup_work(spec, output_dir, opts.phase.is_some())
        .map_err(|e| SpecError::new(label, "execution.spill_dir", e.to_string()))?;
    let corpus = crate::dedup::estimate::corpus(inputs, spec.source.limit);
    let capacity = curator_core::dedup::plan_dedup(&d.dedup, corpus, memory);
    if !capacity.fits && !opts.ignore_memory_plan {
        return Err(SpecError::new(
            label,
            format!("stages[{step}].dedup"),
            format!(
                "needs about {} of memory at its peak ({}), more than the {} this machine allows a dedup phase ({:.0} % of {}); lower bands_per_iteration, raise partitions, or pass --ignore-memory-plan (see `curator-host plan`)",
                human(capacity.peak_bytes),
                capacity.phases.iter().max_by_key(|p| p.bytes).map(|p| p.formula.as_str()).unwrap_or(""),
                human(capacity.budget_bytes),
                curator_core::dedup::DEDUP_MEMORY_SHARE * 100.0,
                human(memory),
            ),
        )
        .into());
    }
    Ok(Some(PlannedDedup {
        step,
        label: spec.stages[step].label().to_string(),
        spec: d.dedup.clone(),
        before,
        all_partitions,
        work_dir,
        exchange,
        corpus,
        capacity,
        memory_bytes: memory,
    }))
}

/// Whether `--phase` and `--shard` fit the pipeline's dedup step (or its absence).
pub(super) fn check_phase(label: &str, dedup: Option<&PlannedDedup>, opts: PlanOptions<'_>) -> Result<(), PlanError> {
    match (dedup, opts.phase) {
        (Some(d), None) if opts.shard.is_some() => {
            return Err(SpecError::new(
                label,
                format!("stages[{}].dedup", d.step),
                "a dedup step needs every partition: run it sharded in phases (--phase docs, buckets, components, output; docs/src/cluster.md)",
            )
            .into());
        }
        (Some(d), Some(_)) if d.spec.method == curator_core::DedupMethod::Semantic && d.spec.device == curator_core::dedup::Device::Gpu => {
            return Err(SpecError::new(
                label,
                format!("stages[{}].dedup.device", d.step),
                "a semantic step in phases fits k-means on the bucket shards' CPUs (exact sums across machines); set device: cpu or auto, or run it on one machine for the GPU",
            )
            .into());
        }
        (None, Some(p)) => {
            return Err(SpecError::new(label, "stages", format!("--phase {}: the pipeline has no dedup step", p.name())).into());
        }
        _ => {}
    }
    if let (Some(p), Some(s)) = (opts.phase, opts.shard)
        && !p.sharded()
        && s.count > 1
    {
        return Err(SpecError::new(label, "stages", format!("--phase {} is one job; it takes no --shard", p.name())).into());
    }
    Ok(())
}
