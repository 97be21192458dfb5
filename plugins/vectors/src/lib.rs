//! Vector algorithms of semantic dedup (NeMo Curator's SemDeDup), on the CPU:
//!
//! - [`kmeans`]: Euclidean k-means on row-major `n × d` f32 data (embeddings, normalised by
//!   the caller for cosine): k-means++ seeding on a sample, then Lloyd iterations whose
//!   distance computations are GEMMs (`‖x‖² − 2 x·c + ‖c‖²`, the `x·c` block by
//!   matrixmultiply), over row chunks on all threads, until the centroids move less than
//!   `tol` (relative to the data's variance, as scikit-learn) or `max_iter`. After the first
//!   iteration Hamerly's bounds skip the comparisons that cannot change a point's centroid
//!   (same centroids as plain Lloyd): 1.25× on 200k × 32, k = 200; 1.04× on 384-dimensional
//!   overlapping clusters, where few points are far enough inside their cluster to skip.
//! - [`semdedup`]: within one cluster, the documents in keep order, each one's largest cosine
//!   similarity to an earlier one (and which), computed in tiles so a cluster of any size
//!   needs `tile²` floats at a time. A document is a duplicate at `eps` when that similarity
//!   is ≥ 1 − eps; the earlier one stays.
//!
//! Deterministic for a seed and a thread count-independent: chunks are reduced in order.

use std::num::NonZeroUsize;

pub mod gpu;

/// `c[m × n] = a[m × k] · b[k × n]ᵀ` where `b` is stored `n × k` row-major (rows of
/// vectors against rows of vectors).
fn dot_rows(a: &[f32], m: usize, b: &[f32], n: usize, k: usize, c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= n * k && c.len() >= m * n);
    // SAFETY: the strides address exactly a (m × k), bᵀ (k × n, read from b's n × k rows)
    // and c (m × n), checked above.
    unsafe {
        matrixmultiply::sgemm(m, k, n, 1.0, a.as_ptr(), k as isize, 1, b.as_ptr(), 1, k as isize, 0.0, c.as_mut_ptr(), n as isize, 1);
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

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
    /// Points k-means++ seeds from (a uniform sample; at least `k`; 20 per cluster is
    /// plenty, and seeding costs `k × init_sample × d`).
    pub init_sample: usize,
}

/// A fitted model.
#[derive(Debug, Clone)]
pub struct KMeans {
    /// `k × d`, row-major.
    pub centroids: Vec<f32>,
    pub k: usize,
    pub d: usize,
    pub iterations: usize,
    /// Sum of squared distances to the nearest centroid at the last assignment.
    pub inertia: f64,
}

/// Nearest centroid (and its squared distance) of each row of `data` (`n × d`), on all
/// threads, in row chunks.
pub fn assign(data: &[f32], d: usize, centroids: &[f32], k: usize) -> (Vec<u32>, Vec<f32>) {
    let n = data.len() / d;
    let c_norms: Vec<f32> = centroids.chunks_exact(d).map(|c| c.iter().map(|x| x * x).sum()).collect();
    const CHUNK: usize = 1024;
    let mut labels = vec![0u32; n];
    let mut dists = vec![0f32; n];
    let mut parts: Vec<(usize, &mut [u32], &mut [f32])> =
        labels.chunks_mut(CHUNK).zip(dists.chunks_mut(CHUNK)).enumerate().map(|(i, (l, s))| (i * CHUNK, l, s)).collect();
    let per_thread = parts.len().div_ceil(threads()).max(1);
    std::thread::scope(|s| {
        while !parts.is_empty() {
            let mine: Vec<_> = parts.drain(..per_thread.min(parts.len())).collect();
            let c_norms = &c_norms;
            s.spawn(move || {
                let mut scores = vec![0f32; CHUNK * k];
                for (start, l, dd) in mine {
                    let m = l.len();
                    let rows = &data[start * d..(start + m) * d];
                    dot_rows(rows, m, centroids, k, d, &mut scores);
                    for r in 0..m {
                        let x_norm: f32 = rows[r * d..(r + 1) * d].iter().map(|x| x * x).sum();
                        let (mut best, mut best_d) = (0usize, f32::INFINITY);
                        for (j, &dot) in scores[r * k..(r + 1) * k].iter().enumerate() {
                            let dist = c_norms[j] - 2.0 * dot;
                            if dist < best_d {
                                best_d = dist;
                                best = j;
                            }
                        }
                        l[r] = best as u32;
                        dd[r] = (best_d + x_norm).max(0.0);
                    }
                }
            });
        }
    });
    (labels, dists)
}

