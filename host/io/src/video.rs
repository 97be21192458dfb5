//! The `video` source: one document per video file, described from its container without
//! decoding (`curator_video::probe`): `id` is the file's path under the source, `text` its
//! path on disk (what the video stages open; an object-store video is first copied to the
//! cache directory), and `_meta` holds `id`, `path` (as given: a path or a URL), `container`, `codec`,
//! `width`, `height`, `fps`, `duration_s`, `num_frames` and `size`. A file that is not a
//! video, is cut short, or holds a codec the stages cannot decode is a [`Reject`] with the
//! reason (`_rejected/`), and the run goes on.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};

use super::records::{ReadOptions, reader_schema};
use super::{InputFile, IoError, Reject, Rejects};

pub struct VideoReader {
    input: InputFile,
    done: bool,
    rejects: Rejects,
}

impl VideoReader {
    pub fn open(input: &InputFile, opts: &ReadOptions) -> VideoReader {
        VideoReader { input: input.clone(), done: false, rejects: Rejects::new(opts.strict) }
    }

    fn reject(&mut self, reason: String) -> Result<Option<RecordBatch>, IoError> {
        self.rejects.add(Reject { source: self.input.display(), line: None, byte_offset: 0, reason, excerpt: String::new() })?;
        Ok(None)
    }
}

impl super::format::PartReader for VideoReader {
    /// The file's one document, or `None` (after a reject, or the second time).
    fn next_batch(&mut self, _n: usize) -> Result<Option<RecordBatch>, IoError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(None);
        }
        let path = match &self.input.loc {
            super::Loc::Local(p) => p.clone(),
            remote => local_copy(remote, self.input.size)?,
        };
        let probe = match curator_video::probe(&path) {
            Ok(p) => p,
            Err(e) => return self.reject(e.reason()),
        };
        let text = path.display().to_string();
        let meta = serde_json::json!({
            "id": self.input.rel,
            "path": self.input.display(),
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

    fn take_rejects(&mut self) -> Vec<Reject> {
        self.rejects.take()
    }
}

/// Video files as a source format (`format: video`): one document per file.
pub struct Video;
pub static VIDEO: Video = Video;

static FILE_NAMES: super::format::FileNames = super::format::FileNames {
    format: "video",
    extensions: curator_video::container::VIDEO_EXTENSIONS,
    unnamed: &[],
    outputs_drop_extension: false,
};

impl super::format::SourceFormat for Video {
    fn names(&self) -> &super::format::FileNames {
        &FILE_NAMES
    }
    fn open(&self, part: &super::format::ReadPart<'_>) -> Result<Box<dyn super::format::PartReader>, IoError> {
        Ok(Box::new(VideoReader::open(part.file(), part.opts)))
    }
    fn not_a_sink(&self) -> String {
        "video is a source format; write clips with the clip_writer stage and their index as jsonl or parquet".into()
    }
}

/// A local copy of an object-store video (decoders seek, and the stages open a path):
/// `<cache>/videos/<hash of the URL>-<size>.<ext>`, downloaded once under a temporary name and
/// renamed when complete, reused while the object's size is unchanged.
fn local_copy(loc: &super::Loc, size: u64) -> Result<std::path::PathBuf, IoError> {
    let url = loc.display();
    let dir = crate::os::default_cache_dir().unwrap_or_else(std::env::temp_dir).join("videos");
    let ext = url.rsplit_once('.').map(|(_, e)| e).filter(|e| e.len() <= 5 && !e.contains('/')).unwrap_or("bin");
    let path = dir.join(format!("{:016x}-{size}.{ext}", xxhash_rust::xxh3::xxh3_64(url.as_bytes())));
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == size) {
        return Ok(path);
    }
    let werr = |source| IoError::write(path.display().to_string(), source);
    std::fs::create_dir_all(&dir).map_err(werr)?;
    let tmp = dir.join(format!(".{}.tmp-{}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(), std::process::id()));
    let mut out = std::fs::File::create(&tmp).map_err(werr)?;
    let copied = std::io::copy(&mut loc.open_from(0)?, &mut out).map_err(|source| IoError::Read { file: url.clone(), line: 0, source });
    if let Err(e) = copied.and_then(|_| out.sync_all().map_err(werr)).and_then(|_| std::fs::rename(&tmp, &path).map_err(werr)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Loc;
    use crate::format::PartReader;

    fn input(path: &std::path::Path) -> InputFile {
        InputFile { loc: Loc::Local(path.to_path_buf()), rel: "x.mp4".into(), size: 0, format: crate::Source(&VIDEO), compressed: false }
    }

    #[test]
    fn a_file_that_is_not_a_video_is_rejected_or_fails_when_strict() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.mp4");
        std::fs::write(&f, b"{\"text\": \"not a video\"}\n").unwrap();
        let mut r = VideoReader::open(&input(&f), &ReadOptions::default());
        assert!(r.next_batch(1).unwrap().is_none());
        let rejects = r.take_rejects();
        assert_eq!(rejects.len(), 1);
        assert!(rejects[0].reason.starts_with("not a video file"), "{:?}", rejects[0]);
        let strict = ReadOptions { strict: true, ..ReadOptions::default() };
        let e = VideoReader::open(&input(&f), &strict).next_batch(1).unwrap_err().to_string();
        assert!(e.contains("x.mp4") && e.contains("not a video file"), "{e}");
    }
}
