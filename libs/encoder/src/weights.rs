//! The model's tensors from `model.safetensors`, checked against the config's shapes. The
//! CPU reference reads its matrices as f32; the GPU path reads them as fp16, straight from
//! the file when it stores fp16 (no f32 copy on the way). Vectors (biases, norms) and
//! DeBERTa's projected position tables are f32 on both.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use rayon::prelude::*;
use safetensors::tensor::TensorInfo;
use safetensors::{Dtype, SafeTensors};

use crate::EncoderError;
use crate::config::{Arch, ModelConfig};
pub use crate::tensors::{Elem, Linear, Norm};

// Tensors are read by reinterpreting the file's little-endian bytes in place.
const _: () = assert!(cfg!(target_endian = "little"), "safetensors files are little-endian");

/// One transformer layer.
#[derive(Debug, Clone)]
pub struct Layer<M = f32> {
    pub query: Linear<M>,
    pub key: Linear<M>,
    pub value: Linear<M>,
    pub attn_out: Linear<M>,
    pub attn_norm: Norm,
    pub up: Linear<M>,
    pub down: Linear<M>,
    pub out_norm: Norm,
    /// DeBERTa: the relative embeddings projected by this layer's key (c2p) and query (p2c)
    /// weights, `[2 × span, hidden]` each, in f32. They depend on the weights alone, so they
    /// are computed once at load for both back-ends; empty for BERT or a term the model lacks.
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

/// All of a model's weights: the backbone's matrices and embedding tables in `M`, the head
/// in f32 (it runs on the host).
#[derive(Debug, Clone)]
pub struct Weights<M = f32> {
    pub word: Vec<M>,
    pub position: Vec<M>,
    pub token_type: Vec<M>,
    pub embed_norm: Norm,
    pub layers: Vec<Layer<M>>,
    pub head: Option<Head>,
}

/// Tensors of one checkpoint, checked against the shapes the config implies; names are under
/// `prefix` unless asked for at the top.
pub(crate) struct Reader<'a> {
    tensors: Tensors<'a>,
    path: &'a Path,
    prefix: String,
}

