//! The one distance kernel of this crate: rows of vectors against a packed set of vectors,
//! each row's nearest and second-nearest by `‖c‖² − 2 x·c` (the squared Euclidean distance
//! less `‖x‖²`), fused: the dot products stay in registers and the minimum is taken from them,
//! so no `rows × k` score matrix is written or read back. Two folds share the blocked loop:
//! [`nearest`] (k-means' plain assignment and the centroids' gaps; SemDeDup's nearest earlier
//! member, with zero norms: the largest dot product) and [`panel_minima`] (each 16-vector
//! panel's two smallest values, for the bounded assignment's groups).
//!
//! On x86-64 with AVX2 and FMA (detected at run time) the dot products come from a 6 × 16
//! register-blocked micro-kernel written with `std::arch` intrinsics; elsewhere from a
//! portable loop of the same blocking. Hand-written because no kept crate fuses the GEMM with
//! the argmin: on two AVX2 cores (FMA peak ~185 GFLOP/s, measured), matrixmultiply's sgemm
//! followed by a scan of the score matrix assigned 200k × 384 rows to 200 centroids at
//! ~55 GFLOP/s, this kernel at 96–116 (`examples/kmeans-bench.rs`, `assign_gflops`).
//!
//! Each dot product is summed dimension by dimension in order, so a result does not depend on
//! how rows are split into blocks or threads.

use std::ops::Range;

/// Vectors per packed panel (two AVX registers).
const NR: usize = 16;
/// Rows per register block.
const MR: usize = 6;
/// Rows per cache block: the panel loop runs over this many rows (≤ 150 KB at d = 384) so the
/// rows stay in L2 while each 16-vector panel stays in L1.
const ROWS_PER_BLOCK: usize = 16 * MR;
/// Dimensions per slice: a 16-vector panel slice is 8 KB, a row block's 3 KB.
const DIMS_PER_SLICE: usize = 128;

/// Vectors packed for the kernel: panels of 16, each stored dimension-major (`d × 16`), the
/// last padded with vectors at infinite distance; with the squared norm of each.
pub struct Packed {
    panels: Vec<f32>,
    norms: Vec<f32>,
    /// Index of the first vector (labels are `first + position`).
    first: usize,
    len: usize,
    d: usize,
}

impl Packed {
    /// `vectors` (`len × d`, row-major), labelled `0..len`, with their squared norms
    /// (k-means' distances).
    pub fn new(vectors: &[f32], d: usize) -> Packed {
        Packed::build(vectors, d, 0, true)
    }

    /// `vectors` labelled `first..`, with zero norms: the nearest is the one of largest dot
    /// product (`best = −2 · max x·c`).
    pub fn by_dot(vectors: &[f32], d: usize, first: usize) -> Packed {
        Packed::build(vectors, d, first, false)
    }

    /// The vectors `slots[i]` of `vectors` (`u32::MAX`: an empty slot, at infinite distance)
    /// in slot order, with their squared norms: a caller that groups vectors by panel (16
    /// slots each) reads the slots back from [`panel_minima`].
    pub fn slots(vectors: &[f32], d: usize, slots: &[u32]) -> Packed {
        let panels_n = slots.len().div_ceil(NR);
        let mut panels = vec![0f32; panels_n * d * NR];
        let mut norms = vec![f32::INFINITY; panels_n * NR];
        for (i, &c) in slots.iter().enumerate() {
            let Some(v) = vectors.get(c as usize * d..(c as usize + 1) * d) else { continue };
            let (p, j) = (i / NR, i % NR);
            norms[i] = dot(v, v);
            for (t, &x) in v.iter().enumerate() {
                panels[(p * d + t) * NR + j] = x;
            }
        }
        Packed { panels, norms, first: 0, len: panels_n * NR, d }
    }

    /// Panels of 16 slots.
    pub fn panels(&self) -> usize {
        self.len.div_ceil(NR)
    }

