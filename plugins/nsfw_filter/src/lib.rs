//! NeMo Curator's `ImageNSFWFilterStage` as a stage: LAION's CLIP-based NSFW detector (NeMo's
//! `NSFWModel` layout in `.safetensors`; `scripts/models/nsfw_to_safetensors.py` converts the
//! `.pth` NeMo downloads) scores each image's normalised CLIP L/14 embedding (the
//! `image_embedding` column `image_embedder` writes, or the column `embedding_field` names)
//! as a probability; `nsfw_score` is written and, as NeMo does, images scoring at or over
//! `score_threshold` (0.5) are dropped.

use curator_image::heads::{Head, stage};
use curator_sdk::prelude::*;

/// Drops images the NSFW detector scores at or over the threshold.
#[stage(
    name = "nsfw_filter",
    cpus = 1.0,
    memory_mb = 256,
    dir = "models",
    inputs = [],
    input_params = ["embedding_field"],
    outputs = ["nsfw_score"]
)]
pub struct NsfwFilter {
    /// The head's weights: a `.safetensors` file, or the directory holding `model.safetensors`,
    /// inside the granted `models` directory.
    pub model: String,
    /// The column of CLIP L/14 embeddings to score (what `image_embedder` writes).
    #[param(default = "image_embedding")]
    pub embedding_field: String,
    /// Images scoring this or more are dropped (NeMo's default).
    #[param(default = 0.5)]
    pub score_threshold: f64,
    /// The column the score is written to.
    #[param(default = "nsfw_score")]
    pub score_field: String,
    /// Drop images at or over the threshold; false: only write the score.
    #[param(default = true)]
    pub filter: bool,
    #[state]
    head: Option<Head>,
}

impl Stage for NsfwFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.head = Some(stage::load(&self.model, Head::nsfw)?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let head = self.head.as_ref().ok_or_else(|| StageError::Failed("the head is not loaded".into()))?;
        let threshold = self.score_threshold;
        stage::filter(head, &batch, &self.embedding_field, &self.score_field, self.filter, |s| f64::from(s) < threshold)
    }
}
