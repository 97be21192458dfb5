//! InternVideo2's vision tower in f32 on the CPU, one clip at a time, operation by operation
//! as `PretrainInternVideo2.forward` (unfused: `use_flash_attn`, `use_fused_rmsnorm` and
//! `use_fused_mlp` off, the same arithmetic) up to the pooled token, then `vision_proj` and
//! unit length as NeMo Curator's `get_vid_feat`.

use super::{Block, Pool, VideoConfig, VideoWeights};
use crate::cpu::attention;
use crate::tensors::{dense, gelu, layer_norm};
use crate::vision::patch_into;

/// InternVideo2's RMS norms (`eps` 1e-6).
const RMS_EPS: f32 = 1e-6;
/// The attention pool's layer norms (`nn.LayerNorm`, `eps` 1e-5).
const POOL_EPS: f32 = 1e-5;

/// `row ← row / √(mean(row²) + ε) · weight`.
fn rms_norm(row: &mut [f32], weight: &[f32]) {
    let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
    let inv = 1.0 / (ms + RMS_EPS).sqrt();
    row.iter_mut().zip(weight).for_each(|(v, w)| *v = *v * inv * w);
}

/// One clip's embedding (`px`: `[frames × 3 × size × size]`), unit length, `[proj_dim]`.
pub fn embed(c: &VideoConfig, w: &VideoWeights, px: &[f32]) -> Vec<f32> {
    let d = c.embed_dim;
    let patches = token_patches(c, px, false);
    let l = c.tokens();
    let mut x = Vec::with_capacity(l * d);
    x.extend_from_slice(&w.class);
    x.extend_from_slice(&dense(&w.patch, &patches, l - 1));
    x.iter_mut().zip(&w.position).for_each(|(v, p)| *v += p);
    for b in &w.blocks {
        block(c, b, &mut x, l);
    }
    let pooled = pool(c, &w.pool, &x, l);
    let mut e = dense(&w.projection, &pooled, 1);
    crate::vision::normalize_rows(&mut e, c.proj_dim);
    e
}

/// A clip's patches as rows (`3 · patch²` values, as the patch convolution's weight is laid
/// out) in the tower's token order: frame, then patch row, then patch column; with `class`, a
/// zero row first where the class token goes (the GPU path's layout).
pub fn token_patches(c: &VideoConfig, px: &[f32], class: bool) -> Vec<f32> {
    let g = c.grid();
    let per_frame = 3 * c.img_size * c.img_size;
    let k = 3 * c.patch_size * c.patch_size;
    let skip = if class { k } else { 0 };
    let mut patches = vec![0f32; skip + c.num_frames * g * g * k];
    for (i, row) in patches[skip..].chunks_exact_mut(k).enumerate() {
        let (t, p) = (i / (g * g), i % (g * g));
        patch_into(&px[t * per_frame..(t + 1) * per_frame], c.img_size, c.patch_size, p / g, p % g, row);
    }
    patches
}

/// `x ← x + γ₁ · attn(rms(x))`, then `x ← x + γ₂ · mlp(rms(x))`.
fn block(c: &VideoConfig, b: &Block, x: &mut [f32], l: usize) {
    let d = c.embed_dim;
    let mut n = x.to_vec();
    n.chunks_exact_mut(d).for_each(|row| rms_norm(row, &b.norm1));
    let qkv = dense(&b.qkv, &n, l);
    let mut q = Vec::with_capacity(l * d);
    let mut k = Vec::with_capacity(l * d);
    let mut v = Vec::with_capacity(l * d);
    for row in qkv.chunks_exact(3 * d) {
        q.extend_from_slice(&row[..d]);
        k.extend_from_slice(&row[d..2 * d]);
        v.extend_from_slice(&row[2 * d..]);
    }
    // The query and key norms run over the whole width, all heads together.
    q.chunks_exact_mut(d).for_each(|row| rms_norm(row, &b.q_norm));
    k.chunks_exact_mut(d).for_each(|row| rms_norm(row, &b.k_norm));
    let scale = 1.0 / ((d / c.num_heads) as f32).sqrt();
    let ctx = attention(&q, &k, &v, l, d, c.num_heads, scale, |_, _| {});
    let a = dense(&b.proj, &ctx, l);
    for (row, a) in x.chunks_exact_mut(d).zip(a.chunks_exact(d)) {
        row.iter_mut().zip(a).zip(&b.ls1).for_each(|((x, a), g)| *x += g * a);
    }
    let mut n = x.to_vec();
    n.chunks_exact_mut(d).for_each(|row| rms_norm(row, &b.norm2));
    let mut up = dense(&b.fc1, &n, l);
    up.iter_mut().for_each(|u| *u = gelu(*u));
    let down = dense(&b.fc2, &up, l);
    for (row, m) in x.chunks_exact_mut(d).zip(down.chunks_exact(d)) {
        row.iter_mut().zip(m).zip(&b.ls2).for_each(|((x, m), g)| *x += g * m);
    }
}

