//! What a Hugging Face model directory says about the model: `config.json` (architecture and
//! sizes, labels) and, for sentence-transformers models, the pooling and sequence length.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The activation of the feed-forward layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact (erf) form, as `torch.nn.functional.gelu`.
    Gelu,
    /// `gelu_new` / `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    Relu,
    /// `quick_gelu` (CLIP): `x · sigmoid(1.702 x)`.
    QuickGelu,
}

/// How token states become one vector per document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the (non-padding) token states: sentence-transformers' default.
    Mean,
    /// The state of the first token (`[CLS]`).
    Cls,
}

/// DeBERTa-v2/v3's disentangled attention, from `config.json` (transformers'
/// `DebertaV2Config`).
#[derive(Debug, Clone, PartialEq)]
pub struct Disentangled {
    /// Relative positions each side (`position_buckets`, else `max_relative_positions`):
    /// `rel_embeddings` has `2 × span` rows.
    pub span: usize,
    /// Log buckets: `(position_buckets, max_relative_positions)` when `position_buckets > 0`.
    pub buckets: Option<(usize, usize)>,
    /// Content-to-position term (`pos_att_type` holds `c2p`).
    pub c2p: bool,
    /// Position-to-content term (`pos_att_type` holds `p2c`).
    pub p2c: bool,
    /// Positions projected with the content query/key weights (`share_att_key`), else with
    /// their own `pos_query_proj` / `pos_key_proj`.
    pub share_att_key: bool,
    /// `norm_rel_ebd` holds `layer_norm`: the relative embeddings go through `encoder.LayerNorm`.
    pub norm_rel_ebd: bool,
    /// Absolute position embeddings are added to the input (`position_biased_input`).
    pub position_biased_input: bool,
}

impl Disentangled {
    /// The divisor of every score term: `sqrt(head_dim × (1 + c2p + p2c))`.
    pub fn scale(&self, head_dim: usize) -> f32 {
        let factor = 1 + usize::from(self.c2p) + usize::from(self.p2c);
        ((head_dim * factor) as f32).sqrt()
    }

    /// The row of the projected relative embeddings that query `i` and key `j` use (the same
    /// row for both terms: the log buckets are odd, so p2c's `-bucket(j - i)` is `bucket(i - j)`).
    pub fn index(&self, i: usize, j: usize) -> usize {
        self.row(i as i64 - j as i64)
    }

    /// The row of every distance `i - j` in `-max..=max`, at `i - j + max`: the row depends
    /// on the distance alone, so both back-ends look it up here instead of bucketing per pair.
    pub fn rows_by_distance(&self, max: usize) -> Vec<u32> {
        let max = max as i64;
        (-max..=max).map(|rel| self.row(rel) as u32).collect()
    }

    fn row(&self, rel: i64) -> usize {
        let bucket = match self.buckets {
            Some((size, max)) => log_bucket(rel, size, max),
            None => rel,
        };
        (bucket + self.span as i64).clamp(0, 2 * self.span as i64 - 1) as usize
    }
}

/// transformers' `make_log_bucket_position`, in f32 as it computes it: distances under
/// `size / 2` stay as they are, longer ones shrink logarithmically up to `max`.
pub fn log_bucket(rel: i64, size: usize, max: usize) -> i64 {
    let mid = (size / 2) as i64;
    let abs = if rel < mid && rel > -mid { mid - 1 } else { rel.abs() };
    if abs <= mid {
        return rel;
    }
    let log = ((abs as f32 / mid as f32).ln() / ((max as f32 - 1.0) / mid as f32).ln() * (mid - 1) as f32).ceil() + mid as f32;
    log as i64 * rel.signum()
}

/// Which model family runs, and what it needs beyond BERT's shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Arch {
    /// BERT, RoBERTa, XLM-R, ELECTRA: absolute positions, scaled dot-product attention.
    Bert,
    /// DeBERTa-v2/v3 (and mDeBERTa): relative positions, disentangled attention.
    Deberta(Disentangled),
}

