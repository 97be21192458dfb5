//! Matroska and WebM, through the `matroska-demuxer` crate (pure Rust, EBML with bounds
//! checks): the first video track and its frames. Matroska has no frame table, so the frame
//! count is estimated from duration × frame rate, and a file cut short shows as an error at
//! the frame where it ends.

use std::fs::File;
use std::io::BufReader;

use matroska_demuxer::{Frame, MatroskaFile, TrackType};

use super::{Codec, Packet, Probe, VideoError};

/// The video track's frames, in file order (Matroska stores decode order).
pub struct Frames {
    mkv: MatroskaFile<BufReader<File>>,
    track: u64,
    /// Seconds per timestamp unit.
    scale: f64,
    origin: Option<u64>,
    path: String,
    frame: Frame,
}

impl Frames {
    pub(super) fn next_packet(&mut self) -> Result<Option<Packet>, VideoError> {
        loop {
            let more = self
                .mkv
                .next_frame(&mut self.frame)
                .map_err(|e| VideoError::Truncated { path: self.path.clone(), reason: format!("cannot read the next frame: {e}") })?;
            if !more {
                return Ok(None);
            }
            if self.frame.track != self.track {
                continue;
            }
            let origin = *self.origin.get_or_insert(self.frame.timestamp);
            let pts = self.frame.timestamp.saturating_sub(origin) as f64 * self.scale;
            let data = std::mem::take(&mut self.frame.data);
            return Ok(Some(Packet { data, pts, dts: pts, keyframe: self.frame.is_keyframe.unwrap_or(false) }));
        }
    }
}

fn codec(id: &str) -> Codec {
    match id {
        "V_MPEG4/ISO/AVC" => Codec::H264,
        "V_MPEGH/ISO/HEVC" => Codec::Hevc,
        "V_VP9" => Codec::Vp9,
        "V_AV1" => Codec::Av1,
        other => Codec::Other(other.to_string()),
    }
}

pub(super) fn open(file: File, size: u64, path: &str) -> Result<(Probe, Frames), VideoError> {
    let mkv = MatroskaFile::open(BufReader::new(file))
        .map_err(|e| VideoError::Corrupt { path: path.to_string(), reason: format!("Matroska header: {e}") })?;
    let Some(t) = mkv.tracks().iter().find(|t| t.track_type() == TrackType::Video) else {
        return Err(VideoError::Unsupported { path: path.into(), reason: "no video track".into() });
    };
    let scale = mkv.info().timestamp_scale().get() as f64 / 1e9;
    let (width, height) = t.video().map(|v| (v.pixel_width().get() as u32, v.pixel_height().get() as u32)).unwrap_or((0, 0));
    // Rounded: Matroska stores nanoseconds per frame (33333333 for 30 fps).
    let fps = t.default_duration().map(|d| (1e12 / d.get() as f64).round() / 1e3).unwrap_or(0.0);
    let duration_s = mkv.info().duration().map(|d| d * scale).unwrap_or(0.0);
    let probe = Probe {
        container: "matroska",
        codec: codec(t.codec_id()),
        width,
        height,
        fps,
        duration_s,
        num_frames: (duration_s * fps).round() as u64,
        config: t.codec_private().map(<[u8]>::to_vec).unwrap_or_default(),
        size,
    };
    let track = t.track_number().get();
    Ok((probe, Frames { mkv, track, scale, origin: None, path: path.to_string(), frame: Frame::default() }))
}
