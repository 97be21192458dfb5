//! Semantic dedup's policy: its parameters with NeMo Curator's defaults, and which member of
//! a near-duplicate pair stays (the keep order of a cluster).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{DedupPlan, DedupSpec, PHASE_OVERHEAD_BYTES, PhaseEstimate, ShardMemory};

/// Which document of a semantic duplicate pair stays (SemDeDup's `which_to_keep`): documents
/// of a cluster are ordered by this rule and the earlier one stays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeepRule {
    /// Farthest from the cluster's centroid first: the less typical document stays.
    #[default]
    Hard,
    /// Nearest to the centroid first.
    Easy,
    /// A seeded shuffle of the cluster.
    Random,
}

/// `eps`: one value, or several reported together (the first decides).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Eps {
    One(f64),
    Many(Vec<f64>),
}

impl Eps {
    pub fn values(&self) -> Vec<f64> {
        match self {
            Eps::One(e) => vec![*e],
            Eps::Many(v) => v.clone(),
        }
    }
}

/// What happens to duplicates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DedupAction {
    /// Drop every document of a group but its survivor.
    #[default]
    Remove,
    /// Keep every document; add `duplicate_group` (the survivor's position, null when unique)
    /// and `is_duplicate` (true for the ones `remove` would drop).
    Mark,
    /// Write only `_duplicates/` (the ids to remove); nothing reaches the sink.
    Identify,
}

/// Semantic parameters with their defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticParams {
    /// `None`: one cluster per [`DOCS_PER_CLUSTER`] documents.
    pub n_clusters: Option<usize>,
    pub max_iter: usize,
    pub tol: f64,
    pub eps: Vec<f64>,
    pub keep: KeepRule,
    pub fit_fraction: f64,
    pub seed: u64,
    pub embedding_field: String,
}

/// Documents per cluster when `n_clusters` is not given.
pub const DOCS_PER_CLUSTER: u64 = 1000;
/// Clusters larger than this on average make the pairwise phase quadratic in earnest: `plan`
/// warns.
pub const LARGE_CLUSTER: u64 = 50_000;
/// Embedding width `plan` assumes (it does not read the vectors): bge-large / e5-large.
pub const PLANNED_DIM: u64 = 1024;
/// Most memory k-means' Yinyang bounds take (`curator-vectors` keeps to it).
pub const LOWER_BOUNDS_BYTES: u64 = 256 << 20;
/// Earlier members per block of the pairwise phase (the CPU packs `tile × d` floats of them;
/// the GPU computes `tile²` similarities at a time in device memory).
pub const PAIR_TILE: u64 = 1024;
/// The largest cluster `plan` expects, as a multiple of the mean cluster size (k-means on
/// embeddings gives uneven clusters).
pub const CLUSTER_SKEW: u64 = 4;
/// Clusters the pairwise phase holds at once (one per core, up to this).
pub const CLUSTERS_IN_FLIGHT: u64 = 8;

impl SemanticParams {
    /// Clusters for `docs` documents.
    pub fn clusters(&self, docs: u64) -> usize {
        self.n_clusters.unwrap_or_else(|| docs.div_ceil(DOCS_PER_CLUSTER).max(1) as usize).clamp(1, docs.max(1) as usize)
    }
}

/// The order in which a cluster's members are considered (the earlier of a duplicate pair
/// stays): `dist[i]` is member i's squared distance to the centroid and `pos[i]` its
/// position in the run (ties broken by position, so the order never depends on partitioning).
pub fn keep_order(dist: &[f32], pos: &[u32], rule: KeepRule, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..dist.len()).collect();
    match rule {
        KeepRule::Hard => order.sort_by(|&a, &b| dist[b].total_cmp(&dist[a]).then(pos[a].cmp(&pos[b]))),
        KeepRule::Easy => order.sort_by(|&a, &b| dist[a].total_cmp(&dist[b]).then(pos[a].cmp(&pos[b]))),
        KeepRule::Random => {
            // A key per document from the seed and its position: the same shuffle however the
            // cluster's members were gathered.
            let key = |p: u32| {
                let mut z = seed ^ (u64::from(p)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            };
            order.sort_by_key(|&i| (key(pos[i]), pos[i]));
        }
    }
    order
}

