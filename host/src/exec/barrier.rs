//! A pipeline with a dedup step, run as three scheduling steps around its barrier:
//!
//! 1. **documents**: the stages in front of the barrier (with `minhash` for fuzzy), from the
//!    source into the step's documents spill, one marker per finished partition;
//! 2. **the step's phases** (`crate::dedup::find_duplicates`), each checkpointed;
//! 3. **output**: the spilled documents replayed with the verdict applied
//!    (`DedupReplay`) through the stages after the barrier into the sink, journaled as any
//!    run; then `_duplicates/`.
//!
//! A killed run rerun with the same command redoes only unfinished partitions of step 1,
//! unfinished phases of step 2 and unjournaled partitions of step 3.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use curator_core::scaling::Capacity;

use super::graph::{Sink, Source, run_graph};
use super::spill::SpillDir;
use super::summary::ScaleEvent;
use super::write::Written;
use super::{Ctx, RunError};
use crate::dedup::work::{Work, fingerprint};
use crate::dedup::{DedupReplay, DedupStats, find_duplicates, writes_documents};
use crate::io::journal::Journal;
use crate::plan::{Plan, PlannedDedup};

/// What the three steps did: (documents read, lines rejected), what the sink got, the step's
/// statistics, and its work directory (removed by the caller once the run is complete).
pub(super) struct Barrier {
    pub read: (u64, u64),
    pub written: Written,
    pub stats: DedupStats,
    pub work: Work,
}

pub(super) fn run_with_dedup(
    plan: &Plan,
    d: &PlannedDedup,
    new_ctx: &dyn Fn(Plan) -> Arc<Ctx>,
    capacity: &Capacity,
    t0: Instant,
    scaling: &mut Vec<ScaleEvent>,
) -> Result<Barrier, RunError> {
    let work = Work::open(&d.work_dir, &fingerprint(&plan.spec, d.step, &plan.inputs))?;
    let docs_dir = work.path("docs");
    let reader = SpillDir::open(docs_dir.clone(), None)?;
    let todo: Vec<_> = d.all_partitions.iter().filter(|p| !reader.done_marker(p.index).exists()).cloned().collect();
    let mut read = (0, 0);
    let docs_clock = crate::dedup::PhaseClock::start("documents", None);
    let docs_resumed = todo.is_empty();
    if !todo.is_empty() {
        tracing::info!(
            partitions = todo.len(),
            of = d.all_partitions.len(),
            "dedup {:?}: documents through {} stage(s) into {}",
            d.label,
            d.before,
            docs_dir.display()
        );
        for p in &todo {
            reader.clear_partition(p.index)?;
        }
        let spill = SpillDir::open(docs_dir.clone(), Some(todo.iter().map(|p| p.index).collect()))?;
        let mut front = plan.clone();
        front.partitions = todo;
        let ctx = new_ctx(front);
        let stages: Vec<usize> = (0..d.before).collect();
        read = run_graph(&ctx, Source::Read, &stages, Sink::Spill(&spill), capacity, t0, scaling)?.0;
    } else {
        tracing::info!("dedup {:?}: every partition's documents were spilled by an earlier run", d.label);
    }
    crate::dedup::crash_point("docs");
    let ctx = new_ctx(plan.clone());
    let mut docs_stats = crate::dedup::DedupStats::default();
    docs_clock.finish(&mut docs_stats, docs_resumed);
    let (index, verdict, mut stats) = find_duplicates(d, &work, &reader, &ctx.metrics)?;
    stats.phases.splice(0..0, docs_stats.phases);
    let out_clock = crate::dedup::PhaseClock::start("output", None);
    let mut written = Written::default();
    if writes_documents(d.spec.action) && !plan.partitions.is_empty() {
        let replay = DedupReplay {
            docs: &reader,
            index: &index,
            verdict: &verdict,
            action: d.spec.action,
            local: plan.partitions.iter().enumerate().map(|(k, p)| (p.index, k)).collect(),
            drop: if d.spec.method == curator_core::DedupMethod::Fuzzy { vec![crate::dedup::SIGNATURE] } else { Vec::new() },
        };
        let journal = Mutex::new(Journal::open_for_append(&plan.output_dir, &plan.journal_name())?);
        let stages: Vec<usize> = (d.before..plan.stages.len()).collect();
        written = run_graph(&ctx, Source::Replay(&replay), &stages, Sink::Write(&journal), capacity, t0, scaling)?.1;
    }
    out_clock.finish(&mut stats, false);
    let dup_clock = crate::dedup::PhaseClock::start("duplicates", None);
    let listed = crate::dedup::write_duplicates(&plan.output_dir, &reader, &index, &verdict, &mut stats, dup_clock)?;
    tracing::info!("dedup {:?}: {listed} duplicate id(s) in {}", d.label, plan.output_dir.join("_duplicates").display());
    crate::dedup::crash_point("duplicates");
    Ok(Barrier { read, written, stats, work })
}
