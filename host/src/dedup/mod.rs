//! Deduplication, the mechanism: the phases of a `- dedup:` step over the documents spilled
//! in front of its barrier. What a step means, which document survives and how much memory
//! each phase may take are decided in `curator_core::dedup`; this module carries it out.
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

pub mod components;
pub mod estimate;
mod exact;
mod fuzzy;
mod index;
mod output;
pub mod remove_ids;
pub mod report;
pub mod semantic;
pub mod work;

use std::sync::atomic::Ordering;
use std::time::Instant;

use curator_core::{DedupAction, DedupMethod};

pub use fuzzy::SIGNATURE;
pub use index::Index;
pub use output::Verdict;
pub(crate) use output::{DedupReplay, write_duplicates};

use crate::exec::SpillDir;
use crate::io::IoError;
use crate::metrics::RunMetrics;
use crate::plan::PlannedDedup;
use work::Work;

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
#[derive(Debug, Clone, Default, serde::Serialize)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic: Option<serde_json::Value>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct PhaseStats {
    pub phase: String,
    pub seconds: f64,
    pub peak_rss_bytes: u64,
    /// Resident memory when the phase started (what earlier phases left: the process, the
    /// allocator's free lists); the phase's own peak is `peak_rss_bytes` minus this.
    pub start_rss_bytes: u64,
    /// `plan`'s estimate for this phase, when it makes one.
    #[serde(skip_serializing_if = "Option::is_none")]
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

/// For the resume tests: `CURATOR_DEDUP_CRASH_AT=<marker>` kills this process with SIGKILL
/// right after that marker is written (as `kill -9` would at that moment).
pub(crate) fn crash_point(marker: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT.get_or_init(|| std::env::var("CURATOR_DEDUP_CRASH_AT").ok()).as_deref() == Some(marker) {
        tracing::warn!("CURATOR_DEDUP_CRASH_AT={marker}: killing this process");
        crate::os::kill(std::process::id());
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
}

/// Documents per text-check chunk: the plan's, or `CURATOR_DEDUP_CHECK_CHUNK` (tests use it
/// to force many chunks on small data).
fn check_chunk(planned: u64) -> u64 {
    std::env::var("CURATOR_DEDUP_CHECK_CHUNK").ok().and_then(|v| v.parse().ok()).unwrap_or(planned)
}

/// Times a phase and samples the process's peak RSS (the high-water mark is reset first
/// where the kernel allows it, so each phase reports its own).
pub(crate) struct PhaseClock {
    name: &'static str,
    t0: Instant,
    planned: Option<u64>,
    start_rss: u64,
}

impl PhaseClock {
    pub(crate) fn start(name: &'static str, planned: Option<u64>) -> PhaseClock {
        crate::os::release_free_memory();
        crate::os::reset_peak_rss();
        tracing::info!("dedup: {name}");
        PhaseClock { name, t0: Instant::now(), planned, start_rss: crate::os::own_rss_bytes() }
    }
    pub(crate) fn finish(self, stats: &mut DedupStats, resumed: bool) {
        stats.phases.push(PhaseStats {
            phase: self.name.to_string(),
            seconds: self.t0.elapsed().as_secs_f64(),
            peak_rss_bytes: crate::os::own_peak_rss_bytes(),
            start_rss_bytes: self.start_rss,
            planned_bytes: self.planned,
            resumed,
        });
    }
}

/// Run the phases of `dedup` over the documents in `docs` (all partitions spilled).
pub(crate) fn find_duplicates(
    dedup: &PlannedDedup,
    work: &Work,
    docs: &SpillDir,
    metrics: &RunMetrics,
) -> Result<(Index, Verdict, DedupStats), DedupError> {
    let spec = &dedup.spec;
    let cap = &dedup.capacity;
    let mut stats = DedupStats {
        method: format!("{:?}", spec.method).to_lowercase(),
        action: format!("{:?}", spec.action).to_lowercase(),
        bands_per_iteration: cap.bands_per_iteration,
        iterations: cap.iterations,
        partitions: cap.partitions,
        ..Default::default()
    };
    let planned = |phase: &str| cap.phases.iter().find(|p| p.phase == phase).map(|p| p.bytes);
    let resumed = work.done("scan");
    let clock = PhaseClock::start("scan", None);
    let mut dim = 0;
    let index = match spec.method {
        DedupMethod::Exact => exact::scan(work, docs, spec.hash.unwrap_or_default(), cap.partitions, metrics)?,
        DedupMethod::Fuzzy => fuzzy::scan(work, docs, &spec.fuzzy(), metrics)?,
        DedupMethod::Semantic => {
            let (index, d) = semantic::scan(work, docs, &spec.semantic(), metrics)?;
            dim = d;
            index
        }
    };
    clock.finish(&mut stats, resumed);
    stats.documents = index.documents();
    if stats.documents > curator_core::dedup::MAX_DOCS {
        return Err(DedupError::TooManyDocs(stats.documents));
    }
    let groups = match spec.method {
        DedupMethod::Semantic => {
            let p = spec.semantic();
            let use_gpu = match spec.device {
                curator_core::dedup::Device::Cpu => false,
                curator_core::dedup::Device::Gpu => true,
                curator_core::dedup::Device::Auto => !crate::gpu::discover().gpus.is_empty(),
            };
            if use_gpu && !work.done("groups") {
                let clock = PhaseClock::start("gpu", None);
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
            let clock = PhaseClock::start("kmeans", planned("kmeans"));
            let assigned = semantic::cluster(work, stats.documents, dim, &p)?;
            clock.finish(&mut stats, resumed);
            let resumed = work.done("groups");
            let clock = PhaseClock::start("pairwise", planned("pairwise"));
            let g = semantic::pairwise(work, dim, &assigned, &p)?;
            clock.finish(&mut stats, resumed);
            stats.semantic = work::read_all(&work.path(semantic::STATS)).ok().and_then(|b| serde_json::from_slice(&b).ok());
            g
        }
        DedupMethod::Exact => {
            let resumed = work.done("groups");
            let clock = PhaseClock::start("group", planned("group"));
            let g = exact::group(work, cap.partitions)?;
            clock.finish(&mut stats, resumed);
            g
        }
        DedupMethod::Fuzzy => {
            let p = spec.fuzzy();
            let n = stats.documents as u32;
            metrics.dedup.iterations_total.store(cap.iterations as u64, Ordering::Relaxed);
            for it in 0..cap.iterations {
                let resumed = work.done(&format!("buckets-{it:03}"));
                let clock = PhaseClock::start("buckets", planned("buckets"));
                fuzzy::buckets(work, n, &p, cap.bands_per_iteration, cap.partitions, it)?;
                clock.finish(&mut stats, resumed);
                metrics.dedup.iterations_done.store(it as u64 + 1, Ordering::Relaxed);
            }
            let resumed = work.done("groups");
            let clock = PhaseClock::start("components", planned("components"));
            let found = fuzzy::components(work, docs, &index, &p, cap.iterations, check_chunk(cap.check_docs_per_chunk), metrics)?;
            clock.finish(&mut stats, resumed);
            stats.candidate_pairs = found.candidates;
            stats.verified_pairs = found.verified;
            stats.text_checks = found.text_checks;
            found.groups
        }
    };
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
    Ok((index, verdict, stats))
}

/// Whether the output phase writes anything.
pub fn writes_documents(action: DedupAction) -> bool {
    action != DedupAction::Identify
}