    fn build(vectors: &[f32], d: usize, first: usize, with_norms: bool) -> Packed {
        let len = vectors.len().checked_div(d).unwrap_or(0);
        let panels_n = len.div_ceil(NR);
        let mut panels = vec![0f32; panels_n * d * NR];
        let mut norms = vec![f32::INFINITY; panels_n * NR];
        for (c, v) in vectors.chunks_exact(d.max(1)).take(len).enumerate() {
            let (p, j) = (c / NR, c % NR);
            norms[c] = if with_norms { dot(v, v) } else { 0.0 };
            for (t, &x) in v.iter().enumerate() {
                panels[(p * d + t) * NR + j] = x;
            }
        }
        Packed { panels, norms, first, len, d }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Squared norm of vector `c` (position, not label).
    pub fn norm(&self, c: usize) -> f32 {
        self.norms[c]
    }
}

/// A row's nearest packed vector (label), and the two smallest `‖c‖² − 2 x·c`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Nearest {
    pub label: u32,
    pub best: f32,
    pub second: f32,
}

impl Nearest {
    /// Nothing seen yet.
    pub const NONE: Nearest = Nearest { label: u32::MAX, best: f32::INFINITY, second: f32::INFINITY };
}

/// Which packed vectors a row may take.
#[derive(Debug, Clone, Copy)]
pub enum Candidates {
    /// Every one.
    All,
    /// Row `r` takes only labels `< first_row + r` (SemDeDup: earlier members only).
    Before { first_row: usize },
}

/// Folds `rows` (`m × d`) against `c` into `out` (one per row; start from
/// [`Nearest::NONE`], or from an earlier fold against other vectors): a strictly smaller
/// value replaces, so among equal ones the earliest label (in fold order) stays.
pub fn nearest(rows: &[f32], c: &Packed, allowed: Candidates, out: &mut [Nearest]) {
    let m = out.len();
    let d = c.d;
    assert!(rows.len() >= m * d, "rows shorter than m × d");
    drive(
        m,
        |r| &rows[r * d..(r + 1) * d],
        c,
        0..c.panels(),
        allowed,
        |rb, mr, first_label, acc, norms| {
            let above: [f32; MR] = std::array::from_fn(|i| if i < mr { out[rb + i].second } else { f32::NEG_INFINITY });
            // Only rows where some value beats their second best are merged.
            let mut hits = finish(acc, norms, above);
            while hits != 0 {
                let i = hits.trailing_zeros() as usize;
                hits &= hits - 1;
                let limit = match allowed {
                    Candidates::All => usize::MAX,
                    Candidates::Before { first_row } => first_row + rb + i,
                };
                let o = &mut out[rb + i];
                for (j, &v) in acc[i].iter().enumerate() {
                    let label = first_label + j;
                    if label >= limit {
                        break;
                    }
                    if v < o.best {
                        o.second = o.best;
                        o.best = v;
                        o.label = label as u32;
                    } else if v < o.second {
                        o.second = v;
                    }
                }
            }
        },
    );
}

/// The smallest and second-smallest `‖c‖² − 2 x·c` of one row in one panel, and the slot
/// (0..16) of the smallest (the first, on ties).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PanelMin {
    pub best: f32,
    pub second: f32,
    pub slot: u8,
}

/// The rows `picks` of `rows` (`d` floats each; read in place, not copied) against the panels
/// `panels` of `c`, row-major into `out` (`picks.len() × panels.len()`).
pub fn panel_minima(rows: &[f32], picks: &[usize], c: &Packed, panels: Range<usize>, out: &mut [PanelMin]) {
    let (d, width) = (c.d, panels.len());
    assert!(picks.iter().all(|&r| (r + 1) * d <= rows.len()) && out.len() >= picks.len() * width, "picked rows and room for them");
    let first = panels.start;
    drive(
        picks.len(),
        |i| &rows[picks[i] * d..(picks[i] + 1) * d],
        c,
        panels,
        Candidates::All,
        |rb, mr, first_label, acc, norms| {
            let p = (first_label - c.first) / NR - first;
            let mins = minima(acc, norms);
            for (i, min) in mins.into_iter().enumerate().take(mr) {
                out[(rb + i) * width + p] = min;
            }
        },
    );
}

