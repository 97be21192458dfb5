//! CLIP image embeddings as a stage (NeMo Curator's `ImageEmbeddingStage`,
//! `openai/clip-vit-large-patch14` by default there): each row's image bytes (the `image`
//! column a WebDataset source gives) decoded and preprocessed exactly as transformers'
//! `CLIPImageProcessor` (`curator_image`; JPEGs on the GPU with nvJPEG where the tower runs
//! there and the library is present, the rest in parallel on the stage's cores), through the
//! model's vision tower and projection (`curator_encoder::vision`), scaled to unit length as
//! NeMo does, written as a float32-vector column (`image_embedding`) that the aesthetic and
//! NSFW filters and `dedup: {method: semantic, embedding_field: image_embedding}` read.
//!
//! The model directory (`config.json` of a `CLIPModel` or `CLIPVisionModelWithProjection`,
//! `model.safetensors`, `preprocessor_config.json`) comes from the directory the pipeline
//! grants as `models`. On the GPU the tower runs in fp16 on the text encoder's kernels
//! (`curator_encoder::vision::gpu`), in passes of `model_inference_batch_size` images that
//! stay inside the stage's `gpu_memory_gb` (a pass that would not fit is halved); on the CPU
//! in f32 (`device: cpu`, or `auto` where no GPU is usable).
//!
//! An image that does not decode fails the batch naming its row; the host retries, splits the
//! batch and names the one document (or sets it aside with `ignore_failures`). The WebDataset
//! reader has already refused members that are not images or are cut short.

use curator_encoder::vision::VisionModel;
use curator_encoder::vision::stage::{batch_error, load_tower};
use curator_image::clip::Processor;
use curator_sdk::prelude::*;

/// CLIP image embeddings from a Hugging Face CLIP model.
#[stage(
    name = "image_embedder",
    native,
    // Decoding and preprocessing run on the stage's cores (8: measured decode-bound at 4).
    cpus = 8.0,
    gpu_memory_gb = 4.0,
    memory_mb = 4096,
    dir = "models",
    inputs = ["image"],
    outputs = ["image_embedding"],
    batch_size = 256
)]
pub struct ImageEmbedder {
    /// The model directory as the stage sees it (inside the granted `models` directory).
    pub model: String,
    /// auto (GPU if usable, else CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
    /// Images per forward pass on the GPU (NeMo's model_inference_batch_size; halved while a
    /// pass would not fit `gpu_memory_gb`).
    #[param(default = 256, min = 1)]
    pub model_inference_batch_size: usize,
    /// Scale each embedding to unit length (NeMo does).
    #[param(default = true)]
    pub normalize: bool,
    /// The column the embedding is written to.
    #[param(default = "image_embedding")]
    pub embedding_field: String,
    #[state]
    model_state: Option<(VisionModel, Processor)>,
}

impl Stage for ImageEmbedder {
    fn init(&mut self) -> Result<(), StageError> {
        self.model_state = Some(load_tower("image_embedder", &self.model, &self.device, &mut self.model_inference_batch_size)?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let (model, processor) = self.model_state.as_ref().ok_or_else(|| StageError::Failed("image_embedder: not set up".into()))?;
        // The manifest's one input column (what a WebDataset source gives).
        let col = batch.column("image")?;
        let n = batch.len();
        let dim = model.config.embed_dim();
        let images: Vec<&[u8]> = (0..n)
            .map(|i| col.bytes_at(i).filter(|_| col.is_valid(i)).ok_or_else(|| StageError::Failed(format!("row {i}: no image"))))
            .collect::<Result<_, _>>()?;
        // On the GPU, JPEGs nvJPEG takes are decoded and preprocessed there; every other image
        // on all the stage's cores. Then one call (the GPU passes queue back to back).
        let cpu = |i: usize| processor.pixel_values_of(images[i]).map_err(|e| format!("row {i}: {e}"));
        let out = model.embed_encoded(&images, processor, &cpu, self.normalize, self.model_inference_batch_size).map_err(batch_error)?;
        Ok(Output::Columns(vec![Column::f32_vectors(&self.embedding_field, dim, &out)]))
    }
}
