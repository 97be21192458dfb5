//! CLIP's preprocessing of one image size as data, computed once per size: the taps of the two
//! resize passes restricted to the pixels the centre crop keeps, and the table from a byte to
//! its normalised value. [`Plan::apply`] runs it on the CPU (it is what
//! [`Processor::pixel_values_into`] does for every image the crop does not pad); the GPU path
//! (curator-encoder's `vision::gpu`, kernels `resize_rows` and `resize_patches`) runs the same
//! data on images nvJPEG decoded, one thread per output value, with the same integer sums.
//!
//! Restricting the passes to the crop changes no value: an output pixel of Pillow's resize
//! depends only on its own taps, so the columns and rows the crop drops need not be computed.

use crate::Rgb8;
use crate::clip::Processor;
use crate::resize::{PRECISION_BITS, Taps, clip8, taps};

/// One axis of a plan: for each output index the first input index, and `k` fixed-point weights
/// each (zero past the taps Pillow uses; an index past the input is clamped, its weight zero).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub first: Vec<i32>,
    pub k: usize,
    pub weights: Vec<i32>,
}

impl Axis {
    /// `taps` padded to one length, their first indices less `base`.
    fn from_taps(t: &Taps, base: usize) -> Axis {
        let k = t.weights.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut weights = vec![0; t.weights.len() * k];
        for (dst, w) in weights.chunks_exact_mut(k).zip(&t.weights) {
            dst[..w.len()].copy_from_slice(w);
        }
        Axis { first: t.first.iter().map(|&f| (f - base) as i32).collect(), k, weights }
    }

    /// Output `o`'s taps: (input index clamped below `len`, weight).
    fn taps(&self, o: usize, len: usize) -> impl Iterator<Item = (usize, i32)> + '_ {
        let first = self.first[o] as usize;
        self.weights[o * self.k..(o + 1) * self.k].iter().enumerate().map(move |(j, &w)| ((first + j).min(len - 1), w))
    }
}

/// Pillow's rounding offset, where every sum starts.
const HALF: i32 = 1 << (PRECISION_BITS - 1);

/// CLIP's preprocessing of a `src_width × src_height` image whose crop needs no padding.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub src_width: usize,
    pub src_height: usize,
    /// The output: `out_height × out_width` pixels.
    pub out_width: usize,
    pub out_height: usize,
    /// The input rows the vertical pass reads: `[row_lo, row_lo + rows)`.
    pub row_lo: usize,
    pub rows: usize,
    /// The horizontal pass, per output column (indices into the source row).
    pub horizontal: Axis,
    /// The vertical pass, per output row (indices into the horizontal pass's `rows` rows).
    pub vertical: Axis,
}

impl Processor {
    /// The plan for images of `width × height`; `None` where the crop would pad (the image,
    /// resized, is smaller than the crop: [`Processor::pixel_values_into`] handles that).
    pub fn plan(&self, width: usize, height: usize) -> Option<Plan> {
        if width == 0 || height == 0 {
            return None;
        }
        let (rh, rw) = self.resized_size(height, width);
        let (ch, cw) = self.crop.unwrap_or((rh, rw));
        if rh < ch || rw < cw {
            return None;
        }
        let (top, left) = ((rh - ch) / 2, (rw - cw) / 2);
        // Only the outputs the crop keeps.
        let (h, v) = (taps(width, rw, left..left + cw), taps(height, rh, top..top + ch));
        let row_lo = v.first.iter().copied().min()?;
        let row_hi = v.first.iter().zip(&v.weights).map(|(f, w)| f + w.len()).max()?;
        Some(Plan {
            src_width: width,
            src_height: height,
            out_width: cw,
            out_height: ch,
            row_lo,
            rows: row_hi - row_lo,
            horizontal: Axis::from_taps(&h, 0),
            vertical: Axis::from_taps(&v, row_lo),
        })
    }

