//! k-means as map and reduce steps, so that the rows it is fitted on can live on several
//! machines: each [`FitShard`] holds some of the rows (their bounds and their clusters'
//! fixed-point sums) and answers a round's centroids with a [`Partial`]; [`reduce`] turns
//! every shard's partial into the next centroids. [`crate::kmeans`] is the same steps with
//! one shard in one process, so a fit split over any number of shards gives the centroids
//! one machine gives, bit for bit:
//!
//! - the sums are exact integers (`FixedSums`, one scale for the whole fit: [`fixed_scale`]),
//!   so adding the shards' sums equals summing all rows at once;
//! - a row's label depends only on the row and the round's centroids (the bounds skip work,
//!   never change a label), so a shard restarted at any round, with fresh bounds, answers
//!   the same;
//! - an empty cluster takes the row farthest from its centroid over the whole fit: every
//!   shard sends its farthest rows (as many as it has empty clusters, which is at least how
//!   many are empty overall), and [`reduce`] takes the farthest of those.

use crate::bounds;
use crate::kernel::{Packed, dist2};
use crate::{Change, FixedSums, Rng};

/// A row offered to fill an empty cluster: its squared distance to its centroid, its index
/// in the whole fit (ties go to the lower index) and its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Far {
    pub dist: f32,
    pub index: u64,
    pub vector: Vec<f32>,
}

/// One shard's answer to a round: its clusters' member sums (`k × d`, fixed point) and
/// member counts, its rows farthest from their centroids when it has empty clusters, and how
/// many row–centroid distances it computed.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    pub sums: Vec<i64>,
    pub counts: Vec<u64>,
    pub far: Vec<Far>,
    pub distances: u64,
}

/// Why a partial's bytes cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPartial(pub String);

impl std::fmt::Display for BadPartial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a k-means partial: {}", self.0)
    }
}

impl Partial {
    /// Little-endian bytes: `k`, `d`, far rows, distances (u64 each), then the sums, the
    /// counts and each far row (dist f32, index u64, d × f32).
    pub fn to_bytes(&self, d: usize) -> Vec<u8> {
        let k = self.counts.len();
        let mut out = Vec::with_capacity(32 + k * d * 8 + k * 8 + self.far.len() * (12 + d * 4));
        for v in [k as u64, d as u64, self.far.len() as u64, self.distances] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        self.sums.iter().for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
        self.counts.iter().for_each(|c| out.extend_from_slice(&c.to_le_bytes()));
        for f in &self.far {
            out.extend_from_slice(&f.dist.to_le_bytes());
            out.extend_from_slice(&f.index.to_le_bytes());
            f.vector.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
        }
        out
    }

    /// The partial of `k` clusters of `d` dimensions in `bytes`.
    pub fn from_bytes(bytes: &[u8], k: usize, d: usize) -> Result<Partial, BadPartial> {
        let mut r = Reader { bytes, at: 0 };
        let (pk, pd, nfar, distances) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        if pk != k as u64 || pd != d as u64 {
            return Err(BadPartial(format!("{pk} clusters × {pd} dimensions where the fit has {k} × {d}")));
        }
        let sums = (0..k * d).map(|_| r.u64().map(|v| v as i64)).collect::<Result<_, _>>()?;
        let counts = (0..k).map(|_| r.u64()).collect::<Result<_, _>>()?;
        let mut far = Vec::with_capacity(nfar.min(k as u64) as usize);
        for _ in 0..nfar {
            let dist = r.f32()?;
            let index = r.u64()?;
            let vector = (0..d).map(|_| r.f32()).collect::<Result<_, _>>()?;
            far.push(Far { dist, index, vector });
        }
        if r.at != bytes.len() {
            return Err(BadPartial(format!("{} bytes past its end", bytes.len() - r.at)));
        }
        Ok(Partial { sums, counts, far, distances })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], BadPartial> {
        let b = self.bytes.get(self.at..self.at + N).ok_or_else(|| BadPartial(format!("cut short at byte {}", self.at)))?;
        self.at += N;
        b.try_into().map_err(|_| BadPartial("cut short".into()))
    }
    fn u64(&mut self) -> Result<u64, BadPartial> {
        self.take::<8>().map(u64::from_le_bytes)
    }
    fn f32(&mut self) -> Result<f32, BadPartial> {
        self.take::<4>().map(f32::from_le_bytes)
    }
}

