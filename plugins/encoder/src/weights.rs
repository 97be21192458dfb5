//! The model's tensors from `model.safetensors`, in f32 on the host, checked against the
//! config's shapes. Both back-ends start from these: the CPU reference uses them as they are,
//! the GPU path converts the matrices to fp16 once.

use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::EncoderError;
use crate::config::{Arch, ModelConfig};

/// `y = x Wᵀ + b` with `W` as `[out, inp]`, row-major (PyTorch's `nn.Linear`).
#[derive(Debug, Clone)]
pub struct Linear {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
    pub out: usize,
    pub inp: usize,
}

/// A layer norm's scale and shift.
#[derive(Debug, Clone)]
pub struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// One transformer layer.
#[derive(Debug, Clone)]
pub struct Layer {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
    pub attn_out: Linear,
    pub attn_norm: Norm,
    pub up: Linear,
    pub down: Linear,
    pub out_norm: Norm,
    /// DeBERTa: the relative embeddings projected by this layer's key (c2p) and query (p2c)
    /// weights, `[2 × span, hidden]` each. They depend on the weights alone, so they are
    /// computed once at load for both back-ends; empty for BERT or a term the model lacks.
    pub pos_key: Vec<f32>,
    pub pos_query: Vec<f32>,
}

/// A sequence-classification head.
#[derive(Debug, Clone)]
pub enum Head {
    /// BERT: `classifier(pooler(h[CLS]))` (the pooler is `tanh(dense)`, when the model has one).
    Bert { pooler: Option<Linear>, classifier: Linear },
    /// RoBERTa: `out_proj(tanh(dense(h[CLS])))`.
    Roberta { dense: Linear, out_proj: Linear },
    /// transformers' DeBERTa: `classifier(gelu(pooler.dense(h[CLS])))` (ContextPooler).
    ContextPooler { dense: Linear, classifier: Linear },
    /// NeMo's model-hub DeBERTa classifiers: `fc(h[CLS])` (`fc` on every token, first kept).
    First { fc: Linear },
    /// NeMo's multi-head model: one `head_i.fc` per target over the mean-pooled states.
    MeanHeads { heads: Vec<Linear> },
}

impl Head {
    /// How the encoder's states reach the head.
    pub fn pooling(&self) -> crate::Pooling {
        match self {
            Head::MeanHeads { .. } => crate::Pooling::Mean,
            _ => crate::Pooling::Cls,
        }
    }

    /// Logits per document (the heads' outputs side by side for [`Head::MeanHeads`]).
    pub fn outputs(&self) -> usize {
        match self {
            Head::Bert { classifier, .. } | Head::ContextPooler { classifier, .. } => classifier.out,
            Head::Roberta { out_proj, .. } => out_proj.out,
            Head::First { fc } => fc.out,
            Head::MeanHeads { heads } => heads.iter().map(|h| h.out).sum(),
        }
    }
}

/// All of a model's weights.
#[derive(Debug, Clone)]
pub struct Weights {
    pub word: Vec<f32>,
    pub position: Vec<f32>,
    pub token_type: Vec<f32>,
    pub embed_norm: Norm,
    pub layers: Vec<Layer>,
    pub head: Option<Head>,
}

/// Tensors of one checkpoint as f32, checked against the shapes the config implies; names
/// are under `prefix` unless asked for at the top.
pub(crate) struct Reader<'a> {
    st: SafeTensors<'a>,
    path: &'a Path,
    prefix: String,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], path: &'a Path, prefix: &str) -> Result<Reader<'a>, EncoderError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| EncoderError::Model { path: path.to_path_buf(), reason: e.to_string() })?;
        Ok(Reader { st, path, prefix: prefix.to_string() })
    }

    pub(crate) fn err(&self, reason: String) -> EncoderError {
        EncoderError::Model { path: self.path.to_path_buf(), reason }
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.st.tensor(name).is_ok()
    }

    /// Tensor `name` (under the model prefix unless `top`) as f32, with `shape`.
    pub(crate) fn get(&self, name: &str, shape: &[usize], top: bool) -> Result<Vec<f32>, EncoderError> {
        let full = if top { name.to_string() } else { format!("{}{name}", self.prefix) };
        let t = self.st.tensor(&full).map_err(|_| self.err(format!("tensor {full:?} is missing")))?;
        if t.shape() != shape {
            return Err(self.err(format!("tensor {full:?} has shape {:?}, expected {shape:?}", t.shape())));
        }
        let data = t.data();
        let values: Vec<f32> = match t.dtype() {
            Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            Dtype::BF16 => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            other => return Err(self.err(format!("tensor {full:?} has dtype {other:?} (f32, f16 or bf16 expected)"))),
        };
        if values.len() != shape.iter().product::<usize>() {
            return Err(self.err(format!("tensor {full:?} holds {} values for shape {shape:?}", values.len())));
        }
        Ok(values)
    }

    pub(crate) fn linear(&self, name: &str, out: usize, inp: usize, top: bool) -> Result<Linear, EncoderError> {
        Ok(Linear {
            w: self.get(&format!("{name}.weight"), &[out, inp], top)?,
            b: self.get(&format!("{name}.bias"), &[out], top)?,
            out,
            inp,
        })
    }

    pub(crate) fn norm(&self, name: &str, h: usize) -> Result<Norm, EncoderError> {
        // Old checkpoints call them gamma/beta.
        let (g, b) = if self.has(&format!("{}{name}.weight", self.prefix)) { ("weight", "bias") } else { ("gamma", "beta") };
        Ok(Norm { gamma: self.get(&format!("{name}.{g}"), &[h], false)?, beta: self.get(&format!("{name}.{b}"), &[h], false)? })
    }
}

