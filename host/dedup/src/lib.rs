//! `curator-dedup`, a crate under the host (re-exported as `curator_host::dedup`): deduplication, the mechanism: the phases of a `- dedup:` step over the documents spilled
//! in front of its barrier. What a step means, which document survives and how much memory
//! each phase may take are decided in `curator_core::dedup`; this crate carries it out.
//!
//! ```text
//! docs spill ─▶ scan ─▶ exact: keys-P.bin (hash, position) ─▶ group ──────────────┐
//!                   └─▶ fuzzy: sigs.bin ─▶ buckets (bands_per_iteration at a time) │
//!                                          ─▶ edges-I.bin ─▶ verify (Jaccard) ─▶ components
//!                                                                                  ▼
//!                              groups.bin (position, survivor) ─▶ _duplicates/ + replay
//! ```
//!
//! Every phase writes its files under temporary names, renames them, then writes a marker
//! (`work.rs`); a rerun skips phases whose marker exists.

mod buckets;
pub mod components;
#[cfg(feature = "parquet")]
mod duplicates;
#[cfg(not(feature = "parquet"))]
#[path = "duplicates_absent.rs"]
mod duplicates;
pub mod estimate;
mod exact;
pub mod exchange;
mod fuzzy;
mod index;
mod keys;
pub mod lean;
mod output;
pub mod rendezvous;
pub mod scans;
pub mod semantic;
mod semantic_shards;
pub mod verify;
pub mod work;

use curator_io as io;
use curator_io::os;
use curator_run::{gpu, metrics, task};

use std::sync::atomic::Ordering;
use std::time::Instant;

use curator_core::dedup::DedupPhase;
use curator_core::shard::Shard;
use curator_core::{DedupAction, DedupMethod};

pub use duplicates::write_duplicates;
pub use index::Index;
pub use keys::SIGNATURE;
pub use output::DedupReplay;
pub use output::Verdict;

/// Why a build without the `parquet` feature cannot run a dedup step.
pub const NO_PARQUET: &str = concat!("a dedup step writes its duplicates as Parquet (`_duplicates/`): ", curator_io::not_built!("parquet"));

use crate::io::IoError;
use crate::metrics::RunMetrics;
use crate::task::SpillDir;
use work::{Layout, Work};

/// Why a dedup phase failed.
#[derive(Debug, thiserror::Error)]
pub enum DedupError {
    #[error("dedup: {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("dedup: {0}")]
    Spill(#[from] IoError),
    #[error("dedup: {path}: {message}")]
    Data { path: String, message: String },
    #[error("dedup: {0} documents reached the step; one step handles at most {max}", max = curator_core::dedup::MAX_DOCS)]
    TooManyDocs(u64),
}

/// What a dedup step found and did, for `_summary.json` and the end-of-run table.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct DedupStats {
    pub method: String,
    pub action: String,
    /// Documents that reached the step.
    pub documents: u64,
    /// Groups of two or more documents.
    pub groups: u64,
    /// Documents `remove` drops (every member of a group but its survivor).
    pub duplicates: u64,
    pub largest_group: u64,
    /// Fuzzy: bands per pass, passes, hash partitions.
    pub bands_per_iteration: usize,
    pub iterations: usize,
    pub partitions: usize,
    /// Fuzzy: distinct pairs found in LSH buckets, and those whose Jaccard passed.
    pub candidate_pairs: u64,
    pub verified_pairs: u64,
    /// Fuzzy: candidate pairs whose signatures left doubt, compared on their shingle sets.
    pub text_checks: u64,
    /// Seconds and peak resident memory (bytes) of each phase run in this process.
    pub phases: Vec<PhaseStats>,
    /// Semantic: clusters, duplicates at each eps, the largest cluster, per-cluster counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic: Option<serde_json::Value>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PhaseStats {
    pub phase: DedupPhase,
    pub seconds: f64,
    pub peak_rss_bytes: u64,
    /// Resident memory when the phase started (what earlier phases left: the process, the
    /// allocator's free lists); the phase's own peak is `peak_rss_bytes` minus this.
    pub start_rss_bytes: u64,
    /// `plan`'s estimate for this phase, when it makes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_bytes: Option<u64>,
    /// Whether the phase was done by an earlier (interrupted) run.
    pub resumed: bool,
}

/// Sizes for people: `1.5 GiB`.
pub fn human(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", units[u]) }
}

/// Documents per text-check chunk: the plan's, or `CURATOR_DEDUP_CHECK_CHUNK` (tests use it
/// to force many chunks on small data).
fn check_chunk(planned: u64) -> u64 {
    std::env::var("CURATOR_DEDUP_CHECK_CHUNK").ok().and_then(|v| v.parse().ok()).unwrap_or(planned)
}

