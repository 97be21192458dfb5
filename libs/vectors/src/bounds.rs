//! The assignment step of k-means with Yinyang bounds (Ding et al. 2015, "Yinyang K-Means: a
//! drop-in replacement of the classic K-Means with consistent speedup"). The centroids are
//! split into groups of 16 — one kernel panel each (a multiple of 16 when the rows' bounds
//! would not fit [`LOWER_BOUNDS_BUDGET`]), neighbours together by a k-means of the first
//! centroids. Every row keeps an upper bound on its distance to its centroid and, per group,
//! a lower bound on its distance to the group's other centroids. When centroids move, the
//! bounds follow (the upper grows by the own centroid's move, a group's lower bound shrinks by
//! the group's largest move), and a row is compared only with the groups whose bound no longer
//! clears its upper bound:
//! - none: the row is not read at all;
//! - some: each such group's panel against all the rows of the chunk that asked for it, by
//!   the blocked kernel (rows read in place);
//! - most (over 80 % of the centroids): every panel, by the same kernel.
//!
//! The kernel hands back each panel's two smallest values, so one pass gives the nearest
//! centroid and every group's new bound. The labels are those plain Lloyd gives, up to float
//! ties. With one group this is Hamerly's algorithm (2010).

use rayon::prelude::*;

use crate::kernel::{self, Candidates, Nearest, Packed, PanelMin, dist2};
use crate::{CHUNK, Change, KMeansParams, NO_CLUSTER};

/// Lower bounds kept at most (floats, all rows together: 256 MiB).
const LOWER_BOUNDS_BUDGET: usize = 1 << 26;
/// Slots of a kernel panel.
const PANEL: usize = 16;
/// Rows per call of the kernel's panel minima (their minima stay in L1).
const BLOCK_ROWS: usize = 96;
/// An empty slot.
const EMPTY: u32 = u32::MAX;

/// A small slack so float error does not decide near-ties: a bound counts as clearing an
/// upper bound only when it does so by more than that.
fn clears(lower: f32, upper: f32) -> bool {
    upper <= lower * (1.0 - 1e-5) - 1e-6
}

/// Centroids in groups of `size` slots (whole kernel panels).
pub(crate) struct Groups {
    /// Slot → centroid ([`EMPTY`] pads a group), `groups × size`.
    slots: Vec<u32>,
    /// Centroid → group.
    of: Vec<u32>,
    size: usize,
}

impl Groups {
    /// Groups of 16 of the `k` centroids (more, in multiples of 16, when `n` rows' bounds
    /// would not fit [`LOWER_BOUNDS_BUDGET`]): the centroids sorted by their nearest centre of
    /// a k-means of them, then cut into runs.
    pub(crate) fn new(centroids: &[f32], k: usize, d: usize, n: usize, seed: u64) -> Groups {
        let most = (LOWER_BOUNDS_BUDGET / n.max(1)).max(1);
        let mut size = PANEL;
        while k.div_ceil(size) > most {
            size *= 2;
        }
        let t = k.div_ceil(size);
        let near: Vec<u32> = if t <= 1 {
            vec![0; k]
        } else {
            let p = KMeansParams { k: t, max_iter: 5, tol: 0.0, seed, init_sample: k };
            let fit = crate::kmeans(&centroids[..k * d], d, &p);
            crate::assign(&centroids[..k * d], d, &fit.centroids, fit.k).0
        };
        let mut order: Vec<u32> = (0..k as u32).collect();
        order.sort_by_key(|&j| (near[j as usize], j));
        let mut slots = vec![EMPTY; t * size];
        let mut of = vec![0u32; k];
        for (g, run) in order.chunks(size).enumerate() {
            let mut run = run.to_vec();
            run.sort_unstable();
            for (i, &j) in run.iter().enumerate() {
                slots[g * size + i] = j;
                of[j as usize] = g as u32;
            }
        }
        Groups { slots, of, size }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len() / self.size
    }
}

/// Each row's centroid and bounds.
pub(crate) struct Bounds {
    pub(crate) labels: Vec<u32>,
    /// An upper bound on the distance to the own centroid.
    upper: Vec<f32>,
    /// `n × groups`: a lower bound on the distance to every other centroid of each group.
    lower: Vec<f32>,
    groups: usize,
    /// Each row's squared norm (once per fit, not per iteration).
    norms: Vec<f32>,
}

impl Bounds {
    pub(crate) fn new(data: &[f32], d: usize, groups: usize) -> Bounds {
        let norms: Vec<f32> = data.par_chunks(d).map(|x| kernel::dot(x, x)).collect();
        let n = norms.len();
        Bounds { labels: vec![NO_CLUSTER; n], upper: vec![0.0; n], lower: vec![0.0; n * groups], groups, norms }
    }

