//! Bicubic resizing as Pillow does it (`Image.resize(size, Image.BICUBIC)`, its
//! `Resample.c`), to the bit: separable convolution (horizontal pass, then vertical), the
//! cubic kernel with a = −0.5 widened by the scale when shrinking (antialiasing), weights
//! normalised per output pixel then rounded to 22-bit fixed point, each pass rounded and
//! clamped to 8 bits.
//!
//! Hand-written rather than taken from a resizing crate because the contract is equality with
//! transformers' `CLIPImageProcessor`, which resizes with Pillow: a crate that picks its own
//! fixed-point precision or skips the intermediate rounding lands a unit off on some pixels,
//! and the parity test (`tests/preprocess.rs`) would say so.

use crate::Rgb8;

/// Pillow's `PRECISION_BITS` for 8-bit images: 32 − 8 − 2.
pub const PRECISION_BITS: u32 = 22;

/// Pillow's bicubic kernel (a = −0.5), support 2.
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// The taps of one axis: for each output index, the first input index and its fixed-point
/// weights (Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc`).
pub struct Taps {
    pub first: Vec<usize>,
    pub weights: Vec<Vec<i32>>,
}

/// The taps of `outputs` when one axis is resized from `in_size` to `out_size` values
/// (`first[i]`, `weights[i]`: output `outputs.start + i`).
pub fn taps(in_size: usize, out_size: usize, outputs: std::ops::Range<usize>) -> Taps {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    let ss = 1.0 / filterscale;
    let mut first = Vec::with_capacity(outputs.len());
    let mut weights = Vec::with_capacity(outputs.len());
    for xx in outputs {
        let center = (xx as f64 + 0.5) * scale;
        // `(int)(v + 0.5)` in C truncates towards zero; the clamps make that floor here.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let k: Vec<f64> = (xmin..xmax).map(|x| bicubic((x as f64 - center + 0.5) * ss)).collect();
        let total: f64 = k.iter().sum();
        let fixed = k
            .iter()
            .map(|&w| {
                let w = if total != 0.0 { w / total } else { w };
                let v = w * f64::from(1u32 << PRECISION_BITS);
                (if v < 0.0 { v - 0.5 } else { v + 0.5 }) as i32
            })
            .collect();
        first.push(xmin);
        weights.push(fixed);
    }
    Taps { first, weights }
}

/// `(sum + ½) >> 22`, clamped to a byte (Pillow's `clip8`). Sums fit in i32, as in Pillow:
/// 255 × 2²² × Σ|w| < 2³¹ for the bicubic kernel (Σ|w| < 1.3).
pub fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// `img` resized to `width × height` with Pillow's bicubic filter.
pub fn bicubic_resize(img: &Rgb8, width: usize, height: usize) -> Rgb8 {
    if img.width == width && img.height == height {
        return img.clone();
    }
    let half = 1i32 << (PRECISION_BITS - 1);
    // Horizontal pass (every input row; Pillow skips rows the vertical pass never reads,
    // which changes nothing in the result). The three channels of a pixel in one loop.
    let tmp = if width != img.width {
        let h = taps(img.width, width, 0..width);
        let mut data = vec![0u8; width * img.height * 3];
        for (src, dst) in img.data.chunks_exact(img.width * 3).zip(data.chunks_exact_mut(width * 3)) {
            for (out, (&x0, w)) in dst.chunks_exact_mut(3).zip(h.first.iter().zip(&h.weights)) {
                let px = &src[x0 * 3..(x0 + w.len()) * 3];
                let (mut r, mut g, mut b) = (half, half, half);
                for (p, &k) in px.chunks_exact(3).zip(w) {
                    r += i32::from(p[0]) * k;
                    g += i32::from(p[1]) * k;
                    b += i32::from(p[2]) * k;
                }
                out.copy_from_slice(&[clip8(r), clip8(g), clip8(b)]);
            }
        }
        std::borrow::Cow::Owned(Rgb8 { width, height: img.height, data })
    } else {
        std::borrow::Cow::Borrowed(img)
    };
    if height == tmp.height {
        return tmp.into_owned();
    }
    let v = taps(tmp.height, height, 0..height);
    let row = tmp.width * 3;
    let mut data = vec![0u8; row * height];
    let mut acc = vec![0i32; row];
    for (dst, (&y0, w)) in data.chunks_exact_mut(row).zip(v.first.iter().zip(&v.weights)) {
        // Row by row: each tap's input row is read once, in order.
        acc.fill(half);
        for (j, &k) in w.iter().enumerate() {
            let src = &tmp.data[(y0 + j) * row..(y0 + j + 1) * row];
            for (a, &p) in acc.iter_mut().zip(src) {
                *a += i32::from(p) * k;
            }
        }
        for (o, &a) in dst.iter_mut().zip(&acc) {
            *o = clip8(a);
        }
    }
    Rgb8 { width: tmp.width, height, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_in_fixed_point_and_a_flat_image_stays_flat() {
        for (i, o) in [(1000, 224), (224, 224), (100, 224), (333, 7)] {
            let t = taps(i, o, 0..o);
            for w in &t.weights {
                let s: i64 = w.iter().map(|&k| i64::from(k)).sum();
                assert!((s - (1 << PRECISION_BITS)).abs() <= w.len() as i64, "{i}->{o}: {s}");
            }
        }
        let flat = Rgb8 { width: 37, height: 23, data: [10u8, 128, 250].repeat(37 * 23) };
        let out = bicubic_resize(&flat, 11, 50);
        assert_eq!((out.width, out.height), (11, 50));
        assert!(out.data.chunks_exact(3).all(|p| p == [10, 128, 250]), "{:?}", &out.data[..9]);
    }

    #[test]
    fn the_kernel_is_catmull_rom() {
        assert_eq!(bicubic(0.0), 1.0);
        assert_eq!(bicubic(1.0), 0.0);
        assert_eq!(bicubic(2.0), 0.0);
        assert!((bicubic(0.5) - 0.5625).abs() < 1e-12);
        assert!((bicubic(1.5) + 0.0625).abs() < 1e-12);
    }
}
