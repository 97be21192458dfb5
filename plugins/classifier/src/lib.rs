//! Sequence classification as a stage (NeMo Curator's quality / domain / content-type /
//! FineWeb-Edu classifiers): each document's text through a BERT- or DeBERTa-family model with
//! a classification head ([`curator_encoder`]), writing the predicted label and its score, and
//! keeping the documents whose label is in `filter_by` (alias `keep_labels`) and whose score
//! lies within `min_score`..`max_score`.
//!
//! NeMo's multi-head prompt task and complexity model writes NeMo's eleven columns instead
//! (`prompt_complexity_score`, `task_type_1`, `task_type_2`, `task_type_prob` and one score per
//! complexity target); `min_score`/`max_score` then apply to `prompt_complexity_score`.
//!
//! A classification model's score is the softmax probability of the predicted label; a
//! regression model's (one output, like FineWeb-Edu's) is the raw output, and its label is
//! that score rounded to an integer, as FineWeb-Edu's `int_score`. `probabilities: true`
//! also writes every label's probability as a float32-vector column `<label_field>_probs`.

use curator_encoder::stage::{batch_error, encoder_options, load_encoder, texts};
use curator_sdk::prelude::*;

/// Sequence classification with a BERT- or DeBERTa-family model.
#[stage(name = "classifier", native, cpus = 4.0, gpu_memory_gb = 4.0, memory_mb = 4096, dir = "models", inputs = [], input_params = ["text_field"], outputs = ["label", "score"], batch_size = 8192)]
pub struct Classifier {
    /// The model directory as the stage sees it (inside the granted `models` directory).
    pub model: String,
    /// auto (GPU if usable, else CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
    /// Longest sequence in tokens (0: the model's own: sentence-transformers' or a model-hub
    /// checkpoint's `max_len`, else its position limit, 512 for DeBERTa).
    #[param(default = 0, min = 0, max = 8192)]
    pub max_tokens: usize,
    /// NeMo's name for `max_tokens` (0: unset; set one of the two).
    #[param(default = 0, min = 0, max = 8192)]
    pub max_seq_length: usize,
    /// Cut each text to this many characters before tokenizing (NeMo's max_chars; 0: no cut).
    #[param(default = 0, min = 0)]
    pub max_chars: usize,
    /// Padded tokens per forward pass (`curator-host tune` measures the best).
    #[param(default = 65536, min = 8)]
    pub max_batch_tokens: usize,
    /// Documents per forward pass at most (NeMo's knob).
    #[param(default = 256, min = 1)]
    pub model_inference_batch_size: usize,
    /// The column the text is read from.
    #[param(default = "text")]
    pub text_field: String,
    /// The column the predicted label is written to.
    #[param(default = "label")]
    pub label_field: String,
    /// The column the score is written to.
    #[param(default = "score")]
    pub score_field: String,
    /// Keep only documents with one of these labels (empty: any label). NeMo's name.
    #[param(default = [])]
    pub filter_by: Vec<String>,
    /// The same as `filter_by` (set one of the two).
    #[param(default = [])]
    pub keep_labels: Vec<String>,
    /// Keep only documents scoring at least this.
    pub min_score: Option<f64>,
    /// Keep only documents scoring at most this.
    pub max_score: Option<f64>,
    /// Also write every label's probability (`<label_field>_probs`, a float32 vector).
    #[param(default = false)]
    pub probabilities: bool,
    #[state]
    encoder: Option<curator_encoder::Encoder>,
}

/// The label and score of one document's logits.
pub fn decide(labels: &[String], regression: bool, logits: &[f32]) -> (String, f64) {
    if regression {
        let score = f64::from(logits.first().copied().unwrap_or(0.0));
        return (format!("{}", score.round() as i64), score);
    }
    let probs = curator_encoder::head::softmax(logits);
    let (best, p) = probs.iter().enumerate().fold((0, f32::NEG_INFINITY), |acc, (i, &p)| if p > acc.1 { (i, p) } else { acc });
    (labels.get(best).cloned().unwrap_or_else(|| format!("LABEL_{best}")), f64::from(p))
}

impl Classifier {
    /// The labels to keep: `filter_by` or its alias `keep_labels`.
    fn wanted(&self) -> &[String] {
        if self.filter_by.is_empty() { &self.keep_labels } else { &self.filter_by }
    }

    fn keeps(&self, label: Option<&str>, score: f64) -> bool {
        let wanted = self.wanted();
        (wanted.is_empty() || label.is_some_and(|label| wanted.iter().any(|l| l == label)))
            && self.min_score.is_none_or(|m| score >= m)
            && self.max_score.is_none_or(|m| score <= m)
    }