/// The fixed-point scale of a fit of `n` rows whose largest magnitude is `max_abs`: a power
/// of two as large as keeps `n × max_abs × scale` below 2⁶² and `max_abs × scale` below 2⁵⁰,
/// at most 2⁴⁰.
pub fn fixed_scale(n: usize, max_abs: f32) -> f64 {
    let e = if max_abs > 0.0 {
        let max = f64::from(max_abs);
        (62.0 - (n.max(1) as f64 * max).log2()).min(50.0 - max.log2()).floor().min(40.0)
    } else {
        0.0
    };
    2f64.powi(e as i32)
}

/// The largest finite magnitude in `data` (for [`fixed_scale`]).
pub fn max_abs(data: &[f32]) -> f32 {
    use rayon::prelude::*;
    data.par_chunks(1 << 16).map(|c| c.iter().map(|x| x.abs()).filter(|x| x.is_finite()).fold(0f32, f32::max)).reduce(|| 0.0, f32::max)
}

/// The rows k-means++ seeds from, as indices into a fit of `n` rows (ascending), and the
/// random stream the seeding goes on with.
pub fn init_sample(n: usize, p: &crate::KMeansParams) -> (Vec<usize>, Rng) {
    let k = p.k.clamp(1, n.max(1));
    let mut rng = Rng::new(p.seed);
    let idx = crate::sample(n, p.init_sample.max(k).min(n), &mut rng);
    (idx, rng)
}

/// The starting centroids (`k × d`) from the seeding rows (`rows`, in [`init_sample`]'s
/// order) and the absolute tolerance (`tol` × their mean per-dimension variance).
pub fn start(rows: &[f32], d: usize, k: usize, tol: f64, rng: &mut Rng) -> (Vec<f32>, f64) {
    let m = rows.len() / d.max(1);
    let all: Vec<usize> = (0..m).collect();
    let centroids = crate::seed_plus_plus(rows, d, &all, k.clamp(1, m.max(1)), rng);
    (centroids, tol * crate::variance(rows, d, &all))
}

/// Some of the rows of a fit, with what the rounds keep of them: each row's label and
/// bounds, and the sums of its clusters.
pub struct FitShard<'a> {
    data: &'a [f32],
    d: usize,
    /// The fit index of the first row (a shard's rows are a contiguous run of the fit).
    first: u64,
    groups: bounds::Groups,
    bounds: bounds::Bounds,
    sums: FixedSums,
    rounds: usize,
}