/// Every tensor's name and shape in a `.safetensors` file, from its header alone (what a
/// model-hub checkpoint's backbone is read from).
pub fn shapes(path: &Path) -> Result<std::collections::BTreeMap<String, Vec<usize>>, EncoderError> {
    use std::io::Read;
    let err = |reason: String| EncoderError::Model { path: path.to_path_buf(), reason };
    let mut file = std::fs::File::open(path).map_err(|e| EncoderError::io(path, e))?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(|e| EncoderError::io(path, e))?;
    let len = u64::from_le_bytes(len);
    if len > 100 << 20 {
        return Err(err(format!("safetensors header of {len} bytes: not a safetensors file")));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).map_err(|e| EncoderError::io(path, e))?;
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| err(format!("safetensors header: {e}")))?;
    Ok(map
        .into_iter()
        .filter(|(name, _)| name != "__metadata__")
        .filter_map(|(name, info)| {
            let shape = info.get("shape")?.as_array()?.iter().map(|d| d.as_u64().map(|d| d as usize)).collect::<Option<Vec<_>>>()?;
            Some((name, shape))
        })
        .collect())
}

impl Weights {
    /// Read `path` (a `.safetensors` file) for a model shaped as `config`.
    pub fn load(path: &Path, config: &ModelConfig) -> Result<Weights, EncoderError> {
        let bytes = std::fs::read(path).map_err(|e| EncoderError::io(path, e))?;
        Weights::from_bytes(&bytes, path, config)
    }