    /// The centroids moved by `moves` (`k`): the bounds follow.
    pub(crate) fn follow(&mut self, moves: &[f32], groups: &Groups) {
        let drift: Vec<f32> = groups
            .slots
            .chunks(groups.size)
            .map(|run| run.iter().filter(|&&j| j != EMPTY).map(|&j| moves[j as usize]).fold(0.0, f32::max))
            .collect();
        let t = self.groups;
        self.labels.par_iter().zip(self.upper.par_iter_mut()).zip(self.lower.par_chunks_mut(t)).for_each(|((&a, u), lower)| {
            *u += moves[a as usize];
            lower.iter_mut().zip(&drift).for_each(|(l, m)| *l -= m);
        });
    }
}

/// Half the distance from each centroid to its nearest other centroid: a point closer than
/// that to its centroid cannot be closer to another.
pub(crate) fn half_gaps(packed: &Packed, centroids: &[f32]) -> Vec<f32> {
    let mut near = vec![Nearest::NONE; packed.len()];
    kernel::nearest(centroids, packed, Candidates::All, &mut near);
    near.iter()
        .enumerate()
        .map(|(j, o)| {
            // The nearest is the centroid itself unless another lies at no greater distance.
            let other = if o.label as usize == j { o.second } else { o.best };
            0.5 * (other + packed.norm(j)).max(0.0).sqrt()
        })
        .collect()
}

/// One thread's scratch space.
#[derive(Default)]
struct Scratch {
    /// Rows compared with every centroid (positions in the chunk).
    full: Vec<usize>,
    /// (group, row) pairs: the rows compared with some groups only.
    some: Vec<(usize, usize)>,
    /// The best of each such pair's group: (value, centroid, second value).
    found: Vec<(f32, u32, f32)>,
    /// Per row of the chunk: the best value so far and its centroid (sparse rows).
    best: Vec<(f32, u32)>,
    asked: Vec<usize>,
    minima: Vec<PanelMin>,
}

impl Scratch {
    /// `rows` (positions in `chunk`) against `panels`: each row's minima.
    fn minima(&mut self, chunk: &[f32], rows: &[usize], packed: &Packed, panels: std::ops::Range<usize>) {
        self.minima.clear();
        self.minima.resize(rows.len() * panels.len(), PanelMin { best: 0.0, second: 0.0, slot: 0 });
        kernel::panel_minima(chunk, rows, packed, panels, &mut self.minima);
    }
}

/// The smallest value of a group's panels (`mins`, the group's first panel `q0`), its
/// centroid, and the group's second-smallest value.
fn group_best(mins: &[PanelMin], q0: usize, slots: &[u32]) -> (f32, u32, f32) {
    let (mut best, mut label, mut second) = (f32::INFINITY, EMPTY, f32::INFINITY);
    for (i, m) in mins.iter().enumerate() {
        let j = slots[(q0 + i) * PANEL + m.slot as usize];
        if label == EMPTY || m.best < best || (m.best == best && j < label) {
            second = second.min(best).min(m.second);
            (best, label) = (m.best, j);
        } else {
            second = second.min(m.best);
        }
    }
    (best, label, second)
}