/// [`PanelMin`] of each row of a block from its dot products.
fn minima(acc: &[[f32; NR]; MR], norms: &[f32; NR]) -> [PanelMin; MR] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked above).
        return unsafe { minima_avx2(acc, norms) };
    }
    std::array::from_fn(|i| min_of(&std::array::from_fn(|j| norms[j] - 2.0 * acc[i][j])))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn minima_avx2(acc: &[[f32; NR]; MR], norms: &[f32; NR]) -> [PanelMin; MR] {
    use std::arch::x86_64::{
        __m256, _CMP_EQ_OQ, _mm_cvtss_f32, _mm_min_ps, _mm_movehl_ps, _mm_shuffle_ps, _mm256_blendv_ps, _mm256_castps256_ps128,
        _mm256_castsi256_ps, _mm256_cmp_ps, _mm256_cmpeq_epi32, _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_min_ps,
        _mm256_movemask_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32,
    };
    // The smallest of 8 lanes.
    #[target_feature(enable = "avx2,fma")]
    fn hmin(v: __m256) -> f32 {
        let m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let m = _mm_min_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_min_ps(m, _mm_shuffle_ps::<0b01>(m, m)))
    }
    // SAFETY: `norms` and each accumulator row hold 16 floats.
    let (n0, n1) = unsafe { (_mm256_loadu_ps(norms.as_ptr()), _mm256_loadu_ps(norms.as_ptr().add(8))) };
    let minus2 = _mm256_set1_ps(-2.0);
    let inf = _mm256_set1_ps(f32::INFINITY);
    let (lanes0, lanes1) = (_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
    std::array::from_fn(|i| {
        // SAFETY: as above.
        let (a0, a1) = unsafe { (_mm256_loadu_ps(acc[i].as_ptr()), _mm256_loadu_ps(acc[i].as_ptr().add(8))) };
        let (v0, v1) = (_mm256_fmadd_ps(a0, minus2, n0), _mm256_fmadd_ps(a1, minus2, n1));
        let best = hmin(_mm256_min_ps(v0, v1));
        let b = _mm256_set1_ps(best);
        let eq = (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v0, b)) as u32)
            | ((_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v1, b)) as u32) << 8);
        let slot = if eq == 0 { 0 } else { eq.trailing_zeros() };
        let at = _mm256_set1_epi32(slot as i32);
        let w0 = _mm256_blendv_ps(v0, inf, _mm256_castsi256_ps(_mm256_cmpeq_epi32(lanes0, at)));
        let w1 = _mm256_blendv_ps(v1, inf, _mm256_castsi256_ps(_mm256_cmpeq_epi32(lanes1, at)));
        PanelMin { best, second: hmin(_mm256_min_ps(w0, w1)), slot: slot as u8 }
    })
}

/// Branch-free (the values of a panel come in no order a branch predictor could learn).
fn min_of(values: &[f32; NR]) -> PanelMin {
    let best = values.iter().copied().fold(f32::INFINITY, f32::min);
    let slot = values.iter().position(|&v| v == best).unwrap_or(0);
    let second = values.iter().enumerate().map(|(j, &v)| if j == slot { f32::INFINITY } else { v }).fold(f32::INFINITY, f32::min);
    PanelMin { best, second, slot: slot as u8 }
}

/// The blocked loop of both: `m` rows (`row(i)`, `d` floats each) in cache blocks, each
/// against the panels asked for, six rows at a time; `fold(first row, rows, first label, dot
/// products, norms)` gets each block of up to six rows' dot products with a panel (rows past
/// `rows` repeat the first; ignore them).
fn drive<'r>(
    m: usize,
    row: impl Fn(usize) -> &'r [f32],
    c: &Packed,
    panels: Range<usize>,
    allowed: Candidates,
    mut fold: impl FnMut(usize, usize, usize, &mut [[f32; NR]; MR], &[f32; NR]),
) {
    let d = c.d;
    assert!(panels.end <= c.panels(), "panels of the pack");
    if m == 0 || c.len == 0 || d == 0 {
        return;
    }
    let mut accs = [[[0f32; NR]; MR]; ROWS_PER_BLOCK / MR];
    for r0 in (0..m).step_by(ROWS_PER_BLOCK) {
        let r_end = (r0 + ROWS_PER_BLOCK).min(m);
        for p in panels.clone() {
            let panel = &c.panels[p * d * NR..(p + 1) * d * NR];
            let first_label = c.first + p * NR;
            // Row blocks with an allowed vector in this panel.
            let wanted = |rb: usize| match allowed {
                Candidates::All => true,
                Candidates::Before { first_row } => first_label < first_row + rb + MR.min(r_end - rb) - 1,
            };
            // Dimensions in slices, so a slice of the panel stays in L1 while the row blocks
            // pass it.
            for t0 in (0..d).step_by(DIMS_PER_SLICE) {
                let kc = DIMS_PER_SLICE.min(d - t0);
                let slice = &panel[t0 * NR..(t0 + kc) * NR];
                for (rb, acc) in (r0..r_end).step_by(MR).zip(accs.iter_mut()) {
                    if !wanted(rb) {
                        continue;
                    }
                    let mr = MR.min(r_end - rb);
                    // Missing rows of the last block repeat its first row (results ignored).
                    let at = |i: usize| &row(rb + if i < mr { i } else { 0 })[t0..t0 + kc];
                    block([at(0), at(1), at(2), at(3), at(4), at(5)], slice, kc, acc, t0 == 0);
                }
            }
            let norms: &[f32; NR] = c.norms[p * NR..(p + 1) * NR].try_into().expect("a panel has 16 norms");
            for (rb, acc) in (r0..r_end).step_by(MR).zip(accs.iter_mut()) {
                if !wanted(rb) {
                    continue;
                }
                fold(rb, MR.min(r_end - rb), first_label, acc, norms);
            }
        }
    }
}

