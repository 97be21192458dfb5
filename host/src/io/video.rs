//! The `video` source: one document per video file, described from its container without
//! decoding (`curator_video::probe`): `id` is the file's path under the source, `text` its
//! path on disk (what the video stages open), and `_meta` holds `id`, `path`, `container`, `codec`,
//! `width`, `height`, `fps`, `duration_s`, `num_frames` and `size`. A file that is not a
//! video, is cut short, or holds a codec the stages cannot decode is a [`Reject`] with the
//! reason (`_rejected/`), and the run goes on.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};

use super::jsonl::{ReadOptions, reader_schema};
use super::{InputFile, IoError, Reject};

pub struct VideoReader {
    input: InputFile,
    strict: bool,
    done: bool,
    rejects: Vec<Reject>,
}

impl VideoReader {
    pub fn open(input: &InputFile, opts: &ReadOptions) -> VideoReader {
        VideoReader { input: input.clone(), strict: opts.strict, done: false, rejects: Vec::new() }
    }

    fn reject(&mut self, reason: String) -> Result<Option<RecordBatch>, IoError> {
        let r = Reject { source: self.input.display(), line: None, byte_offset: 0, reason, excerpt: String::new() };
        if self.strict {
            return Err(r.into_error());
        }
        self.rejects.push(r);
        Ok(None)
    }

    /// The file's one document, or `None` (after a reject, or the second time).
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, IoError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(None);
        }
        let super::Loc::Local(path) = self.input.loc.clone() else {
            return self
                .reject("video sources read local files (or a mounted bucket); object-store URLs are not supported for video yet".into());
        };
        let probe = match curator_video::probe(&path) {
            Ok(p) => p,
            Err(e) => return self.reject(e.reason()),
        };
        let text = path.display().to_string();
        let meta = serde_json::json!({
            "id": self.input.rel,
            "path": text,
            "container": probe.container,
            "codec": probe.codec.name(),
            "width": probe.width,
            "height": probe.height,
            "fps": probe.fps,
            "duration_s": probe.duration_s,
            "num_frames": probe.num_frames,
            "size": probe.size,
        });
        let col = |v: &str| Arc::new(StringArray::from(vec![v.to_string()])) as ArrayRef;
        let batch = RecordBatch::try_new(reader_schema(), vec![col(&self.input.rel), col(&text), col(&meta.to_string())])
            .map_err(|e| IoError::Line { at: self.input.display(), message: format!("cannot build the batch: {e}") })?;
        Ok(Some(batch))
    }

    pub fn take_rejects(&mut self) -> Vec<Reject> {
        std::mem::take(&mut self.rejects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Loc;
    use curator_core::pipeline::Format;

    fn input(path: &std::path::Path) -> InputFile {
        InputFile { loc: Loc::Local(path.to_path_buf()), rel: "x.mp4".into(), size: 0, format: Format::Video, compressed: false }
    }

    #[test]
    fn a_file_that_is_not_a_video_is_rejected_or_fails_when_strict() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.mp4");
        std::fs::write(&f, b"{\"text\": \"not a video\"}\n").unwrap();
        let mut r = VideoReader::open(&input(&f), &ReadOptions::default());
        assert!(r.next_batch().unwrap().is_none());
        let rejects = r.take_rejects();
        assert_eq!(rejects.len(), 1);
        assert!(rejects[0].reason.starts_with("not a video file"), "{:?}", rejects[0]);
        let strict = ReadOptions { strict: true, ..ReadOptions::default() };
        let e = VideoReader::open(&input(&f), &strict).next_batch().unwrap_err().to_string();
        assert!(e.contains("x.mp4") && e.contains("not a video file"), "{e}");
    }
}