    /// The normalised value of each byte, per channel: `[3 × 256]` (rescaled in f64 then f32,
    /// less the mean, over the standard deviation, as transformers computes it).
    pub fn table(&self) -> Vec<f32> {
        let mut t = Vec::with_capacity(3 * 256);
        for c in 0..3 {
            for b in 0..=255u8 {
                let mut v = match self.rescale_factor {
                    Some(f) => (f64::from(b) * f) as f32,
                    None => f32::from(b),
                };
                if let Some((mean, std)) = &self.mean_std {
                    v = (v - mean[c]) / std[c];
                }
                t.push(v);
            }
        }
        t
    }
}

/// Taps of the horizontal pass come in whole groups of this many: the i32 lanes of a 256-bit
/// vector.
const GROUP: usize = 8;

/// The horizontal pass laid out for contiguous dot products: output pixel `x` is, per channel,
/// the sum over one window of a source row's pixels, `[start[x], start[x] + taps)`, times
/// `weights[x * taps..(x + 1) * taps]` (zero where no tap falls). A window is a whole number
/// of [`GROUP`]s and lies inside the row (moved left at the row's end, the weights with it), so
/// there is no index to clamp and the sums are exactly the taps'.
struct Windows {
    start: Vec<usize>,
    taps: usize,
    weights: Vec<i32>,
}

impl Windows {
    /// `None` where a window would not fit in a row (images a few pixels wide).
    fn new(axis: &Axis, width: usize) -> Option<Windows> {
        let taps = axis.k.next_multiple_of(GROUP);
        if taps > width {
            return None;
        }
        let outputs = axis.first.len();
        let (mut start, mut weights) = (Vec::with_capacity(outputs), vec![0; outputs * taps]);
        for (x, w) in weights.chunks_exact_mut(taps).enumerate() {
            let first = axis.first[x] as usize;
            let at = first.min(width - taps);
            // A tap with a weight lies inside the image, so inside the window; the axis' zero
            // padding past Pillow's taps may not, and adds nothing.
            for (j, &k) in axis.weights[x * axis.k..(x + 1) * axis.k].iter().enumerate() {
                if k != 0 {
                    w[first - at + j] = k;
                }
            }
            start.push(at);
        }
        Some(Windows { start, taps, weights })
    }

    /// Every row, portably: `tmp`'s rows (`out_row` bytes each) from the image's rows from `row_lo`.
    fn rows(&self, img: &Rgb8, row_lo: usize, tmp: &mut [u8], out_row: usize) {
        let src_row = img.width * 3;
        for (r, dst) in tmp.chunks_exact_mut(out_row).enumerate() {
            let src = &img.data[(row_lo + r) * src_row..(row_lo + r + 1) * src_row];
            for ((out, &at), w) in dst.chunks_exact_mut(3).zip(&self.start).zip(self.weights.chunks_exact(self.taps)) {
                let mut acc = [HALF; 3];
                for (px, &k) in src[at * 3..(at + self.taps) * 3].chunks_exact(3).zip(w) {
                    for (a, &p) in acc.iter_mut().zip(px) {
                        *a += i32::from(p) * k;
                    }
                }
                out.copy_from_slice(&acc.map(clip8));
            }
        }
    }