/// A multi-head classifier's targets (NeMo's prompt task and complexity model): one linear
/// head per target over the mean-pooled states, and how NeMo turns their probabilities into
/// scores (`weights_map`, `divisor_map`, `task_type_map`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Targets {
    /// Each target's name and number of classes, in the heads' order (`target_sizes`).
    pub sizes: Vec<(String, usize)>,
    /// The task type's label per class (`task_type_map`).
    pub task_types: Vec<String>,
    /// Per target, the value of each class (`weights_map`).
    pub weights: BTreeMap<String, Vec<f64>>,
    /// Per target, the divisor of the weighted sum (`divisor_map`).
    pub divisors: BTreeMap<String, f64>,
}

/// An encoder's shape, from `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub model_type: String,
    pub arch: Arch,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    pub max_positions: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f32,
    pub activation: Activation,
    /// Label names by index (`id2label`); empty for a model without a classification head.
    pub labels: Vec<String>,
    /// `problem_type: regression`, or a single-output head: the score is the raw logit.
    pub regression: bool,
    /// The pooling a sentence-transformers model was trained with (`1_Pooling/config.json`).
    pub pooling: Option<Pooling>,
    /// sentence-transformers' `max_seq_length` (`sentence_bert_config.json`), or a model-hub
    /// checkpoint's `max_len`.
    pub max_seq_length: Option<usize>,
    /// A multi-head classifier's targets (empty for one head).
    pub targets: Targets,
    /// Where the model came from, in words (planning logs it): the layout found and, for a
    /// model-hub checkpoint, its backbone.
    pub layout: String,
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default = "bert")]
    model_type: String,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_positions")]
    max_position_embeddings: usize,
    #[serde(default = "default_types")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f32,
    #[serde(default = "default_act")]
    hidden_act: String,
    #[serde(default)]
    id2label: BTreeMap<String, String>,
    #[serde(default)]
    num_labels: Option<usize>,
    #[serde(default)]
    problem_type: Option<String>,
    #[serde(default)]
    position_embedding_type: Option<String>,
    // DeBERTa-v2/v3 (transformers' DebertaV2Config defaults).
    #[serde(default)]
    relative_attention: bool,
    #[serde(default = "minus_one")]
    max_relative_positions: i64,
    #[serde(default = "minus_one")]
    position_buckets: i64,
    #[serde(default)]
    pos_att_type: Option<PosAttType>,
    #[serde(default)]
    share_att_key: bool,
    #[serde(default)]
    norm_rel_ebd: Option<String>,
    #[serde(default = "yes")]
    position_biased_input: bool,
    #[serde(default)]
    embedding_size: Option<usize>,
    #[serde(default)]
    conv_kernel_size: Option<usize>,
    #[serde(default)]
    attention_head_size: Option<usize>,
    #[serde(default)]
    pooler_hidden_act: Option<String>,
}

/// `pos_att_type` as a list (`["p2c", "c2p"]`) or a string (`"p2c|c2p"`).
#[derive(Deserialize)]
#[serde(untagged)]
enum PosAttType {
    List(Vec<String>),
    Text(String),
}

impl PosAttType {
    fn kinds(&self) -> Vec<String> {
        match self {
            PosAttType::List(v) => v.iter().map(|s| s.trim().to_lowercase()).collect(),
            PosAttType::Text(s) => s.split('|').map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty()).collect(),
        }
    }
}

fn minus_one() -> i64 {
    -1
}
fn yes() -> bool {
    true
}

fn bert() -> String {
    "bert".into()
}
fn default_positions() -> usize {
    512
}
fn default_types() -> usize {
    2
}
fn default_eps() -> f32 {
    1e-12
}
fn default_act() -> String {
    "gelu".into()
}

/// The longest sequence of a model without absolute positions.
pub const MAX_RELATIVE_TOKENS: usize = 8192;

/// Model types this runtime runs: BERT's layout, and DeBERTa-v2/v3's.
pub const SUPPORTED: &[&str] = &["bert", "roberta", "xlm-roberta", "electra", "deberta-v2"];

