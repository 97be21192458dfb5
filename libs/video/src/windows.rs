//! What a captioning model is shown of a clip, as NeMo Curator's `CaptionPreparationStage`
//! prepares it (`nemo_curator/utils/windowing_utils.py`, Qwen-VL's `smart_resize`):
//!
//! 1. the clip's frames cut into windows of `window_size` frames, a remainder of at least
//!    `remainder_threshold` frames its own window and a shorter one added to the last;
//! 2. each window sampled at `sampling_fps` (an even number of frames, 4 to 768, spread
//!    evenly from its first frame to its last);
//! 3. each frame sized as Qwen-VL's processor sizes it: both sides multiples of the patch
//!    factor (28; 32 for Qwen3-VL), the area within `min_pixels..=max_pixels`, the aspect kept.

/// A clip with fewer frames has no window (NeMo's `WINDOW_MIN_FRAMES`).
pub const MIN_WINDOW_FRAMES: usize = 4;

/// Frames sampled from a window come in pairs (Qwen-VL merges two frames into one temporal patch).
const FRAME_FACTOR: usize = 2;
const MIN_SAMPLED: usize = 4;
const MAX_SAMPLED: usize = 768;

/// A window: the clip's frames `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: usize,
    pub end: usize,
}

impl Window {
    pub fn len(&self) -> usize {
        self.end + 1 - self.start
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The windows of a clip of `total` frames (NeMo's `compute_windows`).
pub fn windows(total: usize, window_size: usize, remainder_threshold: usize) -> Vec<Window> {
    if total < MIN_WINDOW_FRAMES || window_size == 0 {
        return Vec::new();
    }
    if total <= window_size {
        return vec![Window { start: 0, end: total - 1 }];
    }
    let full = total / window_size;
    let remainder = total % window_size;
    let mut out: Vec<Window> = (0..full).map(|i| Window { start: i * window_size, end: (i + 1) * window_size - 1 }).collect();
    if remainder >= remainder_threshold {
        out.push(Window { start: total - remainder, end: total - 1 });
    } else if remainder > 0
        && let Some(last) = out.last_mut()
    {
        last.end = total - 1;
    }
    out
}

/// How many frames a window of `total` frames shown at `video_fps` gives at `fps` (NeMo's
/// `smart_nframes`): `total / video_fps × fps`, within 4..=min(768, total), rounded to an even
/// number (halves to even, as Python's `round`).
pub fn sampled_count(fps: f64, total: usize, video_fps: f64) -> Result<usize, String> {
    let min = MIN_SAMPLED.div_ceil(FRAME_FACTOR) * FRAME_FACTOR;
    let max = (MAX_SAMPLED.min(total) / FRAME_FACTOR) * FRAME_FACTOR;
    let wanted = if video_fps > 0.0 { total as f64 / video_fps * fps } else { total as f64 };
    let clamped = wanted.max(min as f64).min(max as f64);
    let n = (clamped / FRAME_FACTOR as f64).round_ties_even() as usize * FRAME_FACTOR;
    if n < FRAME_FACTOR || n > total {
        return Err(format!("a window of {total} frames gives {n} frames at {fps} fps; it needs 2 to {total}"));
    }
    Ok(n)
}

/// The clip's frames a window shows at `fps`: `n` indices spread evenly from its first frame
/// to its last, as `torch.linspace(start, end, n).round()` gives them (float32 steps, halves
/// to even).
pub fn sample(window: Window, fps: f64, video_fps: f64) -> Result<Vec<usize>, String> {
    let n = sampled_count(fps, window.len(), video_fps)?;
    let (start, end) = (window.start as f32, window.end as f32);
    if n == 1 {
        return Ok(vec![window.start]);
    }
    let step = (end - start) / (n - 1) as f32;
    let half = n / 2;
    Ok((0..n)
        .map(|i| {
            // torch fills the first half forwards from `start` and the second backwards from `end`.
            let v = if i < half { start + step * i as f32 } else { end - step * (n - 1 - i) as f32 };
            v.round_ties_even() as usize
        })
        .collect())
}

/// Qwen-VL's frame size for a `height` × `width` frame (its processor's `smart_resize`): each
/// side rounded to a multiple of `factor`, then scaled down (floor) or up (ceil) with the
/// aspect kept while the area is above `max_pixels` or below `min_pixels`. Returns
/// `(height, width)`.
pub fn model_size(height: usize, width: usize, factor: usize, min_pixels: usize, max_pixels: usize) -> Result<(usize, usize), String> {
    if height == 0 || width == 0 || factor == 0 {
        return Err(format!("cannot size a {width}x{height} frame to multiples of {factor}"));
    }
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    if h.max(w) / h.min(w) > 200.0 {
        return Err(format!("a {width}x{height} frame's aspect ratio is over 200"));
    }
    let round = |x: f64| ((x / f).round_ties_even() as usize * factor).max(factor);
    let (mut hb, mut wb) = (round(h), round(w));
    if hb * wb > max_pixels {
        let beta = (h * w / max_pixels as f64).sqrt();
        hb = ((h / beta / f).floor() as usize * factor).max(factor);
        wb = ((w / beta / f).floor() as usize * factor).max(factor);
    } else if hb * wb < min_pixels {
        let beta = (min_pixels as f64 / (h * w)).sqrt();
        hb = (h * beta / f).ceil() as usize * factor;
        wb = (w * beta / f).ceil() as usize * factor;
    }
    Ok((hb, wb))
}

/// The clip's frame rate from its frames' times: frames per second between the first and
/// the last (what the frames were decoded at; 0 when it cannot be told).
pub fn frame_rate(times: &[f64]) -> f64 {
    match (times.first(), times.last()) {
        (Some(a), Some(b)) if times.len() > 1 && b > a => (times.len() - 1) as f64 / (b - a),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(start: usize, end: usize) -> Window {
        Window { start, end }
    }

    #[test]
    fn windows_are_nemos() {
        // The cases of NeMo's tests/utils/test_windowing_utils.py.
        assert_eq!(windows(0, 128, 64), vec![]);
        assert_eq!(windows(3, 128, 64), vec![]);
        assert_eq!(windows(100, 128, 64), vec![w(0, 99)]);
        assert_eq!(windows(128, 128, 64), vec![w(0, 127)]);
        assert_eq!(windows(256, 128, 64), vec![w(0, 127), w(128, 255)]);
        // A remainder of 70 ≥ 64: its own window; of 30: added to the last.
        assert_eq!(windows(326, 128, 64), vec![w(0, 127), w(128, 255), w(256, 325)]);
        assert_eq!(windows(286, 128, 64), vec![w(0, 127), w(128, 285)]);
        // NeMo's caption defaults: 256 and 128.
        assert_eq!(windows(300, 256, 128), vec![w(0, 299)]);
        assert_eq!(windows(400, 256, 128), vec![w(0, 255), w(256, 399)]);
    }

    #[test]
    fn sampled_counts_are_smart_nframes() {
        // 256 frames at 30 fps, 2 fps: 17.07 → 18 (8.53 pairs round to 9).
        assert_eq!(sampled_count(2.0, 256, 30.0), Ok(18));
        // 10 frames at 30 fps: 0.67 → at least 4.
        assert_eq!(sampled_count(2.0, 10, 30.0), Ok(4));
        // 5 frames decoded at 2 fps: 5 → at most 4 (even, ≤ 5).
        assert_eq!(sampled_count(2.0, 5, 2.0), Ok(4));
        // Halves round to even pairs: 9 frames = 4.5 pairs → 4 → 8; 11 = 5.5 pairs → 6 → 12.
        assert_eq!(sampled_count(9.0, 30, 30.0), Ok(8));
        assert_eq!(sampled_count(11.0, 30, 30.0), Ok(12));
        // Capped by the window's own frames (even): 21 of 21 → 20.
        assert_eq!(sampled_count(1.0, 21, 1.0), Ok(20));
        // Never over 768.
        assert_eq!(sampled_count(30.0, 10_000, 30.0), Ok(768));
    }

    #[test]
    fn samples_spread_like_torch_linspace() {
        // torch.linspace(0, 255, 18).round(): 0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, ...
        let s = sample(w(0, 255), 2.0, 30.0).unwrap();
        assert_eq!(s.len(), 18);
        assert_eq!(s[0], 0);
        assert_eq!(s[17], 255);
        assert_eq!(&s[..4], &[0, 15, 30, 45]);
        // linspace(256, 399, 10): step 15.89 → 256, 271.89 → 272, ...
        let t = sample(w(256, 399), 2.0, 30.0).unwrap();
        assert_eq!(t, vec![256, 272, 288, 304, 320, 335, 351, 367, 383, 399]);
        // linspace(0, 7, 6): 0, 1.4, 2.8 forwards, 4.2, 5.6, 7 backwards.
        assert_eq!(sample(w(0, 7), 6.0, 8.0).unwrap(), vec![0, 1, 3, 4, 6, 7]);
    }

    #[test]
    fn model_sizes_are_qwens_smart_resize() {
        let (min, max) = (128 * 28 * 28, 768 * 28 * 28);
        // 1080p: 38.57 × 68.57 patches is over 768 → scaled down: beta = sqrt(2073600/602112).
        assert_eq!(model_size(1080, 1920, 28, min, max), Ok((560, 1008)));
        // 252 × 448 is 9 × 16 patches = 112,896 pixels: kept.
        assert_eq!(model_size(252, 448, 28, min, max), Ok((252, 448)));
        // 224 × 398 rounds to 224 × 392 = 87,808 < min → scaled up (ceil).
        assert_eq!(model_size(224, 398, 28, min, max), Ok((252, 448)));
        // Qwen3-VL's factor 32.
        assert_eq!(model_size(256, 448, 32, 0, usize::MAX), Ok((256, 448)));
        assert!(model_size(1, 300, 28, min, max).is_err());
    }

    #[test]
    fn the_frame_rate_comes_from_the_frames_times() {
        assert_eq!(frame_rate(&[0.0, 0.5, 1.0, 1.5]), 2.0);
        assert_eq!(frame_rate(&[3.0]), 0.0);
        assert_eq!(frame_rate(&[]), 0.0);
    }
}
