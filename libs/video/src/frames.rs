//! Decoded frames as columns of a batch, one row per video or clip:
//!
//! | column | type | holds |
//! |---|---|---|
//! | `frames` | binary | the frames back to back, each `height` rows of `width` pixels of `channels` bytes (1: luma, 3: RGB) |
//! | `frame_times` | binary | each frame's presentation time in seconds, f64 little-endian |
//! | `frame_width`, `frame_height`, `frame_channels` | int64 | the frames' shape |
//!
//! A row without frames (a video that decoded to nothing) has an empty `frames` value.

use curator_sdk::{Batch, Column, ColumnType, StageError};

pub const FRAMES: &str = "frames";
pub const FRAME_TIMES: &str = "frame_times";
pub const FRAME_WIDTH: &str = "frame_width";
pub const FRAME_HEIGHT: &str = "frame_height";
pub const FRAME_CHANNELS: &str = "frame_channels";
/// The columns a stage that reads frames asks for.
pub const COLUMNS: [&str; 5] = [FRAMES, FRAME_TIMES, FRAME_WIDTH, FRAME_HEIGHT, FRAME_CHANNELS];

/// Frames of one video or clip, all of one shape.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frames {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub times: Vec<f64>,
    pub data: Vec<u8>,
}

impl Frames {
    pub fn new(width: usize, height: usize, channels: usize) -> Frames {
        Frames { width, height, channels, times: Vec::new(), data: Vec::new() }
    }

    pub fn frame_bytes(&self) -> usize {
        self.width * self.height * self.channels
    }

    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    pub fn frame(&self, i: usize) -> &[u8] {
        let n = self.frame_bytes();
        &self.data[i * n..(i + 1) * n]
    }

    pub fn push(&mut self, time: f64, pixels: &[u8]) {
        debug_assert_eq!(pixels.len(), self.frame_bytes());
        self.times.push(time);
        self.data.extend_from_slice(pixels);
    }

    /// Frames `range` as a new value.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Frames {
        let n = self.frame_bytes();
        Frames {
            width: self.width,
            height: self.height,
            channels: self.channels,
            times: self.times[range.clone()].to_vec(),
            data: self.data[range.start * n..range.end * n].to_vec(),
        }
    }

    /// Luma of pixel `p` of frame `i` (RGB by BT.601 weights, in integers).
    pub fn luma(&self, i: usize, p: usize) -> u8 {
        let f = self.frame(i);
        match self.channels {
            3 => {
                let (r, g, b) = (f[3 * p] as u32, f[3 * p + 1] as u32, f[3 * p + 2] as u32);
                ((77 * r + 150 * g + 29 * b + 128) >> 8) as u8
            }
            c => f[c * p],
        }
    }

    /// Frame `i` as RGB bytes (`RGBRGB…`; a luma frame as grey), what the model stages
    /// preprocess.
    pub fn rgb(&self, i: usize) -> Vec<u8> {
        match self.channels {
            3 => self.frame(i).to_vec(),
            _ => (0..self.width * self.height).flat_map(|p| [self.luma(i, p); 3]).collect(),
        }
    }

    /// The indices of the frames kept at `fps` ([`Sampler`]: the first frame at or after each
    /// tick; 0 keeps every frame).
    pub fn sampled(&self, fps: f64) -> Vec<usize> {
        let mut sampler = Sampler::new(fps);
        (0..self.len()).filter(|&i| sampler.keep(self.times[i])).collect()
    }

    fn times_bytes(&self) -> Vec<u8> {
        self.times.iter().flat_map(|t| t.to_le_bytes()).collect()
    }
}

/// What a decoder is asked for: frames at `fps` (0: every frame), scaled to `width` × `height`
/// with `channels` bytes a pixel (1: luma, 3: RGB), at most `max_frames` (0: no limit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    pub fps: f64,
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub max_frames: usize,
}

/// Picks frames at a target rate from frames in presentation order: the first frame at or
/// after each tick of `1 / fps` seconds.
#[derive(Debug, Clone)]
pub struct Sampler {
    step: f64,
    next: f64,
}

impl Sampler {
    pub fn new(fps: f64) -> Sampler {
        Sampler { step: if fps > 0.0 { 1.0 / fps } else { 0.0 }, next: f64::NEG_INFINITY }
    }

    /// Whether the frame at `pts` is kept.
    pub fn keep(&mut self, pts: f64) -> bool {
        if self.step == 0.0 {
            return true;
        }
        if pts + 1e-6 < self.next {
            return false;
        }
        // The next tick after this frame, on the grid k × step (no drift over long videos).
        self.next = ((pts + 1e-6) / self.step).floor() * self.step + self.step;
        true
    }
}