/// One assignment of every row of `data` to its nearest centroid, bounded. `all` compares
/// every row with every centroid (the first iteration). `half_gaps[j]` is half the distance
/// from centroid j to its nearest other (a row closer than that to its centroid stays).
/// Returns how many row–centroid distances were computed, and the rows that changed cluster.
pub(crate) fn assign(
    data: &[f32],
    d: usize,
    centroids: &[f32],
    groups: &Groups,
    half_gaps: &[f32],
    b: &mut Bounds,
    all: bool,
) -> (u64, Vec<Change>) {
    let k = groups.of.len();
    let t = b.groups;
    let size = groups.size;
    let per_group = size / PANEL;
    let packed = Packed::slots(centroids, d, &groups.slots);
    let panels = packed.panels();
    let centroid = |j: usize| &centroids[j * d..(j + 1) * d];
    let norms = &b.norms;
    b.labels
        .par_chunks_mut(CHUNK)
        .zip(b.upper.par_chunks_mut(CHUNK))
        .zip(b.lower.par_chunks_mut(CHUNK * t))
        .enumerate()
        .map_init(Scratch::default, |s, (i, ((labels, upper), lower))| {
            let first_row = i * CHUNK;
            let rows = &data[first_row * d..(first_row + labels.len()) * d];
            let norms = &norms[first_row..first_row + labels.len()];
            let mut computed = 0u64;
            let mut changes = Vec::new();
            s.full.clear();
            s.some.clear();
            s.best.clear();
            s.best.resize(labels.len(), (f32::INFINITY, EMPTY));
            for (r, x) in rows.chunks_exact(d).enumerate() {
                let a = labels[r] as usize;
                if all || a >= k {
                    s.full.push(r);
                    continue;
                }
                let lb = &lower[r * t..(r + 1) * t];
                let bound = lb.iter().copied().fold(f32::INFINITY, f32::min).max(half_gaps[a]);
                if clears(bound, upper[r]) {
                    continue;
                }
                let u = dist2(x, centroid(a)).sqrt();
                computed += 1;
                upper[r] = u;
                if clears(bound, u) {
                    continue;
                }
                let before = s.some.len();
                s.some.extend((0..t).filter(|&g| !clears(lb[g], u)).map(|g| (g, r)));
                // Over 80 % of the centroids: all of them, in one pass.
                if (s.some.len() - before) * size * 10 > k * 8 {
                    s.some.truncate(before);
                    s.full.push(r);
                    continue;
                }
                // The own centroid at its exact distance, as a value of the kernel's form.
                s.best[r] = (u * u - norms[r], a as u32);
            }
            // The rows compared with some groups: each group with the rows that asked for it.
            s.some.sort_unstable();
            s.found.clear();
            let mut at = 0;
            while at < s.some.len() {
                let g = s.some[at].0;
                let end = at + s.some[at..].iter().take_while(|p| p.0 == g).count();
                let mut asked = std::mem::take(&mut s.asked);
                asked.clear();
                asked.extend(s.some[at..end].iter().map(|p| p.1));
                let q0 = g * per_group;
                s.minima(rows, &asked, &packed, q0..q0 + per_group);
                computed += (asked.len() * size) as u64;
                for (&r, mins) in asked.iter().zip(s.minima.chunks_exact(per_group)) {
                    let found = group_best(mins, q0, &groups.slots);
                    let best = &mut s.best[r];
                    if found.0 < best.0 || (found.0 == best.0 && found.1 < best.1) {
                        *best = (found.0, found.1);
                    }
                    s.found.push(found);
                }
                s.asked = asked;
                at = end;
            }
            // Their new bounds, once each row's best is known.
            for (&(g, r), &(value, label, second)) in s.some.iter().zip(&s.found) {
                let v = if label == s.best[r].1 { second } else { value };
                lower[r * t + g] = (v + norms[r]).max(0.0).sqrt();
            }
            for r in 0..labels.len() {
                let (_, best) = s.best[r];
                let a = labels[r];
                if best == EMPTY || best == a {
                    continue;
                }
                // The centroid left is now one of its group's others.
                let ga = groups.of[a as usize] as usize;
                lower[r * t + ga] = lower[r * t + ga].min(upper[r]);
                changes.push(((first_row + r) as u32, a, best));
                labels[r] = best;
                upper[r] = dist2(&rows[r * d..(r + 1) * d], centroid(best as usize)).sqrt();
            }
            // The rest against every panel, a block of rows at a time.
            let full = std::mem::take(&mut s.full);
            for block in full.chunks(BLOCK_ROWS) {
                s.minima(rows, block, &packed, 0..panels);
                computed += (block.len() * k) as u64;
                for (&r, mins) in block.iter().zip(s.minima.chunks_exact(panels)) {
                    // The smallest value, the smaller centroid on ties (as plain Lloyd).
                    let (mut q_best, mut best) = (0, EMPTY);
                    for (q, m) in mins.iter().enumerate() {
                        let j = groups.slots[q * PANEL + m.slot as usize];
                        if best == EMPTY || m.best < mins[q_best].best || (m.best == mins[q_best].best && j < best) {
                            (q_best, best) = (q, j);
                        }
                    }
                    let x = &rows[r * d..(r + 1) * d];
                    let norm = norms[r];
                    let lb = &mut lower[r * t..(r + 1) * t];
                    for (g, l) in lb.iter_mut().enumerate() {
                        let qs = g * per_group..(g + 1) * per_group;
                        let v = qs.map(|q| if q == q_best { mins[q].second } else { mins[q].best }).fold(f32::INFINITY, f32::min);
                        *l = (v + norm).max(0.0).sqrt();
                    }
                    if labels[r] != best {
                        changes.push(((first_row + r) as u32, labels[r], best));
                        labels[r] = best;
                    }
                    upper[r] = dist2(x, centroid(best as usize)).sqrt();
                }
            }
            s.full = full;
            (computed, changes)
        })
        .reduce(
            || (0, Vec::new()),
            |(n, mut a), (m, b)| {
                a.extend(b);
                (n + m, a)
            },
        )
}
