//! What a dedup step needs of a machine: each phase's memory (`PhaseEstimate`, by
//! `DedupPhase`), the bands per iteration and partitions that fit (`plan_dedup`), from the
//! corpus and the step's settings. Pure arithmetic; the host applies it.

use serde::{Deserialize, Serialize};

use super::{DEFAULT_BANDS_PER_ITERATION, DedupMethod, DedupSpec, Shingle, semantic};

/// What `plan` knows of a corpus before reading it all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Corpus {
    pub docs: u64,
    pub bytes: u64,
}

/// Bytes per record of the exact grouping spill: the 128-bit hash and the document's position.
pub const EXACT_RECORD_BYTES: u64 = 24;
/// Largest exact-dedup key partition the planner picks.
pub const EXACT_PARTITION_BYTES: u64 = 16 << 20;
/// Bytes per document and band in the bucket phase: the band's 64-bit key and the document's
/// 32-bit position, packed in one u128 (sorted in place, no scratch).
pub const BUCKET_RECORD_BYTES: u64 = 16;
/// Bytes per document of union-find (one u32 parent each).
pub const UNION_FIND_BYTES: u64 = 4;
/// Bytes per candidate pair (two u32), sorted and deduplicated in memory.
pub const EDGE_BYTES: u64 = 8;
/// Fixed working memory of a phase beside its records: the chunk of signatures being read
/// (8 MiB), read and write buffers of the spill files.
pub const PHASE_OVERHEAD_BYTES: u64 = 16 << 20;
/// Share of the memory a dedup phase may plan for (the rest: the process, page cache, error).
pub const DEDUP_MEMORY_SHARE: f64 = 0.6;
/// Candidate pairs assumed per document when planning (a corpus with 20 % near-duplicates in
/// bands of 20 gives about this many after deduplication of the pair list).
pub const PLANNED_EDGES_PER_DOC: f64 = 0.5;

/// The plan of a dedup step on one machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DedupPlan {
    /// Bands bucketed per pass (fuzzy; 0 for exact).
    pub bands_per_iteration: usize,
    /// Passes over the signatures (fuzzy; 1 for exact).
    pub iterations: usize,
    /// Hash partitions of the grouping / bucket spill.
    pub partitions: usize,
    /// Peak memory of each phase, in bytes, by the formulas above.
    pub phases: Vec<PhaseEstimate>,
    /// Disk the step's spill needs at its peak (documents + keys + buckets of one pass).
    pub spill_bytes: u64,
    /// The most memory one phase needs.
    pub peak_bytes: u64,
    /// What the phases may use (`DEDUP_MEMORY_SHARE` of the memory given).
    pub budget_bytes: u64,
    /// Whether the settings given (not the ones the planner would pick) fit the budget.
    pub fits: bool,
    /// Fuzzy: documents whose shingle sets are held at once while undecided candidate pairs
    /// are checked on text (the pairs are checked in chunks of this many documents).
    pub check_docs_per_chunk: u64,
    /// Settings that will work but badly (e.g. too few clusters for the corpus).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Semantic: the memory of one bucket shard of a phased step, which holds only its share
    /// of the fit sample (`ShardMemory::of`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_shard: Option<ShardMemory>,
}

/// Memory of one of M shards that split part of a phase's data: `fixed_bytes` each, plus
/// `split_bytes / M`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMemory {
    pub fixed_bytes: u64,
    pub split_bytes: u64,
}

impl ShardMemory {
    /// One shard's bytes when there are `shards` of them.
    pub fn of(&self, shards: u64) -> u64 {
        self.fixed_bytes + self.split_bytes.div_ceil(shards.max(1))
    }
}

