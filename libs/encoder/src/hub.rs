//! Hugging Face "model hub mixin" checkpoints, the layout of NeMo Curator's DeBERTa
//! classifiers (`nvidia/quality-classifier-deberta`, `nvidia/domain-classifier`, ...): a
//! `config.json` that names a `base_model` and the head (`id2label`, `fc_dropout`, `max_len`;
//! or the multi-head model's `target_sizes` and score maps) but not the backbone's shape,
//! which NeMo downloads from the hub. Here the backbone is DeBERTa-v3's published
//! configuration with the sizes the checkpoint's own tensors have, so no download is needed
//! and a checkpoint that does not match is refused by name.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::{ModelConfig, Targets};

/// Whether `config.json` is a model-hub mixin's (a `base_model`, no `model_type`).
pub fn is_hub_config(config: &Value) -> bool {
    config.get("base_model").is_some_and(Value::is_string) && config.get("model_type").is_none()
}

/// Backbones whose configuration is known: DeBERTa-v3 (every size) and mDeBERTa-v3.
fn known_backbone(name: &str) -> bool {
    let n = name.to_lowercase();
    n.contains("deberta-v3")
}

/// The model's configuration from a mixin `config.json` and the checkpoint's tensor shapes.
pub fn config(hub: &Value, shapes: &BTreeMap<String, Vec<usize>>) -> Result<ModelConfig, String> {
    let base = hub.get("base_model").and_then(Value::as_str).unwrap_or_default();
    if !known_backbone(base) {
        return Err(format!(
            "config.json names base_model {base:?}; model-hub checkpoints run with a DeBERTa-v3 backbone \
             (microsoft/deberta-v3-*, microsoft/mdeberta-v3-base); save other models with transformers' save_pretrained"
        ));
    }
    let prefix = ["model.", "backbone.", "deberta.", ""]
        .into_iter()
        .find(|p| shapes.contains_key(&format!("{p}embeddings.word_embeddings.weight")))
        .ok_or("no embeddings.word_embeddings.weight tensor under model., backbone. or deberta.")?;
    let shape = |name: &str| shapes.get(&format!("{prefix}{name}")).cloned();
    let [vocab, hidden] =
        shape("embeddings.word_embeddings.weight").and_then(|s| <[usize; 2]>::try_from(s).ok()).ok_or("word embeddings are not 2-D")?;
    let layers = (0..).take_while(|l| shapes.contains_key(&format!("{prefix}encoder.layer.{l}.attention.self.query_proj.weight"))).count();
    if layers == 0 {
        return Err(format!("no {prefix}encoder.layer.0.attention.self.query_proj.weight: not a DeBERTa-v2/v3 backbone"));
    }
    let inter =
        shape("encoder.layer.0.intermediate.dense.weight").and_then(|s| s.first().copied()).ok_or("no intermediate.dense.weight")?;
    let rel_rows = shape("encoder.rel_embeddings.weight").and_then(|s| s.first().copied()).ok_or("no encoder.rel_embeddings.weight")?;
    if hidden % 64 != 0 {
        return Err(format!("hidden size {hidden} is not a multiple of DeBERTa-v3's 64-wide heads"));
    }
    let separate_pos = shapes.contains_key(&format!("{prefix}encoder.layer.0.attention.self.pos_key_proj.weight"));
    let absolute = shapes.contains_key(&format!("{prefix}embeddings.position_embeddings.weight"));
    let max_positions = shape("embeddings.position_embeddings.weight").and_then(|s| s.first().copied()).unwrap_or(512);
    let mut backbone = json!({
        "model_type": "deberta-v2",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden / 64,
        "intermediate_size": inter,
        "max_position_embeddings": max_positions,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-7,
        "relative_attention": true,
        "position_buckets": rel_rows / 2,
        "max_relative_positions": -1,
        "norm_rel_ebd": if shapes.contains_key(&format!("{prefix}encoder.LayerNorm.weight")) { "layer_norm" } else { "none" },
        "share_att_key": !separate_pos,
        "pos_att_type": "p2c|c2p",
        "position_biased_input": absolute,
        "type_vocab_size": 0,
    });
    let targets = targets(hub)?;
    let head = if let Some(labels) = hub.get("id2label") {
        backbone["id2label"] = labels.clone();
        "NeMo's `fc` on the first token"
    } else if !targets.sizes.is_empty() {
        "NeMo's multi-head model: one `fc` per target over the mean-pooled states"
    } else {
        "no head"
    };
    let mut config = ModelConfig::parse(&backbone.to_string())?;
    config.max_seq_length = hub.get("max_len").and_then(Value::as_u64).map(|n| n as usize);
    config.targets = targets;
    config.layout = format!(
        "model-hub checkpoint ({head}); backbone {base}: DeBERTa-v3's configuration with the checkpoint's shapes \
         ({layers} layers, {hidden} wide, {} heads, vocabulary {vocab}, {} relative buckets)",
        hidden / 64,
        rel_rows / 2
    );
    Ok(config)
}

