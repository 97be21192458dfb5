//! NeMo Curator's image heads, small MLPs over a normalised CLIP embedding, read from
//! `.safetensors` in NeMo's module layouts (dimensions from the tensors' shapes):
//!
//! - **aesthetic** (`nemo_curator/models/aesthetics.py`, the improved aesthetic predictor,
//!   `ttj/sac-logos-ava1-l14-linearMSE`): `layers.{0,2,4,6,7}`, 768→1024→128→64→16→1, linear
//!   throughout (the dropouts are inactive at inference); the score is on a 0–10 scale.
//! - **nsfw** (`nemo_curator/models/nsfw.py`, LAION's CLIP-based NSFW detector):
//!   `(x − norm.mean) / √norm.variance`, then `linear_1..3` with ReLU and `linear_4` with a
//!   sigmoid; the score is a probability.
//!
//! Computed in f32 as PyTorch does on the CPU (a product per layer, bias added after).

use safetensors::{Dtype, SafeTensors};

/// `y = x Wᵀ + b`.
#[derive(Debug, Clone)]
pub struct Dense {
    w: Vec<f32>,
    b: Vec<f32>,
    out: usize,
    inp: usize,
}

/// `Σ wᵢ·x` for four weight rows at once, eight independent sums each: every value of `x` is
/// loaded once for the four (the loads, and one sum's dependency chain, are what limit a
/// scalar loop). Natively the eight lanes vectorise; in WASM they are written as SIMD128
/// (LLVM leaves the plain loop scalar there: 1.2 GMAC/s in a guest against 8.6 natively).
fn dot4(w: [&[f32]; 4], x: &[f32]) -> [f32; 4] {
    let n = x.len() / 8 * 8;
    let s = lanes8(w, &x[..n]);
    let mut out = [0f32; 4];
    for ((o, acc), row) in out.iter_mut().zip(&s).zip(&w) {
        let tail: f32 = row[n..].iter().zip(&x[n..]).map(|(a, b)| a * b).sum();
        *o = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
    }
    out
}

/// The eight lane sums of each of the four rows over `x` (a multiple of 8 long).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn lanes8(w: [&[f32]; 4], x: &[f32]) -> [[f32; 8]; 4] {
    let mut s = [[0f32; 8]; 4];
    for i in (0..x.len()).step_by(8) {
        let xs = &x[i..i + 8];
        for (acc, row) in s.iter_mut().zip(&w) {
            let ws = &row[i..i + 8];
            for k in 0..8 {
                acc[k] += ws[k] * xs[k];
            }
        }
    }
    s
}

/// The eight lane sums of each of the four rows over `x` (a multiple of 8 long), in SIMD128:
/// the same products and the same lane sums as the portable loop.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn lanes8(w: [&[f32]; 4], x: &[f32]) -> [[f32; 8]; 4] {
    use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};
    let load = |v: &[f32], i: usize| -> v128 {
        let v = &v[i..i + 4];
        // SAFETY: `v` holds 4 floats (16 bytes); v128_load reads unaligned.
        unsafe { v128_load(v.as_ptr().cast()) }
    };
    let mut acc = [[f32x4_splat(0.0); 2]; 4];
    for i in (0..x.len()).step_by(8) {
        let (x0, x1) = (load(x, i), load(x, i + 4));
        for (a, row) in acc.iter_mut().zip(&w) {
            a[0] = f32x4_add(a[0], f32x4_mul(load(row, i), x0));
            a[1] = f32x4_add(a[1], f32x4_mul(load(row, i + 4), x1));
        }
    }
    let mut s = [[0f32; 8]; 4];
    for (dst, a) in s.iter_mut().zip(&acc) {
        // SAFETY: each half of `dst` is 4 floats (16 bytes); v128_store writes unaligned.
        unsafe {
            v128_store(dst[..4].as_mut_ptr().cast(), a[0]);
            v128_store(dst[4..].as_mut_ptr().cast(), a[1]);
        }
    }
    s
}

impl Dense {
    /// The layer on `n` rows of `inp` values: `[n × out]`. Four weight rows at a time against
    /// every input row, so each weight row is read from memory once per batch and each input
    /// value once per four outputs.
    fn apply(&self, x: &[f32], n: usize) -> Vec<f32> {
        let mut out = vec![0f32; n * self.out];
        let zero = vec![0f32; self.inp];
        for o in (0..self.out).step_by(4) {
            let row = |j: usize| if o + j < self.out { &self.w[(o + j) * self.inp..(o + j + 1) * self.inp] } else { &zero[..] };
            let w = [row(0), row(1), row(2), row(3)];
            for (r, xr) in x.chunks_exact(self.inp).enumerate() {
                let d = dot4(w, xr);
                for (j, v) in d.iter().enumerate().take(self.out - o) {
                    out[r * self.out + o + j] = v + self.b[o + j];
                }
            }
        }
        out
    }
}

/// Which head, and its weights.
#[derive(Debug, Clone)]
pub enum Head {
    Aesthetic { layers: Vec<Dense> },
    Nsfw { mean: Vec<f32>, scale: Vec<f32>, layers: Vec<Dense> },
}

/// A head that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HeadError(String);

fn tensor(st: &SafeTensors<'_>, name: &str) -> Result<(Vec<usize>, Vec<f32>), HeadError> {
    let t = st.tensor(name).map_err(|_| HeadError(format!("tensor {name:?} is missing")))?;
    let d = t.data();
    let v: Vec<f32> = match t.dtype() {
        Dtype::F32 => d.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        Dtype::F64 => d.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).collect(),
        other => return Err(HeadError(format!("tensor {name:?} is {other:?} (f32 or f64 expected)"))),
    };
    Ok((t.shape().to_vec(), v))
}