/// The phases of a dedup step, as they are planned (`PhaseEstimate`), timed and reported (the
/// host's `_summary.json`). Serialized in lower case: `"documents"`, `"scan"`, ….
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DedupPhase {
    /// The stages in front of the barrier, from the source into the documents spill.
    Documents,
    /// Keys (exact), signatures (fuzzy) or embeddings (semantic) read from the spill.
    Scan,
    /// Fuzzy: the LSH passes, bands into candidate pairs.
    Buckets,
    /// Exact: keys grouped, one hash partition at a time.
    Group,
    /// Fuzzy: candidate pairs triaged, checked and joined by union-find.
    Components,
    /// Semantic: k-means and the pairwise pass on the GPU, in one process.
    Gpu,
    /// Semantic: k-means on the CPU.
    Kmeans,
    /// Semantic: the within-cluster similarity pass on the CPU.
    Pairwise,
    /// The spill replayed with the verdict applied, through the stages after the barrier.
    Output,
    /// `_duplicates/` written.
    Duplicates,
}

impl DedupPhase {
    pub fn name(self) -> &'static str {
        match self {
            DedupPhase::Documents => "documents",
            DedupPhase::Scan => "scan",
            DedupPhase::Buckets => "buckets",
            DedupPhase::Group => "group",
            DedupPhase::Components => "components",
            DedupPhase::Gpu => "gpu",
            DedupPhase::Kmeans => "kmeans",
            DedupPhase::Pairwise => "pairwise",
            DedupPhase::Output => "output",
            DedupPhase::Duplicates => "duplicates",
        }
    }
}

impl std::fmt::Display for DedupPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl DedupPlan {
    /// The planned peak memory of `phase`, when the plan estimates it.
    pub fn planned_bytes(&self, phase: DedupPhase) -> Option<u64> {
        self.phases.iter().find(|p| p.phase == phase).map(|p| p.bytes)
    }