impl ModelConfig {
    /// Parse the text of a `config.json`; `Err` says what is unusable.
    pub fn parse(text: &str) -> Result<ModelConfig, String> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if !SUPPORTED.contains(&raw.model_type.as_str()) {
            return Err(format!("model_type {:?} is not supported (this runtime runs {})", raw.model_type, SUPPORTED.join(", ")));
        }
        let arch = if raw.model_type == "deberta-v2" { Arch::Deberta(disentangled(&raw)?) } else { Arch::Bert };
        if let Some(p) = raw.position_embedding_type.as_deref().filter(|p| *p != "absolute") {
            return Err(format!("position_embedding_type {p:?} is not supported (only \"absolute\")"));
        }
        if raw.num_attention_heads == 0 || !raw.hidden_size.is_multiple_of(raw.num_attention_heads) {
            return Err(format!("hidden_size {} is not a multiple of num_attention_heads {}", raw.hidden_size, raw.num_attention_heads));
        }
        if raw.hidden_size == 0 || raw.hidden_size > 8192 || raw.intermediate_size == 0 || raw.max_position_embeddings == 0 {
            return Err("hidden_size, intermediate_size and max_position_embeddings must be positive (hidden_size ≤ 8192)".into());
        }
        let activation = match raw.hidden_act.as_str() {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            "quick_gelu" => Activation::QuickGelu,
            other => return Err(format!("hidden_act {other:?} is not supported (gelu, gelu_new, relu, quick_gelu)")),
        };
        let mut labels = Vec::new();
        let n = raw.num_labels.unwrap_or(0).max(raw.id2label.len());
        for i in 0..n {
            labels.push(raw.id2label.get(&i.to_string()).cloned().unwrap_or_else(|| format!("LABEL_{i}")));
        }
        let regression = raw.problem_type.as_deref() == Some("regression") || labels.len() == 1;
        // RoBERTa-style models offset positions by the padding index + 1.
        let layout = format!("{} ({})", raw.model_type, if labels.is_empty() { "encoder" } else { "sequence classification" });
        Ok(ModelConfig {
            model_type: raw.model_type,
            arch,
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            num_layers: raw.num_hidden_layers,
            num_heads: raw.num_attention_heads,
            intermediate_size: raw.intermediate_size,
            max_positions: raw.max_position_embeddings,
            type_vocab_size: raw.type_vocab_size,
            layer_norm_eps: raw.layer_norm_eps,
            activation,
            labels,
            regression,
            pooling: None,
            max_seq_length: None,
            targets: Targets::default(),
            layout,
        })
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// The first position id (RoBERTa-style models start after the padding index).
    pub fn position_offset(&self) -> usize {
        if self.model_type.contains("roberta") { 2 } else { 0 }
    }

    /// Whether absolute position embeddings are added to the input.
    pub fn absolute_positions(&self) -> bool {
        match &self.arch {
            Arch::Bert => true,
            Arch::Deberta(d) => d.position_biased_input,
        }
    }

    /// The longest sequence the model accepts, in tokens: the position table's for absolute
    /// positions; relative positions have no limit (NeMo runs DeBERTa-v3 at 1,024), so 8,192,
    /// the stage's ceiling.
    pub fn max_tokens(&self) -> usize {
        if self.absolute_positions() { self.max_positions - self.position_offset() } else { MAX_RELATIVE_TOKENS }
    }

    /// The sequence length used when neither the stage nor the model names one.
    pub fn default_tokens(&self) -> usize {
        self.max_seq_length.unwrap_or(if self.absolute_positions() { self.max_tokens() } else { self.max_positions })
    }
}