/// Semantic dedup's phases for `n` documents: k-means holds the fit sample and twice the
/// centroids, the pairwise phase the clusters in flight (see [`plan_dedup`]).
pub(super) fn plan(spec: &DedupSpec, n: u64, docs_spill: u64, budget: u64) -> DedupPlan {
    let p = spec.semantic();
    let k = p.clusters(n) as u64;
    let d = PLANNED_DIM;
    let fit = ((n as f64 * p.fit_fraction).ceil() as u64).clamp(1, n);
    // k-means: the fit sample with a label and two bounds per row, the centroids three
    // times (current, previous, packed for the kernel) and their fixed-point sums, a label
    // and a distance per document; then the pairwise phase: those, plus the clusters in
    // flight (a cluster's vectors, one packed tile of them, a best match per member).
    // (The bounds: one per group of 16 centroids per fitted row, at most 256 MiB.)
    let bounds = (fit * k.div_ceil(16) * 4).min(LOWER_BOUNDS_BYTES);
    let kmeans = fit * (d * 4 + 12) + bounds + k * d * (3 * 4 + 8) + n * 8 + PHASE_OVERHEAD_BYTES;
    let mean = n.div_ceil(k);
    let largest = (mean * CLUSTER_SKEW).min(n);
    let pairwise = n * 12 + CLUSTERS_IN_FLIGHT * (largest * (d * 4 + 12) + PAIR_TILE * d * 4) + PHASE_OVERHEAD_BYTES;
    let mut warnings = Vec::new();
    if mean > LARGE_CLUSTER {
        warnings.push(format!(
            "n_clusters {k} leaves ~{mean} documents per cluster: the pairwise phase is quadratic in a cluster's size; use at least {} clusters",
            n.div_ceil(DOCS_PER_CLUSTER)
        ));
    }
    let phases = vec![
        PhaseEstimate {
            phase: super::DedupPhase::Kmeans,
            bytes: kmeans,
            formula: format!(
                "{fit} fitted × ({d} dims × 4 B + 12 B) + bounds {} MiB + {k} centroids × {d} × 20 B + {n} docs × 8 B + 16 MiB",
                bounds >> 20
            ),
        },
        PhaseEstimate {
            phase: super::DedupPhase::Pairwise,
            bytes: pairwise,
            formula: format!(
                "{n} docs × 12 B + {CLUSTERS_IN_FLIGHT} clusters in flight × (largest ~{largest} docs × ({d} × 4 B + 12 B) + {PAIR_TILE} × {d} × 4 B) + 16 MiB"
            ),
        },
    ];
    let peak = kmeans.max(pairwise);
    // A bucket shard of a phased step: its share of the fit sample and of the bounds; every
    // shard holds the centroids, every document's label and distance (8 B), and the
    // clusters in flight of the ones it owns.
    let in_flight = CLUSTERS_IN_FLIGHT * (largest * (d * 4 + 12) + PAIR_TILE * d * 4);
    let bucket_shard = ShardMemory {
        fixed_bytes: k * d * (3 * 4 + 8) + n * 8 + in_flight + PHASE_OVERHEAD_BYTES,
        split_bytes: fit * (d * 4 + 12) + bounds,
    };
    DedupPlan {
        bands_per_iteration: 0,
        iterations: 1,
        partitions: 1,
        peak_bytes: peak,
        phases,
        spill_bytes: docs_spill + n * d * 4 + n * 8,
        budget_bytes: budget,
        fits: peak <= budget,
        check_docs_per_chunk: 0,
        warnings,
        bucket_shard: Some(bucket_shard),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_shard_plans_its_share_of_the_fit_and_never_more_than_one_machine() {
        let spec: DedupSpec = serde_json::from_str(r#"{"method": "semantic"}"#).unwrap();
        let p = plan(&spec, 10_000_000, 0, u64::MAX);
        let shard = p.bucket_shard.unwrap();
        assert!(shard.of(1) <= p.peak_bytes + p.peak_bytes / 10, "{} vs {}", shard.of(1), p.peak_bytes);
        // 10 M documents of 1,024 dims: the fit is ~41 GB; eight shards hold an eighth each.
        assert!(shard.of(8) < p.peak_bytes / 4, "{} vs {}", shard.of(8), p.peak_bytes);
        assert_eq!(shard.of(8) - shard.fixed_bytes, shard.split_bytes.div_ceil(8));
    }

    #[test]
    fn keep_rules_order_a_cluster() {
        let dist = [0.5, 0.1, 0.9, 0.1];
        let pos = [10, 11, 12, 13];
        assert_eq!(keep_order(&dist, &pos, KeepRule::Hard, 0), vec![2, 0, 1, 3]);
        assert_eq!(keep_order(&dist, &pos, KeepRule::Easy, 0), vec![1, 3, 0, 2]);
        let r = keep_order(&dist, &pos, KeepRule::Random, 7);
        assert_eq!(r, keep_order(&dist, &pos, KeepRule::Random, 7));
        let mut sorted = r.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
        // The same documents gathered in another order get the same order by position.
        let r2 = keep_order(&[0.1, 0.9, 0.1, 0.5], &[13, 12, 11, 10], KeepRule::Random, 7);
        let as_pos = |o: &[usize], p: &[u32]| o.iter().map(|&i| p[i]).collect::<Vec<_>>();
        assert_eq!(as_pos(&r, &pos), as_pos(&r2, &[13, 12, 11, 10]));
    }
}