/// `acc[i][j] (+)= a[i] · panel[.., j]` over `kc` dimensions for a 6-row block against a
/// 16-vector panel slice (`kc × 16`); `fresh` starts the sums at zero.
fn block(a: [&[f32]; MR], panel: &[f32], kc: usize, acc: &mut [[f32; NR]; MR], fresh: bool) {
    debug_assert!(a.iter().all(|r| r.len() >= kc) && panel.len() >= kc * NR);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked above); every row holds ≥ kc floats and
        // the panel kc × 16 (callers' slices, checked in debug builds and by construction).
        unsafe { block_avx2(a, panel.as_ptr(), kc, acc, fresh) };
        return;
    }
    block_portable(a, panel, kc, acc, fresh);
}

fn block_portable(a: [&[f32]; MR], panel: &[f32], kc: usize, acc: &mut [[f32; NR]; MR], fresh: bool) {
    if fresh {
        *acc = [[0f32; NR]; MR];
    }
    for t in 0..kc {
        let b = &panel[t * NR..(t + 1) * NR];
        for (row, out) in a.iter().zip(acc.iter_mut()) {
            let x = row[t];
            for (o, &y) in out.iter_mut().zip(b) {
                *o += x * y;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(a: [&[f32]; MR], panel: *const f32, kc: usize, acc: &mut [[f32; NR]; MR], fresh: bool) {
    use std::arch::x86_64::{__m256, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let mut s: [[__m256; 2]; MR] = [[_mm256_setzero_ps(); 2]; MR];
    if !fresh {
        for (v, out) in s.iter_mut().zip(acc.iter()) {
            // SAFETY: each accumulator row holds 16 floats.
            unsafe { *v = [_mm256_loadu_ps(out.as_ptr()), _mm256_loadu_ps(out.as_ptr().add(8))] };
        }
    }
    let p = a.map(<[f32]>::as_ptr);
    for t in 0..kc {
        // SAFETY: t < kc, and the panel holds kc × 16 floats, each row kc (the caller's contract).
        unsafe {
            let b0 = _mm256_loadu_ps(panel.add(t * NR));
            let b1 = _mm256_loadu_ps(panel.add(t * NR + 8));
            for i in 0..MR {
                let x = _mm256_broadcast_ss(&*p[i].add(t));
                s[i][0] = _mm256_fmadd_ps(x, b0, s[i][0]);
                s[i][1] = _mm256_fmadd_ps(x, b1, s[i][1]);
            }
        }
    }
    for (out, v) in acc.iter_mut().zip(&s) {
        // SAFETY: each accumulator row holds 16 floats.
        unsafe {
            _mm256_storeu_ps(out.as_mut_ptr(), v[0]);
            _mm256_storeu_ps(out.as_mut_ptr().add(8), v[1]);
        }
    }
}

/// Turns dot products into `v[i][j] = ‖c_j‖² − 2 a[i] · c_j` (in place); bit `i` of the
/// result is set when some `v[i][j] < above[i]`.
fn finish(acc: &mut [[f32; NR]; MR], norms: &[f32; NR], above: [f32; MR]) -> u32 {
    let mut hits = 0;
    for (i, row) in acc.iter_mut().enumerate() {
        let mut lower = false;
        for (v, n) in row.iter_mut().zip(norms) {
            *v = n - 2.0 * *v;
            lower |= *v < above[i];
        }
        hits |= u32::from(lower) << i;
    }
    hits
}

/// `a · b`, in eight running sums (vectorised; AVX2 + FMA where the CPU has them).
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut s = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            s[i] += x[i] * y[i];
        }
    }
    s.iter().sum::<f32>() + tail
}

/// `‖a − b‖²`, in eight running sums (vectorised; AVX2 + FMA where the CPU has them).
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
pub fn dist2(a: &[f32], b: &[f32]) -> f32 {
    let mut s = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| (x - y) * (x - y)).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            s[i] += (x[i] - y[i]) * (x[i] - y[i]);
        }
    }
    s.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, d: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::Rng::new(seed);
        (0..n * d).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect()
    }

    /// Brute force in f64: each row's best and second-best `‖c‖² − 2 x·c` among allowed labels.
    fn brute(rows: &[f32], vs: &[f32], d: usize, norms: bool, allowed: impl Fn(usize, usize) -> bool) -> Vec<(Option<usize>, f64, f64)> {
        rows.chunks_exact(d)
            .enumerate()
            .map(|(r, x)| {
                let mut all: Vec<(f64, usize)> = vs
                    .chunks_exact(d)
                    .enumerate()
                    .filter(|&(c, _)| allowed(r, c))
                    .map(|(c, v)| {
                        let dot: f64 = x.iter().zip(v).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
                        let n: f64 = if norms { v.iter().map(|a| f64::from(*a).powi(2)).sum() } else { 0.0 };
                        (n - 2.0 * dot, c)
                    })
                    .collect();
                all.sort_by(|a, b| a.0.total_cmp(&b.0));
                (all.first().map(|x| x.1), all.first().map_or(f64::INFINITY, |x| x.0), all.get(1).map_or(f64::INFINITY, |x| x.0))
            })
            .collect()
    }

    #[test]
    fn nearest_and_second_match_brute_force_for_odd_shapes() {
        // Row counts and vector counts that are not multiples of the blocks; d not of 8.
        for (m, k, d) in [(1, 1, 1), (7, 17, 13), (100, 33, 384), (97, 16, 5)] {
            let rows = data(m, d, m as u64);
            let vs = data(k, d, k as u64 + 100);
            let mut out = vec![Nearest::NONE; m];
            nearest(&rows, &Packed::new(&vs, d), Candidates::All, &mut out);
            for (o, (label, best, second)) in out.iter().zip(brute(&rows, &vs, d, true, |_, _| true)) {
                assert_eq!(Some(o.label as usize), label, "{m} {k} {d}");
                assert!((f64::from(o.best) - best).abs() < 1e-3 && (f64::from(o.second) - second).abs() < 1e-3 || second.is_infinite());
            }
        }
    }

    #[test]
    fn panel_minima_match_brute_force_over_slots_and_ranges() {
        let (m, k, d) = (13, 21, 10);
        let rows = data(m, d, 11);
        let vs = data(k, d, 12);
        // Two panels: vectors 20, 3, 7 and an empty slot, then 0..16 reversed.
        let mut slots = vec![u32::MAX; 32];
        slots[..3].copy_from_slice(&[20, 3, 7]);
        for (i, s) in slots[16..].iter_mut().enumerate() {
            *s = 15 - i as u32;
        }
        let packed = Packed::slots(&vs, d, &slots);
        let mut mins = vec![PanelMin { best: 0.0, second: 0.0, slot: 0 }; m * 2];
        panel_minima(&rows, &(0..m).collect::<Vec<_>>(), &packed, 0..2, &mut mins);
        let value = |x: &[f32], c: u32| {
            let c = &vs[c as usize * d..(c as usize + 1) * d];
            dot(c, c) - 2.0 * dot(x, c)
        };
        for (r, x) in rows.chunks_exact(d).enumerate() {
            for p in 0..2 {
                let mut vals: Vec<(f32, usize)> =
                    (0..16).filter(|&j| slots[p * 16 + j] != u32::MAX).map(|j| (value(x, slots[p * 16 + j]), j)).collect();
                vals.sort_by(|a, b| a.0.total_cmp(&b.0));
                let got = mins[r * 2 + p];
                assert_eq!(got.slot as usize, vals[0].1, "row {r} panel {p}");
                assert!((got.best - vals[0].0).abs() < 1e-4 && (got.second - vals[1].0).abs() < 1e-4);
                if p == 1 {
                    // The second panel alone: the same minima.
                    let mut one = [PanelMin { best: 0.0, second: 0.0, slot: 0 }];
                    panel_minima(&rows, &[r], &packed, 1..2, &mut one);
                    assert_eq!(one[0], got);
                }
            }
        }
    }

    #[test]
    fn vector_minima_match_the_scalar_ones_ties_included() {
        let vals = data(MR, NR, 31);
        let mut acc: [[f32; NR]; MR] = std::array::from_fn(|i| std::array::from_fn(|j| vals[i * NR + j]));
        // A tie for the largest dot product: the first slot wins.
        acc[2][4] = 9.0;
        acc[2][9] = 9.0;
        let norms: [f32; NR] = std::array::from_fn(|j| if j == 15 { f32::INFINITY } else { j as f32 * 0.01 });
        let norms = {
            let mut n = norms;
            n[4] = 0.0;
            n[9] = 0.0;
            n
        };
        let got = minima(&acc, &norms);
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, min_of(&std::array::from_fn(|j| norms[j] - 2.0 * acc[i][j])), "row {i}");
        }
        assert_eq!((got[2].slot, got[2].best, got[2].second), (4, -18.0, -18.0));
    }

    #[test]
    fn portable_and_simd_blocks_agree() {
        let d = 37;
        let rows = data(MR, d, 1);
        let panel = data(NR, d, 2);
        let a: [&[f32]; MR] = std::array::from_fn(|i| &rows[i * d..(i + 1) * d]);
        let (mut x, mut y) = ([[0f32; NR]; MR], [[0f32; NR]; MR]);
        // In two slices (20 + 17 dimensions), as `nearest` runs them.
        let half: [&[f32]; MR] = std::array::from_fn(|i| &a[i][20..]);
        block(a, &panel, 20, &mut x, true);
        block(half, &panel[20 * NR..], 17, &mut x, false);
        block_portable(a, &panel, d, &mut y, true);
        let norms: [f32; NR] = std::array::from_fn(|j| j as f32);
        let above: [f32; MR] = std::array::from_fn(|i| if i % 2 == 0 { f32::INFINITY } else { -1e9 });
        assert_eq!(finish(&mut x, &norms, above), 0b010101);
        assert_eq!(finish(&mut y, &norms, above), 0b010101);
        for (p, q) in x.iter().flatten().zip(y.iter().flatten()) {
            assert!((p - q).abs() < 1e-4, "{p} {q}");
        }
    }

    #[test]
    fn before_takes_only_earlier_labels_across_folds() {
        // SemDeDup's shape: rows 0..m against themselves in two packs of earlier vectors.
        let (m, d) = (45, 9);
        let vs = data(m, d, 4);
        let mut out = vec![Nearest::NONE; m];
        for (first, part) in [(0, &vs[..20 * d]), (20, &vs[20 * d..])] {
            nearest(&vs, &Packed::by_dot(part, d, first), Candidates::Before { first_row: 0 }, &mut out);
        }
        for (r, (o, (label, best, _))) in out.iter().zip(brute(&vs, &vs, d, false, |r, c| c < r)).enumerate() {
            assert_eq!(label.map(|l| l as u32).unwrap_or(u32::MAX), o.label, "row {r}");
            assert!(r == 0 || (f64::from(o.best) - best).abs() < 1e-4);
        }
    }

    #[test]
    fn dot_and_dist2_match_naive() {
        let a = data(1, 29, 8);
        let b = data(1, 29, 9);
        let naive_dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let naive_d2: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
        assert!((dot(&a, &b) - naive_dot).abs() < 1e-5);
        assert!((dist2(&a, &b) - naive_d2).abs() < 1e-5);
    }
}