/// Fixed-point scale of the centroid sums: exact integer addition, so the sums (and the
/// centroids) do not depend on how rows are split between threads.
const FIXED: f64 = (1u64 << 32) as f64;

/// Each cluster's members summed (fixed point, `k × d`) and counted.
type Sums = (Vec<i64>, Vec<u64>);

/// k-means++ seeding on `sample` rows of `data`.
pub(crate) fn seed_plus_plus(data: &[f32], d: usize, sample: &[usize], k: usize, rng: &mut Rng) -> Vec<f32> {
    let row = |i: usize| &data[sample[i] * d..(sample[i] + 1) * d];
    let dist2 = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>();
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
        // Update the distances in parallel chunks.
        let per = closest.len().div_ceil(threads()).max(1);
        std::thread::scope(|s| {
            for (t, part) in closest.chunks_mut(per).enumerate() {
                let c = &c;
                s.spawn(move || {
                    for (j, v) in part.iter_mut().enumerate() {
                        let x = dist2(row(t * per + j), c);
                        if x < *v {
                            *v = x;
                        }
                    }
                });
            }
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
/// point farthest from its centroid (as scikit-learn). Returns the squared movement.
pub(crate) fn update(centroids: &mut [f32], sums: &[f64], counts: &[u64], data: &[f32], dists: &[f32], d: usize) -> f64 {
    let n = dists.len();
    let mut shift = 0.0;
    let mut far: Option<Vec<usize>> = None;
    let mut next_far = 0;
    for (c, &count) in counts.iter().enumerate() {
        let new: Vec<f32> = if count > 0 {
            sums[c * d..(c + 1) * d].iter().map(|s| (s / count as f64) as f32).collect()
        } else {
            let far = far.get_or_insert_with(|| {
                let mut f: Vec<usize> = (0..n).collect();
                f.sort_unstable_by(|&a, &b| dists[b].total_cmp(&dists[a]).then(a.cmp(&b)));
                f
            });
            let i = far[next_far.min(n.saturating_sub(1))];
            next_far += 1;
            data[i * d..(i + 1) * d].to_vec()
        };
        shift += new.iter().zip(&centroids[c * d..(c + 1) * d]).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>();
        centroids[c * d..(c + 1) * d].copy_from_slice(&new);
    }
    shift
}

/// Fit k-means on `data` (`n × d`).
pub fn kmeans(data: &[f32], d: usize, p: &KMeansParams) -> KMeans {
    let n = data.len() / d.max(1);
    let k = p.k.clamp(1, n.max(1));
    let mut rng = Rng::new(p.seed);
    let idx = sample(n, p.init_sample.max(k).min(n), &mut rng);
    let mut centroids = seed_plus_plus(data, d, &idx, k, &mut rng);
    // scikit-learn's tolerance: tol × mean per-dimension variance of the data (estimated on
    // the seeding sample).
    let tol = p.tol * variance(data, d, &idx);
    let mut iterations = 0;
    let mut inertia = 0.0;
    let mut b = Bounds { labels: vec![0; n], upper: vec![0.0; n], lower: vec![0.0; n] };
    for it in 0..p.max_iter.max(1) {
        iterations += 1;
        let (sums, counts) = assign_bounded(data, d, &centroids, k, &mut b, it == 0);
        // `upper` is each point's exact distance to its centroid after the pass.
        let dists: Vec<f32> = b.upper.iter().map(|u| u * u).collect();
        inertia = dists.iter().map(|&x| f64::from(x)).sum();
        let sums: Vec<f64> = sums.iter().map(|&s| s as f64 / FIXED).collect();
        let before = centroids.clone();
        let shift = update(&mut centroids, &sums, &counts, data, &dists, d);
        // Hamerly's bounds follow the centroids: the distance to the own centroid grows by at
        // most its move, to any other shrinks by at most the largest other move.
        let moves: Vec<f32> = before
            .chunks_exact(d)
            .zip(centroids.chunks_exact(d))
            .map(|(a, c)| a.iter().zip(c).map(|(x, y)| (x - y) * (x - y)).sum::<f32>().sqrt())
            .collect();
        let (mut first, mut second, mut arg) = (0f32, 0f32, usize::MAX);
        for (j, &m) in moves.iter().enumerate() {
            if m > first {
                (second, first, arg) = (first, m, j);
            } else if m > second {
                second = m;
            }
        }
        for i in 0..n {
            let a = b.labels[i] as usize;
            b.lower[i] -= if a == arg { second } else { first };
        }
        if shift <= tol {
            break;
        }
    }
    KMeans { centroids, k, d, iterations, inertia }
}

/// Each point's centroid and Hamerly's bounds: `upper` its distance to that centroid,
/// `lower` a lower bound on its distance to any other.
struct Bounds {
    labels: Vec<u32>,
    upper: Vec<f32>,
    lower: Vec<f32>,
}

/// A chunk of points: its first row, and its slices of the labels and bounds.
type BoundsChunk<'a> = (usize, &'a mut [u32], &'a mut [f32], &'a mut [f32]);

/// Half the distance from each centroid to its nearest other centroid: a point closer than
/// that to its centroid cannot be closer to another.
fn half_gaps(centroids: &[f32], k: usize, d: usize) -> Vec<f32> {
    let norms: Vec<f32> = centroids.chunks_exact(d).map(|c| c.iter().map(|x| x * x).sum()).collect();
    let mut dots = vec![0f32; k * k];
    dot_rows(centroids, k, centroids, k, d, &mut dots);
    (0..k)
        .map(|j| {
            let nearest = (0..k).filter(|&o| o != j).map(|o| norms[j] + norms[o] - 2.0 * dots[j * k + o]).fold(f32::INFINITY, f32::min);
            0.5 * nearest.max(0.0).sqrt()
        })
        .collect()
}

/// One Lloyd assignment with Hamerly's bounds (Hamerly 2010, "Making k-means even faster"):
/// a point whose exact distance to its centroid is within both its lower bound and half the
/// gap to that centroid's nearest neighbour keeps its centroid without being compared to the
/// others; the rest (all of them when `all`) are compared to every centroid in one GEMM per
/// chunk. The labels are those plain Lloyd gives (up to float ties). Returns each cluster's
/// fixed-point sum and count (exact, so independent of the threads).
fn assign_bounded(data: &[f32], d: usize, centroids: &[f32], k: usize, b: &mut Bounds, all: bool) -> Sums {
    let c_norms: Vec<f32> = centroids.chunks_exact(d).map(|c| c.iter().map(|x| x * x).sum()).collect();
    let gaps = half_gaps(centroids, k, d);
    const CHUNK: usize = 1024;
    let mut parts: Vec<BoundsChunk<'_>> = b
        .labels
        .chunks_mut(CHUNK)
        .zip(b.upper.chunks_mut(CHUNK))
        .zip(b.lower.chunks_mut(CHUNK))
        .enumerate()
        .map(|(i, ((l, u), lo))| (i * CHUNK, l, u, lo))
        .collect();
    let per_thread = parts.len().div_ceil(threads()).max(1);
    let partials: Vec<Sums> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        while !parts.is_empty() {
            let mine: Vec<_> = parts.drain(..per_thread.min(parts.len())).collect();
            let (c_norms, gaps) = (&c_norms, &gaps);
            handles.push(s.spawn(move || {
                let mut gathered = vec![0f32; CHUNK * d];
                let mut scores = vec![0f32; CHUNK * k];
                let mut todo = Vec::with_capacity(CHUNK);
                let (mut acc, mut counts) = (vec![0i64; k * d], vec![0u64; k]);
                for (start, labels, upper, lower) in mine {
                    let m = labels.len();
                    let rows = &data[start * d..(start + m) * d];
                    todo.clear();
                    for r in 0..m {
                        let x = &rows[r * d..(r + 1) * d];
                        if !all {
                            let a = labels[r] as usize;
                            let c = &centroids[a * d..(a + 1) * d];
                            let u = x.iter().zip(c).map(|(p, q)| (p - q) * (p - q)).sum::<f32>().sqrt();
                            upper[r] = u;
                            // A small slack keeps float error from deciding near-ties.
                            if u <= gaps[a].max(lower[r]) * (1.0 - 1e-5) - 1e-6 {
                                continue;
                            }
                        }
                        gathered[todo.len() * d..(todo.len() + 1) * d].copy_from_slice(x);
                        todo.push(r);
                    }
                    if !todo.is_empty() {
                        dot_rows(&gathered, todo.len(), centroids, k, d, &mut scores);
                        for (t, &r) in todo.iter().enumerate() {
                            let x = &gathered[t * d..(t + 1) * d];
                            let x_norm: f32 = x.iter().map(|v| v * v).sum();
                            let (mut best, mut best_d, mut next_d) = (0usize, f32::INFINITY, f32::INFINITY);
                            for (j, &dot) in scores[t * k..(t + 1) * k].iter().enumerate() {
                                let dist = c_norms[j] - 2.0 * dot;
                                if dist < best_d {
                                    (next_d, best_d, best) = (best_d, dist, j);
                                } else if dist < next_d {
                                    next_d = dist;
                                }
                            }
                            labels[r] = best as u32;
                            let c = &centroids[best * d..(best + 1) * d];
                            upper[r] = x.iter().zip(c).map(|(p, q)| (p - q) * (p - q)).sum::<f32>().sqrt();
                            lower[r] = (next_d + x_norm).max(0.0).sqrt();
                        }
                    }
                    for r in 0..m {
                        let a = labels[r] as usize;
                        counts[a] += 1;
                        acc[a * d..(a + 1) * d]
                            .iter_mut()
                            .zip(&rows[r * d..(r + 1) * d])
                            .for_each(|(s, x)| *s += (f64::from(*x) * FIXED) as i64);
                    }
                }
                (acc, counts)
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let mut acc = vec![0i64; k * d];
    let mut counts = vec![0u64; k];
    for (a, c) in partials {
        acc.iter_mut().zip(&a).for_each(|(x, y)| *x += y);
        counts.iter_mut().zip(&c).for_each(|(x, y)| *x += y);
    }
    (acc, counts)
}

/// SemDeDup within one cluster: `vectors` (`m × d`, unit length) are in keep order; for each,
/// its largest cosine similarity to an earlier one and that one's index (`None` for the
/// first). Computed in `tile × tile` blocks.
pub fn semdedup(vectors: &[f32], d: usize, tile: usize) -> Vec<(f32, Option<u32>)> {
    let m = vectors.len() / d.max(1);
    let mut best: Vec<(f32, Option<u32>)> = vec![(f32::NEG_INFINITY, None); m];
    let tile = tile.max(1);
    let mut block = vec![0f32; tile * tile];
    for j0 in (0..m).step_by(tile) {
        let jn = tile.min(m - j0);
        // Rows i < j: blocks i0 ≤ j0.
        for i0 in (0..=j0).step_by(tile) {
            let i_n = tile.min(m - i0);
            dot_rows(&vectors[j0 * d..(j0 + jn) * d], jn, &vectors[i0 * d..(i0 + i_n) * d], i_n, d, &mut block);
            for jj in 0..jn {
                let j = j0 + jj;
                let row = &block[jj * i_n..(jj + 1) * i_n];
                for (ii, &sim) in row.iter().enumerate() {
                    let i = i0 + ii;
                    if i >= j {
                        break;
                    }
                    if sim > best[j].0 {
                        best[j] = (sim, Some(i as u32));
                    }
                }
            }
        }
    }
    best.into_iter().map(|(s, i)| if i.is_none() { (0.0, None) } else { (s, i) }).collect()
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
    fn plain_lloyd(data: &[f32], d: usize, p: &KMeansParams) -> Vec<f32> {
        let n = data.len() / d;
        let mut rng = Rng::new(p.seed);
        let idx = sample(n, p.init_sample.max(p.k).min(n), &mut rng);
        let mut centroids = seed_plus_plus(data, d, &idx, p.k, &mut rng);
        for _ in 0..p.max_iter {
            let (labels, dists) = assign(data, d, &centroids, p.k);
            let (mut acc, mut counts) = (vec![0i64; p.k * d], vec![0u64; p.k]);
            for (i, &l) in labels.iter().enumerate() {
                counts[l as usize] += 1;
                for j in 0..d {
                    acc[l as usize * d + j] += (f64::from(data[i * d + j]) * FIXED) as i64;
                }
            }
            let sums: Vec<f64> = acc.iter().map(|&s| s as f64 / FIXED).collect();
            update(&mut centroids, &sums, &counts, data, &dists, d);
        }
        centroids
    }

    #[test]
    fn bounds_skip_work_but_not_the_result() {
        // Overlapping clusters (wide noise), more centroids than blobs: many points move early.
        let mut rng = Rng::new(5);
        let d = 12;
        let data: Vec<f32> = (0..3000 * d).map(|i| ((i / d) % 7) as f32 * 0.3 + rng.next_f64() as f32).collect();
        let p = KMeansParams { k: 10, max_iter: 15, tol: 0.0, seed: 3, init_sample: 200 };
        assert_eq!(kmeans(&data, d, &p).centroids, plain_lloyd(&data, d, &p));
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
