//! Vector algorithms of semantic dedup (NeMo Curator's SemDeDup), on the CPU:
//!
//! - [`kmeans`]: Euclidean k-means on row-major `n × d` f32 data (embeddings, normalised by
//!   the caller for cosine): k-means++ seeding on a sample, then Lloyd iterations until the
//!   centroids move less than `tol` (relative to the data's variance, as scikit-learn) or
//!   `max_iter`. Rows are compared to every centroid by the fused distance kernel
//!   ([`kernel`]: dot products and argmin in registers, no score matrix), over row chunks on
//!   all threads. After the first iteration Yinyang bounds (one per group of 16 centroids;
//!   `bounds.rs`) keep, without reading them, the rows whose centroid cannot change, and
//!   compare the others only with the groups that could hold a nearer centroid (same
//!   centroids as plain Lloyd); the clusters' sums are updated from the rows that moved only,
//!   so an iteration after convergence costs O(n).
//! - [`semdedup`]: within one cluster, the documents in keep order, each one's largest cosine
//!   similarity to an earlier one (and which), by the same kernel over `tile` earlier members
//!   packed at a time. A document is a duplicate at `eps` when that similarity is ≥ 1 − eps;
//!   the earlier one stays.
//!
//! Deterministic for a seed, and independent of the thread count: every dot product is summed
//! in dimension order, and the clusters' sums are exact fixed-point integers.

pub mod fit;
#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(not(feature = "cuda"))]
#[path = "gpu_absent.rs"]
pub mod gpu;

mod bounds;
pub mod kernel;

use kernel::{Candidates, Nearest, Packed, dist2, dot};
use rayon::prelude::*;

/// Rows per parallel work item (the threads take them as they finish the last).
const CHUNK: usize = 1024;

/// A splitmix64 stream (seeded, portable).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// How k-means runs.
#[derive(Debug, Clone, Copy)]
pub struct KMeansParams {
    pub k: usize,
    pub max_iter: usize,
    /// Stop when the centroids' squared movement is below `tol` × the data's mean variance
    /// per dimension (scikit-learn's rule).
    pub tol: f64,
    pub seed: u64,
    /// Points k-means++ seeds from (a uniform sample; at least `k`). Seeding costs
    /// `k × init_sample × d` in `k` sequential rounds; 8 per cluster gave the same inertia
    /// after Lloyd as 20 on 200k × 384 with k = 1,000, at a sixth of the seeding time.
    pub init_sample: usize,
}

/// A fitted model.
#[derive(Debug, Clone)]
pub struct KMeans {
    /// `k × d`, row-major.
    pub centroids: Vec<f32>,
    pub k: usize,
    pub d: usize,
    /// Lloyd iterations on all rows.
    pub iterations: usize,
    /// Sum of squared distances of the rows to their centroids after the last iteration.
    pub inertia: f64,
    /// Seconds spent seeding, before `steps`.
    pub init_seconds: f64,
    /// Each iteration's wall time and how many row–centroid distances it computed (plain
    /// Lloyd computes `n × k`; the bounds skip the rest); empty where not traced (the GPU).
    pub steps: Vec<Step>,
}

/// One Lloyd iteration, as [`KMeans::steps`] reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub seconds: f64,
    pub distances: u64,
}

/// Nearest centroid (and its squared distance) of each row of `data` (`n × d`), on all
/// threads, in row chunks.
pub fn assign(data: &[f32], d: usize, centroids: &[f32], k: usize) -> (Vec<u32>, Vec<f32>) {
    assert!(d > 0, "vectors of at least one dimension");
    let n = data.len() / d;
    let packed = Packed::new(&centroids[..k * d], d);
    let mut labels = vec![0u32; n];
    let mut dists = vec![0f32; n];
    labels.par_chunks_mut(CHUNK).zip(dists.par_chunks_mut(CHUNK)).enumerate().for_each_init(
        || vec![Nearest::NONE; CHUNK],
        |near, (i, (l, dd))| {
            let rows = &data[i * CHUNK * d..(i * CHUNK + l.len()) * d];
            let near = &mut near[..l.len()];
            near.fill(Nearest::NONE);
            kernel::nearest(rows, &packed, Candidates::All, near);
            for (((l, dd), o), x) in l.iter_mut().zip(dd.iter_mut()).zip(near.iter()).zip(rows.chunks_exact(d)) {
                *l = o.label;
                *dd = (o.best + dot(x, x)).max(0.0);
            }
        },
    );
    (labels, dists)
}

