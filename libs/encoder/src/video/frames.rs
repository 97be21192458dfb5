//! A clip's frames made into a video tower's input as NeMo Curator makes them for InternVideo2
//! (`InternVideo2MultiModality._construct_frames`): every `len / frames`-th frame (integer
//! division), the first `frames` of those, each resized to the square with OpenCV's bilinear
//! `cv2.resize` ([`curator_image::cv_linear`], to the bit), scaled to 0–1 and normalised with
//! ImageNet's mean and deviation in f32, laid out `[frames × 3 × size × size]`.

use curator_image::Rgb8;
use curator_image::cv_linear;

use super::VideoConfig;

/// ImageNet's mean and standard deviation (NeMo's `_v_mean`, `_v_std`).
pub const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// The indices of the `want` frames taken from `n` (`frames[::n // want][:want]`); `None` when
/// there are fewer than `want`.
pub fn pick(n: usize, want: usize) -> Option<Vec<usize>> {
    if want == 0 || n < want {
        return None;
    }
    let step = n / want;
    Some((0..want).map(|i| i * step).collect())
}

/// `frame` resized to the tower's square, as bytes (what the parity test checksums).
pub fn resized(config: &VideoConfig, frame: &Rgb8) -> Rgb8 {
    cv_linear::resize(frame, config.img_size, config.img_size)
}

/// The tower's input for one clip from its frames (already sampled at the stage's rate), or
/// `None` when there are fewer than `config.num_frames`.
pub fn pixels(config: &VideoConfig, frames: &[Rgb8]) -> Option<Vec<f32>> {
    let picked = pick(frames.len(), config.num_frames)?;
    let s = config.img_size;
    let mut out = vec![0f32; config.pixels()];
    for (t, &i) in picked.iter().enumerate() {
        let img = resized(config, &frames[i]);
        let plane = &mut out[t * 3 * s * s..(t + 1) * 3 * s * s];
        for (p, px) in img.data.chunks_exact(3).enumerate() {
            for c in 0..3 {
                plane[c * s * s + p] = (f32::from(px[c]) / 255.0 - MEAN[c]) / STD[c];
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_picked_as_nemo_slices_them() {
        assert_eq!(pick(18, 8), Some(vec![0, 2, 4, 6, 8, 10, 12, 14]));
        assert_eq!(pick(8, 8), Some((0..8).collect()));
        assert_eq!(pick(15, 8), Some((0..8).collect()));
        assert_eq!(pick(17, 4), Some(vec![0, 4, 8, 12]));
        assert_eq!(pick(7, 8), None);
    }
}
