//! Motion scores of a clip from the luma difference of consecutive frames (0–1 per pixel).
//!
//! NeMo Curator scores motion from the decoder's motion vectors; we score the frames the
//! pipeline already decoded, so no second decode is needed. The two scores play the same
//! roles as NeMo's: `global_mean` (the whole frame's mean motion) and a patch score over a
//! 16 × 16 grid of patches (256; fewer on frames smaller than 16 pixels): the mean motion of the
//! patch that moves most, so a small moving subject on a still background is not mistaken for
//! a static clip.

use crate::frames::Frames;

/// Patches per side of the grid.
pub const GRID: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Motion {
    /// Mean absolute luma difference between consecutive frames, over the clip (0–1).
    pub global_mean: f64,
    /// The largest per-patch mean of the same (0–1).
    pub patch_max: f64,
}

/// Motion of `f` (all its frames); a clip of fewer than two frames has no motion.
pub fn score(f: &Frames) -> Motion {
    let (w, h) = (f.width, f.height);
    if f.len() < 2 || w == 0 || h == 0 {
        return Motion { global_mean: 0.0, patch_max: 0.0 };
    }
    let (gx, gy) = (GRID.min(w), GRID.min(h));
    let mut patch = vec![0u64; gx * gy];
    let mut count = vec![0u64; gx * gy];
    let mut total = 0u64;
    for i in 1..f.len() {
        for y in 0..h {
            let py = y * gy / h;
            for x in 0..w {
                let p = y * w + x;
                let d = (f.luma(i, p) as i32 - f.luma(i - 1, p) as i32).unsigned_abs() as u64;
                let k = py * gx + x * gx / w;
                patch[k] += d;
                count[k] += 1;
                total += d;
            }
        }
    }
    let pairs = (f.len() - 1) as f64;
    let global_mean = total as f64 / (pairs * (w * h) as f64 * 255.0);
    let patch_max = patch.iter().zip(&count).filter(|(_, c)| **c > 0).map(|(s, c)| *s as f64 / (*c as f64 * 255.0)).fold(0.0, f64::max);
    Motion { global_mean, patch_max }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn still_frames_score_zero_and_a_moving_patch_shows() {
        let mut still = Frames::new(32, 32, 1);
        for i in 0..5 {
            still.push(i as f64, &[90; 1024]);
        }
        assert_eq!(score(&still), Motion { global_mean: 0.0, patch_max: 0.0 });
        // One 2x2 patch flips between black and white: tiny global mean, full patch motion.
        let mut blink = Frames::new(32, 32, 1);
        for i in 0..5 {
            let mut px = [0u8; 1024];
            if i % 2 == 1 {
                for (y, x) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    px[y * 32 + x] = 255;
                }
            }
            blink.push(i as f64, &px);
        }
        let m = score(&blink);
        assert!((m.global_mean - 4.0 / 1024.0).abs() < 1e-12, "{m:?}");
        assert!((m.patch_max - 1.0).abs() < 1e-12, "{m:?}");
        assert_eq!(score(&blink.slice(0..1)).global_mean, 0.0);
    }
}