/// `x × scale` rounded to an integer, for `|x × scale| < 2⁵¹`: adding 1.5 × 2⁵² leaves the
/// integer in the low mantissa bits (a float add and an integer subtract, which vectorise,
/// where `as i64` does not).
fn fixed(x: f32, scale: f64) -> i64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0;
    (f64::from(x) * scale + MAGIC).to_bits() as i64 - MAGIC.to_bits() as i64
}

/// No cluster (a row's label before its first assignment).
const NO_CLUSTER: u32 = u32::MAX;

/// A row that changed cluster in an assignment: (row, old label or [`NO_CLUSTER`], new label).
type Change = (u32, u32, u32);

/// Each cluster's member sum in fixed point (`k × d`) and member count, kept up to date from
/// the rows that change cluster: integer addition is exact and commutes, so the sums do not
/// depend on the threads or on the order of the changes, and an iteration where few rows move
/// touches only those rows.
struct FixedSums {
    acc: Vec<i64>,
    counts: Vec<u64>,
    /// A power of two: as large as keeps `n × max |x| × scale` below 2⁶² and `max |x| × scale`
    /// below 2⁵⁰ (so [`fixed`] is exact), at most 2⁴⁰.
    scale: f64,
    d: usize,
}

impl FixedSums {
    /// Sums at the scale `data`'s own fit takes (the tests' plain Lloyd).
    #[cfg(test)]
    fn new(data: &[f32], d: usize, k: usize) -> FixedSums {
        FixedSums::with_scale(k, d, fit::fixed_scale(data.len() / d.max(1), fit::max_abs(data)))
    }

    /// Empty sums of `k` clusters at `scale` (the whole fit's, [`fit::fixed_scale`]).
    fn with_scale(k: usize, d: usize, scale: f64) -> FixedSums {
        FixedSums { acc: vec![0; k * d], counts: vec![0; k], scale, d }
    }

    /// Moves each changed row's vector from its old cluster's sum to its new one's.
    fn apply(&mut self, data: &[f32], changes: &[Change]) {
        let (d, k) = (self.d, self.counts.len());
        // The (row, sign) entries of each cluster, grouped by a counting sort.
        let mut starts = vec![0usize; k + 1];
        for &(_, old, new) in changes {
            if old != NO_CLUSTER {
                starts[old as usize + 1] += 1;
            }
            starts[new as usize + 1] += 1;
        }
        for c in 0..k {
            starts[c + 1] += starts[c];
        }
        let mut next = starts.clone();
        let mut entries = vec![(0u32, 0i64); starts[k]];
        for &(row, old, new) in changes {
            if old != NO_CLUSTER {
                entries[next[old as usize]] = (row, -1);
                next[old as usize] += 1;
                self.counts[old as usize] -= 1;
            }
            entries[next[new as usize]] = (row, 1);
            next[new as usize] += 1;
            self.counts[new as usize] += 1;
        }
        let scale = self.scale;
        self.acc.par_chunks_mut(d.max(1)).enumerate().for_each(|(c, sum)| {
            for &(row, sign) in &entries[starts[c]..starts[c + 1]] {
                let x = &data[row as usize * d..(row as usize + 1) * d];
                sum.iter_mut().zip(x).for_each(|(s, x)| *s += sign * fixed(*x, scale));
            }
        });
    }

    /// The sums as floats (`k × d`).
    #[cfg(test)]
    fn as_f64(&self) -> Vec<f64> {
        self.acc.iter().map(|&s| s as f64 / self.scale).collect()
    }
}

/// k-means++ seeding on `sample` rows of `data`.
pub(crate) fn seed_plus_plus(data: &[f32], d: usize, sample: &[usize], k: usize, rng: &mut Rng) -> Vec<f32> {
    // The sample's rows side by side: every round reads all of them, in order.
    let rows: Vec<f32> = sample.iter().flat_map(|&i| data[i * d..(i + 1) * d].iter().copied()).collect();
    let row = |i: usize| &rows[i * d..(i + 1) * d];
    let mut centroids = Vec::with_capacity(k * d);
    let first = rng.below(sample.len());
    centroids.extend_from_slice(row(first));
    let mut closest: Vec<f32> = (0..sample.len()).map(|i| dist2(row(i), row(first))).collect();
    for _ in 1..k {
        let total: f64 = closest.iter().map(|&x| f64::from(x)).sum();
        let pick = if total <= 0.0 {
            rng.below(sample.len())
        } else {
            let mut target = rng.next_f64() * total;
            let mut pick = sample.len() - 1;
            for (i, &c) in closest.iter().enumerate() {
                target -= f64::from(c);
                if target <= 0.0 {
                    pick = i;
                    break;
                }
            }
            pick
        };
        let c = row(pick).to_vec();
        closest.par_chunks_mut(CHUNK).zip(rows.par_chunks(CHUNK * d)).for_each(|(part, xs)| {
            part.iter_mut().zip(xs.chunks_exact(d)).for_each(|(v, x)| *v = v.min(dist2(x, &c)));
        });
        centroids.extend_from_slice(&c);
    }
    centroids
}

