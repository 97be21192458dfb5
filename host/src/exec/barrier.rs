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
//!
//! `run_phase` runs one of them as one job of a cluster (`run --phase P --shard I/N`, see
//! `curator_core::shard::Phase`), every job sharing the work directory.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use curator_core::shard::{Phase, Shard};

use super::graph::{Sink, Source, run_graph};
use super::stream_dedup::ExactStream;
use super::write::Written;
use super::{RunError, Schedule};
use crate::dedup::exchange::Exchange;
use crate::dedup::work::{Work, fingerprint};
use crate::dedup::{DedupReplay, DedupStats, find_duplicates, writes_documents};
use crate::io::journal::Journal;
use crate::plan::{Plan, PlannedDedup};
use crate::task::{Resident, SpillDir};

/// What the three steps did: (documents read, lines rejected), what the sink got, the step's
/// statistics, and its work directory (removed by the caller once the run is complete).
pub(super) struct Barrier {
    pub read: (u64, u64),
    pub written: Written,
    pub stats: DedupStats,
    pub work: Work,
}

/// The whole step on this machine: documents, the step's phases, output, `_duplicates/`.
pub(super) fn run_with_dedup(plan: &Plan, d: &PlannedDedup, sched: &mut Schedule<'_>) -> Result<Barrier, RunError> {
    let work = Work::open(&d.work_dir, &fingerprint(&plan.spec, d.step, &plan.inputs), false)?;
    let reader = SpillDir::open(work.path(crate::dedup::work::DOCS), None)?;
    let mut docs_stats = DedupStats::default();
    // `identify` writes no documents: nothing to keep them for.
    let budget = if writes_documents(d.spec.action) { resident_budget(d) } else { 0 };
    let resident = Arc::new(Resident::new(budget));
    let stream = streams_output(plan, d, &reader, budget)
        .then(|| -> Result<_, RunError> {
            let journal = Journal::open_for_append(&plan.output_dir, &plan.journal_name())?;
            let order = d.all_partitions.iter().map(|p| p.index).collect();
            let hash = d.spec.hash.unwrap_or_default();
            Ok(Arc::new(ExactStream::new((sched.new_ctx)(plan.clone()), journal, resident.clone(), hash, order)))
        })
        .transpose()?;
    let read = spill_documents(plan, d, &reader, sched, &mut docs_stats, Some(&resident).filter(|_| budget > 0), stream.as_ref())?;
    let streamed = stream.map(|s| s.finish()).transpose()?;
    let ctx = (sched.new_ctx)(plan.clone());
    let (index, verdict, mut stats) = find_duplicates(d.step_plan(), &work, &reader, &ctx.metrics)?;
    stats.phases.splice(0..0, docs_stats.phases);
    let (held, bytes, refused) = resident.counts();
    tracing::info!(
        "dedup {:?}: {held} batch(es) of documents ({}) kept in memory for the output, {refused} that did not fit read again",
        d.label,
        crate::dedup::human(bytes)
    );
    let written = match streamed {
        None => write_output(plan, d, &reader, (&index, &verdict), &mut stats, sched, Some(&resident))?,
        Some(streamed) => {
            tracing::info!(
                "dedup {:?}: {} of {} partition(s) written while their documents were read ({} duplicate(s) removed there)",
                d.label,
                streamed.partitions.len(),
                plan.partitions.len(),
                streamed.removed
            );
            // The output step writes the partitions left, numbered in a plan of their own;
            // what it commits is numbered back as in the run's plan.
            let done: HashSet<usize> = streamed.partitions.iter().copied().collect();
            let mut rest = plan.clone();
            rest.partitions.retain(|p| !done.contains(&p.index));
            let at: std::collections::HashMap<usize, usize> = plan.partitions.iter().enumerate().map(|(k, p)| (p.index, k)).collect();
            let mut written = write_output(&rest, d, &reader, (&index, &verdict), &mut stats, sched, Some(&resident))?;
            for (pi, _) in &mut written.entries {
                *pi = rest.partitions.get(*pi).and_then(|p| at.get(&p.index)).copied().unwrap_or(*pi);
            }
            written.entries.extend(streamed.written.entries);
            written.docs_out += streamed.written.docs_out;
            written
        }
    };
    drop(resident);
    let dup_clock = crate::dedup::PhaseClock::start(curator_core::dedup::DedupPhase::Duplicates, None);
    let listed = crate::dedup::write_duplicates(&plan.output_dir, &reader, &index, &verdict, &mut stats, dup_clock)?;
    tracing::info!("dedup {:?}: {listed} duplicate id(s) in {}", d.label, plan.output_dir.join("_duplicates").display());
    crate::os::crash_point("duplicates");
    Ok(Barrier { read, written, stats, work })
}

