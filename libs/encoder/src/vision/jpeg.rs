//! JPEGs decoded and preprocessed on the GPU: nvJPEG ([`super::nvjpeg`]) decodes a group of
//! images into one device buffer of interleaved RGB, then two kernels run each image's
//! [`Plan`] (curator-image's CLIP preprocessing as data: Pillow's bicubic taps restricted to the
//! crop, and the byte → normalised value table) and write the image's rows of the pass's patch
//! matrix, as the host's `patches_into` would from the same pixel values. The host never sees
//! the pixels; what it sends is the compressed bytes, the taps and a descriptor per image.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use curator_image::plan::Plan;
use half::f16;

use super::nvjpeg::{NvImage, Nvjpeg};
use crate::EncoderError;
use crate::gpu::device::GpuDevice;
use crate::gpu::driver;
use crate::gpu::launch::{PREP_DESC, Prep};

/// Decoded bytes per nvJPEG call at most (a bigger image goes alone).
const RAW_BYTES: usize = 256 << 20;

/// Device bytes the decoding may hold besides the tower's (the decoded group, its resized rows,
/// and nvJPEG's own buffers), counted in the tower's budget.
pub(crate) const JPEG_BYTES: u64 = 512 << 20;

/// Images larger than this (pixels) take the CPU path (they would not fit [`RAW_BYTES`]).
const MAX_PIXELS: usize = RAW_BYTES / 3;

/// The tower's JPEG decoder and its device buffers (reused, grown as needed).
pub(crate) struct DeviceJpeg {
    nvjpeg: Nvjpeg,
    raw: Option<CudaSlice<u8>>,
    tmp: Option<CudaSlice<u8>>,
}

/// One image's slot of a pass, its bytes and its plan.
pub(crate) type Job<'a> = (usize, &'a [u8], Arc<Plan>);

/// The pass's geometry: crop side, patch side, rows per image (padded), tokens, row width.
pub(crate) type Geometry = (usize, usize, usize, usize, usize);

impl DeviceJpeg {
    pub(crate) fn open() -> Result<DeviceJpeg, String> {
        Ok(DeviceJpeg { nvjpeg: Nvjpeg::open()?, raw: None, tmp: None })
    }

