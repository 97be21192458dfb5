//! Containers: what a video file holds, read without decoding, and its compressed frames.

pub mod mkv;
pub mod mp4;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// File name endings the `video` source reads from a directory by default.
pub const VIDEO_EXTENSIONS: &[&str] = &[".mp4", ".m4v", ".mov", ".mkv", ".webm"];

/// A video codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codec {
    H264,
    Hevc,
    Vp9,
    Av1,
    /// Anything else, by the container's name for it (`mp4v`, `V_MPEG2`, …).
    Other(String),
}

impl Codec {
    /// The short name written to the `codec` field.
    pub fn name(&self) -> &str {
        match self {
            Codec::H264 => "h264",
            Codec::Hevc => "hevc",
            Codec::Vp9 => "vp9",
            Codec::Av1 => "av1",
            Codec::Other(s) => s,
        }
    }

    /// Whether the video stages can decode it (on the CPU, and with NVDEC on the GPU).
    pub fn supported(&self) -> bool {
        !matches!(self, Codec::Other(_))
    }
}

/// What a video file holds, from its container.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// `mp4` (MP4, MOV, M4V) or `matroska` (MKV, WebM).
    pub container: &'static str,
    pub codec: Codec,
    pub width: u32,
    pub height: u32,
    /// Frames per second (the commonest frame duration's rate).
    pub fps: f64,
    pub duration_s: f64,
    /// Frames in the video track (estimated from duration × fps for Matroska, which has no
    /// frame table).
    pub num_frames: u64,
    /// The decoder configuration record (`avcC`, `hvcC`, `vpcC`, `av1C`, or Matroska's
    /// CodecPrivate); empty when the container has none.
    pub config: Vec<u8>,
    /// File size in bytes.
    pub size: u64,
}

/// One compressed frame, in decode order.
#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    /// The frame's bytes as stored (H.264/HEVC: length-prefixed NAL units).
    pub data: Vec<u8>,
    /// Presentation time in seconds, from the start of the video (the earliest frame is 0).
    pub pts: f64,
    /// Decode time in seconds (equals `pts` where the container has no decode times).
    pub dts: f64,
    pub keyframe: bool,
}

/// A file that cannot be used as a video, and why. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum VideoError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not a video file: {reason}")]
    NotVideo { path: String, reason: String },
    #[error("{path}: truncated: {reason}")]
    Truncated { path: String, reason: String },
    #[error("{path}: corrupt: {reason}")]
    Corrupt { path: String, reason: String },
    #[error("{path}: unsupported: {reason}")]
    Unsupported { path: String, reason: String },
}

impl VideoError {
    /// The reason without the path (for `_rejected/` records, which name the file apart).
    pub fn reason(&self) -> String {
        match self {
            VideoError::Io { source, .. } => source.to_string(),
            VideoError::NotVideo { reason, .. } => format!("not a video file: {reason}"),
            VideoError::Truncated { reason, .. } => format!("truncated: {reason}"),
            VideoError::Corrupt { reason, .. } => format!("corrupt: {reason}"),
            VideoError::Unsupported { reason, .. } => format!("unsupported: {reason}"),
        }
    }
}

/// Which container a file's first bytes say it is.
fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.len() >= 4 && head[..4] == [0x1a, 0x45, 0xdf, 0xa3] {
        return Some("matroska");
    }
    if head.len() >= 8 && mp4::is_box_type(&head[4..8]) {
        return Some("mp4");
    }
    None
}

fn open(path: &Path) -> Result<(File, u64, &'static str), VideoError> {
    let io = |source| VideoError::Io { path: path.display().to_string(), source };
    let mut file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut head = [0u8; 8];
    let n = read_up_to(&mut file, &mut head).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let kind = sniff(&head[..n]).ok_or_else(|| VideoError::NotVideo {
        path: path.display().to_string(),
        reason: if n == 0 { "the file is empty".into() } else { "neither an MP4/MOV nor a Matroska/WebM container".into() },
    })?;
    Ok((file, size, kind))
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// What `path` holds, from its container alone (nothing is decoded). Fails on files that are
/// not videos, are cut short, or hold no video track the stages can decode.
pub fn probe(path: &Path) -> Result<Probe, VideoError> {
    Ok(Demuxer::open(path)?.probe)
}

/// A video file's compressed frames in decode order, with what its container says.
pub struct Demuxer {
    pub probe: Probe,
    inner: Inner,
}

enum Inner {
    Mp4(mp4::Samples),
    Mkv(Box<mkv::Frames>),
}

impl Demuxer {
    pub fn open(path: &Path) -> Result<Demuxer, VideoError> {
        let (file, size, kind) = open(path)?;
        let name = path.display().to_string();
        let (probe, inner) = match kind {
            "mp4" => {
                let (probe, samples) = mp4::open(file, size, &name)?;
                (probe, Inner::Mp4(samples))
            }
            _ => {
                let (probe, frames) = mkv::open(file, size, &name)?;
                (probe, Inner::Mkv(Box::new(frames)))
            }
        };
        if !probe.codec.supported() {
            return Err(VideoError::Unsupported {
                path: name,
                reason: format!("codec {} (h264, hevc, vp9 and av1 are decoded)", probe.codec.name()),
            });
        }
        if probe.width == 0 || probe.height == 0 {
            return Err(VideoError::Corrupt { path: name, reason: format!("frame size {}x{}", probe.width, probe.height) });
        }
        Ok(Demuxer { probe, inner })
    }

    /// The next frame in decode order, `None` at the end.
    pub fn next_packet(&mut self) -> Result<Option<Packet>, VideoError> {
        match &mut self.inner {
            Inner::Mp4(s) => s.next_packet(),
            Inner::Mkv(f) => f.next_packet(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_containers_by_their_first_bytes() {
        assert_eq!(sniff(b"\0\0\0\x20ftypisom"), Some("mp4"));
        assert_eq!(sniff(&[0x1a, 0x45, 0xdf, 0xa3, 1, 2]), Some("matroska"));
        assert_eq!(sniff(b"{\"text\": 1}"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn garbage_is_not_a_video_and_says_so() {
        let dir = std::env::temp_dir().join(format!("curator-video-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("noise.mp4");
        std::fs::write(&f, (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<_>>()).unwrap();
        let e = probe(&f).unwrap_err().to_string();
        assert!(e.contains("noise.mp4") && e.contains("not a video file"), "{e}");
        std::fs::write(&f, b"").unwrap();
        assert!(probe(&f).unwrap_err().to_string().contains("empty"));
    }
}
