//! Reading a model directory: its `config.json` (a plain Hugging Face config, or a model-hub
//! mixin's, whose backbone shape comes from the weights), then the sentence-transformers files
//! (`1_Pooling/config.json`, `sentence_bert_config.json`) when present.

use std::path::Path;

use serde::Deserialize;

use crate::EncoderError;
use crate::config::{ModelConfig, Pooling};

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

impl ModelConfig {
    /// Read `config.json` (and the sentence-transformers files when present) from `dir`.
    pub fn load(dir: &Path) -> Result<ModelConfig, EncoderError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| EncoderError::io(&path, e))?;
        let model_err = |reason| EncoderError::Model { path: path.clone(), reason };
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| model_err(e.to_string()))?;
        let mut config = if crate::hub::is_hub_config(&value) {
            let weights = dir.join("model.safetensors");
            let shapes = crate::weights::shapes(&weights)?;
            crate::hub::config(&value, &shapes).map_err(|reason| EncoderError::Model { path: weights.clone(), reason })?
        } else {
            ModelConfig::parse(&text).map_err(model_err)?
        };
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
}