    /// "hardware" or "GPU".
    pub(crate) fn backend(&self) -> &'static str {
        self.nvjpeg.backend
    }

    /// Whether nvJPEG's memory comes from our pools (no `cuMemFree` in a decode), so that the
    /// decoder is safe on a card other processes share.
    pub(crate) fn pooled(&self) -> bool {
        self.nvjpeg.pooled
    }

    /// Whether a JPEG of this header goes to the decoder (one the hardware decoder takes, of a
    /// size that fits a group).
    pub(crate) fn takes(h: &curator_image::jpeg::JpegHeader) -> bool {
        h.gpu_decodable() && h.width * h.height <= MAX_PIXELS
    }

    /// Decode `jobs` and write each one's slot of `patches` (`[slots × L × K]`), on stream `s`
    /// (which alone touches the decoder's buffers). The bytes must stay unchanged until `s`
    /// has run.
    pub(crate) fn preprocess(
        &mut self,
        dev: &GpuDevice,
        s: &Arc<CudaStream>,
        jobs: &[Job<'_>],
        table: &CudaSlice<f32>,
        geometry: Geometry,
        patches: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let sizes: Vec<usize> = jobs.iter().map(|j| raw_len(&j.2)).collect();
        let mut start = 0;
        for count in groups(&sizes, RAW_BYTES) {
            let end = start + count;
            self.group(dev, s, &jobs[start..end], sizes[start..end].iter().sum(), table, geometry, patches)?;
            start = end;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn group(
        &mut self,
        dev: &GpuDevice,
        s: &Arc<CudaStream>,
        jobs: &[Job<'_>],
        raw_bytes: usize,
        table: &CudaSlice<f32>,
        geometry: Geometry,
        patches: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let side = geometry.0;
        let PrepLayout { desc, coef, raw_bytes: raw_at, tmp_bytes: tmp_at } =
            prep_layout(jobs.iter().map(|(slot, _, plan)| (*slot, plan.as_ref())), side).map_err(EncoderError::Gpu)?;
        debug_assert_eq!(raw_at, raw_bytes);
        let raw = grown(s, &mut self.raw, raw_at)?;
        let (base, _sync) = raw.device_ptr_mut(s);
        let mut outs: Vec<NvImage> = Vec::with_capacity(jobs.len());
        let mut at = 0u64;
        for (_, _, plan) in jobs {
            let pitch = plan.src_width * 3;
            outs.push(NvImage {
                channel: [(base + at) as *mut u8, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut()],
                pitch: [pitch, 0, 0, 0],
            });
            at += (pitch * plan.src_height) as u64;
        }
        drop(_sync);
        let data: Vec<&[u8]> = jobs.iter().map(|(_, d, _)| *d).collect();
        dev.ctx().bind_to_thread().map_err(driver("bind context"))?;
        // SAFETY: each output is its image's `pitch × height` bytes inside `raw` (device memory
        // of this context, only touched on stream `s`: the kernels below read it after the
        // decode, the next group's decode writes it after them); the bytes are the caller's,
        // unchanged until the stream has run (the call ends with a copy back that waits for it).
        unsafe { self.nvjpeg.decode(&data, &mut outs, s.cu_stream() as *mut std::ffi::c_void) }.map_err(EncoderError::Gpu)?;
        let desc = s.clone_htod(&desc).map_err(driver("copy descriptors"))?;
        let coef = s.clone_htod(&coef).map_err(driver("copy taps"))?;
        let tmp = grown(s, &mut self.tmp, tmp_at)?;
        let raw = self.raw.as_ref().ok_or_else(|| EncoderError::Gpu("no decode buffer".into()))?;
        let prep = Prep { desc: &desc, coef: &coef, images: jobs.len() };
        dev.k.resize_rows(s, raw, &prep, side, tmp)?;
        dev.k.resize_patches(s, tmp, &prep, table, geometry, patches)
    }
}

/// What the preprocessing kernels (`resize_rows`, `resize_patches`) read for a group of images:
/// [`PREP_DESC`] values per image (where its decoded bytes start and their pitch, its width,
/// the plan's rows, where its taps are and how many per output, where its resized rows go, its
/// slot in the pass), the taps (one copy per image size), and the bytes the decoded images and
/// their resized rows take on the device.
#[derive(Debug, Clone, PartialEq)]
pub struct PrepLayout {
    pub desc: Vec<i64>,
    pub coef: Vec<i32>,
    pub raw_bytes: usize,
    pub tmp_bytes: usize,
}

/// The [`PrepLayout`] of `jobs` (slot, plan), in order, for a tower whose crop is `side` pixels
/// (a plan of another output size is refused). Public for the emulated kernels' test
/// (`tests/kernel_emulation.rs`), which runs the kernels on exactly what the device gets.
pub fn prep_layout<'p>(jobs: impl Iterator<Item = (usize, &'p Plan)>, side: usize) -> Result<PrepLayout, String> {
    let (mut desc, mut coef) = (Vec::new(), Vec::new());
    let mut taps_at: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
    let (mut raw_at, mut tmp_at) = (0usize, 0usize);
    for (slot, plan) in jobs {
        if plan.out_width != side || plan.out_height != side {
            return Err(format!("a plan of {}×{} for a tower of {side} px", plan.out_width, plan.out_height));
        }
        let (h_off, v_off) = *taps_at.entry((plan.src_width, plan.src_height)).or_insert_with(|| {
            let h_off = coef.len();
            coef.extend(&plan.horizontal.first);
            coef.extend(&plan.horizontal.weights);
            let v_off = coef.len();
            coef.extend(&plan.vertical.first);
            coef.extend(&plan.vertical.weights);
            (h_off, v_off)
        });
        let pitch = plan.src_width * 3;
        desc.extend(
            [raw_at, pitch, plan.src_width, plan.row_lo, plan.rows, h_off, plan.horizontal.k, v_off, plan.vertical.k, tmp_at, slot]
                .map(|v| v as i64),
        );
        raw_at += pitch * plan.src_height;
        tmp_at += plan.rows * side * 3;
    }
    debug_assert_eq!(desc.len() % PREP_DESC, 0);
    Ok(PrepLayout { desc, coef, raw_bytes: raw_at, tmp_bytes: tmp_at })
}

/// How many images each decode call takes, in order: as few calls as groups of at most `cap`
/// decoded bytes allow (an image larger than `cap` alone), their counts as even as the bytes
/// let them be: a pass's calls then have one or two batch sizes and no small remainder (a
/// call of two images after one of 43, as batches of 45 gave, costs a call's fixed overhead
/// for two images).
fn groups(sizes: &[usize], cap: usize) -> Vec<usize> {
    let mut fewest = Vec::new();
    let (mut n, mut bytes) = (0usize, 0usize);
    for &b in sizes {
        if n > 0 && bytes + b > cap {
            fewest.push(n);
            (n, bytes) = (0, 0);
        }
        n += 1;
        bytes += b;
    }
    if n > 0 {
        fewest.push(n);
    }
    // The same number of calls, their counts differing by one at most, if every call's bytes
    // still fit (a call of one image always does).
    let calls = fewest.len();
    let even: Vec<usize> = (0..calls).map(|i| sizes.len() / calls + usize::from(i < sizes.len() % calls)).collect();
    let mut at = 0;
    let fits = even.iter().all(|&c| {
        let bytes: usize = sizes[at..at + c].iter().sum();
        at += c;
        c == 1 || bytes <= cap
    });
    if fits { even } else { fewest }
}

/// Decoded bytes of an image (interleaved RGB, no row padding).
fn raw_len(plan: &Plan) -> usize {
    plan.src_width * 3 * plan.src_height
}

/// `buf`, reallocated when it holds fewer than `len` bytes.
fn grown<'b>(s: &Arc<CudaStream>, buf: &'b mut Option<CudaSlice<u8>>, len: usize) -> Result<&'b mut CudaSlice<u8>, EncoderError> {
    if buf.as_ref().is_none_or(|b| b.len() < len) {
        *buf = None;
        // SAFETY: every byte a kernel reads is written first (by the decode, or pass 1).
        *buf = Some(unsafe { s.alloc::<u8>(len.max(1)) }.map_err(driver("allocate decode buffers"))?);
    }
    buf.as_mut().ok_or_else(|| EncoderError::Gpu("no buffer".into()))
}

#[cfg(test)]
mod tests {
    use super::groups;

    #[test]
    fn decode_calls_are_few_and_even() {
        // 45 photos of which 43 fit a call: 23 + 22, not 43 + 2.
        assert_eq!(groups(&[6; 45], 258), vec![23, 22]);
        assert_eq!(groups(&[6; 256], 258), vec![43, 43, 43, 43, 42, 42]);
        // Sizes that vary: never over the cap, never more calls than needed.
        let sizes = [100, 1, 1, 1, 100, 1, 1, 100];
        let counts = groups(&sizes, 103);
        assert_eq!(counts.iter().sum::<usize>(), sizes.len());
        let mut at = 0;
        for &c in &counts {
            assert!(c == 1 || sizes[at..at + c].iter().sum::<usize>() <= 103, "{counts:?}");
            at += c;
        }
        assert_eq!(counts.len(), 3, "{counts:?}");
        // An image over the cap goes alone; nothing gives no call.
        assert_eq!(groups(&[500, 1, 1], 100), vec![1, 2]);
        assert!(groups(&[], 100).is_empty());
    }
}