impl<'a> FitShard<'a> {
    /// The shard of rows `data` (`rows × d`, fit indices from `first` on) of a fit of
    /// `total` rows, whose rounds start from `centroids`; `scale` is the whole fit's
    /// [`fixed_scale`].
    pub fn new(data: &'a [f32], d: usize, first: u64, centroids: &[f32], total: usize, scale: f64, seed: u64) -> FitShard<'a> {
        let k = centroids.len() / d.max(1);
        let groups = bounds::Groups::new(centroids, k, d, total, seed);
        let bounds = bounds::Bounds::new(data, d, groups.len());
        FitShard { data, d, first, groups, bounds, sums: FixedSums::with_scale(k, d, scale), rounds: 0 }
    }

    /// The rows assigned to `centroids` (the round's): the shard's partial.
    pub fn round(&mut self, centroids: &[f32]) -> Partial {
        let d = self.d;
        let gaps = bounds::half_gaps(&Packed::new(centroids, d), centroids);
        let (distances, changes): (u64, Vec<Change>) =
            bounds::assign(self.data, d, centroids, &self.groups, &gaps, &mut self.bounds, self.rounds == 0);
        self.rounds += 1;
        self.sums.apply(self.data, &changes);
        let empty = self.sums.counts.iter().filter(|&&c| c == 0).count();
        let far = if empty == 0 { Vec::new() } else { self.farthest(centroids, empty) };
        Partial { sums: self.sums.acc.clone(), counts: self.sums.counts.clone(), far, distances }
    }

    /// The `m` rows farthest from their centroids (farthest first, then by fit index).
    fn farthest(&self, centroids: &[f32], m: usize) -> Vec<Far> {
        let d = self.d;
        let dists = crate::distances(self.data, d, centroids, &self.bounds.labels);
        let mut order: Vec<usize> = (0..dists.len()).collect();
        order.sort_unstable_by(|&a, &b| dists[b].total_cmp(&dists[a]).then(a.cmp(&b)));
        order
            .into_iter()
            .take(m)
            .map(|i| Far { dist: dists[i], index: self.first + i as u64, vector: self.data[i * d..(i + 1) * d].to_vec() })
            .collect()
    }

    /// The centroids moved from `before` to `after` (the reduce of the last round): the
    /// bounds follow.
    pub fn follow(&mut self, before: &[f32], after: &[f32]) {
        let d = self.d;
        let moves: Vec<f32> = before.chunks_exact(d).zip(after.chunks_exact(d)).map(|(a, c)| dist2(a, c).sqrt()).collect();
        self.bounds.follow(&moves, &self.groups);
    }

    /// Each row's label at the last round.
    pub fn labels(&self) -> &[u32] {
        &self.bounds.labels
    }
}

/// The next centroids from a round's `centroids` (updated in place) and every shard's
/// partial: each cluster's mean, or for an empty cluster the farthest row not taken yet (as
/// scikit-learn); returns the squared movement.
pub fn reduce(centroids: &mut [f32], partials: &[Partial], scale: f64, d: usize) -> f64 {
    let k = centroids.len() / d.max(1);
    let mut acc = vec![0i64; k * d];
    let mut counts = vec![0u64; k];
    for p in partials {
        acc.iter_mut().zip(&p.sums).for_each(|(a, s)| *a += s);
        counts.iter_mut().zip(&p.counts).for_each(|(a, c)| *a += c);
    }
    let sums: Vec<f64> = acc.iter().map(|&s| s as f64 / scale).collect();
    crate::update_with(
        centroids,
        &sums,
        &counts,
        |m| {
            let mut far: Vec<&Far> = partials.iter().flat_map(|p| &p.far).collect();
            far.sort_unstable_by(|a, b| b.dist.total_cmp(&a.dist).then(a.index.cmp(&b.index)));
            far.into_iter().take(m).map(|f| f.vector.clone()).collect()
        },
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KMeansParams;

    /// Rows of several overlapping blobs (many rows move early), unit length.
    fn rows(n: usize, d: usize, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        let mut v: Vec<f32> = (0..n * d).map(|i| ((i / d) % 7) as f32 * 0.3 + rng.next_f64() as f32).collect();
        for r in v.chunks_exact_mut(d) {
            let s = r.iter().map(|x| x * x).sum::<f32>().sqrt();
            r.iter_mut().for_each(|x| *x /= s);
        }
        v
    }

    /// k-means with its rows cut into `cuts` (fit indices where a shard starts), each shard
    /// joining at round `joins[s]` (a restarted shard, fresh bounds), partials through bytes.
    fn sharded(data: &[f32], d: usize, p: &KMeansParams, cuts: &[usize], joins: &[usize]) -> Vec<f32> {
        let n = data.len() / d;
        let k = p.k.clamp(1, n);
        let (idx, mut rng) = init_sample(n, p);
        let seed_rows: Vec<f32> = idx.iter().flat_map(|&i| data[i * d..(i + 1) * d].iter().copied()).collect();
        let (mut centroids, tol) = start(&seed_rows, d, k, p.tol, &mut rng);
        let scale = fixed_scale(n, max_abs(data));
        let mut bounds: Vec<usize> = cuts.to_vec();
        bounds.push(n);
        let mut shards: Vec<Option<FitShard<'_>>> = (0..cuts.len()).map(|_| None).collect();
        for round in 0..p.max_iter.max(1) {
            let mut partials = Vec::new();
            for s in 0..cuts.len() {
                if round >= joins[s] && shards[s].is_none() {
                    let (a, b) = (bounds[s], bounds[s + 1]);
                    shards[s] = Some(FitShard::new(&data[a * d..b * d], d, a as u64, &centroids, n, scale, p.seed));
                }
                let partial = match &mut shards[s] {
                    Some(shard) => shard.round(&centroids),
                    // Not joined yet: a throw-away shard answers this round alone.
                    None => {
                        let (a, b) = (bounds[s], bounds[s + 1]);
                        FitShard::new(&data[a * d..b * d], d, a as u64, &centroids, n, scale, p.seed).round(&centroids)
                    }
                };
                partials.push(Partial::from_bytes(&partial.to_bytes(d), k, d).unwrap());
            }
            let before = centroids.clone();
            let shift = reduce(&mut centroids, &partials, scale, d);
            shards.iter_mut().flatten().for_each(|s| s.follow(&before, &centroids));
            if shift <= tol {
                break;
            }
        }
        centroids
    }

    #[test]
    fn shards_in_any_cut_and_restarted_at_any_round_give_one_machines_centroids() {
        let d = 12;
        let data = rows(2400, d, 5);
        // 40 distinct rows, each 60 times in a run: seeding from k rows runs out of distinct
        // ones, so centroids coincide, clusters run empty overall and take the farthest rows
        // (of every shard). k = 300 leaves clusters empty in the shards' rows.
        let repeated: Vec<f32> = (0..2400).flat_map(|i| data[(i / 60) * d..(i / 60 + 1) * d].to_vec()).collect();
        for (rows, k, init) in [(&data, 10, 80), (&data, 60, 480), (&data, 300, 2400), (&repeated, 60, 60)] {
            let p = KMeansParams { k, max_iter: 25, tol: 1e-6, seed: 11, init_sample: init };
            let one = crate::kmeans(rows, d, &p).centroids;
            assert_eq!(sharded(rows, d, &p, &[0], &[0]), one, "one shard, k = {k}");
            assert_eq!(sharded(rows, d, &p, &[0, 700, 701, 1900], &[0, 0, 3, 0]), one, "four shards, k = {k}");
            assert_eq!(sharded(rows, d, &p, &[0, 100], &[5, 2]), one, "two late shards, k = {k}");
            assert_eq!(sharded(rows, d, &p, &[0, 0, 1200, 2400], &[0, 0, 0, 0]), one, "shards without rows, k = {k}");
        }
    }

    #[test]
    fn a_partial_reads_back_and_a_bad_one_is_named() {
        let p = Partial {
            sums: vec![1, -2, 3, 4],
            counts: vec![2, 0],
            far: vec![Far { dist: 0.5, index: 9, vector: vec![0.25, -1.0] }],
            distances: 17,
        };
        let b = p.to_bytes(2);
        assert_eq!(Partial::from_bytes(&b, 2, 2).unwrap(), p);
        assert!(Partial::from_bytes(&b, 3, 2).unwrap_err().to_string().contains("2 clusters × 2 dimensions where the fit has 3 × 2"));
        assert!(Partial::from_bytes(&b[..b.len() - 1], 2, 2).unwrap_err().0.contains("cut short"));
        let mut long = b.clone();
        long.push(0);
        assert!(Partial::from_bytes(&long, 2, 2).unwrap_err().0.contains("1 bytes past its end"));
    }
}
