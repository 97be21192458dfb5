//! `clip_aesthetic_filter`: NeMo Curator's `ClipAestheticFilterStage` over the frames each
//! clip carries (from `video_decode` → `clip_split`). Frames are sampled at `target_fps`
//! (the first frame at or after each tick, as NeMo's `sequence` extraction), each one
//! preprocessed exactly as transformers' `CLIPImageProcessor` and embedded by CLIP's vision
//! tower (`curator_encoder::vision`, the same path as `image_embedder`), scored by the
//! aesthetic head (`curator_image::heads`, the same as `aesthetic_filter`), and the clip's
//! score is the `reduction` (min, NeMo's default, or mean) over its frames. A clip scoring
//! under `score_threshold` is dropped; a clip without frames scores −1, as in NeMo.
//!
//! With `embedding_field` set, the clip's CLIP embedding is written too: the mean of its
//! sampled frames' unit embeddings, scaled to unit length (a frame average, not a video
//! model's embedding; zeros for a clip without frames). `dedup: {method: semantic,
//! embedding_field: …}` reads it.
//!
//! Frames are the decoder's: decode at a size near the tower's (e.g. `height: 224`) so that
//! CLIP's resize has pixels to work with. Luma frames are read as grey RGB.

use curator_encoder::vision::VisionModel;
use curator_encoder::vision::stage::{batch_error, load_tower};
use curator_image::Rgb8;
use curator_image::clip::Processor;
use curator_image::heads::{Head, stage};
use curator_sdk::prelude::*;
use curator_video::frames::{self, Frames};
use rayon::prelude::*;

/// Drops clips whose CLIP aesthetic score, reduced over their frames, is under the threshold.
#[stage(
    name = "clip_aesthetic_filter",
    native,
    cpus = 4.0,
    gpu_memory_gb = 4.0,
    memory_mb = 4096,
    dir = "models",
    inputs = ["frames", "frame_times", "frame_width", "frame_height", "frame_channels"],
    outputs = ["aesthetic_score"],
    batch_size = 16
)]
pub struct ClipAestheticFilter {
    /// The CLIP model directory (ViT-L/14 for NeMo's head) inside the granted `models` directory.
    pub model: String,
    /// The aesthetic head: a `.safetensors` file, or the directory holding `model.safetensors`.
    pub head: String,
    /// Clips scoring under this are dropped (NeMo's default).
    #[param(default = 0.5)]
    pub score_threshold: f64,
    /// How a clip's frame scores become its score.
    #[param(default = "min", one_of = ["min", "mean"])]
    pub reduction: String,
    /// Frames per second scored (0: every frame the clip carries).
    #[param(default = 1.0, min = 0.0)]
    pub target_fps: f64,
    /// The column the score is written to.
    #[param(default = "aesthetic_score")]
    pub score_field: String,
    /// Also write the clip's embedding (the mean of its frames') to this column ("": do not).
    #[param(default = "")]
    pub embedding_field: String,
    /// Drop clips under the threshold; false: only write the score.
    #[param(default = true)]
    pub filter: bool,
    /// auto (GPU if usable, else CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
    /// Frames per forward pass on the GPU (halved while a pass would not fit `gpu_memory_gb`).
    #[param(default = 256, min = 1)]
    pub model_inference_batch_size: usize,
    #[state]
    models: Option<(VisionModel, Processor, Head)>,
}