/// The attention pool: the tokens' mean (layer-normed) asks every token (keys and values
/// layer-normed apart), heads side by side, then the projection to `clip_embed_dim`.
fn pool(c: &VideoConfig, p: &Pool, x: &[f32], l: usize) -> Vec<f32> {
    let d = c.embed_dim;
    let mut mean = vec![0f32; d];
    for row in x.chunks_exact(d) {
        mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
    }
    mean.iter_mut().for_each(|m| *m /= l as f32);
    layer_norm(&mut mean, &p.norm_q, POOL_EPS);
    let normed = |norm| {
        let mut n = x.to_vec();
        n.chunks_exact_mut(d).for_each(|row| layer_norm(row, norm, POOL_EPS));
        n
    };
    let q = dense(&p.q, &mean, 1);
    let k = dense(&p.k, &normed(&p.norm_k), l);
    let v = dense(&p.v, &normed(&p.norm_v), l);
    let heads = c.attn_pool_num_heads;
    let dh = d / heads;
    let scale = 1.0 / (dh as f32).sqrt();
    let mut ctx = vec![0f32; d];
    let mut scores = vec![0f32; l];
    for h in 0..heads {
        let cols = h * dh..(h + 1) * dh;
        let qh: Vec<f32> = q[cols.clone()].iter().map(|v| v * scale).collect();
        for (s, krow) in scores.iter_mut().zip(k.chunks_exact(d)) {
            *s = qh.iter().zip(&krow[cols.clone()]).map(|(a, b)| a * b).sum();
        }
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        scores.iter_mut().for_each(|s| {
            *s = (*s - max).exp();
            sum += *s;
        });
        for (s, vrow) in scores.iter().zip(v.chunks_exact(d)) {
            let p = s / sum;
            ctx[cols.clone()].iter_mut().zip(&vrow[cols.clone()]).for_each(|(c, v)| *c += p * v);
        }
    }
    dense(&p.proj, &ctx, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_layout_is_the_cpu_layout_after_a_zero_class_row() {
        let c = VideoConfig {
            model_type: "internvideo2".into(),
            embed_dim: 8,
            depth: 0,
            num_heads: 2,
            mlp_hidden: 16,
            patch_size: 2,
            img_size: 4,
            num_frames: 2,
            clip_embed_dim: 4,
            attn_pool_num_heads: 2,
            proj_dim: 3,
        };
        let px: Vec<f32> = (0..c.pixels()).map(|i| i as f32).collect();
        let (cpu, gpu) = (token_patches(&c, &px, false), token_patches(&c, &px, true));
        let k = 3 * 2 * 2;
        assert_eq!(gpu.len(), c.tokens() * k);
        assert!(gpu[..k].iter().all(|&v| v == 0.0));
        assert_eq!(&gpu[k..], &cpu[..]);
        // Token 5 is frame 1's patch (0, 1): its first value is frame 1's pixel (row 0, col 2).
        assert_eq!(cpu[5 * k], (3 * 4 * 4 + 2) as f32);
    }

    #[test]
    fn rms_norm_scales_rows_to_unit_mean_square() {
        let mut row = vec![3.0, 4.0];
        rms_norm(&mut row, &[1.0, 2.0]);
        let r = (12.5f32 + 1e-6).sqrt();
        assert!((row[0] - 3.0 / r).abs() < 1e-6 && (row[1] - 8.0 / r).abs() < 1e-6);
    }
}
