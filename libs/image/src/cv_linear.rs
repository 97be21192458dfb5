//! Bilinear resizing as OpenCV does it for 8-bit images (`cv2.resize(img, (w, h))`, whose
//! default is `INTER_LINEAR`), to the bit: what NeMo Curator's video embedders resize frames
//! with (InternVideo2's `_construct_frames`).
//!
//! OpenCV's arithmetic (`imgproc/src/resize.cpp`, 4.x): each output coordinate maps to
//! `(d + 0.5) · scale − 0.5` (computed in f64, kept as f32), clamped to the image; its two
//! weights are rounded to 11-bit fixed point (2048); the horizontal pass sums in 32-bit
//! integers; the vertical pass is OpenCV's SIMD kernel (`VResizeLinearVec_32s8u`) — each row
//! sum shifted right by 4, multiplied by its weight keeping the high 16 bits, the two added and
//! rounded by 2 bits — which lands a unit off the exact product on some pixels, and which
//! opencv-python 4.x (5.1) applies to whole rows. Rows are not clamped as columns are (a row
//! above the first keeps its fraction over two copies of the first row). Halving both sides
//! exactly is the 2 × 2 mean, as OpenCV switches to `INTER_AREA` there. Checked against
//! `cv2.resize` on up- and downscales of random and smooth images, odd sizes included.
//!
//! Hand-written for the same reason as [`crate::resize`]: the contract is equality with the
//! reference's resizer, and the parity test (`curator-encoder`'s `tests/internvideo2.rs`)
//! compares checksums of the resized frames.

use crate::Rgb8;

/// OpenCV's `INTER_RESIZE_COEF_BITS`.
const COEF_BITS: u32 = 11;
const COEF_SCALE: f32 = (1 << COEF_BITS) as f32;

/// One axis: for each output index, the first source index and its two fixed-point weights.
/// Columns are clamped to the image (the weight goes to the edge pixel); rows are not: a row
/// left of the first keeps its fraction, and both of its source rows are clipped to the image
/// (`rows`), as OpenCV does.
fn axis(src: usize, dst: usize, clamp: bool) -> Vec<(i64, [i32; 2])> {
    let scale = 1.0 / (dst as f64 / src as f64);
    (0..dst)
        .map(|d| {
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let mut s = f.floor() as i64;
            let mut f = f - s as f32;
            if clamp && s < 0 {
                f = 0.0;
                s = 0;
            }
            if clamp && s >= src as i64 - 1 {
                f = 0.0;
                s = src as i64 - 1;
            }
            let w0 = ((1.0 - f) * COEF_SCALE).round_ties_even() as i32;
            let w1 = (f * COEF_SCALE).round_ties_even() as i32;
            (s, [w0, w1])
        })
        .collect()
}

/// `img` resized to `width × height` as `cv2.resize(img, (width, height))` (bilinear).
pub fn resize(img: &Rgb8, width: usize, height: usize) -> Rgb8 {
    let (sw, sh) = (img.width, img.height);
    if sw == width && sh == height {
        return img.clone();
    }
    if sw == 2 * width && sh == 2 * height {
        return halve(img, width, height);
    }
    let xs = axis(sw, width, true);
    let ys = axis(sh, height, false);
    let row = |s: i64| s.clamp(0, sh as i64 - 1) as usize;
    let row_bytes = width * 3;
    // Each source row's horizontal pass, computed once: `[sh][row_bytes]`.
    let horizontal = |y: usize| -> Vec<i32> {
        let src = &img.data[y * sw * 3..(y + 1) * sw * 3];
        let mut out = vec![0i32; row_bytes];
        for (d, &(s, [w0, w1])) in xs.iter().enumerate() {
            let s = s as usize;
            for c in 0..3 {
                let a = i32::from(src[s * 3 + c]);
                out[d * 3 + c] = if s + 1 < sw { a * w0 + i32::from(src[(s + 1) * 3 + c]) * w1 } else { a * (1 << COEF_BITS) };
            }
        }
        out
    };
    let rows: Vec<Vec<i32>> = (0..sh).map(horizontal).collect();
    let mut data = vec![0u8; row_bytes * height];
    for (d, &(s, [b0, b1])) in ys.iter().enumerate() {
        let (r0, r1) = (&rows[row(s)], &rows[row(s + 1)]);
        let out = &mut data[d * row_bytes..(d + 1) * row_bytes];
        let hi = |v: i32, b: i32| ((v >> 4) * b) >> 16;
        for ((o, &a), &b) in out.iter_mut().zip(r0).zip(r1) {
            *o = ((hi(a, b0) + hi(b, b1) + 2) >> 2).clamp(0, 255) as u8;
        }
    }
    Rgb8 { width, height, data }
}

/// Exactly half size: the mean of each 2 × 2 block, rounded (OpenCV's fast `INTER_AREA`).
fn halve(img: &Rgb8, width: usize, height: usize) -> Rgb8 {
    let sw = img.width;
    let px = |x: usize, y: usize, c: usize| u32::from(img.data[(y * sw + x) * 3 + c]);
    let mut data = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for x in 0..width {
            for c in 0..3 {
                let sum = px(2 * x, 2 * y, c) + px(2 * x + 1, 2 * y, c) + px(2 * x, 2 * y + 1, c) + px(2 * x + 1, 2 * y + 1, c);
                data.push(((sum + 2) >> 2) as u8);
            }
        }
    }
    Rgb8 { width, height, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_in_fixed_point_and_the_edges_clamp() {
        for (s, d) in [(160, 224), (90, 224), (640, 224), (7, 3)] {
            for (i, (src, [w0, w1])) in axis(s, d, true).into_iter().enumerate() {
                assert_eq!(w0 + w1, 2048, "{s}->{d} at {i}");
                assert!((0..s as i64).contains(&src));
            }
        }
        // Upscaling 2 → 4: the first output sits left of the first pixel: clamped as a column,
        // kept with its fraction as a row.
        assert_eq!(axis(2, 4, true), vec![(0, [2048, 0]), (0, [1536, 512]), (0, [512, 1536]), (1, [2048, 0])]);
        assert_eq!(axis(2, 4, false), vec![(-1, [512, 1536]), (0, [1536, 512]), (0, [512, 1536]), (1, [1536, 512])]);
    }

    #[test]
    fn a_flat_image_stays_flat_and_halving_takes_block_means() {
        let flat = Rgb8 { width: 5, height: 3, data: vec![77; 45] };
        assert!(resize(&flat, 11, 7).data.iter().all(|&v| v == 77));
        let img = Rgb8 { width: 2, height: 2, data: vec![0, 0, 0, 10, 10, 10, 20, 20, 20, 31, 31, 31] };
        assert_eq!(resize(&img, 1, 1).data, vec![15, 15, 15]);
    }
}
