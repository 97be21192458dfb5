//! NeMo Curator's `FastTextQualityFilter` as a stage: a fastText classifier (user-supplied,
//! from the directory the pipeline grants as `models`) scores each document as the
//! probability of `label` (1 − the probability of the predicted label when it is another);
//! a document is kept when a Pareto(`alpha`) draw exceeds 1 − score, so good documents are
//! kept almost always and poor ones sometimes (the GPT-3 recipe).
//!
//! Deviation: NeMo draws from one global NumPy stream, so which documents survive depends
//! on partitioning and worker order. Here each document's draw comes from `seed` and a hash
//! of its text: the same document gets the same decision in any run, on any number of
//! workers.

use curator_fasttext::Model;
use curator_sdk::prelude::*;

/// Keeps documents a fastText quality classifier likes (with Pareto sampling).
#[stage(name = "fasttext_quality_filter", score_filter, cpus = 1.0, memory_mb = 1024, dir = "models")]
pub struct FastTextQualityFilter {
    /// The model file as the stage sees it (inside the granted `models` directory).
    pub model_path: String,
    /// The label of good documents.
    #[param(default = "__label__hq")]
    pub label: String,
    /// Shape of the Pareto distribution: larger keeps fewer poor documents.
    #[param(default = 3.0)]
    pub alpha: f64,
    /// Seed of the per-document draws.
    #[param(default = 42)]
    pub seed: u64,
    #[state]
    model: Option<Model>,
}

/// splitmix64: a well-mixed 64-bit value from `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A Pareto(`alpha`) draw (NumPy's `pareto`: Lomax, support from 0) for this document.
pub fn pareto_draw(seed: u64, text: &str, alpha: f64) -> f64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in text.as_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    let u = (mix(seed ^ h) >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
    let e = -(1.0 - u).ln(); // standard exponential
    (e / alpha).exp() - 1.0
}

impl FastTextQualityFilter {
    /// NeMo's score: the probability of `label`.
    pub fn score(model: &Model, label: &str, text: &str) -> f64 {
        let text = text.replace('\n', " ").replace("__label__", " ");
        let want = label.strip_prefix("__label__").unwrap_or(label);
        match model.predict(&text, 1, 0.0).first() {
            Some(&(p, l)) if l == want => f64::from(p),
            Some(&(p, _)) => 1.0 - f64::from(p),
            None => 0.0,
        }
    }
}

impl Stage for FastTextQualityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        if self.alpha <= 0.0 {
            return Err(StageError::InvalidParams(format!("alpha must be positive, not {}", self.alpha)));
        }
        self.model = Some(load_granted("model_path", &self.model_path, "models", Model::load)?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let model = self.model.as_ref().ok_or_else(|| StageError::Failed("the model is not loaded".into()))?;
        score_filter(&batch, self.score_field.as_deref(), self.filter, self.invert, |doc| {
            let s = Self::score(model, &self.label, doc.text());
            Ok((s, pareto_draw(self.seed, doc.text(), self.alpha) > 1.0 - s))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pareto_draws_are_per_document_and_follow_the_distribution() {
        assert_eq!(pareto_draw(42, "a", 3.0), pareto_draw(42, "a", 3.0));
        assert_ne!(pareto_draw(42, "a", 3.0), pareto_draw(43, "a", 3.0));
        // P(X > t) = (1 + t)^-alpha for Lomax(alpha): check at t = 0.25, alpha = 3
        let n = 20_000;
        let above = (0..n).filter(|i| pareto_draw(7, &i.to_string(), 3.0) > 0.25).count() as f64 / n as f64;
        assert!((above - 1.25f64.powi(-3)).abs() < 0.02, "{above}");
    }
}