    /// As [`Weights::load`], from the file's bytes (`path` names it in errors).
    pub fn from_bytes(bytes: &[u8], path: &Path, config: &ModelConfig) -> Result<Weights, EncoderError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| EncoderError::Model { path: path.to_path_buf(), reason: e.to_string() })?;
        let prefix = ["", "bert.", "roberta.", "electra.", "deberta.", "model.", "backbone."]
            .iter()
            .find(|p| st.tensor(&format!("{p}embeddings.word_embeddings.weight")).is_ok())
            .map(|p| p.to_string())
            .ok_or_else(|| EncoderError::Model {
                path: path.to_path_buf(),
                reason: "no embeddings.word_embeddings.weight tensor: not a BERT- or DeBERTa-family checkpoint".into(),
            })?;
        let r = Reader { st, path, prefix };
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let deberta = match &config.arch {
            Arch::Deberta(d) => Some(d),
            Arch::Bert => None,
        };
        // DeBERTa's relative embeddings, normalised once when the model says so.
        let rel = match deberta {
            Some(d) => {
                let mut rel = r.get("encoder.rel_embeddings.weight", &[2 * d.span, h], false)?;
                if d.norm_rel_ebd {
                    let norm = r.norm("encoder.LayerNorm", h)?;
                    rel.chunks_exact_mut(h).for_each(|row| crate::cpu::layer_norm(row, &norm, config.layer_norm_eps));
                }
                rel
            }
            None => Vec::new(),
        };
        let (q, k, v) = if deberta.is_some() { ("query_proj", "key_proj", "value_proj") } else { ("query", "key", "value") };
        let mut layers = Vec::with_capacity(config.num_layers);
        for l in 0..config.num_layers {
            let p = format!("encoder.layer.{l}");
            let mut layer = Layer {
                query: r.linear(&format!("{p}.attention.self.{q}"), h, h, false)?,
                key: r.linear(&format!("{p}.attention.self.{k}"), h, h, false)?,
                value: r.linear(&format!("{p}.attention.self.{v}"), h, h, false)?,
                attn_out: r.linear(&format!("{p}.attention.output.dense"), h, h, false)?,
                attn_norm: r.norm(&format!("{p}.attention.output.LayerNorm"), h)?,
                up: r.linear(&format!("{p}.intermediate.dense"), i, h, false)?,
                down: r.linear(&format!("{p}.output.dense"), h, i, false)?,
                out_norm: r.norm(&format!("{p}.output.LayerNorm"), h)?,
                pos_key: Vec::new(),
                pos_query: Vec::new(),
            };
            if let Some(d) = deberta {
                let rows = 2 * d.span;
                // The relative embeddings through the content projection when shared, else
                // through the layer's own `pos_*_proj`.
                let project = |shared: &Linear, own: &str| -> Result<Vec<f32>, EncoderError> {
                    Ok(if d.share_att_key {
                        crate::cpu::dense(shared, &rel, rows)
                    } else {
                        crate::cpu::dense(&r.linear(&format!("{p}.attention.self.{own}"), h, h, false)?, &rel, rows)
                    })
                };
                if d.c2p {
                    layer.pos_key = project(&layer.key, "pos_key_proj")?;
                }
                if d.p2c {
                    layer.pos_query = project(&layer.query, "pos_query_proj")?;
                }
            }
            layers.push(layer);
        }
        let n = config.labels.len();
        let head = if !config.targets.sizes.is_empty() {
            let heads = config
                .targets
                .sizes
                .iter()
                .enumerate()
                .map(|(k, (_, size))| r.linear(&format!("head_{k}.fc"), *size, h, true))
                .collect::<Result<Vec<_>, _>>()?;
            Some(Head::MeanHeads { heads })
        } else if n == 0 {
            None
        } else if r.has("fc.weight") {
            Some(Head::First { fc: r.linear("fc", n, h, true)? })
        } else if deberta.is_some() && r.has("pooler.dense.weight") {
            Some(Head::ContextPooler { dense: r.linear("pooler.dense", h, h, true)?, classifier: r.linear("classifier", n, h, true)? })
        } else if r.has("classifier.out_proj.weight") {
            Some(Head::Roberta { dense: r.linear("classifier.dense", h, h, true)?, out_proj: r.linear("classifier.out_proj", n, h, true)? })
        } else if r.has("classifier.weight") {
            let pooler =
                if r.has(&format!("{}pooler.dense.weight", r.prefix)) { Some(r.linear("pooler.dense", h, h, false)?) } else { None };
            Some(Head::Bert { pooler, classifier: r.linear("classifier", n, h, true)? })
        } else {
            return Err(r.err(format!("config.json names {n} labels but the checkpoint has no classifier tensors")));
        };
        // DeBERTa-v3 has neither absolute positions nor token types: empty tables.
        let position = if config.absolute_positions() {
            r.get("embeddings.position_embeddings.weight", &[config.max_positions, h], false)?
        } else {
            Vec::new()
        };
        let token_type = if deberta.is_some() && config.type_vocab_size == 0 {
            Vec::new()
        } else {
            r.get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size.max(1), h], false)?
        };
        Ok(Weights {
            word: r.get("embeddings.word_embeddings.weight", &[config.vocab_size, h], false)?,
            position,
            token_type,
            embed_norm: r.norm("embeddings.LayerNorm", h)?,
            layers,
            head,
        })
    }

    /// Bytes the weights take on the GPU (matrices and DeBERTa's position tables in fp16,
    /// vectors in f32).
    pub fn gpu_bytes(&self) -> usize {
        let lin = |l: &Linear| l.w.len() * 2 + l.b.len() * 4;
        let norm = |n: &Norm| n.gamma.len() * 8;
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                lin(&l.query)
                    + lin(&l.key)
                    + lin(&l.value)
                    + lin(&l.attn_out)
                    + lin(&l.up)
                    + lin(&l.down)
                    + norm(&l.attn_norm)
                    + norm(&l.out_norm)
                    + (l.pos_key.len() + l.pos_query.len()) * 2
            })
            .sum();
        (self.word.len() + self.position.len() + self.token_type.len()) * 2 + norm(&self.embed_norm) + layers
    }
}
