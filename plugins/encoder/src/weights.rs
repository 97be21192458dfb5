//! The model's tensors from `model.safetensors`, in f32 on the host, checked against the
//! config's shapes. Both back-ends start from these: the CPU reference uses them as they are,
//! the GPU path converts the matrices to fp16 once.

use std::path::Path;

use safetensors::tensor::TensorInfo;
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
    tensors: Tensors<'a>,
    path: &'a Path,
    prefix: String,
}

/// Where a [`Reader`]'s tensors come from.
enum Tensors<'a> {
    /// The file's bytes: every tensor read as f32.
    Full(SafeTensors<'a>),
    /// The file's header alone: each tensor's presence, dtype and shape checked, its values
    /// left unread (empty). Planning's set-up check, which drops the model right after.
    Header(std::collections::BTreeMap<String, TensorInfo>),
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], path: &'a Path, prefix: &str) -> Result<Reader<'a>, EncoderError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| EncoderError::Model { path: path.to_path_buf(), reason: e.to_string() })?;
        Ok(Reader { tensors: Tensors::Full(st), path, prefix: prefix.to_string() })
    }

    /// A reader of `path`'s header alone (see [`Tensors::Header`]).
    pub(crate) fn header_only(path: &'a Path, prefix: &str) -> Result<Reader<'a>, EncoderError> {
        Ok(Reader { tensors: Tensors::Header(header(path)?), path, prefix: prefix.to_string() })
    }

    /// Whether values are left unread ([`Reader::header_only`]).
    pub(crate) fn hollow(&self) -> bool {
        matches!(self.tensors, Tensors::Header(_))
    }

    pub(crate) fn err(&self, reason: String) -> EncoderError {
        EncoderError::Model { path: self.path.to_path_buf(), reason }
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        match &self.tensors {
            Tensors::Full(st) => st.tensor(name).is_ok(),
            Tensors::Header(h) => h.contains_key(name),
        }
    }

    /// Tensor `name` (under the model prefix unless `top`) as f32, with `shape` (empty when
    /// [`Reader::hollow`], once its dtype and shape are checked).
    pub(crate) fn get(&self, name: &str, shape: &[usize], top: bool) -> Result<Vec<f32>, EncoderError> {
        let full = if top { name.to_string() } else { format!("{}{name}", self.prefix) };
        let missing = || self.err(format!("tensor {full:?} is missing"));
        let (dtype, found, data) = match &self.tensors {
            Tensors::Full(st) => {
                let t = st.tensor(&full).map_err(|_| missing())?;
                (t.dtype(), t.shape().to_vec(), Some(t.data()))
            }
            Tensors::Header(h) => {
                let t = h.get(&full).ok_or_else(missing)?;
                (t.dtype, t.shape.clone(), None)
            }
        };
        if found != shape {
            return Err(self.err(format!("tensor {full:?} has shape {found:?}, expected {shape:?}")));
        }
        if !matches!(dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(self.err(format!("tensor {full:?} has dtype {dtype:?} (f32, f16 or bf16 expected)")));
        }
        let Some(data) = data else { return Ok(Vec::new()) };
        let values: Vec<f32> = match dtype {
            Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            _ => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
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
    Ok(header(path)?.into_iter().map(|(name, t)| (name, t.shape)).collect())
}

/// Every tensor of a `.safetensors` file as its header describes it, read without its data;
/// a header whose tensors do not fit its dtypes and shapes, or a file shorter or longer than
/// the header says, is refused (as reading the whole file would refuse it).
pub fn header(path: &Path) -> Result<std::collections::BTreeMap<String, TensorInfo>, EncoderError> {
    use std::io::Read;
    let err = |reason: String| EncoderError::Model { path: path.to_path_buf(), reason };
    let mut file = std::fs::File::open(path).map_err(|e| EncoderError::io(path, e))?;
    let size = file.metadata().map_err(|e| EncoderError::io(path, e))?.len();
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(|e| EncoderError::io(path, e))?;
    let len = u64::from_le_bytes(len);
    if len > 100 << 20 {
        return Err(err(format!("safetensors header of {len} bytes: not a safetensors file")));
    }
    let mut text = vec![0u8; len as usize];
    file.read_exact(&mut text).map_err(|e| EncoderError::io(path, e))?;
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&text).map_err(|e| err(format!("safetensors header: {e}")))?;
    let mut tensors = std::collections::BTreeMap::new();
    let mut end = 0u64;
    for (name, info) in map.into_iter().filter(|(name, _)| name != "__metadata__") {
        let info: TensorInfo = serde_json::from_value(info).map_err(|e| err(format!("safetensors header: tensor {name:?}: {e}")))?;
        let (start, stop) = info.data_offsets;
        let bits = info.shape.iter().try_fold(info.dtype.bitsize(), |n: usize, d| n.checked_mul(*d));
        if start > stop || bits != Some((stop - start) * 8) {
            return Err(err(format!(
                "safetensors header: tensor {name:?} has {} bytes for {:?} {:?}",
                stop.saturating_sub(start),
                info.dtype,
                info.shape
            )));
        }
        end = end.max(stop as u64);
        tensors.insert(name, info);
    }
    if 8 + len + end != size {
        return Err(err(format!(
            "the file holds {size} bytes, its header describes {}: truncated or not a safetensors file",
            8 + len + end
        )));
    }
    Ok(tensors)
}

impl Weights {
    /// Read `path` (a `.safetensors` file) for a model shaped as `config`.
    pub fn load(path: &Path, config: &ModelConfig) -> Result<Weights, EncoderError> {
        let bytes = std::fs::read(path).map_err(|e| EncoderError::io(path, e))?;
        Weights::from_bytes(&bytes, path, config)
    }

    /// As [`Weights::load`], from the file's bytes (`path` names it in errors).
    pub fn from_bytes(bytes: &[u8], path: &Path, config: &ModelConfig) -> Result<Weights, EncoderError> {
        Weights::read(Reader::new(bytes, path, "")?, config)
    }

    /// The checks of [`Weights::load`] on `path`'s header alone: every tensor the config
    /// implies is there with its shape and a float dtype. The weights it gives are hollow
    /// (shapes kept, values empty): for planning's set-up check, which never runs them.
    pub fn check(path: &Path, config: &ModelConfig) -> Result<Weights, EncoderError> {
        Weights::read(Reader::header_only(path, "")?, config)
    }

    fn read(mut r: Reader<'_>, config: &ModelConfig) -> Result<Weights, EncoderError> {
        r.prefix = ["", "bert.", "roberta.", "electra.", "deberta.", "model.", "backbone."]
            .iter()
            .find(|p| r.has(&format!("{p}embeddings.word_embeddings.weight")))
            .map(|p| p.to_string())
            .ok_or_else(|| r.err("no embeddings.word_embeddings.weight tensor: not a BERT- or DeBERTa-family checkpoint".into()))?;
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
                    Ok(if r.hollow() {
                        if !d.share_att_key {
                            r.linear(&format!("{p}.attention.self.{own}"), h, h, false)?;
                        }
                        Vec::new()
                    } else if d.share_att_key {
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