    /// Bytes of decoded batches the documents phase may keep in memory for the output (a
    /// step run whole on one machine), so that the output neither reads the source again
    /// nor decodes the spill: half of what the budget leaves beside the peak phase (the kept
    /// batches are held through every phase, and the output's stages start workers while
    /// they are still held). Partitions that do not fit are read again.
    pub fn resident_bytes(&self) -> u64 {
        self.budget_bytes.saturating_sub(self.peak_bytes) / 2
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseEstimate {
    pub phase: DedupPhase,
    pub bytes: u64,
    /// The formula, for people.
    pub formula: String,
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// Plan a dedup step for `corpus` on a machine with `memory` bytes: the bands per iteration
/// and partitions (the step's own when set, else the largest bands per iteration up to 5
/// that fits with one partition, then more partitions when even one band does not fit),
/// each phase's peak memory, and the spill disk.
pub fn plan_dedup(spec: &DedupSpec, corpus: Corpus, memory: u64) -> DedupPlan {
    let budget = (memory as f64 * DEDUP_MEMORY_SHARE) as u64;
    let room = budget.saturating_sub(PHASE_OVERHEAD_BYTES).max(1);
    let n = corpus.docs.max(1);
    // The documents spill: the whole documents, or (a lean spill, `output_rereads_source`)
    // each one's id, row and key. An id is taken at 48 bytes.
    let key_bytes = match spec.method {
        DedupMethod::Fuzzy => spec.fuzzy().num_bands as u64 * 8,
        _ => 16,
    };
    let docs_spill = if spec.output_rereads_source() { n * (64 + key_bytes) } else { corpus.bytes + corpus.bytes / 8 + n * 64 };
    match spec.method {
        DedupMethod::Exact => {
            let records = n * EXACT_RECORD_BYTES;
            // Partitions of at most EXACT_PARTITION_BYTES: the group phase's memory stays flat
            // however large the corpus (more partitions cost one small file each).
            let partitions = spec.partitions.unwrap_or_else(|| ceil_div(records, room.min(EXACT_PARTITION_BYTES)).max(1) as usize);
            let group = ceil_div(records, partitions as u64) + PHASE_OVERHEAD_BYTES;
            let phases = vec![PhaseEstimate {
                phase: DedupPhase::Group,
                bytes: group,
                formula: format!("{n} docs × {EXACT_RECORD_BYTES} B / {partitions} partitions + 16 MiB"),
            }];
            DedupPlan {
                bands_per_iteration: 0,
                iterations: 1,
                partitions,
                peak_bytes: group,
                phases,
                spill_bytes: docs_spill + records,
                budget_bytes: budget,
                fits: group <= budget,
                check_docs_per_chunk: 0,
                warnings: Vec::new(),
                bucket_shard: None,
            }
        }
        DedupMethod::Semantic => semantic::plan(spec, n, docs_spill, budget),
        DedupMethod::Fuzzy => {
            let p = spec.fuzzy();
            let per_band = n * BUCKET_RECORD_BYTES;
            let bpi = spec.bands_per_iteration.unwrap_or_else(|| {
                let fit = (room / (per_band + per_band / 8).max(1)) as usize;
                fit.clamp(1, DEFAULT_BANDS_PER_ITERATION.min(p.num_bands))
            });
            let partitions = spec.partitions.unwrap_or_else(|| ceil_div((per_band + per_band / 8) * bpi as u64, room).max(1) as usize);
            let iterations = p.num_bands.div_ceil(bpi);
            let edges = (n as f64 * PLANNED_EDGES_PER_DOC) as u64;
            // The records, cut into one piece per core (an eighth more while they move), and
            // the pass's share of the candidate pairs.
            let records = ceil_div(per_band * bpi as u64, partitions as u64);
            let pass_edges = edges * bpi as u64 / p.num_bands as u64 / partitions as u64;
            let bucket = records + records / 8 + pass_edges * EDGE_BYTES + PHASE_OVERHEAD_BYTES;
            // Shingle sets of documents in undecided pairs, 8 B per shingle, a chunk at a time.
            let avg = (corpus.bytes / n).max(1);
            let shingles_per_doc = match p.shingle {
                Shingle::Chars(_) => avg,
                Shingle::Words(_) => (avg / 6).max(1),
            };
            let set_bytes = shingles_per_doc * 8 + 32;
            let chunk = (room / 4 / set_bytes).clamp(1024, n.max(1024));
            // No shingle set is built when the pairs are not checked.
            let checked = if p.checks_pairs() { chunk.min(n) } else { 0 };
            let sets = checked * set_bytes;
            let components = n * UNION_FIND_BYTES + edges * EDGE_BYTES + n / 8 + sets + PHASE_OVERHEAD_BYTES;
            let phases = vec![
                PhaseEstimate {
                    phase: DedupPhase::Buckets,
                    bytes: bucket,
                    formula: format!(
                        "{n} docs × {BUCKET_RECORD_BYTES} B × {bpi} bands per iteration / {partitions} partitions × 1.125 + ~{pass_edges} pairs × {EDGE_BYTES} B + 16 MiB"
                    ),
                },
                PhaseEstimate {
                    phase: DedupPhase::Components,
                    bytes: components,
                    formula: format!(
                        "{n} docs × {UNION_FIND_BYTES} B + ~{edges} candidate pairs × {EDGE_BYTES} B + {checked} docs' shingle sets × {set_bytes} B + 16 MiB"
                    ),
                },
            ];
            let peak = bucket.max(components);
            // The scan's signatures, or band keys when the pairs are not checked.
            let sigs = if p.checks_pairs() { n * p.num_hashes() as u64 * 4 } else { n * key_bytes };
            DedupPlan {
                bands_per_iteration: bpi,
                iterations,
                partitions,
                peak_bytes: peak,
                phases,
                spill_bytes: docs_spill + sigs + per_band * bpi as u64 + edges * EDGE_BYTES * iterations as u64,
                budget_bytes: budget,
                fits: peak <= budget,
                check_docs_per_chunk: chunk,
                warnings: Vec::new(),
                bucket_shard: None,
            }
        }
    }
}

/// Positions of documents in a run are u32: at most this many documents per dedup step.
pub const MAX_DOCS: u64 = u32::MAX as u64 - 1;