/// `s` distinct rows of `0..n`, uniformly (partial Fisher-Yates), in ascending order.
pub fn sample(n: usize, s: usize, rng: &mut Rng) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    let s = s.min(n);
    for i in 0..s {
        let j = i + rng.below(n - i);
        idx.swap(i, j);
    }
    idx.truncate(s);
    idx.sort_unstable();
    idx
}

/// Mean per-dimension variance of the rows `idx` of `data` (scikit-learn scales `tol` by it).
pub(crate) fn variance(data: &[f32], d: usize, idx: &[usize]) -> f64 {
    let mut mean = vec![0f64; d];
    for &i in idx {
        mean.iter_mut().zip(&data[i * d..(i + 1) * d]).for_each(|(m, x)| *m += f64::from(*x));
    }
    mean.iter_mut().for_each(|m| *m /= idx.len().max(1) as f64);
    idx.iter().map(|&i| data[i * d..(i + 1) * d].iter().zip(&mean).map(|(x, m)| (f64::from(*x) - m).powi(2)).sum::<f64>()).sum::<f64>()
        / (idx.len().max(1) * d.max(1)) as f64
}

/// New centroids from the clusters' sums (`k × d`) and counts; an empty cluster takes the
/// point farthest from its centroid (as scikit-learn; `dists` gives every row's squared
/// distance to its centroid, asked for only then). Returns the squared movement.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn update(centroids: &mut [f32], sums: &[f64], counts: &[u64], data: &[f32], dists: impl FnOnce() -> Vec<f32>, d: usize) -> f64 {
    let far = |m: usize| {
        let dists = dists();
        let mut f: Vec<usize> = (0..dists.len()).collect();
        f.sort_unstable_by(|&a, &b| dists[b].total_cmp(&dists[a]).then(a.cmp(&b)));
        f.into_iter().take(m).map(|i| data[i * d..(i + 1) * d].to_vec()).collect()
    };
    update_with(centroids, sums, counts, far, d)
}

/// [`update`] with the rows for empty clusters given by `far(m)`: the `m` (or fewer) rows
/// farthest from their centroids, farthest first; asked for only when a cluster is empty.
pub(crate) fn update_with(centroids: &mut [f32], sums: &[f64], counts: &[u64], far: impl FnOnce(usize) -> Vec<Vec<f32>>, d: usize) -> f64 {
    let empty = counts.iter().filter(|&&c| c == 0).count();
    let far = if empty > 0 { far(empty) } else { Vec::new() };
    let mut next_far = 0;
    let mut shift = 0.0;
    for (c, &count) in counts.iter().enumerate() {
        let new: Vec<f32> = if count > 0 {
            sums[c * d..(c + 1) * d].iter().map(|s| (s / count as f64) as f32).collect()
        } else if let Some(row) = far.get(next_far.min(far.len().saturating_sub(1))) {
            next_far += 1;
            row.clone()
        } else {
            centroids[c * d..(c + 1) * d].to_vec()
        };
        shift += new.iter().zip(&centroids[c * d..(c + 1) * d]).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>();
        centroids[c * d..(c + 1) * d].copy_from_slice(&new);
    }
    shift
}

/// Fit k-means on `data` (`n × d`): k-means++ seeds from a sample, then Lloyd on all rows
/// (the map and reduce steps of [`fit`] with one shard).
pub fn kmeans(data: &[f32], d: usize, p: &KMeansParams) -> KMeans {
    assert!(d > 0, "vectors of at least one dimension");
    let started = std::time::Instant::now();
    let n = data.len() / d;
    let k = p.k.clamp(1, n.max(1));
    let (idx, mut rng) = fit::init_sample(n, p);
    let seed_rows: Vec<f32> = idx.iter().flat_map(|&i| data[i * d..(i + 1) * d].iter().copied()).collect();
    // scikit-learn's tolerance: tol × mean per-dimension variance of the data (estimated on
    // the seeding sample).
    let (mut centroids, tol) = fit::start(&seed_rows, d, k, p.tol, &mut rng);
    let init_seconds = started.elapsed().as_secs_f64();
    let (labels, steps) = lloyd(data, d, &mut centroids, p.max_iter, tol, p.seed);
    let inertia = distances(data, d, &centroids, &labels).iter().map(|&x| f64::from(x)).sum();
    KMeans { centroids, k, d, iterations: steps.len(), inertia, init_seconds, steps }
}