impl Stage for ClipAestheticFilter {
    fn init(&mut self) -> Result<(), StageError> {
        let (tower, processor) = load_tower("clip_aesthetic_filter", &self.model, &self.device, &mut self.model_inference_batch_size)?;
        let head = stage::load(&self.head, Head::aesthetic)?;
        if head.dim() != tower.config.embed_dim() {
            return Err(StageError::InvalidParams(format!(
                "head {} takes {}-wide embeddings, model {} gives {}",
                self.head,
                head.dim(),
                self.model,
                tower.config.embed_dim()
            )));
        }
        self.models = Some((tower, processor, head));
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let (tower, processor, head) =
            self.models.as_ref().ok_or_else(|| StageError::Failed("clip_aesthetic_filter: not set up".into()))?;
        let clips = frames::from_batch(&batch)?;
        let picked: Vec<(usize, usize)> =
            clips.iter().enumerate().flat_map(|(c, f)| f.sampled(self.target_fps).into_iter().map(move |i| (c, i))).collect();
        let pixels: Vec<f32> = picked
            .par_iter()
            .map(|&(c, i)| {
                let mut v = Vec::new();
                processor.pixel_values_into(&rgb(&clips[c], i), &mut v);
                v
            })
            .collect::<Vec<_>>()
            .concat();
        let dim = tower.config.embed_dim();
        let embeddings = if picked.is_empty() {
            Vec::new()
        } else {
            tower.embed(&pixels, true, self.model_inference_batch_size).map_err(batch_error)?
        };
        let frame_scores = if embeddings.is_empty() { Vec::new() } else { head.scores(&embeddings) };
        let per_clip = per_clip(clips.len(), &picked, &frame_scores, &embeddings, dim, &self.reduction);
        let scores: Vec<f64> = per_clip.iter().map(|(s, _)| *s).collect();
        let keep = (0..scores.len() as u32).filter(|&i| !self.filter || scores[i as usize] >= self.score_threshold).collect();
        let mut columns = vec![Column::float64(&self.score_field, &scores)];
        if !self.embedding_field.is_empty() {
            let means: Vec<f32> = per_clip.into_iter().flat_map(|(_, e)| e).collect();
            columns.push(Column::f32_vectors(&self.embedding_field, dim, &means));
        }
        Ok(Output::Scored { columns, keep })
    }
}

/// Frame `i` of `f` as an RGB image (a luma frame as grey).
fn rgb(f: &Frames, i: usize) -> Rgb8 {
    Rgb8 { width: f.width, height: f.height, data: f.rgb(i) }
}

/// Each clip's score (its frames' scores reduced; −1 without frames, as NeMo) and embedding
/// (its frames' mean, unit length; zeros without frames), from the sampled frames in order.
fn per_clip(
    clips: usize,
    picked: &[(usize, usize)],
    scores: &[f32],
    embeddings: &[f32],
    dim: usize,
    reduction: &str,
) -> Vec<(f64, Vec<f32>)> {
    let mut out: Vec<(Vec<f64>, Vec<f32>)> = vec![(Vec::new(), vec![0.0; dim]); clips];
    for (k, &(c, _)) in picked.iter().enumerate() {
        out[c].0.push(f64::from(scores[k]));
        for (s, e) in out[c].1.iter_mut().zip(&embeddings[k * dim..(k + 1) * dim]) {
            *s += e;
        }
    }
    out.into_iter()
        .map(|(s, mut e)| {
            let score = match (s.is_empty(), reduction) {
                (true, _) => -1.0,
                (false, "mean") => s.iter().sum::<f64>() / s.len() as f64,
                (false, _) => s.iter().copied().fold(f64::INFINITY, f64::min),
            };
            let norm = e.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                e.iter_mut().for_each(|x| *x /= norm);
            }
            (score, e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clips_score_is_its_frames_min_or_mean_and_a_clip_without_frames_scores_minus_one() {
        // Three clips: frames 0, 1 of clip 0; none of clip 1; frame 0 of clip 2 (2-wide).
        let picked = [(0, 0), (0, 1), (2, 0)];
        let scores = [4.0, 6.0, 5.0];
        let embeddings = [1.0, 0.0, 0.0, 1.0, 0.6, 0.8];
        let min = per_clip(3, &picked, &scores, &embeddings, 2, "min");
        assert_eq!(min.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![4.0, -1.0, 5.0]);
        let mean = per_clip(3, &picked, &scores, &embeddings, 2, "mean");
        assert_eq!(mean[0].0, 5.0);
        let h = std::f32::consts::FRAC_1_SQRT_2;
        assert!((mean[0].1[0] - h).abs() < 1e-6 && (mean[0].1[1] - h).abs() < 1e-6, "the mean of the frames, unit length");
        assert_eq!(mean[1].1, vec![0.0, 0.0]);
        assert_eq!(mean[2].1, vec![0.6, 0.8]);
    }

    #[test]
    fn frames_are_sampled_at_the_target_rate_and_luma_reads_as_grey() {
        let mut f = Frames::new(2, 1, 1);
        for k in 0..10 {
            f.push(k as f64 * 0.25, &[10, 200]);
        }
        assert_eq!(f.sampled(1.0), vec![0, 4, 8]);
        assert_eq!(f.sampled(0.0).len(), 10);
        assert_eq!(rgb(&f, 3).data, vec![10, 10, 10, 200, 200, 200]);
    }
}
