//! The vision tower in f32 on the CPU, one image at a time, images in parallel: the reference
//! the GPU path is checked against, operation by operation as transformers' `CLIPVisionModel`.

use rayon::prelude::*;

use super::{VisionConfig, VisionWeights};
use crate::cpu::{activate, attention};
use crate::tensors::{dense, layer_norm};

/// One embedding per image (`pixels`: `[n × 3 × S × S]`), `[n × embed_dim]`, not normalised.
pub fn embed(config: &VisionConfig, w: &VisionWeights, pixels: &[f32]) -> Vec<f32> {
    pixels.par_chunks_exact(config.pixels()).flat_map_iter(|px| one(config, w, px)).collect()
}

/// The image's patches as rows, `[grid² × 3·patch²]`, each flattened as the convolution's
/// weight is (channel, row, column).
pub fn patches(config: &VisionConfig, px: &[f32]) -> Vec<f32> {
    let (g, p) = (config.grid(), config.patch_size);
    let k = 3 * p * p;
    let mut out = vec![0f32; g * g * k];
    for (i, row) in out.chunks_exact_mut(k).enumerate() {
        super::patch_into(px, config.image_size, p, i / g, i % g, row);
    }
    out
}

fn one(config: &VisionConfig, w: &VisionWeights, px: &[f32]) -> Vec<f32> {
    let (h, l, eps) = (config.hidden_size, config.tokens(), config.layer_norm_eps);
    let embedded = dense(&w.patch, &patches(config, px), l - 1);
    let mut x = Vec::with_capacity(l * h);
    x.extend_from_slice(&w.class);
    x.extend_from_slice(&embedded);
    x.iter_mut().zip(&w.position).for_each(|(v, p)| *v += p);
    x.chunks_exact_mut(h).for_each(|row| layer_norm(row, &w.pre_norm, eps));
    let scale = 1.0 / ((h / config.num_heads) as f32).sqrt();
    for layer in &w.layers {
        let mut n = x.clone();
        n.chunks_exact_mut(h).for_each(|row| layer_norm(row, &layer.attn_norm, eps));
        let (q, k, v) = (dense(&layer.query, &n, l), dense(&layer.key, &n, l), dense(&layer.value, &n, l));
        let ctx = attention(&q, &k, &v, l, h, config.num_heads, scale, |_, _| {});
        x.iter_mut().zip(dense(&layer.attn_out, &ctx, l)).for_each(|(x, a)| *x += a);
        let mut n = x.clone();
        n.chunks_exact_mut(h).for_each(|row| layer_norm(row, &layer.out_norm, eps));
        let mut up = dense(&layer.up, &n, l);
        activate(&mut up, config.activation);
        x.iter_mut().zip(dense(&layer.down, &up, l)).for_each(|(x, d)| *x += d);
    }
    let mut pooled = x[..h].to_vec();
    layer_norm(&mut pooled, &w.post_norm, eps);
    match &w.projection {
        Some(p) => dense(p, &pooled, 1),
        None => pooled,
    }
}
