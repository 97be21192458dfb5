//! `motion_filter`: NeMo Curator's `MotionFilterStage` over the frames each clip carries (from
//! `video_decode` → `clip_split`). Writes `motion_global_mean` (mean absolute luma change between
//! consecutive frames, 0–1) and `motion_patch_max` (the same for the most-moving cell of a
//! 16 × 16 grid), and keeps a clip that moves as a whole (`global_mean_threshold`) or somewhere
//! (`patch_max_threshold`). Scores come from frame differences, not motion vectors, so their
//! scale differs from NeMo's. The defaults (0.001 and 0.005: a quarter of a grey level per pixel
//! and frame on average, 1.3 in the busiest patch) separate still from moving footage at the
//! decoder's default 48 × 27 frames, where downscaling has averaged the noise away; a still
//! shot scores 0 to 1e-5, slow synthetic motion 0.0015 and up.

use curator_sdk::prelude::*;
use curator_video::frames;
use curator_video::motion;

/// Drops static clips by their motion scores.
#[stage(
    name = "motion_filter",
    cpus = 1.0,
    memory_mb = 1024,
    inputs = ["frames", "frame_times", "frame_width", "frame_height", "frame_channels"],
    outputs = ["motion_global_mean", "motion_patch_max"]
)]
pub struct MotionFilter {
    /// Keep a clip whose mean motion over the whole frame is at least this (0-1).
    #[param(default = 0.001, min = 0.0, max = 1.0)]
    pub global_mean_threshold: f64,
    /// Keep a clip whose most-moving patch has at least this mean motion (0-1).
    #[param(default = 0.005, min = 0.0, max = 1.0)]
    pub patch_max_threshold: f64,
    /// Only write the scores; keep every clip.
    #[param(default = false)]
    pub score_only: bool,
}

impl Stage for MotionFilter {
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let clips = frames::from_batch(&batch)?;
        let scores: Vec<motion::Motion> = clips.iter().map(motion::score).collect();
        let keep = (0..scores.len() as u32)
            .filter(|&i| {
                let m = scores[i as usize];
                self.score_only || m.global_mean >= self.global_mean_threshold || m.patch_max >= self.patch_max_threshold
            })
            .collect();
        Ok(Output::Scored {
            columns: vec![
                Column::float64("motion_global_mean", &scores.iter().map(|m| m.global_mean).collect::<Vec<_>>()),
                Column::float64("motion_patch_max", &scores.iter().map(|m| m.patch_max).collect::<Vec<_>>()),
            ],
            keep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::native::NativeStage;
    use curator_video::frames::Frames;

    #[test]
    fn still_clips_go_and_moving_ones_stay() {
        let mut still = Frames::new(8, 8, 1);
        let mut moving = Frames::new(8, 8, 1);
        for i in 0..6u8 {
            still.push(i as f64, &[100; 64]);
            moving.push(i as f64, &[i * 40; 64]);
        }
        let b = Batch { num_rows: 2, columns: frames::to_columns(&[still, moving]) };
        let Output::Scored { columns, keep } = NativeStage::new::<MotionFilter>("{}").unwrap().process(b.clone()).unwrap() else {
            panic!("expected scores")
        };
        assert_eq!(keep, [1]);
        assert_eq!(columns[0].f64_values().unwrap()[0], 0.0);
        let Output::Scored { keep, .. } = NativeStage::new::<MotionFilter>(r#"{"score_only": true}"#).unwrap().process(b).unwrap() else {
            panic!("expected scores")
        };
        assert_eq!(keep, [0, 1]);
    }
}
