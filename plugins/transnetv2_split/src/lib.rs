//! `transnetv2_split`: NeMo Curator's `TransNetV2ClipExtractionStage`. Each video (a row with
//! the frame columns `video_decode` writes: every frame, `fps: 0`, at TransNetV2's 48×27 RGB,
//! `video_decode`'s default size) goes through TransNetV2 (`curator_shots`, the published
//! network and weights); frames whose single-frame probability is over `threshold` are
//! transitions; the scenes between them are shaped into clips as NeMo shapes them
//! (`curator_video::clips::{transition_scenes, shape_scenes}`, in frames of the video's frame
//! rate: `min_length_s`, `max_length_s` with `max_length_mode`, `crop_s`).
//!
//! The rows it answers are `clip_split`'s: one per clip, `id` (`<video id>:<clip index>`),
//! `text` (the path), `video_id`, `clip_index`, `start_s` and `end_s` (frame index over frame
//! rate, as NeMo's spans), `num_frames`, and the clip's frames unless `keep_frames` is false,
//! so `motion_filter`, `clip_aesthetic_filter` and `clip_writer` follow it unchanged.
//!
//! The network runs in f32 on the CPU, a video's 100-frame windows in parallel; with a GPU
//! (`device: gpu`, or `auto` when the worker was given one: the manifest asks for CPUs only, so
//! give it a card with `resources: {gpu_memory_gb: 4}`), its convolution stacks run on the
//! card, `windows_per_pass` windows at a time, and the rest of the network on the CPU.

use curator_sdk::prelude::*;
use curator_shots::{FRAME_BYTES, HEIGHT, TransNetV2, WIDTH, Windows};
use curator_video::clips::{self, ClipRows, LongScenes, SceneShape};
use curator_video::frames::{self, Frames};

/// Cuts decoded videos into clips at the shot transitions TransNetV2 finds.
#[stage(
    name = "transnetv2_split",
    native,
    cpus = 4.0,
    memory_mb = 4096,
    dir = "models",
    inputs = ["id", "text", "fps", "frames", "frame_times", "frame_width", "frame_height", "frame_channels"],
    outputs = ["video_id", "clip_index", "start_s", "end_s", "num_frames"],
    batch_size = 1
)]
pub struct TransNetV2Split {
    /// TransNetV2's weights: `model.safetensors` or its directory, inside the granted `models`
    /// directory (made by scripts/models/transnetv2_weights.py).
    pub model: String,
    /// Single-frame probability above which a frame is a shot transition (NeMo's default).
    #[param(default = 0.4, min = 0.0, max = 1.0)]
    pub threshold: f64,
    /// Shortest clip kept, in seconds (0: any).
    #[param(default = 2.0, min = 0.0)]
    pub min_length_s: f64,
    /// Longest clip, in seconds (0: whole scenes).
    #[param(default = 10.0, min = 0.0)]
    pub max_length_s: f64,
    /// A scene over `max_length_s` becomes consecutive clips (stride) or its start (truncate).
    #[param(default = "stride", one_of = ["stride", "truncate"])]
    pub max_length_mode: String,
    /// Seconds cut from both ends of each clip (drops transition frames; 0: none).
    #[param(default = 0.5, min = 0.0)]
    pub crop_s: f64,
    /// A video without any transition is one scene (false: it gives no clips).
    #[param(default = true)]
    pub entire_scene_as_clip: bool,
    /// Most clips per video (0: no limit).
    #[param(default = 0, min = 0)]
    pub limit_clips: usize,
    /// published (the first and last frame repeated to fill the end windows) | nemo (NeMo
    /// Curator's windows: the last one is shorter; its cuts, frame for frame).
    #[param(default = "published", one_of = ["published", "nemo"])]
    pub windows: String,
    /// Pass each clip's frames on (for motion_filter and frame embeddings).
    #[param(default = true)]
    pub keep_frames: bool,
    /// auto (the GPU when the worker was given one, else the CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
    /// GPU: windows of 100 frames per pass (about 220 MB of device memory each).
    #[param(default = 16, min = 1, max = 1024)]
    pub windows_per_pass: usize,
    #[state]
    net: Option<TransNetV2>,
}

impl TransNetV2Split {
    fn shape(&self, fps: f64) -> SceneShape {
        // NeMo: `int(x * framerate)` where the setting is set and non-zero.
        let frames = |s: f64| (s > 0.0).then_some((s * fps) as usize);
        SceneShape {
            min_frames: frames(self.min_length_s),
            max_frames: frames(self.max_length_s),
            long: if self.max_length_mode == "truncate" { LongScenes::Truncate } else { LongScenes::Stride },
            crop_frames: frames(self.crop_s),
        }
    }