fn dense(st: &SafeTensors<'_>, name: &str, inp: usize) -> Result<Dense, HeadError> {
    let (ws, w) = tensor(st, &format!("{name}.weight"))?;
    let (bs, b) = tensor(st, &format!("{name}.bias"))?;
    match (ws.as_slice(), bs.as_slice()) {
        ([out, i], [bo]) if *i == inp && bo == out => Ok(Dense { w, b, out: *out, inp }),
        _ => Err(HeadError(format!("{name}: weight {ws:?} and bias {bs:?} do not take {inp} inputs"))),
    }
}

impl Head {
    /// NeMo's aesthetic MLP from a `.safetensors` file's bytes.
    pub fn aesthetic(bytes: &[u8]) -> Result<Head, HeadError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| HeadError(e.to_string()))?;
        let (shape, _) = tensor(&st, "layers.0.weight")?;
        let mut inp = *shape.get(1).ok_or_else(|| HeadError("layers.0.weight is not a matrix".into()))?;
        let mut layers = Vec::new();
        for i in [0, 2, 4, 6, 7] {
            let d = dense(&st, &format!("layers.{i}"), inp)?;
            inp = d.out;
            layers.push(d);
        }
        if inp != 1 {
            return Err(HeadError(format!("layers.7 gives {inp} values, not one score")));
        }
        Ok(Head::Aesthetic { layers })
    }

    /// NeMo's NSFW model from a `.safetensors` file's bytes.
    pub fn nsfw(bytes: &[u8]) -> Result<Head, HeadError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| HeadError(e.to_string()))?;
        let (_, mean) = tensor(&st, "norm.mean")?;
        let (_, var) = tensor(&st, "norm.variance")?;
        if mean.len() != var.len() || var.iter().any(|v| *v <= 0.0) {
            return Err(HeadError("norm.mean and norm.variance must be as long as each other, the variances positive".into()));
        }
        let mut inp = mean.len();
        let mut layers = Vec::new();
        for i in 1..=4 {
            let d = dense(&st, &format!("linear_{i}"), inp)?;
            inp = d.out;
            layers.push(d);
        }
        if inp != 1 {
            return Err(HeadError(format!("linear_4 gives {inp} values, not one score")));
        }
        Ok(Head::Nsfw { scale: var.iter().map(|v| v.sqrt()).collect(), mean, layers })
    }

    /// The embedding width the head takes.
    pub fn dim(&self) -> usize {
        match self {
            Head::Aesthetic { layers } | Head::Nsfw { layers, .. } => layers[0].inp,
        }
    }

    /// The score of one embedding (`dim()` values).
    pub fn score(&self, x: &[f32]) -> f32 {
        self.scores(x)[0]
    }

    /// The scores of embeddings back to back (`dim()` values each), a layer at a time over all
    /// of them.
    pub fn scores(&self, x: &[f32]) -> Vec<f32> {
        let n = x.len() / self.dim();
        match self {
            Head::Aesthetic { layers } => layers.iter().fold(x.to_vec(), |x, l| l.apply(&x, n)),
            Head::Nsfw { mean, scale, layers } => {
                let mut x: Vec<f32> =
                    x.chunks_exact(mean.len()).flat_map(|e| e.iter().zip(mean).zip(scale).map(|((x, m), s)| (x - m) / s)).collect();
                for l in &layers[..3] {
                    x = l.apply(&x, n).into_iter().map(|v| v.max(0.0)).collect();
                }
                layers[3].apply(&x, n).into_iter().map(|logit| 1.0 / (1.0 + (-logit).exp())).collect()
            }
        }
    }
}

/// What the aesthetic and NSFW filter stages share: the head read from the granted
/// directory, and each row of the embedding column scored, kept or not.
pub mod stage {
    use curator_sdk::prelude::*;

    use super::Head;

    /// The head at `model` (a `.safetensors` file, or a directory holding `model.safetensors`,
    /// inside the granted `models` directory), read with `parse`.
    pub fn load(model: &str, parse: fn(&[u8]) -> Result<Head, super::HeadError>) -> Result<Head, StageError> {
        let path =
            if model.ends_with(".safetensors") { model.to_string() } else { format!("{}/model.safetensors", model.trim_end_matches('/')) };
        load_granted("model", &path, "models", parse)
    }

    /// Each row's score from the float32-vector column `field` as `score_field`; with `filter`,
    /// only the rows `keep` accepts are kept.
    pub fn filter(
        head: &Head,
        batch: &Batch,
        field: &str,
        score_field: &str,
        filter: bool,
        keep: impl Fn(f32) -> bool,
    ) -> Result<Output, StageError> {
        let (dim, values) = batch.column(field)?.f32_vector_values()?;
        if dim != head.dim() && !values.is_empty() {
            return Err(StageError::Failed(format!("column {field:?} holds {dim}-wide vectors, the head takes {}", head.dim())));
        }
        let scores: Vec<f32> = if values.is_empty() { Vec::new() } else { head.scores(&values) };
        let kept = (0..scores.len() as u32).filter(|&i| !filter || keep(scores[i as usize])).collect();
        let column = Column::float64(score_field, &scores.iter().map(|&s| f64::from(s)).collect::<Vec<_>>());
        Ok(Output::Scored { columns: vec![column], keep: kept })
    }
}
