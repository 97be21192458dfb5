//! `clip_writer`: each clip row (from `clip_split`, after any filters) written as an MP4 file
//! into the directory the pipeline grants as `clips`, re-encoded from the source video at full
//! resolution (NeMo Curator's clip transcoding: libx264, `crf`), so every clip starts on a key
//! frame whatever its cut. All clips of one video are written in one decoding pass. The row
//! gains `clip_path`; the frame columns are dropped (the pipeline's sink then
//! writes the clip index: id, video, start, end, scores, path).
//!
//! A clip file appears under its final name only when complete (`.<name>.tmp-<pid>.mp4` until
//! then), so a killed run leaves no partial clip under a final name; a rerun writes it again.

use std::path::{Path, PathBuf};

use curator_sdk::prelude::*;
use curator_video::frames;
use curator_video::{Demuxer, clips::Span};
use curator_video_ffmpeg::{ClipEncoder, decode};

/// Writes clips as MP4 files and adds their paths.
#[stage(
    name = "clip_writer",
    native,
    cpus = 2.0,
    memory_mb = 2048,
    writable_dir = "clips",
    inputs = ["*"],
    outputs = ["clip_path"],
    batch_size = 1000
)]
pub struct ClipWriter {
    /// Directory the clips go to, as the stage sees it (inside the granted `clips`).
    #[param(default = "/clips")]
    pub path: String,
    /// libx264 quality (lower is better; 18 is visually lossless, 23 is x264's default).
    #[param(default = 23, min = 0, max = 51)]
    pub crf: u32,
    /// Decoder threads per video.
    #[param(default = 2, min = 0, max = 64)]
    pub threads: usize,
}

/// A clip to write: its row in the batch, its span in the source, its file.
type ClipJob = (usize, Span, PathBuf);

/// A file name from a clip id (`dir/a.mp4:3` → `dir_a.mp4_3.mp4`).
fn file_name(id: &str) -> String {
    format!("{}.mp4", curator_video::clips::file_stem(id))
}

impl ClipWriter {
    /// Write `clips` (row, span, file) of the video at `source` in one pass.
    fn write_video(&self, source: &str, clips: &[ClipJob], out: &mut [String]) -> Result<(), StageError> {
        let failed = |e: String| StageError::Failed(format!("{source}: {e}"));
        let demuxer = Demuxer::open(Path::new(source)).map_err(|e| StageError::Failed(e.to_string()))?;
        let (w, h, fps) = (demuxer.probe.width, demuxer.probe.height, demuxer.probe.fps);
        let last_end = clips.iter().map(|c| c.1.end).fold(0.0, f64::max);
        let mut open: Vec<Option<ClipEncoder>> = (0..clips.len()).map(|_| None).collect();
        let mut written = vec![false; clips.len()];
        decode(demuxer, self.threads, |frame, pts| {
            for (k, (_, span, file)) in clips.iter().enumerate() {
                if written[k] || pts < span.start - 1e-6 {
                    continue;
                }
                if pts >= span.end - 1e-6 {
                    if let Some(enc) = open[k].take() {
                        enc.finish()?;
                    }
                    written[k] = true;
                    continue;
                }
                if open[k].is_none() {
                    open[k] = Some(ClipEncoder::create(file, w, h, fps, self.crf)?);
                }
                if let Some(enc) = open[k].as_mut() {
                    enc.push(frame, pts - span.start)?;
                }
            }
            Ok(pts < last_end)
        })
        .map_err(failed)?;
        for enc in open.into_iter().flatten() {
            enc.finish().map_err(failed)?;
        }
        for (row, span, file) in clips {
            if !file.exists() {
                return Err(failed(format!("the clip {:.3}..{:.3} s has no frames", span.start, span.end)));
            }
            out[*row] = file.display().to_string();
        }
        Ok(())
    }
}

impl Stage for ClipWriter {
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let dir = curator_sdk::granted_path(&self.path);
        std::fs::create_dir_all(&dir).map_err(|e| StageError::Failed(format!("{}: {e} (grant it as `clips`, writable)", dir.display())))?;
        let ids = batch.column("id")?.strings()?;
        let sources = batch.column("text")?.strings()?;
        let (starts, ends) = (frames::numbers(&batch, "start_s")?, frames::numbers(&batch, "end_s")?);
        let n = batch.num_rows as usize;
        // Rows grouped by source video, in order of first appearance.
        let mut videos: Vec<(String, Vec<ClipJob>)> = Vec::new();
        for r in 0..n {
            let (Some(start), Some(end)) = (starts[r], ends[r]) else {
                return Err(StageError::Failed(format!("row {r}: no start_s/end_s (run clip_split first)")));
            };
            let source = sources.get(r).unwrap_or_default().to_string();
            let clip = (r, Span { start, end }, dir.join(file_name(ids.get(r).unwrap_or_default())));
            match videos.iter_mut().find(|(s, _)| *s == source) {
                Some((_, v)) => v.push(clip),
                None => videos.push((source, vec![clip])),
            }
        }
        let mut out = vec![String::new(); n];
        for (source, clips) in &videos {
            self.write_video(source, clips, &mut out)?;
        }
        let mut columns: Vec<Column> = batch.columns.into_iter().filter(|c| !frames::COLUMNS.contains(&c.name.as_str())).collect();
        columns.push(Column::utf8("clip_path", out.iter().map(String::as_str)));
        Ok(Output::Batch(Batch { num_rows: n as u32, columns }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_ids_become_safe_file_names() {
        assert_eq!(file_name("dir/a b.mp4:3"), "dir_a_b.mp4_3.mp4");
        assert_eq!(file_name("../x:0"), "_x_0.mp4");
    }
}
