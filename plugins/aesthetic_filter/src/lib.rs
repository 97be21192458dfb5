//! NeMo Curator's `ImageAestheticFilterStage` as a stage: the improved aesthetic predictor
//! (`ttj/sac-logos-ava1-l14-linearMSE`, NeMo's MLP layout in `.safetensors`) scores each
//! image's normalised CLIP L/14 embedding (the `image_embedding` column `image_embedder`
//! writes, or the column `embedding_field` names) on a 0–10 scale; `aesthetic_score` is written and, as NeMo does, images scoring
//! under `score_threshold` (0.5 by default, NeMo's) are dropped.

use curator_image::heads::{Head, stage};
use curator_sdk::prelude::*;

/// Keeps images whose aesthetic score reaches the threshold.
#[stage(
    name = "aesthetic_filter",
    cpus = 1.0,
    memory_mb = 256,
    dir = "models",
    inputs = [],
    input_params = ["embedding_field"],
    outputs = ["aesthetic_score"]
)]
pub struct AestheticFilter {
    /// The head's weights: a `.safetensors` file, or the directory holding `model.safetensors`,
    /// inside the granted `models` directory.
    pub model: String,
    /// The column of CLIP L/14 embeddings to score (what `image_embedder` writes).
    #[param(default = "image_embedding")]
    pub embedding_field: String,
    /// Images scoring under this are dropped (NeMo's default).
    #[param(default = 0.5)]
    pub score_threshold: f64,
    /// The column the score is written to.
    #[param(default = "aesthetic_score")]
    pub score_field: String,
    /// Drop images under the threshold; false: only write the score.
    #[param(default = true)]
    pub filter: bool,
    #[state]
    head: Option<Head>,
}

impl Stage for AestheticFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.head = Some(stage::load(&self.model, Head::aesthetic)?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let head = self.head.as_ref().ok_or_else(|| StageError::Failed("the head is not loaded".into()))?;
        let threshold = self.score_threshold;
        stage::filter(head, &batch, &self.embedding_field, &self.score_field, self.filter, |s| f64::from(s) >= threshold)
    }
}