    /// Clips of one video as frame ranges.
    fn clips(&self, net: &TransNetV2, f: &Frames, fps: f64, video: &str) -> Result<Vec<(usize, usize)>, StageError> {
        if (f.width, f.height, f.channels) != (WIDTH, HEIGHT, 3) {
            return Err(StageError::Failed(format!(
                "{video}: TransNetV2 takes {WIDTH}x{HEIGHT} RGB frames, video_decode wrote {}x{}x{} (use video_decode's defaults: width 48, height 27, color rgb)",
                f.width, f.height, f.channels
            )));
        }
        debug_assert_eq!(f.frame_bytes(), FRAME_BYTES);
        let mode = if self.windows == "nemo" { Windows::Nemo } else { Windows::Published };
        let p = net.predict(&f.data, mode).map_err(|e| StageError::Failed(format!("{video}: {e}")))?;
        let transitions: Vec<bool> = p.single.iter().map(|&v| f64::from(v) > self.threshold).collect();
        let scenes = clips::transition_scenes(&transitions, self.entire_scene_as_clip);
        let mut shaped = clips::shape_scenes(&scenes, self.shape(fps));
        if self.limit_clips > 0 {
            shaped.truncate(self.limit_clips);
        }
        log(
            Level::Debug,
            &format!(
                "transnetv2_split: {video}: {} frames, {} transition frames, {} scenes, {} clips",
                f.len(),
                transitions.iter().filter(|&&t| t).count(),
                scenes.len(),
                shaped.len()
            ),
        );
        Ok(shaped)
    }
}

/// The frame rate of a video's frames: the container's, else from the frames' own times.
fn frame_rate(container: Option<f64>, f: &Frames) -> Option<f64> {
    if let Some(fps) = container.filter(|v| v.is_finite() && *v > 0.0) {
        return Some(fps);
    }
    let span = f.times.last()? - f.times.first()?;
    (f.len() > 1 && span > 0.0).then(|| (f.len() - 1) as f64 / span)
}

impl Stage for TransNetV2Split {
    fn init(&mut self) -> Result<(), StageError> {
        let path = curator_sdk::granted_path(&self.model);
        let mut net = TransNetV2::load(&path)
            .map_err(|e| StageError::InvalidParams(format!("model {}: {e} (grant its directory as `models`)", self.model)))?;
        let context = curator_sdk::native::context();
        // Planning's throw-away instance checks the model and leaves devices alone.
        // `auto`: the GPU when the pipeline gave this worker one (the manifest asks for none).
        let given_gpu = context.cuda_visible_devices.as_deref().is_some_and(|d| !d.is_empty() && d != "-1");
        let want_gpu =
            !context.check_only && (self.device == "gpu" || (self.device == "auto" && given_gpu && curator_shots::gpu::Gpu::available()));
        if want_gpu {
            let cache = context.cache_dir.as_ref().map(|d| std::path::PathBuf::from(d).join("kernels"));
            match net.use_gpu(self.windows_per_pass, cache.as_deref()) {
                Ok(()) => {}
                Err(e) if self.device == "gpu" => return Err(StageError::Failed(format!("transnetv2_split: device gpu: {e}"))),
                Err(e) => log(Level::Warn, &format!("transnetv2_split: no GPU ({e}); the network runs on the CPU")),
            }
        }
        let place = if net.on_gpu() {
            format!("convolutions on the GPU ({} windows a pass), the rest on the CPU", self.windows_per_pass)
        } else {
            "on the CPU".to_string()
        };
        log(Level::Info, &format!("transnetv2_split: TransNetV2 {place}"));
        self.net = Some(net);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let net = self.net.as_ref().ok_or_else(|| StageError::Failed("transnetv2_split: not set up".into()))?;
        let ids = batch.column("id")?.strings()?;
        let paths = batch.column("text")?.strings()?;
        let rates = frames::numbers(&batch, "fps").unwrap_or_else(|_| vec![None; batch.num_rows as usize]);
        let videos = frames::from_batch(&batch)?;
        let mut rows = ClipRows::new(self.keep_frames);
        for (r, f) in videos.iter().enumerate() {
            let vid = ids.get(r).unwrap_or_default();
            let Some(fps) = frame_rate(rates.get(r).copied().flatten(), f) else {
                log(Level::Warn, &format!("transnetv2_split: {vid}: no frame rate (neither the container's nor two frames): no clips"));
                continue;
            };
            for (k, (a, b)) in self.clips(net, f, fps, vid)?.into_iter().enumerate() {
                let path = paths.get(r).unwrap_or_default();
                rows.push(vid, path, k, a as f64 / fps, b as f64 / fps, f, a.min(f.len())..b.min(f.len()));
            }
        }
        Ok(Output::Batch(rows.into_batch()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_rate_from_the_container_or_the_frames() {
        let mut f = Frames::new(1, 1, 3);
        for i in 0..11 {
            f.push(i as f64 / 25.0, &[0, 0, 0]);
        }
        assert_eq!(frame_rate(Some(29.97), &f), Some(29.97));
        assert!((frame_rate(None, &f).unwrap() - 25.0).abs() < 1e-9);
        assert!((frame_rate(Some(0.0), &f).unwrap() - 25.0).abs() < 1e-9);
        assert_eq!(frame_rate(None, &Frames::new(1, 1, 3)), None);
    }

    #[test]
    fn nemo_settings_in_frames() {
        let stage = TransNetV2Split {
            model: String::new(),
            threshold: 0.4,
            min_length_s: 2.0,
            max_length_s: 10.0,
            max_length_mode: "truncate".into(),
            crop_s: 0.0,
            entire_scene_as_clip: true,
            limit_clips: 0,
            windows: "published".into(),
            keep_frames: true,
            device: "cpu".into(),
            windows_per_pass: 16,
            net: None,
        };
        let s = stage.shape(29.97);
        assert_eq!((s.min_frames, s.max_frames, s.crop_frames, s.long), (Some(59), Some(299), None, LongScenes::Truncate));
    }
}