    /// [`Windows::rows`] with AVX2: per group of 8 pixels, their 24 bytes split into the three
    /// channels (byte shuffles), widened to i32 and multiplied by the 8 weights; the three sums
    /// reduced together, shifted and clamped to bytes by saturating packs (`clip8`'s values).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn rows_avx2(&self, img: &Rgb8, row_lo: usize, tmp: &mut [u8], out_row: usize) {
        use std::arch::x86_64::*;
        // Where each channel's bytes of a group lie: in its first 16 bytes, and in its last 8
        // (-1: none, pshufb writes a zero).
        const LO: [[i8; 16]; 3] = [
            [0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1],
            [1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1],
            [2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1],
        ];
        const HI: [[i8; 16]; 3] = [
            [-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1],
            [-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1],
            [-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1],
        ];
        let mask = |m: &[i8; 16]| {
            _mm_setr_epi8(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15])
        };
        let (lo, hi) = (LO.map(|m| mask(&m)), HI.map(|m| mask(&m)));
        let src_row = img.width * 3;
        for (r, dst) in tmp.chunks_exact_mut(out_row).enumerate() {
            let src = &img.data[(row_lo + r) * src_row..(row_lo + r + 1) * src_row];
            for ((out, &at), w) in dst.chunks_exact_mut(3).zip(&self.start).zip(self.weights.chunks_exact(self.taps)) {
                let window = &src[at * 3..(at + self.taps) * 3];
                let mut acc = [_mm256_setzero_si256(); 3];
                for (px, ws) in window.chunks_exact(3 * GROUP).zip(w.chunks_exact(GROUP)) {
                    // SAFETY: `px` is 24 bytes: 16 read from its start, 8 from its 16th byte;
                    // `ws` is 8 i32 (unaligned loads).
                    let (first, last, k) = unsafe {
                        (
                            _mm_loadu_si128(px.as_ptr().cast()),
                            _mm_loadl_epi64(px.as_ptr().add(16).cast()),
                            _mm256_loadu_si256(ws.as_ptr().cast()),
                        )
                    };
                    for c in 0..3 {
                        let bytes = _mm_or_si128(_mm_shuffle_epi8(first, lo[c]), _mm_shuffle_epi8(last, hi[c]));
                        acc[c] = _mm256_add_epi32(acc[c], _mm256_mullo_epi32(_mm256_cvtepu8_epi32(bytes), k));
                    }
                }
                // [r g b 0] from the three vectors' lanes, plus Pillow's rounding offset.
                let rg = _mm256_hadd_epi32(acc[0], acc[1]);
                let b0 = _mm256_hadd_epi32(acc[2], _mm256_setzero_si256());
                let rgb = _mm256_hadd_epi32(rg, b0);
                let sum = _mm_add_epi32(_mm256_castsi256_si128(rgb), _mm256_extracti128_si256::<1>(rgb));
                let shifted = _mm_srai_epi32::<{ PRECISION_BITS as i32 }>(_mm_add_epi32(sum, _mm_set1_epi32(HALF)));
                let bytes = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(shifted, shifted), _mm_setzero_si128())).to_le_bytes();
                out.copy_from_slice(&bytes[..3]);
            }
        }
    }
}

