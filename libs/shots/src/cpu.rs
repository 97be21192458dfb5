//! One window through TransNetV2 in f32, following the published PyTorch module operation by
//! operation. Activations are channels-last (`[t][h][w][c]`, one row per pixel), so each
//! convolution is a matrix product over pixel rows: the spatial 1×3×3 kernels of a block's
//! four branches as one product over an im2col of the input, each temporal 3×1×1 kernel as
//! three products over the same rows shifted by ± its dilation (frames outside the window
//! are the convolution's zero padding), written straight into its branch's columns (the
//! concatenation costs nothing).

use crate::weights::{Block, LOOKUP, Linear, STACKS, Weights};
use crate::{HEIGHT, WIDTH};

/// Rows of im2col built at a time (bounds the scratch to `ROWS × 9C` floats).
const ROWS: usize = 2048;

/// `c[m × n] (+)= a[m × k] · b[k × n]`: `a` and `c` row-major with row strides `lda` and
/// `ldc`, `b`'s element (i, j) at `i · b_strides.0 + j · b_strides.1` (a transposed operand is
/// a stride swap).
#[allow(clippy::too_many_arguments)]
fn gemm(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    b_strides: (usize, usize),
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let (rsb, csb) = b_strides;
    assert!(
        a.len() >= (m - 1) * lda + k && b.len() > (k - 1) * rsb + (n - 1) * csb && c.len() >= (m - 1) * ldc + n,
        "gemm operands out of bounds"
    );
    // SAFETY: the assert above keeps every element the strides reach inside the slices, and
    // `c` is borrowed mutably, so it overlaps neither `a` nor `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            lda as isize,
            1,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            if accumulate { 1.0 } else { 0.0 },
            c.as_mut_ptr(),
            ldc as isize,
            1,
        )
    }
}

/// `x[rows × in] · linearᵀ + bias` → `[rows × out]`.
fn dense(l: &Linear, x: &[f32], rows: usize) -> Vec<f32> {
    let mut y: Vec<f32> = (0..rows).flat_map(|_| l.bias.iter().copied()).collect();
    // weightᵀ: element (i, o) at o·in + i.
    gemm(rows, l.inputs, l.outputs, x, l.inputs, &l.weight, (1, l.inputs), &mut y, l.outputs, true);
    y
}

/// A feature map: `t × h × w` pixels of `c` channels, channels-last.
#[derive(Clone)]
struct Map {
    t: usize,
    h: usize,
    w: usize,
    c: usize,
    data: Vec<f32>,
}

impl Map {
    fn pixels(&self) -> usize {
        self.t * self.h * self.w
    }
}