/// Where a [`Reader`]'s tensors come from.
enum Tensors<'a> {
    /// A whole file's bytes, already in memory.
    Bytes(SafeTensors<'a>),
    /// The file itself: each tensor read from its place when asked for, straight into the
    /// vector it is returned in (no copy of the whole file). `start`: where the data begins.
    File { file: std::fs::File, header: BTreeMap<String, TensorInfo>, start: u64 },
    /// The file's header alone: each tensor's presence, dtype and shape checked, its values
    /// left unread (empty). Planning's set-up check, which drops the model right after.
    Header(BTreeMap<String, TensorInfo>),
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], path: &'a Path, prefix: &str) -> Result<Reader<'a>, EncoderError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| EncoderError::Model { path: path.to_path_buf(), reason: e.to_string() })?;
        Ok(Reader { tensors: Tensors::Bytes(st), path, prefix: prefix.to_string() })
    }

    /// A reader of the file at `path`, which reads each tensor when asked for.
    pub(crate) fn open(path: &'a Path, prefix: &str) -> Result<Reader<'a>, EncoderError> {
        let (file, header, start) = read_header(path)?;
        Ok(Reader { tensors: Tensors::File { file, header, start }, path, prefix: prefix.to_string() })
    }

    /// A reader of `path`'s header alone (see [`Tensors::Header`]).
    pub(crate) fn header_only(path: &'a Path, prefix: &str) -> Result<Reader<'a>, EncoderError> {
        Ok(Reader { tensors: Tensors::Header(read_header(path)?.1), path, prefix: prefix.to_string() })
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
            Tensors::Bytes(st) => st.tensor(name).is_ok(),
            Tensors::File { header: h, .. } | Tensors::Header(h) => h.contains_key(name),
        }
    }

    /// Tensor `name` (under the model prefix unless `top`) as `M`, with `shape` (empty when
    /// [`Reader::hollow`], once its dtype and shape are checked).
    pub(crate) fn get<M: Elem>(&self, name: &str, shape: &[usize], top: bool) -> Result<Vec<M>, EncoderError> {
        let full = if top { name.to_string() } else { format!("{}{name}", self.prefix) };
        let missing = || self.err(format!("tensor {full:?} is missing"));
        let (dtype, found) = match &self.tensors {
            Tensors::Bytes(st) => {
                let t = st.tensor(&full).map_err(|_| missing())?;
                (t.dtype(), t.shape().to_vec())
            }
            Tensors::File { header: h, .. } | Tensors::Header(h) => {
                let t = h.get(&full).ok_or_else(missing)?;
                (t.dtype, t.shape.clone())
            }
        };
        if found != shape {
            return Err(self.err(format!("tensor {full:?} has shape {found:?}, expected {shape:?}")));
        }
        let n = shape.iter().product::<usize>();
        match dtype {
            Dtype::F32 => Ok(M::from_f32(self.values(&full, n)?)),
            Dtype::F16 => Ok(M::from_f16(self.values(&full, n)?)),
            Dtype::BF16 => Ok(M::from_bf16(self.values(&full, n)?)),
            _ => Err(self.err(format!("tensor {full:?} has dtype {dtype:?} (f32, f16 or bf16 expected)"))),
        }
    }

    /// The `n` values of tensor `full`, whose dtype is `S` (checked by the caller); empty when
    /// hollow.
    fn values<S: bytemuck::Pod>(&self, full: &str, n: usize) -> Result<Vec<S>, EncoderError> {
        if self.hollow() {
            return Ok(Vec::new());
        }
        let mut out = vec![S::zeroed(); n];
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        match &self.tensors {
            Tensors::Bytes(st) => {
                let data = st.tensor(full).map_err(|e| self.err(e.to_string()))?.data();
                if data.len() != dst.len() {
                    return Err(self.err(format!("tensor {full:?} holds {} bytes for {n} values", data.len())));
                }
                dst.copy_from_slice(data);
            }
            Tensors::File { file, header, start } => {
                // `read_header` checked every tensor's byte range against its dtype and shape.
                let at = header.get(full).ok_or_else(|| self.err(format!("tensor {full:?} is missing")))?.data_offsets.0 as u64;
                let mut file = file;
                file.seek(SeekFrom::Start(start + at)).and_then(|_| file.read_exact(dst)).map_err(|e| EncoderError::io(self.path, e))?;
            }
            Tensors::Header(_) => {}
        }
        Ok(out)
    }

    pub(crate) fn linear<M: Elem>(&self, name: &str, out: usize, inp: usize, top: bool) -> Result<Linear<M>, EncoderError> {
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
pub fn shapes(path: &Path) -> Result<BTreeMap<String, Vec<usize>>, EncoderError> {
    Ok(header(path)?.into_iter().map(|(name, t)| (name, t.shape)).collect())
}

/// Every tensor of a `.safetensors` file as its header describes it, read without its data;
/// a header whose tensors do not fit its dtypes and shapes, or a file shorter or longer than
/// the header says, is refused (as reading the whole file would refuse it).
pub fn header(path: &Path) -> Result<BTreeMap<String, TensorInfo>, EncoderError> {
    Ok(read_header(path)?.1)
}

/// [`header`], with the file opened and the offset its tensors' data starts at.
fn read_header(path: &Path) -> Result<(std::fs::File, BTreeMap<String, TensorInfo>, u64), EncoderError> {
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
    let mut tensors = BTreeMap::new();
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
    Ok((file, tensors, 8 + len))
}

impl<M: Elem> Weights<M> {
    /// Read `path` (a `.safetensors` file) for a model shaped as `config`, each tensor from
    /// its place in the file.
    pub fn load(path: &Path, config: &ModelConfig) -> Result<Weights<M>, EncoderError> {
        Weights::read(Reader::open(path, "")?, config)
    }

    /// As [`Weights::load`], from the file's bytes (`path` names it in errors).
    pub fn from_bytes(bytes: &[u8], path: &Path, config: &ModelConfig) -> Result<Weights<M>, EncoderError> {
        Weights::read(Reader::new(bytes, path, "")?, config)
    }

    /// The checks of [`Weights::load`] on `path`'s header alone: every tensor the config
    /// implies is there with its shape and a float dtype. The weights it gives are hollow
    /// (shapes kept, values empty): for planning's set-up check, which never runs them.
    pub fn check(path: &Path, config: &ModelConfig) -> Result<Weights<M>, EncoderError> {
        Weights::read(Reader::header_only(path, "")?, config)
    }

    fn read(mut r: Reader<'_>, config: &ModelConfig) -> Result<Weights<M>, EncoderError> {
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
        let (q, k, v) = if deberta.is_some() { ("query_proj", "key_proj", "value_proj") } else { ("query", "key", "value") };
        let mut layers = Vec::with_capacity(config.num_layers);
        // DeBERTa without `share_att_key`: each layer's own position projections (f32).
        let mut own_pos: Vec<[Option<Linear<f32>>; 2]> = Vec::new();
        for l in 0..config.num_layers {
            let p = format!("encoder.layer.{l}");
            layers.push(Layer {
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
            });
            if let Some(d) = deberta.filter(|d| !d.share_att_key) {
                let own = |on: bool, name: &str| on.then(|| r.linear(&format!("{p}.attention.self.{name}"), h, h, false)).transpose();
                own_pos.push([own(d.c2p, "pos_key_proj")?, own(d.p2c, "pos_query_proj")?]);
            }
        }
        if let Some(d) = deberta {
            // DeBERTa's relative embeddings, normalised once when the model says so, through
            // the content projections when shared, else through the layers' own `pos_*_proj`:
            // f32 products on the host, the layers side by side.
            let mut rel: Vec<f32> = r.get("encoder.rel_embeddings.weight", &[2 * d.span, h], false)?;
            if d.norm_rel_ebd {
                let norm = r.norm("encoder.LayerNorm", h)?;
                rel.chunks_exact_mut(h).for_each(|row| crate::tensors::layer_norm(row, &norm, config.layer_norm_eps));
            }
            if !r.hollow() {
                let rows = 2 * d.span;
                let project = |content: &Linear<M>, own: Option<&Linear<f32>>| match own {
                    Some(own) => crate::tensors::dense(own, &rel, rows),
                    None => {
                        let w = M::widen(&content.w);
                        crate::tensors::dense(
                            &Linear { w: w.into_owned(), b: content.b.clone(), out: content.out, inp: content.inp },
                            &rel,
                            rows,
                        )
                    }
                };
                layers.par_iter_mut().enumerate().for_each(|(l, layer)| {
                    let [own_key, own_query] = own_pos.get(l).map_or([None, None], |[a, b]| [a.as_ref(), b.as_ref()]);
                    if d.c2p {
                        layer.pos_key = project(&layer.key, own_key);
                    }
                    if d.p2c {
                        layer.pos_query = project(&layer.query, own_query);
                    }
                });
            }
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
        let lin = |l: &Linear<M>| l.w.len() * 2 + l.b.len() * 4;
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
                    // fp16, twice: as cuBLAS reads them and in the fused attention's fragment order
                    + (l.pos_key.len() + l.pos_query.len()) * 2 * 2
            })
            .sum();
        (self.word.len() + self.position.len() + self.token_type.len()) * 2 + norm(&self.embed_norm) + layers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};
    use safetensors::tensor::TensorView;

    /// A file holding `values` as f32, f16 and bf16 tensors (`a32`, `a16`, `ab16`), written
    /// by safetensors itself.
    fn file(values: &[f32]) -> (tempfile::TempDir, std::path::PathBuf) {
        let f16s: Vec<u8> = values.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes()).collect();
        let bf16s: Vec<u8> = values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect();
        let f32s: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let shape = vec![2, values.len() / 2];
        let views = [
            ("a32", TensorView::new(Dtype::F32, shape.clone(), &f32s).expect("view")),
            ("a16", TensorView::new(Dtype::F16, shape.clone(), &f16s).expect("view")),
            ("ab16", TensorView::new(Dtype::BF16, shape.clone(), &bf16s).expect("view")),
        ];
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("model.safetensors");
        safetensors::serialize_to_file(views, None, &path).expect("write");
        (dir, path)
    }

    /// Read from the file or from its bytes in memory, as f32 or as fp16, every dtype gives
    /// the values the file holds: an fp16 tensor read as fp16 is the file's bits, as f32 it
    /// widens exactly; f32 read as fp16 rounds as `f16::from_f32` does.
    #[test]
    fn tensors_read_from_the_file_or_its_bytes_in_either_precision_are_the_files_values() {
        let values: Vec<f32> = (0..37 * 2).map(|i| (i as f32 - 30.0) * 0.3137).collect();
        let (_dir, path) = file(&values);
        let bytes = std::fs::read(&path).expect("read");
        let shape = [2, 37];
        for reader in [Reader::open(&path, "").expect("open"), Reader::new(&bytes, &path, "").expect("parse")] {
            let a32: Vec<f32> = reader.get("a32", &shape, false).expect("a32");
            assert_eq!(a32, values);
            let a32h: Vec<f16> = reader.get("a32", &shape, false).expect("a32 as f16");
            assert_eq!(a32h, values.iter().map(|v| f16::from_f32(*v)).collect::<Vec<_>>());
            let a16: Vec<f16> = reader.get("a16", &shape, false).expect("a16");
            assert_eq!(a16, a32h);
            let a16w: Vec<f32> = reader.get("a16", &shape, false).expect("a16 as f32");
            assert_eq!(a16w, a32h.iter().map(|v| v.to_f32()).collect::<Vec<_>>());
            let ab16: Vec<f32> = reader.get("ab16", &shape, false).expect("ab16");
            assert_eq!(ab16, values.iter().map(|v| bf16::from_f32(*v).to_f32()).collect::<Vec<_>>());
            let wrong = reader.get::<f32>("a16", &[37, 2], false).expect_err("wrong shape");
            assert!(wrong.to_string().contains("has shape [2, 37], expected [37, 2]"), "{wrong}");
            let gone = reader.get::<f16>("b", &shape, false).expect_err("missing");
            assert!(gone.to_string().contains("\"b\" is missing"), "{gone}");
        }
        let hollow: Vec<f16> = Reader::header_only(&path, "").expect("header").get("a16", &shape, false).expect("a16");
        assert!(hollow.is_empty());
    }

    /// A file cut short is refused when it is opened, before any tensor is read.
    #[test]
    fn a_file_cut_short_is_refused_when_opened() {
        let (_dir, path) = file(&[1.0; 8]);
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() - 3]).expect("cut");
        let err = Reader::open(&path, "").err().expect("refused");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}