/// The frame columns for `rows`, in order.
pub fn to_columns(rows: &[Frames]) -> Vec<Column> {
    let times: Vec<Vec<u8>> = rows.iter().map(Frames::times_bytes).collect();
    let int = |name: &str, f: fn(&Frames) -> usize| Column::int64(name, &rows.iter().map(|r| f(r) as i64).collect::<Vec<_>>());
    vec![
        Column::binary(FRAMES, rows.iter().map(|r| r.data.as_slice())),
        Column::binary(FRAME_TIMES, times.iter().map(Vec::as_slice)),
        int(FRAME_WIDTH, |r| r.width),
        int(FRAME_HEIGHT, |r| r.height),
        int(FRAME_CHANNELS, |r| r.channels),
    ]
}

/// Each row's frames, checked: the shape must account for the bytes exactly.
pub fn from_batch(batch: &Batch) -> Result<Vec<Frames>, StageError> {
    let col = |name: &str| batch.column(name).map_err(|_| StageError::Failed(format!("no {name:?} column: run video_decode first")));
    let (data, times) = (col(FRAMES)?, col(FRAME_TIMES)?);
    let (w, h, c) = (col(FRAME_WIDTH)?.i64_values()?, col(FRAME_HEIGHT)?.i64_values()?, col(FRAME_CHANNELS)?.i64_values()?);
    let mut out = Vec::with_capacity(batch.num_rows as usize);
    for r in 0..batch.num_rows as usize {
        let bytes = data.bytes_at(r).unwrap_or_default();
        let tb = times.bytes_at(r).unwrap_or_default();
        let shape = [w.get(r), h.get(r), c.get(r)].map(|v| v.copied().unwrap_or(0).max(0) as usize);
        let (width, height, channels) = (shape[0], shape[1], shape[2]);
        let n = tb.len() / 8;
        if tb.len() % 8 != 0
            || width.checked_mul(height).and_then(|p| p.checked_mul(channels)).and_then(|f| f.checked_mul(n)) != Some(bytes.len())
        {
            return Err(StageError::Failed(format!(
                "row {r}: {} frame bytes do not hold {n} frames of {width}x{height}x{channels}",
                bytes.len()
            )));
        }
        let times = tb.chunks_exact(8).map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])).collect();
        out.push(Frames { width, height, channels, times, data: bytes.to_vec() });
    }
    Ok(out)
}

/// A numeric column as f64 per row, whether typed (float64, int64) or text, as fields the
/// host fills in from the source's `_meta` arrive (`"12.5"`); a missing or unparsable value
/// is `None`.
pub fn numbers(batch: &Batch, name: &str) -> Result<Vec<Option<f64>>, StageError> {
    let col = batch.column(name).map_err(|_| StageError::Failed(format!("no {name:?} column")))?;
    let n = batch.num_rows as usize;
    Ok(match col.ty {
        ColumnType::Float64 => col.f64_values()?.into_iter().enumerate().map(|(i, v)| col.is_valid(i).then_some(v)).collect(),
        ColumnType::Int64 => col.i64_values()?.into_iter().enumerate().map(|(i, v)| col.is_valid(i).then_some(v as f64)).collect(),
        ColumnType::Utf8 => {
            let s = col.strings()?;
            (0..n).map(|i| s.get(i).and_then(|v| v.trim().parse::<f64>().ok())).collect()
        }
        other => return Err(StageError::Failed(format!("column {name:?} has type {other:?}, expected a number"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_through_columns_and_bad_shapes_are_refused() {
        let mut a = Frames::new(2, 1, 3);
        a.push(0.0, &[1, 2, 3, 4, 5, 6]);
        a.push(0.5, &[7, 8, 9, 10, 11, 12]);
        let b = Frames::new(4, 4, 1);
        let batch = Batch { num_rows: 2, columns: to_columns(&[a.clone(), b.clone()]) };
        assert_eq!(from_batch(&batch).unwrap(), [a.clone(), b]);
        assert_eq!(a.slice(1..2).frame(0), &[7, 8, 9, 10, 11, 12]);
        let mut lying = batch.clone();
        lying.columns[2] = Column::int64(FRAME_WIDTH, &[3, 4]);
        assert!(from_batch(&lying).unwrap_err().to_string().contains("do not hold 2 frames of 3x1x3"));
    }

    #[test]
    fn the_sampler_keeps_one_frame_per_tick() {
        let mut s = Sampler::new(2.0);
        let kept: Vec<usize> = (0..30).filter(|&i| s.keep(i as f64 / 10.0)).collect();
        assert_eq!(kept, [0, 5, 10, 15, 20, 25]);
        let mut all = Sampler::new(0.0);
        assert!((0..5).all(|i| all.keep(i as f64)));
        // A 30 fps source sampled at 30 fps keeps every frame despite rounding.
        let mut same = Sampler::new(30.0);
        assert_eq!((0..300).filter(|&i| same.keep(i as f64 / 30.0)).count(), 300);
    }
}