/// Lloyd iterations from `centroids` (`k × d`, updated in place) until they move less than
/// `tol` (never when it is negative) or `max_iter`; each row's label, and the iterations.
fn lloyd(data: &[f32], d: usize, centroids: &mut [f32], max_iter: usize, tol: f64, seed: u64) -> (Vec<u32>, Vec<Step>) {
    let n = data.len() / d.max(1);
    let scale = fit::fixed_scale(n, fit::max_abs(data));
    let mut shard = fit::FitShard::new(data, d, 0, centroids, n, scale, seed);
    let mut steps = Vec::new();
    for _ in 0..max_iter.max(1) {
        let started = std::time::Instant::now();
        let partial = shard.round(centroids);
        let before = centroids.to_vec();
        let shift = fit::reduce(centroids, std::slice::from_ref(&partial), scale, d);
        shard.follow(&before, centroids);
        steps.push(Step { seconds: started.elapsed().as_secs_f64(), distances: partial.distances });
        if shift <= tol {
            break;
        }
    }
    (shard.labels().to_vec(), steps)
}

/// Each row's squared distance to its centroid.
fn distances(data: &[f32], d: usize, centroids: &[f32], labels: &[u32]) -> Vec<f32> {
    labels
        .par_iter()
        .enumerate()
        .map(|(i, &a)| dist2(&data[i * d..(i + 1) * d], &centroids[a as usize * d..(a as usize + 1) * d]))
        .collect()
}

