//! `clip_split`: each video (a row with the frame columns `video_decode` writes) becomes one
//! row per clip: `id` (`<video id>:<clip index>`), `text` (the video's path), `video_id`,
//! `clip_index`, `start_s`, `end_s`, `num_frames` (decoded frames in the clip) and, unless
//! `keep_frames` is false, the clip's own frames for the stages after it (`motion_filter`).
//!
//! `method: fixed` cuts clips of `clip_len_s` every `stride_s` (NeMo Curator's
//! `FixedStrideExtractorStage`); `method: scene` cuts where the content distance between
//! consecutive frames reaches `threshold` (PySceneDetect's content detector; decode every
//! frame, `fps: 0`, for cuts exact to the frame), then shapes scenes into clips of
//! `min_clip_s`..`max_clip_s` as NeMo's TransNetV2 stage does (`crop_s`, `long_scenes`).

use curator_sdk::prelude::*;
use curator_video::clips::{self, ClipRows, LongScenes, Span};
use curator_video::frames::{self, Frames};

/// Cuts decoded videos into clips by fixed stride or scene cuts.
#[stage(
    name = "clip_split",
    cpus = 1.0,
    memory_mb = 2048,
    inputs = ["id", "text", "duration_s", "frames", "frame_times", "frame_width", "frame_height", "frame_channels"],
    outputs = ["video_id", "clip_index", "start_s", "end_s", "num_frames"],
    batch_size = 1
)]
pub struct ClipSplit {
    /// scene (cuts from frame content) | fixed (a clip every `stride_s`)
    #[param(default = "scene", one_of = ["scene", "fixed"])]
    pub method: String,
    /// fixed: length of each clip, in seconds.
    #[param(default = 10.0, min = 0.001)]
    pub clip_len_s: f64,
    /// fixed: seconds between clip starts (equal to `clip_len_s`: back to back).
    #[param(default = 10.0, min = 0.001)]
    pub stride_s: f64,
    /// Shortest clip kept, in seconds.
    #[param(default = 2.0, min = 0.0)]
    pub min_clip_s: f64,
    /// scene: longest clip, in seconds (0: whole scenes).
    #[param(default = 10.0, min = 0.0)]
    pub max_clip_s: f64,
    /// scene: a scene longer than `max_clip_s` becomes consecutive clips (stride) or its first `max_clip_s` (truncate).
    #[param(default = "stride", one_of = ["stride", "truncate"])]
    pub long_scenes: String,
    /// scene: seconds cut from both ends of each scene (drops transition frames).
    #[param(default = 0.0, min = 0.0)]
    pub crop_s: f64,
    /// scene: content distance (0-255, mean of hue, saturation and value differences) that makes a cut.
    #[param(default = 27.0, min = 0.0, max = 255.0)]
    pub threshold: f64,
    /// scene: fewest frames between two cuts.
    #[param(default = 15, min = 1)]
    pub min_scene_frames: usize,
    /// Most clips per video (0: no limit).
    #[param(default = 0, min = 0)]
    pub limit_clips: usize,
    /// Pass each clip's frames on (for motion_filter and frame embeddings).
    #[param(default = true)]
    pub keep_frames: bool,
}

impl ClipSplit {
    fn spans(&self, f: &Frames, duration_s: f64) -> Vec<Span> {
        let mut spans = if self.method == "fixed" {
            clips::fixed_stride(duration_s, self.clip_len_s, self.stride_s, self.min_clip_s)
        } else {
            let cuts = clips::scene_cuts(&clips::content_scores(f), self.threshold, self.min_scene_frames);
            let long = if self.long_scenes == "truncate" { LongScenes::Truncate } else { LongScenes::Stride };
            clips::scenes_to_clips(&cuts, &f.times, duration_s, self.crop_s, self.min_clip_s, self.max_clip_s, long)
        };
        if self.limit_clips > 0 {
            spans.truncate(self.limit_clips);
        }
        spans
    }
}

impl Stage for ClipSplit {
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let ids = batch.column("id")?.strings()?;
        let paths = batch.column("text")?.strings()?;
        let durations = frames::numbers(&batch, "duration_s")?;
        let videos = frames::from_batch(&batch)?;
        let mut rows = ClipRows::new(self.keep_frames);
        for (r, f) in videos.iter().enumerate() {
            let vid = ids.get(r).unwrap_or_default();
            // Without a duration from the container, the last frame's end stands in.
            let frame_gap = f.times.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
            let fallback = f.times.last().map(|t| t + if frame_gap.is_finite() { frame_gap } else { 0.0 }).unwrap_or(0.0);
            let duration = durations[r].filter(|d| *d > 0.0).unwrap_or(fallback);
            for (k, span) in self.spans(f, duration).into_iter().enumerate() {
                rows.push(vid, paths.get(r).unwrap_or_default(), k, span.start, span.end, f, span.frames(&f.times));
            }
        }
        Ok(Output::Batch(rows.into_batch()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::native::NativeStage;

    fn video(colours: &[(usize, [u8; 3])]) -> Batch {
        let mut f = Frames::new(4, 4, 3);
        let mut i = 0;
        for &(n, c) in colours {
            for _ in 0..n {
                f.push(i as f64 / 10.0, &[c; 16].concat());
                i += 1;
            }
        }
        let mut columns = vec![
            Column::utf8("id", ["v.mp4"]),
            Column::utf8("text", ["/data/v.mp4"]),
            Column::utf8("duration_s", [format!("{}", i as f64 / 10.0).as_str()]),
        ];
        columns.extend(frames::to_columns(&[f]));
        Batch { num_rows: 1, columns }
    }

    fn spans(out: Output) -> Vec<(f64, f64, i64)> {
        let Output::Batch(b) = out else { panic!("expected a batch") };
        let (s, e, n) = (b.column("start_s").unwrap(), b.column("end_s").unwrap(), b.column("num_frames").unwrap());
        let (s, e, n) = (s.f64_values().unwrap(), e.f64_values().unwrap(), n.i64_values().unwrap());
        (0..s.len()).map(|i| (s[i], e[i], n[i])).collect()
    }

    #[test]
    fn scenes_become_clips_at_the_cut_frames() {
        let mut stage = NativeStage::new::<ClipSplit>(r#"{"min_clip_s": 0.5, "min_scene_frames": 3}"#).unwrap();
        let b = video(&[(12, [200, 30, 30]), (8, [30, 120, 30]), (10, [30, 30, 200])]);
        assert_eq!(spans(stage.process(b).unwrap()), [(0.0, 1.2, 12), (1.2, 2.0, 8), (2.0, 3.0, 10)]);
    }

    #[test]
    fn fixed_stride_ignores_content() {
        let mut stage =
            NativeStage::new::<ClipSplit>(r#"{"method": "fixed", "clip_len_s": 1.0, "stride_s": 1.0, "min_clip_s": 0.5}"#).unwrap();
        let b = video(&[(25, [10, 10, 10])]);
        assert_eq!(spans(stage.process(b).unwrap()), [(0.0, 1.0, 10), (1.0, 2.0, 10), (2.0, 2.5, 5)]);
    }
}