/// Times a phase and samples the process's peak RSS (the high-water mark is reset first
/// where the kernel allows it, so each phase reports its own).
pub struct PhaseClock {
    phase: DedupPhase,
    t0: Instant,
    planned: Option<u64>,
    start_rss: u64,
}

impl PhaseClock {
    pub fn start(phase: DedupPhase, planned: Option<u64>) -> PhaseClock {
        crate::os::release_free_memory();
        crate::os::reset_peak_rss();
        tracing::info!("dedup: {phase}");
        PhaseClock { phase, t0: Instant::now(), planned, start_rss: crate::os::own_rss_bytes() }
    }
    pub fn finish(self, stats: &mut DedupStats, resumed: bool) {
        stats.phases.push(PhaseStats {
            phase: self.phase,
            seconds: self.t0.elapsed().as_secs_f64(),
            peak_rss_bytes: crate::os::own_peak_rss_bytes(),
            start_rss_bytes: self.start_rss,
            planned_bytes: self.planned,
            resumed,
        });
    }
}

/// What a dedup phase needs of its step: the step's own settings and the capacity planning
/// gave it on this machine (bands per iteration, iterations, partitions, chunk sizes).
#[derive(Clone, Copy)]
pub struct StepPlan<'a> {
    pub spec: &'a curator_core::DedupSpec,
    pub capacity: &'a curator_core::dedup::DedupPlan,
}

/// The step's layout: what this machine's plan picked, unless the work directory recorded
/// one first (`Work::layout`).
pub fn layout(dedup: StepPlan<'_>, work: &Work) -> Result<Layout, DedupError> {
    work.layout(planned_layout(dedup))
}

/// The layout this machine's plan picked.
pub fn planned_layout(dedup: StepPlan<'_>) -> Layout {
    let cap = &dedup.capacity;
    Layout { bands_per_iteration: cap.bands_per_iteration, iterations: cap.iterations, partitions: cap.partitions }
}

fn new_stats(dedup: StepPlan<'_>, layout: Option<Layout>) -> DedupStats {
    let spec = &dedup.spec;
    let layout = layout.unwrap_or(planned_layout(dedup));
    DedupStats {
        method: format!("{:?}", spec.method).to_lowercase(),
        action: format!("{:?}", spec.action).to_lowercase(),
        bands_per_iteration: layout.bands_per_iteration,
        iterations: layout.iterations,
        partitions: layout.partitions,
        ..Default::default()
    }
}

/// Docs phase, after the documents are spilled: the keys (exact) or signatures (fuzzy) of
/// the documents of the partitions `owned` picks, into docs shard `shard`'s scan directory.
pub fn scan_shard(
    dedup: StepPlan<'_>,
    work: &Work,
    docs: &SpillDir,
    shard: Shard,
    owned: impl Fn(usize) -> bool,
    metrics: &RunMetrics,
) -> Result<DedupStats, DedupError> {
    let layout = layout(dedup, work)?;
    let mut stats = new_stats(dedup, Some(layout));
    let part = scans::part(work, shard)?;
    let resumed = part.done("scan");
    let clock = PhaseClock::start(DedupPhase::Scan, None);
    let index = match dedup.spec.method {
        DedupMethod::Exact => exact::scan(&part, docs, owned, dedup.spec.hash.unwrap_or_default(), layout.partitions, metrics)?,
        DedupMethod::Fuzzy => fuzzy::scan(&part, docs, owned, &dedup.spec.fuzzy(), metrics)?,
        DedupMethod::Semantic => semantic::scan(&part, docs, owned, &dedup.spec.semantic(), metrics)?.0,
    };
    clock.finish(&mut stats, resumed);
    stats.documents = index.documents();
    Ok(stats)
}

