//! `video_embedder`: NeMo Curator's `InternVideo2FrameCreationStage` and
//! `InternVideo2EmbeddingStage` over the frames each clip carries (from `video_decode` →
//! `clip_split` or `transnetv2_split`). A clip's frames are sampled at `target_fps` (the first
//! frame at or after each tick, as NeMo's `sequence` extraction); a clip with fewer than the
//! model's frames is sampled again at twice the rate, up to `max_fps` (NeMo re-extracts the
//! same way, up to 20 fps). The frames are made into the tower's input as NeMo makes them
//! (`curator_encoder::video::frames`: every `len / frames`-th frame, OpenCV's bilinear resize,
//! ImageNet's mean and deviation) and embedded by InternVideo2's vision tower
//! (`curator_encoder::video`), a unit-length float32 vector per clip in `embedding_field`, so
//! `dedup: {method: semantic}` runs on clips.
//!
//! A clip too short for the model's frames even at `max_fps` gets no embedding (NeMo records
//! `iv2_embedding: failed` and writes none): it is dropped, or with `drop_short: false` kept
//! with a zero vector. Frames are the decoder's: decode near the tower's size (e.g. `height:
//! 224`); luma frames are read as grey RGB.

use curator_encoder::video::gpu::GpuVideo;
use curator_encoder::video::{VideoModel, frames as tower_frames};
use curator_encoder::{Device, EncoderError};
use curator_image::Rgb8;
use curator_sdk::prelude::*;
use curator_video::frames::{self, Frames};
use rayon::prelude::*;

/// Writes each clip's InternVideo2 embedding.
#[stage(
    name = "video_embedder",
    native,
    cpus = 4.0,
    gpu_memory_gb = 10.0,
    memory_mb = 8192,
    dir = "models",
    inputs = ["frames", "frame_times", "frame_width", "frame_height", "frame_channels"],
    outputs = ["embedding"],
    batch_size = 8
)]
pub struct VideoEmbedder {
    /// The model directory (`config.json` + `model.safetensors`, made by
    /// scripts/models/internvideo2_weights.py) inside the granted `models` directory.
    pub model: String,
    /// Frames per second sampled from each clip (NeMo's default).
    #[param(default = 2.0, min = 0.0)]
    pub target_fps: f64,
    /// The highest rate a short clip is sampled again at (NeMo's 20).
    #[param(default = 20.0, min = 0.0)]
    pub max_fps: f64,
    /// The column the embedding is written to (semantic dedup reads `embedding`).
    #[param(default = "embedding")]
    pub embedding_field: String,
    /// Drop clips too short for the model's frames; false: keep them with a zero vector.
    #[param(default = true)]
    pub drop_short: bool,
    /// auto (the GPU when the worker was given one, else the CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
    /// GPU: clips per forward pass.
    #[param(default = 8, min = 1)]
    pub clips_per_pass: usize,
    #[state]
    tower: Option<VideoModel>,
}

