//! `clip_preview`: NeMo Curator's `PreviewStage`: each row's frames (a clip's, or a caption
//! window's from `caption`) written as an animated WebP at `target_fps`, `target_height`
//! pixels high with the aspect kept, lossy libwebp at `quality` and `compression_level`,
//! looping, into the directory the pipeline grants as `previews`. The row gains
//! `preview_path`; its frame columns are dropped (`keep_frames: true` keeps them).
//!
//! A file appears under its final name only when complete. A row without frames (a clip the
//! caption stage found too short) gets an empty path. Frames are the decoder's: a preview is
//! never sharper than them (decode at ≥ `target_height` for a full-size preview).

use std::path::PathBuf;

use curator_sdk::prelude::*;
use curator_video::clips::file_stem;
use curator_video::frames::{self, Frames};
use curator_video_ffmpeg::{ClipEncoder, Encoding};

/// Writes WebP previews and adds their paths.
#[stage(
    name = "clip_preview",
    native,
    cpus = 2.0,
    memory_mb = 2048,
    writable_dir = "previews",
    inputs = ["*"],
    outputs = ["preview_path"],
    batch_size = 64
)]
pub struct ClipPreview {
    /// Directory the previews go to, as the stage sees it (inside the granted `previews`).
    #[param(default = "/previews")]
    pub path: String,
    /// Frames per second of the preview (NeMo's 1.0).
    #[param(default = 1.0, min = 0.001)]
    pub target_fps: f64,
    /// Height of the preview in pixels (NeMo's 240); the width keeps the aspect.
    #[param(default = 240, min = 2, max = 4096)]
    pub target_height: usize,
    /// libwebp quality, 0-100 (NeMo's 50).
    #[param(default = 50, min = 0, max = 100)]
    pub quality: u32,
    /// libwebp effort, 0-6 (NeMo's 6: smallest files).
    #[param(default = 6, min = 0, max = 6)]
    pub compression_level: u32,
    /// Keep the frame columns on the rows (false: dropped, as the sink seldom wants them).
    #[param(default = false)]
    pub keep_frames: bool,
}

impl ClipPreview {
    /// The preview's size for frames of `width` × `height`: `target_height` high, the aspect kept.
    fn size(&self, width: usize, height: usize) -> (u32, u32) {
        let w = (width as f64 * self.target_height as f64 / height.max(1) as f64).round().max(2.0);
        (w as u32, self.target_height as u32)
    }

    /// Write `clip`'s preview to `file`; the number of frames written.
    fn write(&self, clip: &Frames, file: &std::path::Path) -> Result<u64, String> {
        let picked = clip.sampled(self.target_fps);
        let (w, h) = self.size(clip.width, clip.height);
        let encoding = Encoding::Webp { quality: self.quality, compression_level: self.compression_level };
        let mut enc = ClipEncoder::create_as(file, w, h, self.target_fps, encoding)?;
        // Frames shown at the preview's own rate, as ffmpeg's fps filter spaces them.
        for (k, &i) in picked.iter().enumerate() {
            enc.push_packed(clip.frame(i), clip.width as u32, clip.height as u32, clip.channels, k as f64 / self.target_fps)?;
        }
        enc.finish()
    }
}

impl Stage for ClipPreview {
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let dir = curator_sdk::granted_path(&self.path);
        std::fs::create_dir_all(&dir)
            .map_err(|e| StageError::Failed(format!("{}: {e} (grant it as `previews`, writable)", dir.display())))?;
        let clips = frames::from_batch(&batch)?;
        let ids = batch.column("id")?.strings()?;
        let windows = batch.column("window_index").ok().map(|c| c.i64_values()).transpose()?;
        let mut paths = Vec::with_capacity(clips.len());
        for (r, clip) in clips.iter().enumerate() {
            if clip.is_empty() {
                paths.push(String::new());
                continue;
            }
            let mut stem = file_stem(ids.get(r).unwrap_or_default());
            if let Some(k) = windows.as_ref().and_then(|w| w.get(r)) {
                stem.push_str(&format!(".w{k}"));
            }
            let file: PathBuf = dir.join(format!("{stem}.webp"));
            self.write(clip, &file).map_err(|e| StageError::Failed(format!("{}: {e}", file.display())))?;
            paths.push(file.to_string_lossy().into_owned());
        }
        let mut columns: Vec<Column> =
            batch.columns.into_iter().filter(|c| self.keep_frames || !frames::COLUMNS.contains(&c.name.as_str())).collect();
        columns.push(Column::utf8("preview_path", paths.iter().map(String::as_str)));
        Ok(Output::Batch(Batch { num_rows: clips.len() as u32, columns }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_are_target_height_high_with_the_aspect_kept() {
        let p = ClipPreview {
            path: "/previews".into(),
            target_fps: 1.0,
            target_height: 240,
            quality: 50,
            compression_level: 6,
            keep_frames: false,
        };
        assert_eq!(p.size(1920, 1080), (427, 240));
        assert_eq!(p.size(448, 252), (427, 240));
        assert_eq!(p.size(64, 36), (427, 240));
    }
}
