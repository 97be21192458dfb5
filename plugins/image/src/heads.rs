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

/// `Σ a·b` with eight independent sums (the dependency chain of one sum is what limits a
/// scalar loop, in WASM above all).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut s = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            s[k] += x[k] * y[k];
        }
    }
    ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail
}

impl Dense {
    /// The layer on `n` rows of `inp` values: `[n × out]`. Weight row by weight row, so each
    /// row is read from memory once per batch, not once per embedding.
    fn apply(&self, x: &[f32], n: usize) -> Vec<f32> {
        let mut out = vec![0f32; n * self.out];
        for (o, (w, b)) in self.w.chunks_exact(self.inp).zip(&self.b).enumerate() {
            for (r, row) in x.chunks_exact(self.inp).enumerate() {
                out[r * self.out + o] = dot(w, row) + b;
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