/// One DilatedDCNNV2 block.
fn block(x: &Map, b: &Block) -> Map {
    let (hw, pixels, cin) = (x.h * x.w, x.pixels(), x.c);
    let mid = 2 * b.filters;
    let wide = 4 * mid;
    // The four branches' spatial convolutions: im2col · spatial, ROWS pixels at a time.
    let mut spatial = vec![0f32; pixels * wide];
    let k = 9 * cin;
    let mut col = vec![0f32; ROWS.min(pixels) * k];
    for start in (0..pixels).step_by(ROWS) {
        let rows = ROWS.min(pixels - start);
        for r in 0..rows {
            let p = start + r;
            let (t, y, xx) = (p / hw, (p % hw) / x.w, p % x.w);
            let row = &mut col[r * k..(r + 1) * k];
            for kh in 0..3 {
                for kw in 0..3 {
                    let dst = &mut row[(kh * 3 + kw) * cin..(kh * 3 + kw + 1) * cin];
                    let (sy, sx) = (y as isize + kh as isize - 1, xx as isize + kw as isize - 1);
                    if sy < 0 || sx < 0 || sy >= x.h as isize || sx >= x.w as isize {
                        dst.fill(0.0);
                    } else {
                        let q = (t * x.h + sy as usize) * x.w + sx as usize;
                        dst.copy_from_slice(&x.data[q * cin..(q + 1) * cin]);
                    }
                }
            }
        }
        gemm(rows, k, wide, &col, k, &b.spatial, (wide, 1), &mut spatial[start * wide..], wide, false);
    }
    // Each branch's temporal convolution into its F columns of the block's output.
    let out_c = 4 * b.filters;
    let mut out = vec![0f32; pixels * out_c];
    for (branch, d) in crate::weights::DILATIONS.iter().enumerate() {
        for (tap, w) in b.temporal[branch].iter().enumerate() {
            // Output frame t reads frame t + (tap − 1)·d.
            let shift = (tap as isize - 1) * *d as isize;
            let t0 = (-shift).max(0) as usize;
            let t1 = (x.t as isize - shift.max(0)).max(0) as usize;
            if t0 >= t1 {
                continue;
            }
            let rows = (t1 - t0) * hw;
            let src = ((t0 as isize + shift) as usize * hw) * wide + branch * mid;
            let dst = t0 * hw * out_c + branch * b.filters;
            gemm(rows, mid, b.filters, &spatial[src..], wide, w, (b.filters, 1), &mut out[dst..], out_c, true);
        }
    }
    for px in out.chunks_exact_mut(out_c) {
        for ((v, s), sh) in px.iter_mut().zip(&b.scale).zip(&b.shift) {
            *v = *v * s + sh;
            if b.relu && *v < 0.0 {
                *v = 0.0;
            }
        }
    }
    Map { t: x.t, h: x.h, w: x.w, c: out_c, data: out }
}

/// A StackedDDCNNV2: its blocks, `relu(last) + first`, then a 2×2 average pool (floor).
fn stack(x: &Map, blocks: &[Block]) -> Map {
    let first = block(x, &blocks[0]);
    let mut last: Option<Map> = None;
    for b in &blocks[1..] {
        last = Some(block(last.as_ref().unwrap_or(&first), b));
    }
    let mut sum = last.unwrap_or_else(|| first.clone());
    for (v, s) in sum.data.iter_mut().zip(&first.data) {
        *v = v.max(0.0) + s;
    }
    let (h, w, c) = (sum.h / 2, sum.w / 2, sum.c);
    let mut pooled = vec![0f32; sum.t * h * w * c];
    for t in 0..sum.t {
        for y in 0..h {
            for xx in 0..w {
                let at = |dy: usize, dx: usize| ((t * sum.h + 2 * y + dy) * sum.w + 2 * xx + dx) * c;
                let (a, b, cc, d) = (at(0, 0), at(0, 1), at(1, 0), at(1, 1));
                let o = ((t * h + y) * w + xx) * c;
                for ch in 0..c {
                    pooled[o + ch] = (sum.data[a + ch] + sum.data[b + ch] + sum.data[cc + ch] + sum.data[d + ch]) / 4.0;
                }
            }
        }
    }
    sum.data = pooled;
    sum.h = h;
    sum.w = w;
    sum
}

/// L2-normalise each row of `x` (`F.normalize`: divided by max(‖row‖, 1e-12)).
fn normalize_rows(x: &mut [f32], width: usize) {
    for row in x.chunks_exact_mut(width) {
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        row.iter_mut().for_each(|v| *v /= norm);
    }
}

/// Each frame's similarity to the frames up to 50 before and after it (zero beyond the
/// window), through `fc` and a ReLU: `[t × 128]`. `x` holds unit rows `[t × width]`.
fn lookup(x: &[f32], t: usize, width: usize, fc: &Linear) -> Vec<f32> {
    let half = (LOOKUP - 1) / 2;
    let mut sims = vec![0f32; t * LOOKUP];
    for i in 0..t {
        for j in 0..LOOKUP {
            let u = i as isize + j as isize - half as isize;
            if u >= 0 && (u as usize) < t {
                let u = u as usize;
                sims[i * LOOKUP + j] = x[i * width..(i + 1) * width].iter().zip(&x[u * width..(u + 1) * width]).map(|(a, b)| a * b).sum();
            }
        }
    }
    let mut y = dense(fc, &sims, t);
    y.iter_mut().for_each(|v| *v = v.max(0.0));
    y
}

