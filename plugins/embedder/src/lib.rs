//! Sentence embeddings as a stage (NeMo Curator's `EmbeddingCreator`, sentence-transformers'
//! `encode`): each document's text through a BERT-family encoder ([`curator_encoder`]),
//! pooled (mean by default, or the model's own sentence-transformers pooling), optionally
//! normalised to unit length, written as a float32-vector column (`embedding`), which Parquet
//! sinks store as `FixedSizeList<Float32>` and JSONL sinks as an array of numbers.
//!
//! The model directory (`config.json`, `model.safetensors`, `tokenizer.json`) comes from the
//! directory the pipeline grants as `models`. On the GPU the stage stays inside its
//! `gpu_memory_gb`: a forward pass that would not fit is halved, and the smaller token budget
//! is kept.

use curator_encoder::stage::{batch_error, encoder_options, load_encoder, texts};
use curator_encoder::{Encoder, Pooling};
use curator_sdk::prelude::*;

/// Sentence embeddings from a BERT-family model.
#[stage(name = "embedder", native, cpus = 4.0, gpu_memory_gb = 4.0, memory_mb = 4096, dir = "models", inputs = [], input_params = ["text_field"], outputs = ["embedding"], batch_size = 8192)]
pub struct Embedder {
    /// The model directory as the stage sees it (inside the granted `models` directory).
    pub model: String,
    /// auto (GPU if usable, else CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
    /// Longest sequence in tokens (0: the model's own, e.g. sentence-transformers' max_seq_length).
    #[param(default = 0, min = 0, max = 8192)]
    pub max_tokens: usize,
    /// Cut each text to this many characters before tokenizing (0: no cut).
    #[param(default = 0, min = 0)]
    pub max_chars: usize,
    /// auto (the model's sentence-transformers pooling, else mean) | mean | cls
    #[param(default = "auto", one_of = ["auto", "mean", "cls"])]
    pub pooling: String,
    /// Scale each embedding to unit length.
    #[param(default = true)]
    pub normalize: bool,
    /// Padded tokens per forward pass (`curator-host tune` measures the best).
    #[param(default = 65536, min = 8)]
    pub max_batch_tokens: usize,
    /// Documents per forward pass at most (NeMo's knob).
    #[param(default = 1024, min = 1)]
    pub model_inference_batch_size: usize,
    /// The column the text is read from.
    #[param(default = "text")]
    pub text_field: String,
    /// The column the embedding is written to.
    #[param(default = "embedding")]
    pub embedding_field: String,
    #[state]
    encoder: Option<Encoder>,
}

impl Stage for Embedder {
    fn init(&mut self) -> Result<(), StageError> {
        let opts = encoder_options(&self.device, self.max_tokens, self.max_batch_tokens, self.model_inference_batch_size)?;
        self.encoder = Some(load_encoder("embedder", &self.model, &opts)?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let encoder = self.encoder.as_ref().ok_or_else(|| StageError::Failed("embedder: not set up".into()))?;
        let texts = texts(&batch, &self.text_field)?;
        let pooling = match self.pooling.as_str() {
            "mean" => Pooling::Mean,
            "cls" => Pooling::Cls,
            _ => encoder.config.pooling.unwrap_or(Pooling::Mean),
        };
        let max_chars = (self.max_chars > 0).then_some(self.max_chars);
        let vectors = encoder.embed(&texts, max_chars, pooling, self.normalize).map_err(batch_error)?;
        Ok(Output::Columns(vec![Column::f32_vectors(&self.embedding_field, encoder.config.hidden_size, &vectors)]))
    }
}