/// DeBERTa's attention settings, checked.
fn disentangled(raw: &RawConfig) -> Result<Disentangled, String> {
    if !raw.relative_attention {
        return Err("deberta-v2 without relative_attention is not supported (every released DeBERTa-v2/v3 uses it)".into());
    }
    if raw.embedding_size.is_some_and(|e| e != raw.hidden_size) {
        return Err("deberta-v2 with embedding_size ≠ hidden_size (embed_proj) is not supported".into());
    }
    if raw.conv_kernel_size.is_some_and(|k| k > 0) {
        return Err("deberta-v2 with conv_kernel_size (DeBERTa-v2-xlarge's convolution layer) is not supported".into());
    }
    if raw.attention_head_size.is_some_and(|d| d * raw.num_attention_heads.max(1) != raw.hidden_size) {
        return Err("deberta-v2 with attention_head_size × heads ≠ hidden_size is not supported".into());
    }
    // The ContextPooler's activation (head.rs applies GELU, transformers' default).
    if let Some(act) = raw.pooler_hidden_act.as_deref().filter(|a| *a != "gelu") {
        return Err(format!("pooler_hidden_act {act:?} is not supported (gelu)"));
    }
    let kinds = raw.pos_att_type.as_ref().map(PosAttType::kinds).unwrap_or_default();
    if let Some(other) = kinds.iter().find(|k| *k != "c2p" && *k != "p2c") {
        return Err(format!("pos_att_type {other:?} is not supported (c2p, p2c)"));
    }
    let max_rel = if raw.max_relative_positions < 1 { raw.max_position_embeddings } else { raw.max_relative_positions as usize };
    let span = if raw.position_buckets > 0 { raw.position_buckets as usize } else { max_rel };
    if span == 0 || span > 65_536 {
        return Err(format!("relative position span {span} is out of range (1..=65536)"));
    }
    let buckets = (raw.position_buckets > 0).then_some((raw.position_buckets as usize, max_rel));
    if let Some((size, max)) = buckets
        && (size < 4 || max <= size / 2 + 1)
    {
        return Err(format!("position_buckets {size} with max_relative_positions {max}: the log buckets need max > buckets / 2 + 1"));
    }
    let norm = raw.norm_rel_ebd.as_deref().unwrap_or("none").to_lowercase();
    Ok(Disentangled {
        span,
        buckets,
        c2p: kinds.iter().any(|k| k == "c2p"),
        p2c: kinds.iter().any(|k| k == "p2c"),
        share_att_key: raw.share_att_key,
        norm_rel_ebd: norm.split('|').any(|p| p.trim() == "layer_norm"),
        position_biased_input: raw.position_biased_input,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const MINILM: &str = r#"{"architectures":["BertModel"],"hidden_act":"gelu","hidden_size":384,"intermediate_size":1536,
        "layer_norm_eps":1e-12,"max_position_embeddings":512,"model_type":"bert","num_attention_heads":12,
        "num_hidden_layers":6,"type_vocab_size":2,"vocab_size":30522}"#;

    #[test]
    fn parses_a_bert_config() {
        let c = ModelConfig::parse(MINILM).unwrap();
        assert_eq!((c.hidden_size, c.num_layers, c.num_heads, c.head_dim()), (384, 6, 12, 32));
        assert_eq!(c.activation, Activation::Gelu);
        assert!(c.labels.is_empty());
        assert_eq!(c.max_tokens(), 512);
    }

    #[test]
    fn labels_and_regression() {
        let with = MINILM.replace("\"vocab_size\":30522", "\"vocab_size\":30522,\"id2label\":{\"0\":\"low\",\"1\":\"high\"}");
        let c = ModelConfig::parse(&with).unwrap();
        assert_eq!(c.labels, vec!["low", "high"]);
        assert!(!c.regression);
        let reg = MINILM.replace("\"vocab_size\":30522", "\"vocab_size\":30522,\"num_labels\":1");
        assert!(ModelConfig::parse(&reg).unwrap().regression);
    }

    /// microsoft/deberta-v3-base's config.json.
    pub(crate) const DEBERTA_V3_BASE: &str = r#"{"model_type":"deberta-v2","attention_probs_dropout_prob":0.1,"hidden_act":"gelu",
        "hidden_dropout_prob":0.1,"hidden_size":768,"initializer_range":0.02,"intermediate_size":3072,"max_position_embeddings":512,
        "relative_attention":true,"position_buckets":256,"norm_rel_ebd":"layer_norm","share_att_key":true,"pos_att_type":"p2c|c2p",
        "layer_norm_eps":1e-7,"max_relative_positions":-1,"position_biased_input":false,"num_attention_heads":12,
        "num_hidden_layers":12,"type_vocab_size":0,"vocab_size":128100}"#;

    #[test]
    fn parses_a_deberta_v3_config() {
        let c = ModelConfig::parse(DEBERTA_V3_BASE).unwrap();
        let Arch::Deberta(d) = &c.arch else { panic!("{:?}", c.arch) };
        assert_eq!((d.span, d.buckets, d.c2p, d.p2c, d.share_att_key, d.norm_rel_ebd), (256, Some((256, 512)), true, true, true, true));
        assert!(!d.position_biased_input);
        assert_eq!(c.max_tokens(), MAX_RELATIVE_TOKENS);
        assert_eq!(c.default_tokens(), 512);
        assert!((d.scale(64) - (192f32).sqrt()).abs() < 1e-6);
        let listed = DEBERTA_V3_BASE.replace("\"p2c|c2p\"", "[\"c2p\"]");
        let Arch::Deberta(d) = ModelConfig::parse(&listed).unwrap().arch else { unreachable!() };
        assert!(d.c2p && !d.p2c);
    }

    #[test]
    fn log_buckets_keep_near_positions_and_compress_far_ones() {
        // deberta-v3: 256 buckets over 512 positions; within ±128 a distance is its own bucket.
        for rel in -128..=128 {
            assert_eq!(log_bucket(rel, 256, 512), rel);
        }
        assert_eq!(log_bucket(129, 256, 512), 129);
        assert_eq!(log_bucket(-129, 256, 512), -129);
        assert_eq!(log_bucket(511, 256, 512), 255);
        // Far beyond max, the bucket keeps growing; index() clamps it.
        assert!(log_bucket(2000, 256, 512) > 255);
        let d = Disentangled {
            span: 256,
            buckets: Some((256, 512)),
            c2p: true,
            p2c: true,
            share_att_key: true,
            norm_rel_ebd: true,
            position_biased_input: false,
        };
        assert_eq!(d.index(0, 0), 256);
        assert_eq!(d.index(0, 5000), 0);
        assert_eq!(d.index(5000, 0), 511);
        let rows = d.rows_by_distance(5000);
        for (i, j) in [(0, 0), (0, 5000), (5000, 0), (3, 900), (700, 2), (129, 0)] {
            assert_eq!(rows[i + 5000 - j] as usize, d.index(i, j), "distance {i} - {j}");
        }
        for (i, j) in [(3, 900), (700, 2), (40, 41)] {
            assert_eq!(log_bucket(i as i64 - j as i64, 256, 512), -log_bucket(j as i64 - i as i64, 256, 512), "odd");
        }
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let deberta = DEBERTA_V3_BASE.replace("\"relative_attention\":true", "\"relative_attention\":false");
        assert!(ModelConfig::parse(&deberta).unwrap_err().contains("relative_attention"));
        let conv = DEBERTA_V3_BASE.replace("\"type_vocab_size\":0", "\"type_vocab_size\":0,\"conv_kernel_size\":3");
        assert!(ModelConfig::parse(&conv).unwrap_err().contains("conv_kernel_size"));
        let pooler = DEBERTA_V3_BASE.replace("\"type_vocab_size\":0", "\"type_vocab_size\":0,\"pooler_hidden_act\":\"tanh\"");
        assert!(ModelConfig::parse(&pooler).unwrap_err().contains("pooler_hidden_act"));
        let gpt = MINILM.replace("\"model_type\":\"bert\"", "\"model_type\":\"gpt2\"");
        assert!(ModelConfig::parse(&gpt).unwrap_err().contains("\"gpt2\""));
        let heads = MINILM.replace("\"num_attention_heads\":12", "\"num_attention_heads\":7");
        assert!(ModelConfig::parse(&heads).unwrap_err().contains("multiple"));
        let act = MINILM.replace("\"hidden_act\":\"gelu\"", "\"hidden_act\":\"swish\"");
        assert!(ModelConfig::parse(&act).unwrap_err().contains("swish"));
    }
}