/// The multi-head model's targets (`target_sizes` and the maps), if the config has them.
fn targets(hub: &Value) -> Result<Targets, String> {
    let Some(sizes) = hub.get("target_sizes").and_then(Value::as_object) else { return Ok(Targets::default()) };
    let sizes = sizes
        .iter()
        .map(|(name, n)| {
            n.as_u64().filter(|&n| n > 0).map(|n| (name.clone(), n as usize)).ok_or(format!("target_sizes.{name}: not a positive integer"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let floats = |v: &Value| v.as_array().map(|a| a.iter().filter_map(Value::as_f64).collect::<Vec<_>>());
    let weights: BTreeMap<String, Vec<f64>> = hub
        .get("weights_map")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), floats(v)?))).collect())
        .unwrap_or_default();
    let divisors: BTreeMap<String, f64> = hub
        .get("divisor_map")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_f64()?))).collect())
        .unwrap_or_default();
    let task_types = match hub.get("task_type_map").and_then(Value::as_object) {
        Some(m) => (0..m.len())
            .map(|i| m.get(&i.to_string()).and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("TASK_{i}")))
            .collect(),
        None => Vec::new(),
    };
    for (name, n) in &sizes {
        if name == "task_type" {
            if task_types.len() != *n {
                return Err(format!("task_type_map has {} entries for {n} task types", task_types.len()));
            }
            continue;
        }
        match weights.get(name) {
            Some(w) if w.len() == *n => {}
            Some(w) => return Err(format!("weights_map.{name} has {} values for {n} classes", w.len())),
            None => return Err(format!("weights_map has no {name:?}")),
        }
        if !divisors.get(name).is_some_and(|d| *d != 0.0) {
            return Err(format!("divisor_map.{name} is missing or zero"));
        }
    }
    Ok(Targets { sizes, task_types, weights, divisors })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base_shapes(prefix: &str) -> BTreeMap<String, Vec<usize>> {
        let mut s = BTreeMap::new();
        s.insert(format!("{prefix}embeddings.word_embeddings.weight"), vec![128100, 768]);
        s.insert(format!("{prefix}encoder.rel_embeddings.weight"), vec![512, 768]);
        s.insert(format!("{prefix}encoder.LayerNorm.weight"), vec![768]);
        for l in 0..12 {
            s.insert(format!("{prefix}encoder.layer.{l}.attention.self.query_proj.weight"), vec![768, 768]);
        }
        s.insert(format!("{prefix}encoder.layer.0.intermediate.dense.weight"), vec![3072, 768]);
        s
    }

    #[test]
    fn a_nemo_checkpoint_gets_deberta_v3_base() {
        let hub = json!({"base_model": "microsoft/deberta-v3-base", "fc_dropout": 0.2, "max_len": 1024,
            "id2label": {"0": "High", "1": "Low", "2": "Medium"}});
        assert!(is_hub_config(&hub));
        let c = config(&hub, &base_shapes("model.")).unwrap();
        let want = ModelConfig::parse(crate::config::tests::DEBERTA_V3_BASE).unwrap();
        assert_eq!((c.arch.clone(), c.num_layers, c.num_heads, c.intermediate_size, c.vocab_size), (want.arch, 12, 12, 3072, 128100));
        assert_eq!(c.labels, vec!["High", "Low", "Medium"]);
        assert_eq!(c.max_seq_length, Some(1024));
        assert!(c.layout.contains("fc") && c.layout.contains("microsoft/deberta-v3-base"), "{}", c.layout);
    }

    #[test]
    fn refuses_unknown_backbones_and_bad_maps() {
        let hub = json!({"base_model": "roberta-base", "id2label": {"0": "a"}});
        assert!(config(&hub, &base_shapes("model.")).unwrap_err().contains("roberta-base"));
        let multi = json!({"base_model": "microsoft/DeBERTa-v3-base", "target_sizes": {"task_type": 2, "reasoning": 2},
            "task_type_map": {"0": "QA", "1": "Other"}, "weights_map": {"reasoning": [0.0, 1.0]}, "divisor_map": {}});
        assert!(config(&multi, &base_shapes("backbone.")).unwrap_err().contains("divisor_map.reasoning"));
        let mut ok = multi.clone();
        ok["divisor_map"] = json!({"reasoning": 1.0});
        let c = config(&ok, &base_shapes("backbone.")).unwrap();
        assert_eq!(c.targets.sizes, vec![("task_type".to_string(), 2), ("reasoning".to_string(), 2)]);
        assert!(c.labels.is_empty());
    }
}