/// Buckets phase: the LSH passes bucket shard `shard` owns (`curator_core::shard::owns_pass`),
/// over the signatures of every docs shard (`count` of them when known). Exact dedup has no
/// buckets.
///
/// With `check` (a phased step), the shard also checks its passes' candidate pairs against
/// the documents there (`verify::verify_pass`), so that `components` only joins.
///
/// Semantic dedup's bucket shards are its k-means shards (`semantic_shards`): they meet
/// through `meet` (the work directory, or its object-store prefix) between rounds.
pub fn bucket_shard(
    dedup: StepPlan<'_>,
    work: &Work,
    shard: Shard,
    count: Option<usize>,
    check: Option<&SpillDir>,
    meet: &rendezvous::Rendezvous,
    metrics: &RunMetrics,
) -> Result<DedupStats, DedupError> {
    let layout = layout(dedup, work)?;
    let mut stats = new_stats(dedup, Some(layout));
    if dedup.spec.method == DedupMethod::Semantic {
        return semantic_shards::bucket_shard(dedup, work, meet, shard, stats);
    }
    if dedup.spec.method != DedupMethod::Fuzzy {
        return Ok(stats);
    }
    let p = dedup.spec.fuzzy();
    let scanned = scans::gather(work, count)?;
    stats.documents = scanned.index.documents();
    let records = keys::Records::of(&p);
    let sigs = scans::Sigs::open(&scanned, records.file(), records.width(&p))?;
    let planned = dedup.capacity.planned_bytes(DedupPhase::Buckets);
    let mine: Vec<usize> = (0..layout.iterations).filter(|&it| curator_core::shard::owns_pass(shard, it)).collect();
    metrics.dedup.iterations_total.store(mine.len() as u64, Ordering::Relaxed);
    for (k, &it) in mine.iter().enumerate() {
        let resumed = work.done(&format!("buckets-{it:03}"));
        let clock = PhaseClock::start(DedupPhase::Buckets, planned);
        buckets::buckets(work, &sigs, stats.documents as u32, &p, layout.bands_per_iteration, layout.partitions, it)?;
        if let Some(docs) = check {
            let chunk = check_chunk(dedup.capacity.check_docs_per_chunk);
            verify::verify_pass(work, &sigs, docs, &scanned.index, &p, it, chunk)?;
        }
        clock.finish(&mut stats, resumed);
        metrics.dedup.iterations_done.store(k as u64 + 1, Ordering::Relaxed);
    }
    Ok(stats)
}

/// Components phase: groups from the keys (exact) or from every pass's candidate pairs,
/// verified (fuzzy), over every docs shard's documents; the run-wide index and the verdict.
///
/// `checked_by_buckets`: the bucket shards checked their pairs (a phased step); else they
/// are checked here, against the documents in `docs`.
pub fn components(
    dedup: StepPlan<'_>,
    work: &Work,
    docs: &SpillDir,
    count: Option<usize>,
    checked_by_buckets: bool,
    metrics: &RunMetrics,
) -> Result<(Index, Verdict, DedupStats), DedupError> {
    let layout = layout(dedup, work)?;
    let mut stats = new_stats(dedup, Some(layout));
    let scanned = scans::gather(work, count)?;
    stats.documents = scanned.index.documents();
    let planned = |phase| dedup.capacity.planned_bytes(phase);
    let resumed = work.done("groups");
    let groups = match dedup.spec.method {
        DedupMethod::Exact => {
            let clock = PhaseClock::start(DedupPhase::Group, planned(DedupPhase::Group));
            let g = exact::group(work, &scanned, layout.partitions)?;
            clock.finish(&mut stats, resumed);
            g
        }
        DedupMethod::Semantic => {
            let clock = PhaseClock::start(DedupPhase::Components, None);
            let g = semantic_shards::join(work, &dedup.spec.semantic())?;
            clock.finish(&mut stats, resumed);
            stats.semantic = work::read_all(&work.path(semantic::STATS)).ok().and_then(|b| serde_json::from_slice(&b).ok());
            g
        }
        _ => {
            let p = dedup.spec.fuzzy();
            // The signatures only when the pairs are checked here.
            let sigs = (!checked_by_buckets && p.checks_pairs())
                .then(|| scans::Sigs::open(&scanned, keys::SIGS, p.num_hashes() * 4))
                .transpose()?;
            let clock = PhaseClock::start(DedupPhase::Components, planned(DedupPhase::Components));
            let chunk = check_chunk(dedup.capacity.check_docs_per_chunk);
            let pairs = match checked_by_buckets {
                true => fuzzy::Pairs::Checked,
                false => fuzzy::Pairs::Check { docs, sigs: sigs.as_ref(), p: &p, chunk_docs: chunk },
            };
            let found = fuzzy::components(work, &scanned.index, layout.iterations, pairs, metrics)?;
            clock.finish(&mut stats, resumed);
            stats.candidate_pairs = found.candidates;
            stats.verified_pairs = found.verified;
            stats.text_checks = found.text_checks;
            found.groups
        }
    };
    Ok((scanned.index, verdict(groups, &mut stats, metrics), stats))
}

/// The verdict of `groups`, counted into `stats` and the metrics.
fn verdict(groups: Vec<(u32, u32)>, stats: &mut DedupStats, metrics: &RunMetrics) -> Verdict {
    let verdict = Verdict::new(groups);
    stats.groups = verdict.groups();
    stats.duplicates = verdict.duplicates();
    stats.largest_group = verdict.largest_group();
    metrics.dedup.groups.store(stats.groups, Ordering::Relaxed);
    metrics.dedup.duplicates.store(stats.duplicates, Ordering::Relaxed);
    tracing::info!(
        documents = stats.documents,
        groups = stats.groups,
        duplicates = stats.duplicates,
        largest = stats.largest_group,
        "dedup: {} duplicate(s) in {} group(s)",
        stats.duplicates,
        stats.groups
    );
    verdict
}