impl Plan {
    /// The horizontal pass: the plan's `rows` rows, `out_width` pixels each (RGB bytes).
    pub fn horizontal_pass(&self, img: &Rgb8) -> Vec<u8> {
        let w = self.out_width;
        let mut tmp = vec![0u8; self.rows * w * 3];
        let Some(windows) = Windows::new(&self.horizontal, img.width) else {
            self.horizontal_taps(img, &mut tmp);
            return tmp;
        };
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { windows.rows_avx2(img, self.row_lo, &mut tmp, w * 3) };
            return tmp;
        }
        windows.rows(img, self.row_lo, &mut tmp, w * 3);
        tmp
    }

    /// [`Plan::horizontal_pass`] tap by tap, each index clamped: what the windows compute, the
    /// path of images too narrow for them, and the baseline of `benches/preprocess.rs`.
    pub fn horizontal_taps(&self, img: &Rgb8, tmp: &mut [u8]) {
        for (r, dst) in tmp.chunks_exact_mut(self.out_width * 3).enumerate() {
            let src = &img.data[(self.row_lo + r) * img.width * 3..(self.row_lo + r + 1) * img.width * 3];
            for (x, out) in dst.chunks_exact_mut(3).enumerate() {
                let mut acc = [HALF; 3];
                for (i, k) in self.horizontal.taps(x, img.width) {
                    for (a, &p) in acc.iter_mut().zip(&src[i * 3..i * 3 + 3]) {
                        *a += i32::from(p) * k;
                    }
                }
                out.copy_from_slice(&acc.map(clip8));
            }
        }
    }

    /// The model's input for `img` (`[3 × out_height × out_width]`, channels first) into `out`,
    /// `table` being [`Processor::table`]: what `resize_patches` computes on the GPU.
    pub fn apply(&self, img: &Rgb8, table: &[f32], out: &mut Vec<f32>) {
        let tmp = self.horizontal_pass(img);
        let (row, plane) = (self.out_width * 3, self.out_width * self.out_height);
        out.clear();
        out.resize(3 * plane, 0.0);
        let mut acc = vec![0i32; row];
        for y in 0..self.out_height {
            // Row by row: each tap's input row is read once, in order.
            acc.fill(HALF);
            for (r, k) in self.vertical.taps(y, self.rows) {
                for (a, &p) in acc.iter_mut().zip(&tmp[r * row..(r + 1) * row]) {
                    *a += i32::from(p) * k;
                }
            }
            for (x, px) in acc.chunks_exact(3).enumerate() {
                for (c, &a) in px.iter().enumerate() {
                    out[c * plane + y * self.out_width + x] = table[c * 256 + usize::from(clip8(a))];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(width: usize, height: usize, seed: u32) -> Rgb8 {
        let mut s = seed;
        let data = (0..width * height * 3)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 24) as u8
            })
            .collect();
        Rgb8 { width, height, data }
    }

    /// The plan's values equal the full resize, crop and normalisation for every shape that
    /// needs no padding: shrinking, enlarging, one axis unchanged, exact sizes, odd offsets.
    #[test]
    fn the_plan_equals_resize_crop_and_normalise() {
        let p = Processor::clip(24);
        let table = p.table();
        for (w, h) in [(97, 61), (61, 97), (24, 24), (24, 40), (50, 24), (13, 19), (300, 25), (25, 301), (1920 / 8, 1080 / 8)] {
            let img = noise(w, h, (w * 31 + h) as u32);
            let plan = p.plan(w, h).expect("no padding");
            let mut planned = Vec::new();
            plan.apply(&img, &table, &mut planned);
            let mut full = Vec::new();
            p.full_pixel_values_into(&img, &mut full);
            assert_eq!(planned, full, "{w}x{h}");
            assert!(plan.rows <= h && plan.row_lo + plan.rows <= h, "{w}x{h}: rows {} + {}", plan.row_lo, plan.rows);
        }
    }

    /// The windows (contiguous dot products, AVX2 where the CPU has it, and the portable build of
    /// the same code) give the taps' bytes: windows moved left at the row's end, taps whose
    /// weights round to zero, images too narrow for a window (the taps' path itself).
    #[test]
    fn the_windowed_horizontal_pass_equals_the_taps() {
        let mut shapes = vec![(1920, 1080), (1080, 1920), (640, 480), (225, 224), (4000, 300), (5, 300), (9, 40), (8, 8), (300, 7)];
        shapes.extend((0..40).map(|i| (20 + i * 37 % 500, 30 + i * 53 % 400)));
        for size in [224, 24, 336] {
            let p = Processor::clip(size);
            for &(w, h) in &shapes {
                let Some(plan) = p.plan(w, h) else { continue };
                let img = noise(w, h, (w * 7 + h) as u32);
                let mut taps = vec![0u8; plan.rows * plan.out_width * 3];
                plan.horizontal_taps(&img, &mut taps);
                assert_eq!(plan.horizontal_pass(&img), taps, "{w}x{h} to {size}");
                if let Some(windows) = Windows::new(&plan.horizontal, w) {
                    let mut portable = vec![0u8; taps.len()];
                    windows.rows(&img, plan.row_lo, &mut portable, plan.out_width * 3);
                    assert_eq!(portable, taps, "{w}x{h} to {size}, portable");
                }
            }
        }
    }

    #[test]
    fn a_crop_that_pads_has_no_plan() {
        let p = Processor::from_json(r#"{"size": {"height": 20, "width": 20}, "crop_size": 24}"#, 24).expect("config");
        assert_eq!(p.plan(100, 100), None);
        assert!(Processor::clip(24).plan(0, 10).is_none());
    }
}