    /// NeMo's columns of the multi-head model, and the documents kept by score.
    fn complexity_columns(&self, targets: &curator_encoder::config::Targets, logits: &[f32], n: usize) -> (Vec<Column>, Vec<u32>) {
        let rows: Vec<_> = logits.chunks_exact(n).map(|row| curator_encoder::head::complexity(targets, row)).collect();
        let keep = rows.iter().enumerate().filter(|(_, r)| self.keeps(None, r.prompt_complexity_score)).map(|(i, _)| i as u32).collect();
        let score: Vec<f64> = rows.iter().map(|r| r.prompt_complexity_score).collect();
        let prob: Vec<f64> = rows.iter().map(|r| r.task_type_prob).collect();
        let mut columns = vec![
            Column::float64("prompt_complexity_score", &score),
            Column::utf8("task_type_1", rows.iter().map(|r| r.task_type_1.as_str())),
            Column::utf8("task_type_2", rows.iter().map(|r| r.task_type_2.as_str())),
            Column::float64("task_type_prob", &prob),
        ];
        for (k, (name, _)) in targets.sizes.iter().filter(|(name, _)| name != "task_type").enumerate() {
            let values: Vec<f64> = rows.iter().map(|r| r.scores.get(k).map_or(0.0, |s| s.1)).collect();
            columns.push(Column::float64(name, &values));
        }
        (columns, keep)
    }
}

impl Stage for Classifier {
    fn init(&mut self) -> Result<(), StageError> {
        if !self.filter_by.is_empty() && !self.keep_labels.is_empty() {
            return Err(StageError::InvalidParams("set filter_by or keep_labels (the same list), not both".into()));
        }
        if self.max_tokens > 0 && self.max_seq_length > 0 && self.max_tokens != self.max_seq_length {
            return Err(StageError::InvalidParams("set max_seq_length or max_tokens (the same limit), not both".into()));
        }
        let max_tokens = self.max_tokens.max(self.max_seq_length);
        let opts = encoder_options(&self.device, max_tokens, self.max_batch_tokens, self.model_inference_batch_size)?;
        let encoder = load_encoder("classifier", &self.model, &opts)?;
        let multi = !encoder.config.targets.sizes.is_empty();
        if encoder.config.labels.is_empty() && !multi {
            return Err(StageError::InvalidParams(format!(
                "model {}: config.json has no labels (id2label / num_labels / target_sizes): not a classifier",
                self.model
            )));
        }
        if multi && !self.wanted().is_empty() {
            // NeMo raises NotImplementedError for the same.
            return Err(StageError::InvalidParams(format!(
                "filter_by: model {} is a multi-head model (prompt task and complexity); filter with min_score/max_score on prompt_complexity_score",
                self.model
            )));
        }
        if let Some(unknown) = self.wanted().iter().find(|l| !encoder.config.regression && !encoder.config.labels.contains(l)) {
            return Err(StageError::InvalidParams(format!(
                "filter_by: {unknown:?} is not a label of {} ({})",
                self.model,
                encoder.config.labels.join(", ")
            )));
        }
        self.encoder = Some(encoder);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let encoder = self.encoder.as_ref().ok_or_else(|| StageError::Failed("classifier: not set up".into()))?;
        let texts = texts(&batch, &self.text_field)?;
        let max_chars = (self.max_chars > 0).then_some(self.max_chars);
        let logits = encoder.logits(&texts, max_chars).map_err(batch_error)?;
        let n = encoder.outputs();
        if !encoder.config.targets.sizes.is_empty() {
            let (columns, keep) = self.complexity_columns(&encoder.config.targets, &logits, n);
            return Ok(Output::Scored { columns, keep });
        }
        let mut labels = Vec::with_capacity(texts.len());
        let mut scores = Vec::with_capacity(texts.len());
        let mut keep = Vec::new();
        for (i, row) in logits.chunks_exact(n).enumerate() {
            let (label, score) = decide(&encoder.config.labels, encoder.config.regression, row);
            if self.keeps(Some(&label), score) {
                keep.push(i as u32);
            }
            labels.push(label);
            scores.push(score);
        }
        let mut columns =
            vec![Column::utf8(&self.label_field, labels.iter().map(String::as_str)), Column::float64(&self.score_field, &scores)];
        if self.probabilities {
            let probs: Vec<f32> = logits.chunks_exact(n).flat_map(curator_encoder::head::softmax).collect();
            columns.push(Column::f32_vectors(&format!("{}_probs", self.label_field), n, &probs));
        }
        Ok(Output::Scored { columns, keep })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decides_label_and_score() {
        let labels = vec!["Low".to_string(), "Medium".into(), "High".into()];
        let (l, s) = decide(&labels, false, &[0.0, 2.0, 0.0]);
        assert_eq!(l, "Medium");
        assert!((s - 0.7870).abs() < 1e-3, "{s}");
        assert_eq!(decide(&labels[..1], true, &[2.6]), ("3".to_string(), f64::from(2.6f32)));
    }
}