impl Stage for VideoEmbedder {
    fn init(&mut self) -> Result<(), StageError> {
        let context = curator_sdk::native::context();
        let dir = curator_sdk::granted_path(&self.model);
        // Planning's throw-away instance checks the model's header and leaves devices alone.
        let given_gpu = context.cuda_visible_devices.as_deref().is_some_and(|d| !d.is_empty() && d != "-1");
        let device = match self.device.as_str() {
            "gpu" => Device::Gpu,
            "auto" if given_gpu && GpuVideo::available() => Device::Auto,
            _ => Device::Cpu,
        };
        let cache = context.cache_dir.as_ref().map(|d| std::path::PathBuf::from(d).join("kernels"));
        let load = if context.check_only { VideoModel::check(&dir) } else { VideoModel::load_on(&dir, device, cache.as_deref()) };
        let tower = load.map_err(|e| match e {
            EncoderError::Io { .. } | EncoderError::Model { .. } => {
                StageError::InvalidParams(format!("model {}: {e} (grant its directory as `models`)", self.model))
            }
            other => StageError::Failed(format!("video_embedder: model {}: {other}", self.model)),
        })?;
        log(Level::Info, &format!("video_embedder: {} ({}) on the {}", self.model, tower.config.describe(), tower.device()));
        self.tower = Some(tower);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let tower = self.tower.as_ref().ok_or_else(|| StageError::Failed("video_embedder: not set up".into()))?;
        let clips = frames::from_batch(&batch)?;
        let want = tower.config.num_frames;
        let inputs: Vec<Option<Vec<f32>>> = clips
            .par_iter()
            .map(|f| {
                let picked = sampled(f, self.target_fps, self.max_fps, want);
                let rgb: Vec<Rgb8> = picked.iter().map(|&i| Rgb8 { width: f.width, height: f.height, data: f.rgb(i) }).collect();
                tower_frames::pixels(&tower.config, &rgb)
            })
            .collect();
        let ready: Vec<f32> = inputs.iter().flatten().flatten().copied().collect();
        let embedded = if ready.is_empty() {
            Vec::new()
        } else {
            tower.embed(&ready, self.clips_per_pass).map_err(|e| StageError::Failed(e.to_string()))?
        };
        let dim = tower.config.proj_dim;
        let mut rows = embedded.chunks_exact(dim);
        let mut vectors = Vec::with_capacity(clips.len() * dim);
        let mut keep = Vec::with_capacity(clips.len());
        for (i, input) in inputs.iter().enumerate() {
            match input {
                Some(_) => {
                    vectors.extend_from_slice(
                        rows.next().ok_or_else(|| StageError::Failed("video_embedder: an embedding is missing".into()))?,
                    );
                    keep.push(i as u32);
                }
                None => {
                    vectors.extend(std::iter::repeat_n(0.0, dim));
                    if !self.drop_short {
                        keep.push(i as u32);
                    }
                }
            }
        }
        let short = inputs.iter().filter(|i| i.is_none()).count();
        if short > 0 {
            log(Level::Warn, &format!("video_embedder: {short} clip(s) have fewer than {want} frames even at {} fps", self.max_fps));
        }
        Ok(Output::Scored { columns: vec![Column::f32_vectors(&self.embedding_field, dim, &vectors)], keep })
    }
}

/// The frames of `f` sampled at `fps`, and at twice the rate while fewer than `want` and the
/// rate stays within `max_fps` (NeMo's re-extraction); 0 fps takes every frame.
fn sampled(f: &Frames, fps: f64, max_fps: f64, want: usize) -> Vec<usize> {
    let mut rate = fps;
    let mut picked = f.sampled(rate);
    while picked.len() < want && rate > 0.0 {
        rate *= 2.0;
        if rate > max_fps {
            break;
        }
        picked = f.sampled(rate);
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clip(seconds: f64, fps: f64) -> Frames {
        let mut f = Frames::new(1, 1, 1);
        for k in 0..(seconds * fps) as usize {
            f.push(k as f64 / fps, &[k as u8]);
        }
        f
    }

    #[test]
    fn a_short_clip_is_sampled_again_at_twice_the_rate_up_to_the_limit() {
        // 6 s at 30 fps: 2 fps gives 12 frames, enough for 8.
        assert_eq!(sampled(&clip(6.0, 30.0), 2.0, 20.0, 8).len(), 12);
        // 2 s: 4 frames at 2 fps, 8 at 4 fps.
        assert_eq!(sampled(&clip(2.0, 30.0), 2.0, 20.0, 8).len(), 8);
        // 0.3 s: 9 frames at 30 fps; 2 → 4 → 8 → 16 fps gives 5, 32 is over the limit.
        assert_eq!(sampled(&clip(0.3, 30.0), 2.0, 20.0, 8).len(), 5);
        assert_eq!(sampled(&clip(0.3, 30.0), 0.0, 20.0, 8).len(), 9);
    }
}
