//! The reference back-end: the encoder in f32 on the CPU, one sequence at a time (no padding,
//! so nothing to mask), sequences in parallel. It is what the GPU path is checked against and
//! what runs where there is no GPU; it follows `transformers`' BERT operation by operation.

use rayon::prelude::*;

use crate::config::{Activation, Arch, Disentangled, ModelConfig, Pooling};
use crate::tensors::{Norm, dense, gelu, layer_norm};
use crate::weights::Weights;

/// `x ← LayerNorm(x + residual)` row by row.
fn add_norm(x: &mut [f32], residual: &[f32], norm: &Norm, eps: f32) {
    let h = norm.gamma.len();
    for (row, res) in x.chunks_exact_mut(h).zip(residual.chunks_exact(h)) {
        for (v, r) in row.iter_mut().zip(res) {
            *v += r;
        }
        layer_norm(row, norm, eps);
    }
}

pub(crate) fn activate(x: &mut [f32], act: Activation) {
    match act {
        Activation::Gelu => x.iter_mut().for_each(|v| *v = gelu(*v)),
        Activation::GeluTanh => {
            let c = (2.0 / std::f32::consts::PI).sqrt();
            x.iter_mut().for_each(|v| *v = 0.5 * *v * (1.0 + (c * (*v + 0.044715 * *v * *v * *v)).tanh()))
        }
        Activation::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
        // CLIP's: x · sigmoid(1.702 x).
        Activation::QuickGelu => x.iter_mut().for_each(|v| *v /= 1.0 + (-1.702 * *v).exp()),
    }
}

/// The final hidden states of one sequence, `[len × hidden]`.
pub fn hidden_states(config: &ModelConfig, w: &Weights, ids: &[u32]) -> Vec<f32> {
    let (h, l) = (config.hidden_size, ids.len());
    let (heads, dh) = (config.num_heads, config.head_dim());
    let eps = config.layer_norm_eps;
    let mut x = vec![0f32; l * h];
    for (t, row) in x.chunks_exact_mut(h).enumerate() {
        let id = (ids[t] as usize).min(config.vocab_size - 1);
        row.copy_from_slice(&w.word[id * h..(id + 1) * h]);
        if !w.position.is_empty() {
            let pos = (t + config.position_offset()).min(config.max_positions - 1);
            row.iter_mut().zip(&w.position[pos * h..(pos + 1) * h]).for_each(|(v, p)| *v += p);
        }
        if !w.token_type.is_empty() {
            row.iter_mut().zip(&w.token_type[..h]).for_each(|(v, p)| *v += p);
        }
        layer_norm(row, &w.embed_norm, eps);
    }
    let (scale, rel) = match &config.arch {
        Arch::Bert => (1.0 / (dh as f32).sqrt(), None),
        Arch::Deberta(d) => (1.0 / d.scale(dh), Some((d, d.rows_by_distance(l.saturating_sub(1))))),
    };
    for layer in &w.layers {
        let q = dense(&layer.query, &x, l);
        let k = dense(&layer.key, &x, l);
        let v = dense(&layer.value, &x, l);
        let ctx = attention(&q, &k, &v, l, h, heads, scale, |off, scores| {
            if let Some((d, index)) = &rel {
                disentangled_bias(d, layer, &q, &k, off, h, dh, l, index, scale, scores);
            }
        });
        let mut a = dense(&layer.attn_out, &ctx, l);
        add_norm(&mut a, &x, &layer.attn_norm, eps);
        let mut up = dense(&layer.up, &a, l);
        activate(&mut up, config.activation);
        let mut out = dense(&layer.down, &up, l);
        add_norm(&mut out, &a, &layer.out_norm, eps);
        x = out;
    }
    x
}