/// What the components phase decided, for the output phase of a sharded step: the
/// run-wide index and the verdict (`groups.bin`), and the step's statistics.
pub fn decided(work: &Work) -> Result<(Index, Verdict, DedupStats), DedupError> {
    if !work.done("groups") {
        return Err(DedupError::Data {
            path: work.dir.display().to_string(),
            message: "the components phase has not finished (run --phase components first)".into(),
        });
    }
    let scanned = scans::gather(work, None)?;
    let groups = work::load_pairs(work, "groups.bin")?;
    let stats: DedupStats = work::read_all(&work.path(STATS)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    Ok((scanned.index, Verdict::new(groups), stats))
}

/// The step's statistics, as the components phase saved them for the output shards.
pub const STATS: &str = "stats.json";

/// Run the phases of `dedup` over the documents in `docs` (all partitions spilled), on this
/// machine: the docs shard 0 of 1 scan, every bucket pass, the components.
pub fn find_duplicates(
    dedup: StepPlan<'_>,
    work: &Work,
    docs: &SpillDir,
    metrics: &RunMetrics,
) -> Result<(Index, Verdict, DedupStats), DedupError> {
    if dedup.spec.method == DedupMethod::Semantic {
        return find_semantic(dedup, work, docs, metrics);
    }
    let one = Shard { index: 0, count: 1 };
    let scan = scan_shard(dedup, work, docs, one, |_| true, metrics)?;
    if scan.documents > curator_core::dedup::MAX_DOCS {
        return Err(DedupError::TooManyDocs(scan.documents));
    }
    let meet = rendezvous::Rendezvous::new(crate::io::Loc::Local(work.dir.clone()));
    let buckets = bucket_shard(dedup, work, one, Some(1), None, &meet, metrics)?;
    let (index, verdict, mut stats) = components(dedup, work, docs, Some(1), false, metrics)?;
    let mut phases = scan.phases;
    phases.extend(buckets.phases);
    phases.append(&mut stats.phases);
    stats.phases = phases;
    Ok((index, verdict, stats))
}

/// Semantic dedup on this machine: embeddings, k-means, the within-cluster pass.
fn find_semantic(
    dedup: StepPlan<'_>,
    work: &Work,
    docs: &SpillDir,
    metrics: &RunMetrics,
) -> Result<(Index, Verdict, DedupStats), DedupError> {
    let spec = &dedup.spec;
    let mut stats = new_stats(dedup, None);
    let planned = |phase| dedup.capacity.planned_bytes(phase);
    let resumed = work.done("scan");
    let clock = PhaseClock::start(DedupPhase::Scan, None);
    let (index, dim) = semantic::scan(work, docs, |_| true, &spec.semantic(), metrics)?;
    clock.finish(&mut stats, resumed);
    stats.documents = index.documents();
    if stats.documents > curator_core::dedup::MAX_DOCS {
        return Err(DedupError::TooManyDocs(stats.documents));
    }
    let p = spec.semantic();
    let use_gpu = match spec.device {
        curator_core::dedup::Device::Cpu => false,
        curator_core::dedup::Device::Gpu => true,
        curator_core::dedup::Device::Auto => !crate::gpu::discover().gpus.is_empty(),
    };
    if use_gpu && !work.done("groups") {
        let clock = PhaseClock::start(DedupPhase::Gpu, None);
        match semantic::run_on_gpu(work, stats.documents, dim, spec) {
            Ok(()) => {}
            Err(e) if spec.device == curator_core::dedup::Device::Auto => {
                tracing::warn!("dedup: {e}; running k-means and the pairwise phase on the CPU");
            }
            Err(e) => return Err(e),
        }
        clock.finish(&mut stats, false);
    }
    let resumed = work.done("kmeans");
    let clock = PhaseClock::start(DedupPhase::Kmeans, planned(DedupPhase::Kmeans));
    let assigned = semantic::cluster(work, stats.documents, dim, &p)?;
    clock.finish(&mut stats, resumed);
    let resumed = work.done("groups");
    let clock = PhaseClock::start(DedupPhase::Pairwise, planned(DedupPhase::Pairwise));
    let groups = semantic::pairwise(work, dim, &assigned, &p)?;
    clock.finish(&mut stats, resumed);
    stats.semantic = work::read_all(&work.path(semantic::STATS)).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let verdict = verdict(groups, &mut stats, metrics);
    Ok((index, verdict, stats))
}

/// Whether the output phase writes anything.
pub fn writes_documents(action: DedupAction) -> bool {
    action != DedupAction::Identify
}