/// SemDeDup within one cluster: `vectors` (`m × d`, unit length) are in keep order; for each,
/// its largest cosine similarity to an earlier one and that one's index (`None` for the
/// first). The earlier vectors are packed `tile` at a time, so beyond the vectors themselves
/// a cluster of any size needs `tile × d` floats.
pub fn semdedup(vectors: &[f32], d: usize, tile: usize) -> Vec<(f32, Option<u32>)> {
    let m = vectors.len() / d.max(1);
    let tile = tile.max(1);
    let mut near = vec![Nearest::NONE; m];
    for i0 in (0..m).step_by(tile) {
        let end = (i0 + tile).min(m);
        let packed = Packed::by_dot(&vectors[i0 * d..end * d], d, i0);
        // Only rows after i0 have earlier vectors in this tile.
        let from = i0 + 1;
        if from >= m {
            break;
        }
        near[from..].par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
            let r0 = from + c * CHUNK;
            kernel::nearest(&vectors[r0 * d..(r0 + out.len()) * d], &packed, Candidates::Before { first_row: r0 }, out);
        });
    }
    near.into_iter().map(|o| if o.label == u32::MAX { (0.0, None) } else { (-0.5 * o.best, Some(o.label)) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalize(v: &mut [f32], d: usize) {
        for r in v.chunks_exact_mut(d) {
            let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
            r.iter_mut().for_each(|x| *x /= n);
        }
    }

    /// `k` well-separated blobs of `per` points in `d` dimensions, unit length.
    fn blobs(k: usize, per: usize, d: usize, seed: u64) -> (Vec<f32>, Vec<usize>) {
        let mut rng = Rng::new(seed);
        let mut centers = vec![0f32; k * d];
        centers.iter_mut().for_each(|x| *x = (rng.next_f64() * 2.0 - 1.0) as f32);
        normalize(&mut centers, d);
        let mut data = Vec::with_capacity(k * per * d);
        let mut truth = Vec::new();
        for p in 0..k * per {
            let c = p % k;
            for j in 0..d {
                data.push(centers[c * d + j] + ((rng.next_f64() - 0.5) * 0.05) as f32);
            }
            truth.push(c);
        }
        normalize(&mut data, d);
        (data, truth)
    }

    #[test]
    fn recovers_separated_clusters() {
        let (data, truth) = blobs(20, 50, 32, 7);
        let m = kmeans(&data, 32, &KMeansParams { k: 20, max_iter: 100, tol: 1e-4, seed: 42, init_sample: 1000 });
        let (labels, _) = assign(&data, 32, &m.centroids, 20);
        // Same partition: points share a label exactly when they share a blob.
        for a in (0..1000).step_by(7) {
            for b in (0..1000).step_by(11) {
                assert_eq!(labels[a] == labels[b], truth[a] == truth[b], "{a} {b}");
            }
        }
        assert!(m.iterations < 100);
    }

    #[test]
    fn deterministic_for_a_seed() {
        let (data, _) = blobs(8, 40, 16, 3);
        let p = KMeansParams { k: 8, max_iter: 50, tol: 1e-6, seed: 9, init_sample: 320 };
        let a = kmeans(&data, 16, &p);
        let b = kmeans(&data, 16, &p);
        assert_eq!(a.centroids, b.centroids);
    }

    /// Lloyd without bounds: every point compared to every centroid each iteration.
    fn plain_lloyd(data: &[f32], d: usize, mut centroids: Vec<f32>, iterations: usize) -> Vec<f32> {
        let k = centroids.len() / d;
        for _ in 0..iterations {
            let (labels, dists) = assign(data, d, &centroids, k);
            let mut sums = FixedSums::new(data, d, k);
            let all: Vec<Change> = labels.iter().enumerate().map(|(i, &l)| (i as u32, NO_CLUSTER, l)).collect();
            sums.apply(data, &all);
            update(&mut centroids, &sums.as_f64(), &sums.counts, data, || dists.clone(), d);
        }
        centroids
    }

    #[test]
    fn bounds_skip_work_but_not_the_result() {
        // Overlapping clusters (wide noise), more centroids than blobs: many points move early.
        let mut rng = Rng::new(5);
        let d = 12;
        let data: Vec<f32> = (0..3000 * d).map(|i| ((i / d) % 7) as f32 * 0.3 + rng.next_f64() as f32).collect();
        // One group (Hamerly's bounds) and six (Yinyang's).
        for k in [10, 60] {
            let mut rng = Rng::new(3);
            let seeds = seed_plus_plus(&data, d, &sample(3000, 600, &mut rng), k, &mut rng);
            let mut bounded = seeds.clone();
            let (_, steps) = lloyd(&data, d, &mut bounded, 15, -1.0, 3);
            assert_eq!(bounded, plain_lloyd(&data, d, seeds, 15), "k = {k}");
            let skipped = steps.iter().skip(1).any(|s| s.distances < (3000 * k) as u64);
            assert!(skipped, "the bounds never skipped (k = {k})");
        }
    }

    #[test]
    fn converges_to_a_fixed_point() {
        let (data, _) = blobs(12, 200, 16, 8);
        let p = KMeansParams { k: 12, max_iter: 100, tol: 0.0, seed: 1, init_sample: 240 };
        let m = kmeans(&data, 16, &p);
        assert!(m.iterations < 100);
        // One more plain iteration changes nothing.
        assert_eq!(plain_lloyd(&data, 16, m.centroids.clone(), 1), m.centroids);
    }

    #[test]
    fn fixed_point_rounds_exactly() {
        let scale = 2f64.powi(40);
        for x in [0.0f32, 1.0, -1.0, 0.3, -0.7, 1e-12, -3.5e-9, 1023.75] {
            assert_eq!(fixed(x, scale), (f64::from(x) * scale).round() as i64, "{x}");
        }
    }

    #[test]
    fn assign_matches_brute_force() {
        let (data, _) = blobs(5, 30, 8, 1);
        let centroids: Vec<f32> = data[..5 * 8].to_vec();
        let (labels, dists) = assign(&data, 8, &centroids, 5);
        for (r, row) in data.chunks_exact(8).enumerate() {
            let d2 = |c: usize| row.iter().zip(&centroids[c * 8..(c + 1) * 8]).map(|(a, b)| (a - b) * (a - b)).sum::<f32>();
            let best = (0..5).min_by(|&a, &b| d2(a).total_cmp(&d2(b))).unwrap();
            assert_eq!(labels[r] as usize, best);
            assert!((dists[r] - d2(best)).abs() < 1e-4);
        }
    }

    #[test]
    fn semdedup_finds_each_ones_nearest_earlier_neighbour_in_any_tiling() {
        let (data, _) = blobs(3, 20, 16, 5);
        let brute: Vec<(f32, Option<u32>)> = (0..60)
            .map(|j| {
                (0..j)
                    .map(|i| {
                        (data[i * 16..(i + 1) * 16].iter().zip(&data[j * 16..(j + 1) * 16]).map(|(a, b)| a * b).sum::<f32>(), i as u32)
                    })
                    .fold((0.0, None), |acc: (f32, Option<u32>), (s, i)| if acc.1.is_none() || s > acc.0 { (s, Some(i)) } else { acc })
            })
            .collect();
        for tile in [1, 7, 16, 64] {
            let got = semdedup(&data, 16, tile);
            for (j, (g, b)) in got.iter().zip(&brute).enumerate() {
                assert_eq!(g.1, b.1, "tile {tile} row {j}");
                assert!((g.0 - b.0).abs() < 1e-5);
            }
        }
    }
}