/// One phase of the step (`run --phase`), as one job of a cluster: the work directory is
/// shared by every job and outlives each of them.
pub(super) fn run_phase(
    plan: &Plan,
    d: &PlannedDedup,
    (phase, shard): (Phase, Shard),
    sched: &mut Schedule<'_>,
) -> Result<Barrier, RunError> {
    let exchange = match &d.exchange {
        Some(remote) => Some(pull(plan, d, (phase, shard), remote)?),
        None => None,
    };
    let before = exchange.as_ref().map(Exchange::snapshot).transpose()?;
    let work = Work::open(&d.work_dir, &fingerprint(&plan.spec, d.step, &plan.inputs), true)?;
    let reader = SpillDir::open(work.path(crate::dedup::work::DOCS), None)?;
    let ctx = (sched.new_ctx)(plan.clone());
    let mut read = (0, 0);
    let mut written = Written::default();
    tracing::info!("dedup {:?}: phase {} as shard {} of {}", d.label, phase.name(), shard.index, shard.count);
    let stats = match phase {
        Phase::Docs => {
            let mut stats = DedupStats::default();
            read = spill_documents(plan, d, &reader, sched, &mut stats, None, None)?;
            let owned: HashSet<usize> = d.all_partitions.iter().map(|p| p.index).collect();
            let scan = crate::dedup::scan_shard(d.step_plan(), &work, &reader, shard, |p| owned.contains(&p), &ctx.metrics)?;
            let part = crate::dedup::scans::part(&work, shard)?;
            if read != (0, 0) || !part.path(READ).exists() {
                crate::dedup::work::write_atomic(&part.path(READ), &serde_json::to_vec(&read).unwrap_or_default())?;
            }
            DedupStats { phases: [stats.phases, scan.phases].concat(), ..scan }
        }
        Phase::Buckets => {
            // Semantic dedup's shards meet while they run: in the work directory, or in the
            // object store it is exchanged through.
            let root = d.exchange.clone().unwrap_or_else(|| crate::io::Loc::Local(work.dir.clone()));
            let meet = crate::dedup::rendezvous::Rendezvous::new(root);
            crate::dedup::bucket_shard(d.step_plan(), &work, shard, None, Some(&reader), &meet, &ctx.metrics)?
        }
        Phase::Components => {
            let (index, verdict, mut stats) = crate::dedup::components(d.step_plan(), &work, &reader, None, true, &ctx.metrics)?;
            crate::dedup::work::write_atomic(&work.path(crate::dedup::STATS), &serde_json::to_vec(&stats).unwrap_or_default())?;
            let dup_clock = crate::dedup::PhaseClock::start(curator_core::dedup::DedupPhase::Duplicates, None);
            crate::dedup::write_duplicates(&plan.output_dir, &reader, &index, &verdict, &mut stats, dup_clock)?;
            stats
        }
        Phase::Output => {
            let (index, verdict, mut stats) = crate::dedup::decided(&work)?;
            // What the docs shard of the same partitions read, when the shard counts agree.
            let part = work.path(&format!("scan-{}/{READ}", shard.tag()));
            read = std::fs::read(&part).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or((0, 0));
            written = write_output(plan, d, &reader, (&index, &verdict), &mut stats, sched, None)?;
            stats
        }
    };
    if let (Some(x), Some(before)) = (&exchange, &before) {
        let pushed = x.push(before)?;
        tracing::info!("dedup {:?}: {pushed} work file(s) uploaded to {}", d.label, x.remote().display());
    }
    Ok(Barrier { read, written, stats, work })
}

/// A phase's scratch copy of the work its step exchanges through `remote`: the files the
/// phase reads, and the step's layout (claimed for this machine's plan if no phase has yet).
fn pull(plan: &Plan, d: &PlannedDedup, (phase, shard): (Phase, Shard), remote: &crate::io::Loc) -> Result<Exchange, RunError> {
    let x = Exchange::open(remote.clone(), &d.work_dir)?;
    let partitions: HashSet<usize> = match phase {
        Phase::Docs => d.all_partitions.iter().map(|p| p.index).collect(),
        _ => plan.partitions.iter().map(|p| p.index).collect(),
    };
    let texts = d.spec.method == curator_core::DedupMethod::Fuzzy && d.spec.fuzzy().checks_pairs();
    let owned = crate::dedup::exchange::Owned { phase, shard, partitions: &partitions, texts };
    let pulled = x.pull(|rel| crate::dedup::exchange::reads(&owned, rel))?;
    tracing::info!("dedup {:?}: {pulled} work file(s) fetched from {} into {}", d.label, remote.display(), d.work_dir.display());
    if !d.work_dir.join(Work::LAYOUT).exists() {
        x.claim(Work::LAYOUT, &crate::dedup::work::layout_bytes(&crate::dedup::planned_layout(d.step_plan())))?;
    }
    Ok(x)
}

