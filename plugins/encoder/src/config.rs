//! What a Hugging Face model directory says about the model: `config.json` (architecture and
//! sizes, labels) and, for sentence-transformers models, the pooling and sequence length.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::EncoderError;

/// The activation of the feed-forward layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact (erf) form, as `torch.nn.functional.gelu`.
    Gelu,
    /// `gelu_new` / `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    Relu,
}

/// How token states become one vector per document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the (non-padding) token states: sentence-transformers' default.
    Mean,
    /// The state of the first token (`[CLS]`).
    Cls,
}

/// A BERT-family encoder's shape, from `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub model_type: String,
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
    /// sentence-transformers' `max_seq_length` (`sentence_bert_config.json`).
    pub max_seq_length: Option<usize>,
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

#[derive(Deserialize)]
struct StPooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

#[derive(Deserialize)]
struct StConfig {
    max_seq_length: Option<usize>,
}

/// Model types this runtime runs (they share BERT's layout).
pub const SUPPORTED: &[&str] = &["bert", "roberta", "xlm-roberta", "electra"];

impl ModelConfig {
    /// Read `config.json` (and the sentence-transformers files when present) from `dir`.
    pub fn load(dir: &Path) -> Result<ModelConfig, EncoderError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| EncoderError::io(&path, e))?;
        let mut config = ModelConfig::parse(&text).map_err(|reason| EncoderError::Model { path: path.clone(), reason })?;
        let pooling = dir.join("1_Pooling").join("config.json");
        if let Ok(text) = std::fs::read_to_string(&pooling) {
            let p: StPooling =
                serde_json::from_str(&text).map_err(|e| EncoderError::Model { path: pooling.clone(), reason: e.to_string() })?;
            config.pooling = match (p.pooling_mode_mean_tokens, p.pooling_mode_cls_token) {
                (true, _) => Some(Pooling::Mean),
                (false, true) => Some(Pooling::Cls),
                _ => None,
            };
        }
        let st = dir.join("sentence_bert_config.json");
        if let Ok(text) = std::fs::read_to_string(&st) {
            let s: StConfig = serde_json::from_str(&text).map_err(|e| EncoderError::Model { path: st.clone(), reason: e.to_string() })?;
            config.max_seq_length = s.max_seq_length;
        }
        Ok(config)
    }

    /// Parse the text of a `config.json`; `Err` says what is unusable.
    pub fn parse(text: &str) -> Result<ModelConfig, String> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if !SUPPORTED.contains(&raw.model_type.as_str()) {
            return Err(format!(
                "model_type {:?} is not supported (this runtime runs {}; DeBERTa is not implemented yet)",
                raw.model_type,
                SUPPORTED.join(", ")
            ));
        }
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
            other => return Err(format!("hidden_act {other:?} is not supported (gelu, gelu_new, relu)")),
        };
        let mut labels = Vec::new();
        let n = raw.num_labels.unwrap_or(0).max(raw.id2label.len());
        for i in 0..n {
            labels.push(raw.id2label.get(&i.to_string()).cloned().unwrap_or_else(|| format!("LABEL_{i}")));
        }
        let regression = raw.problem_type.as_deref() == Some("regression") || labels.len() == 1;
        // RoBERTa-style models offset positions by the padding index + 1.
        Ok(ModelConfig {
            model_type: raw.model_type,
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

    /// The longest sequence the model accepts, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_positions - self.position_offset()
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn refuses_what_it_cannot_run() {
        let deberta = MINILM.replace("\"model_type\":\"bert\"", "\"model_type\":\"deberta-v2\"");
        assert!(ModelConfig::parse(&deberta).unwrap_err().contains("deberta-v2"));
        let heads = MINILM.replace("\"num_attention_heads\":12", "\"num_attention_heads\":7");
        assert!(ModelConfig::parse(&heads).unwrap_err().contains("multiple"));
        let act = MINILM.replace("\"hidden_act\":\"gelu\"", "\"hidden_act\":\"swish\"");
        assert!(ModelConfig::parse(&act).unwrap_err().contains("swish"));
    }
}