/// Multi-head self-attention over one unpadded sequence: `softmax(Q_h K_hᵀ · scale + bias) V_h`
/// per head, the heads side by side in the `[l × h]` result. `bias(off, scores)` may add to a
/// head's `[l × l]` scores before the softmax (`off`: the head's first column).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    l: usize,
    h: usize,
    heads: usize,
    scale: f32,
    mut bias: impl FnMut(usize, &mut [f32]),
) -> Vec<f32> {
    let dh = h / heads;
    let mut ctx = vec![0f32; l * h];
    let mut scores = vec![0f32; l * l];
    for head in 0..heads {
        let off = head * dh;
        // scores = Q_h K_hᵀ · scale (Q_h, K_h: the head's columns of the [l × h] buffers).
        // SAFETY: the strides address l × dh values of q and k from `off` (rows h apart)
        // and l × l of scores, all inside their buffers.
        unsafe {
            matrixmultiply::sgemm(
                l,
                dh,
                l,
                scale,
                q.as_ptr().add(off),
                h as isize,
                1,
                k.as_ptr().add(off),
                1,
                h as isize,
                0.0,
                scores.as_mut_ptr(),
                l as isize,
                1,
            );
        }
        bias(off, &mut scores);
        for row in scores.chunks_exact_mut(l) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for s in row.iter_mut() {
                *s = (*s - max).exp();
                sum += *s;
            }
            row.iter_mut().for_each(|s| *s /= sum);
        }
        // ctx_h = P V_h.
        // SAFETY: scores is l × l; v's and ctx's head columns are l rows of dh from `off`,
        // rows h apart, inside their l × h buffers.
        unsafe {
            matrixmultiply::sgemm(
                l,
                l,
                dh,
                1.0,
                scores.as_ptr(),
                l as isize,
                1,
                v.as_ptr().add(off),
                h as isize,
                1,
                0.0,
                ctx.as_mut_ptr().add(off),
                h as isize,
                1,
            );
        }
    }
    ctx
}

/// DeBERTa's position terms added to one head's `[l × l]` scores: content→position
/// `Q_i · posK[idx(i,j)]` and position→content `K_j · posQ[idx(i,j)]`, each times `scale`;
/// `rows[i - j + l - 1]` is `idx(i,j)` ([`Disentangled::rows_by_distance`]).
/// Both are read from `[l × 2·span]` tables made by one product each, as transformers does
/// (its `torch.gather` over the same tables).
#[allow(clippy::too_many_arguments)]
fn disentangled_bias(
    d: &Disentangled,
    layer: &crate::weights::Layer,
    q: &[f32],
    k: &[f32],
    off: usize,
    h: usize,
    dh: usize,
    l: usize,
    rows_of: &[u32],
    scale: f32,
    scores: &mut [f32],
) {
    let rows = 2 * d.span;
    // table[t × rows] = X_h[t] · pos_h[r] for the head's columns of X (q or k) and pos.
    let table = |x: &[f32], pos: &[f32]| {
        let mut out = vec![0f32; l * rows];
        // SAFETY: x holds l rows of h values (the head's dh from `off`), pos rows × h likewise,
        // out l × rows.
        unsafe {
            matrixmultiply::sgemm(
                l,
                dh,
                rows,
                scale,
                x.as_ptr().add(off),
                h as isize,
                1,
                pos.as_ptr().add(off),
                1,
                h as isize,
                0.0,
                out.as_mut_ptr(),
                rows as isize,
                1,
            );
        }
        out
    };
    if d.c2p {
        let c2p = table(q, &layer.pos_key);
        for (i, row) in scores.chunks_exact_mut(l).enumerate() {
            for (j, s) in row.iter_mut().enumerate() {
                *s += c2p[i * rows + rows_of[i + l - 1 - j] as usize];
            }
        }
    }
    if d.p2c {
        let p2c = table(k, &layer.pos_query);
        for (i, row) in scores.chunks_exact_mut(l).enumerate() {
            for (j, s) in row.iter_mut().enumerate() {
                *s += p2c[j * rows + rows_of[i + l - 1 - j] as usize];
            }
        }
    }
}

/// Pool `[len × hidden]` states into one vector.
pub fn pool(states: &[f32], hidden: usize, pooling: Pooling) -> Vec<f32> {
    let l = states.len() / hidden;
    if l == 0 {
        return vec![0f32; hidden];
    }
    match pooling {
        Pooling::Cls => states[..hidden].to_vec(),
        Pooling::Mean => {
            let mut out = vec![0f32; hidden];
            for row in states.chunks_exact(hidden) {
                for (o, v) in out.iter_mut().zip(row) {
                    *o += v;
                }
            }
            out.iter_mut().for_each(|o| *o /= l.max(1) as f32);
            out
        }
    }
}

/// One pooled vector per sequence, `[n × hidden]`, sequences in parallel.
pub fn pooled(config: &ModelConfig, w: &Weights, seqs: &[&[u32]], pooling: Pooling) -> Vec<f32> {
    let h = config.hidden_size;
    let vecs: Vec<Vec<f32>> = seqs.par_iter().map(|ids| pool(&hidden_states(config, w, ids), h, pooling)).collect();
    vecs.concat()
}