/// Whether the step's output is written during its documents phase (`stream_dedup.rs`):
/// exact dedup that removes duplicates, no stage after the step, room to keep batches in
/// memory, one machine, and a documents phase that reads every partition now (a resumed one
/// would not see the keys of the partitions an earlier run spilled). `CURATOR_DEDUP_STREAM=0`
/// turns it off.
fn streams_output(plan: &Plan, d: &PlannedDedup, reader: &SpillDir, budget: u64) -> bool {
    d.spec.method == curator_core::DedupMethod::Exact
        && d.spec.action == curator_core::DedupAction::Remove
        && d.before == plan.stages.len()
        && budget > 0
        && plan.shard.is_none()
        && std::env::var("CURATOR_DEDUP_STREAM").map_or(true, |v| v != "0")
        && d.all_partitions.iter().all(|p| !reader.done_marker(p.index).exists())
}

/// Bytes of documents the documents phase keeps for the output: the plan's
/// (`DedupPlan::resident_bytes`), or `CURATOR_DEDUP_RESIDENT_BYTES` (0 keeps none; tests use
/// it to force a mix of kept and re-read partitions).
fn resident_budget(d: &PlannedDedup) -> u64 {
    std::env::var("CURATOR_DEDUP_RESIDENT_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| d.capacity.resident_bytes())
}

/// What a docs shard read from its source: (documents, rejected lines).
const READ: &str = "read.json";

/// The stages in front of the barrier, from the source into the documents spill, for every
/// partition of `d.all_partitions` not spilled yet; (documents read, lines rejected).
fn spill_documents(
    plan: &Plan,
    d: &PlannedDedup,
    reader: &SpillDir,
    sched: &mut Schedule<'_>,
    stats: &mut DedupStats,
    resident: Option<&Arc<Resident>>,
    stream: Option<&Arc<ExactStream>>,
) -> Result<(u64, u64), RunError> {
    let docs_dir = reader.path().to_path_buf();
    let todo: Vec<_> = d.all_partitions.iter().filter(|p| !reader.done_marker(p.index).exists()).cloned().collect();
    let mut read = (0, 0);
    let docs_clock = crate::dedup::PhaseClock::start(curator_core::dedup::DedupPhase::Documents, None);
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
        let mut spill = SpillDir::open(docs_dir.clone(), Some(todo.iter().map(|p| p.index).collect()))?;
        if d.spec.output_rereads_source() {
            use crate::dedup::lean::{DocKey, lean_batch};
            let key = match d.spec.method {
                curator_core::DedupMethod::Fuzzy => DocKey::Bands(d.spec.fuzzy()),
                _ => DocKey::Exact(d.spec.hash.unwrap_or_default()),
            };
            spill = spill.lean(Box::new(move |b| lean_batch(b, &key)));
        }
        if let Some(r) = resident {
            spill = spill.keeping(r.clone());
        }
        if let Some(s) = stream {
            spill = spill.on_done(s.hook());
        }
        let mut front = plan.clone();
        front.partitions = todo;
        let ctx = (sched.new_ctx)(front);
        let stages: Vec<usize> = (0..d.before).collect();
        read = run_graph(&ctx, Source::Read, &stages, Sink::Spill(&spill), sched)?.0;
    } else {
        tracing::info!("dedup {:?}: every partition's documents were spilled by an earlier run", d.label);
    }
    crate::os::crash_point("docs");
    docs_clock.finish(stats, docs_resumed);
    Ok(read)
}

/// The documents with the verdict applied through the stages after the barrier into the
/// sink, for the partitions `plan.partitions` holds (journaled as any run): read from the
/// source again when the spill is lean (`dedup::lean`), else replayed from the spill.
fn write_output(
    plan: &Plan,
    d: &PlannedDedup,
    reader: &SpillDir,
    (index, verdict): (&crate::dedup::Index, &crate::dedup::Verdict),
    stats: &mut DedupStats,
    sched: &mut Schedule<'_>,
    resident: Option<&Arc<Resident>>,
) -> Result<Written, RunError> {
    let out_clock = crate::dedup::PhaseClock::start(curator_core::dedup::DedupPhase::Output, None);
    let mut written = Written::default();
    if writes_documents(d.spec.action) && !plan.partitions.is_empty() {
        let replay = DedupReplay {
            docs: reader,
            index,
            verdict,
            action: d.spec.action,
            local: plan.partitions.iter().enumerate().map(|(k, p)| (p.index, k)).collect(),
            drop: match d.spec.method {
                curator_core::DedupMethod::Fuzzy => vec![crate::dedup::SIGNATURE],
                _ => vec![crate::dedup::lean::KEY],
            },
            resident: resident.map(|r| r.as_ref()),
        };
        let journal = Mutex::new(Journal::open_for_append(&plan.output_dir, &plan.journal_name())?);
        let stages: Vec<usize> = (d.before..plan.stages.len()).collect();
        let ctx = (sched.new_ctx)(plan.clone());
        let source = if index.any_lean() {
            tracing::info!(
                "dedup {:?}: the output reads the source again where the documents phase kept no batch in memory (the documents spill holds no text)",
                d.label
            );
            Source::ReadAgain(&replay)
        } else {
            Source::Replay(&replay)
        };
        written = run_graph(&ctx, source, &stages, Sink::Write(&journal), sched)?.1;
    }
    out_clock.finish(stats, false);
    Ok(written)
}