/// RGB histograms of 8×8×8 bins per frame, unit length.
fn histograms(frames: &[&[u8]]) -> Vec<f32> {
    let mut h = vec![0f32; frames.len() * 512];
    for (i, f) in frames.iter().enumerate() {
        let mut counts = [0u32; 512];
        for px in f.chunks_exact(3) {
            let bin = ((px[0] as usize >> 5) << 6) + ((px[1] as usize >> 5) << 3) + (px[2] as usize >> 5);
            counts[bin] += 1;
        }
        for (o, c) in h[i * 512..(i + 1) * 512].iter_mut().zip(counts) {
            *o = c as f32;
        }
    }
    normalize_rows(&mut h, 512);
    h
}

/// The three stacks of one window: the last stack's map (`[t × 3 × 6 × 256]`, channels-last)
/// and each frame's per-stack channel means side by side (`[t × 448]`).
pub(crate) fn stacks(w: &Weights, frames: &[&[u8]]) -> (Vec<f32>, Vec<f32>) {
    let t = frames.len();
    let mut x = Map { t, h: HEIGHT, w: WIDTH, c: 3, data: Vec::with_capacity(t * HEIGHT * WIDTH * 3) };
    for f in frames {
        x.data.extend(f.iter().map(|&b| b as f32 / 255.0));
    }
    let features: usize = (0..STACKS).map(Weights::stack_channels).sum();
    let mut means = vec![0f32; t * features];
    let mut at = 0;
    for blocks in &w.stacks {
        x = stack(&x, blocks);
        let hw = x.h * x.w;
        for i in 0..t {
            let dst = &mut means[i * features + at..i * features + at + x.c];
            for p in 0..hw {
                for (d, v) in dst.iter_mut().zip(&x.data[(i * hw + p) * x.c..(i * hw + p + 1) * x.c]) {
                    *d += v;
                }
            }
            dst.iter_mut().for_each(|d| *d /= hw as f32);
        }
        at += x.c;
    }
    (x.data, means)
}

/// Everything after the stacks for one window: the similarity and colour-histogram branches,
/// `fc1` and both heads' logits per frame. `last` and `means` are [`stacks`]' (from the CPU or
/// the GPU).
pub(crate) fn head(w: &Weights, frames: &[&[u8]], last: &[f32], means: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let t = frames.len();
    let mut projected = dense(&w.similarity_projection, means, t);
    normalize_rows(&mut projected, w.similarity_projection.outputs);
    let similarity = lookup(&projected, t, w.similarity_projection.outputs, &w.similarity_fc);
    let hist = histograms(frames);
    let colour = lookup(&hist, t, 512, &w.histogram_fc);
    // [colour | similarity | the last stack's pixels (h, w, c)] per frame.
    let flat = last.len() / t.max(1);
    let s = w.histogram_fc.outputs;
    let mut all = Vec::with_capacity(t * (2 * s + flat));
    for i in 0..t {
        all.extend_from_slice(&colour[i * s..(i + 1) * s]);
        all.extend_from_slice(&similarity[i * s..(i + 1) * s]);
        all.extend_from_slice(&last[i * flat..(i + 1) * flat]);
    }
    let mut hidden = dense(&w.fc1, &all, t);
    hidden.iter_mut().for_each(|v| *v = v.max(0.0));
    (dense(&w.single, &hidden, t), dense(&w.many_hot, &hidden, t))
}

/// The logits of both heads for each frame of one window (`frames`: each `27 × 48 × 3`
/// bytes, any number of them).
pub fn forward(w: &Weights, frames: &[&[u8]]) -> (Vec<f32>, Vec<f32>) {
    let (last, means) = stacks(w, frames);
    head(w, frames, &last, &means)
}
