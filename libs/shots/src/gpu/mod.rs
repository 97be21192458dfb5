//! TransNetV2's convolution stacks on the GPU, the windows of a pass batched: the frames are
//! uploaded once per video and each window's frames gathered on the card; a block's spatial
//! convolutions are one im2col product, each temporal tap one strided-batched product over the
//! windows (a window's frames never see another window's), cuBLAS in f32 with TF32 tensor
//! cores (what PyTorch's cuDNN convolutions use by default). Only the last stack's map and the
//! per-stack means (`[t × 4608]` and `[t × 448]` per window) come back; the rest of the network
//! (similarity, histograms, `fc1`, heads: about 7 % of the arithmetic) runs on the CPU,
//! windows in parallel, through the same code as the CPU path (`cpu::head`).

use std::path::Path;

use cudarc::cublas::Gemm;
use cudarc::driver::{CudaSlice, LaunchConfig};
use curator_gpu::{CudaLib, RowMajor, SingleStream};

use crate::weights::{DILATIONS, STACKS, Weights};
use crate::{FRAME_BYTES, HEIGHT, ShotsError, WIDTH};

const KERNELS: &str = include_str!("kernels.cu");

/// Floats of im2col scratch at most (256 MB).
const COL_FLOATS: usize = 1 << 26;

curator_gpu::kernels! {
    /// Every kernel of `kernels.cu` (its signatures checked in this module's tests).
    pub(crate) struct Kernels {
        fn frames_to_float(frames: *const u8, index: *const i32, n: i64, frame_bytes: i32, out: *mut f32);
        fn im2col3x3(x: *const f32, row0: i64, rows: i64, h: i32, w: i32, c: i32, col: *mut f32);
        fn bn_act(x: *mut f32, scale: *const f32, shift: *const f32, c: i32, n: i64, relu: i32);
        fn residual_pool(last: *const f32, first: *const f32, h: i32, w: i32, c: i32, slots: i64, out: *mut f32);
        fn slot_means(x: *const f32, hw: i32, c: i32, slots: i64, out: *mut f32, ld: i32, offset: i32);
    }
}

fn gpu<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> ShotsError {
    move |e| ShotsError::Gpu(format!("{what}: {e:?}"))
}

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig::for_num_elems(n as u32)
}

/// One block's weights on the device.
struct GBlock {
    filters: usize,
    spatial: CudaSlice<f32>,
    temporal: Vec<Vec<CudaSlice<f32>>>,
    scale: CudaSlice<f32>,
    shift: CudaSlice<f32>,
    relu: bool,
}

/// A map on the device: `slots × h × w` rows of `c` channels.
struct DMap {
    h: usize,
    w: usize,
    c: usize,
    data: CudaSlice<f32>,
}

/// GPU 0 (the worker's `CUDA_VISIBLE_DEVICES` picks the card) with the stacks' weights.
pub struct Gpu {
    k: Kernels,
    stacks: Vec<Vec<GBlock>>,
    /// GPU 0, its stream and cuBLAS (dropped after the weights above).
    dev: SingleStream,
}

impl Gpu {
    /// Whether this machine has the CUDA libraries the GPU path loads.
    pub fn available() -> bool {
        curator_gpu::missing(&[CudaLib::Driver, CudaLib::Nvrtc, CudaLib::Cublas]).is_none()
    }

    /// Open GPU 0, compile (or read from `kernel_cache`) the kernels and upload the stacks.
    pub fn open(w: &Weights, kernel_cache: Option<&Path>) -> Result<Gpu, ShotsError> {
        let dev = SingleStream::open("transnetv2", KERNELS, "im2col3x3", kernel_cache).map_err(ShotsError::Gpu)?;
        let k = Kernels::load(&dev.module).map_err(|(name, e)| ShotsError::Gpu(format!("kernel {name}: {e:?}")))?;
        let stream = dev.stream.clone();
        let up = |v: &[f32]| stream.clone_htod(v).map_err(gpu("upload weights"));
        let mut stacks = Vec::with_capacity(STACKS);
        for blocks in &w.stacks {
            let mut out = Vec::with_capacity(blocks.len());
            for b in blocks {
                let temporal = b.temporal.iter().map(|taps| taps.iter().map(|t| up(t)).collect()).collect::<Result<_, _>>()?;
                out.push(GBlock {
                    filters: b.filters,
                    spatial: up(&b.spatial)?,
                    temporal,
                    scale: up(&b.scale)?,
                    shift: up(&b.shift)?,
                    relu: b.relu,
                });
            }
            stacks.push(out);
        }
        Ok(Gpu { k, stacks, dev })
    }

    /// A video's frames on the device, for [`Gpu::stacks`].
    pub fn upload(&self, frames: &[u8]) -> Result<CudaSlice<u8>, ShotsError> {
        self.dev.stream.clone_htod(frames).map_err(gpu("upload frames"))
    }

    /// The stacks of `index.len() / t` windows of `t` frames (`index`: the video frame of each
    /// window position, window after window): the last stack's maps `[slots × 4608]` and the
    /// per-stack means `[slots × 448]`, as `cpu::stacks` gives them window by window.
    pub fn stacks(&self, frames: &CudaSlice<u8>, index: &[i32], t: usize) -> Result<(Vec<f32>, Vec<f32>), ShotsError> {
        let slots = index.len();
        let windows = slots / t.max(1);
        debug_assert_eq!(windows * t, slots);
        let s = &self.dev.stream;
        let idx = s.clone_htod(index).map_err(gpu("upload window index"))?;
        let n = slots * FRAME_BYTES;
        let mut data = s.alloc_zeros::<f32>(n).map_err(gpu("alloc frames"))?;
        // SAFETY: one thread per output float (n); every index is a frame of `frames`.
        unsafe { self.k.frames_to_float(s, grid(n), frames, &idx, n as i64, FRAME_BYTES as i32, &mut data) }
            .map_err(gpu("frames_to_float"))?;
        let mut x = DMap { h: HEIGHT, w: WIDTH, c: 3, data };
        let features: usize = (0..STACKS).map(Weights::stack_channels).sum();
        let mut means = s.alloc_zeros::<f32>(slots * features).map_err(gpu("alloc means"))?;
        let mut at = 0;
        for blocks in &self.stacks {
            let first = self.block(&x, t, windows, &blocks[0])?;
            let mut last: Option<DMap> = None;
            for b in &blocks[1..] {
                last = Some(self.block(last.as_ref().unwrap_or(&first), t, windows, b)?);
            }
            let last = last.as_ref().unwrap_or(&first);
            let (h, w, c) = (first.h / 2, first.w / 2, first.c);
            let total = slots * h * w * c;
            let mut pooled = s.alloc_zeros::<f32>(total).map_err(gpu("alloc pooled"))?;
            // SAFETY: one thread per pooled float; `last` and `first` hold slots × (2h) × (2w) × c.
            unsafe {
                self.k.residual_pool(
                    s,
                    grid(total),
                    &last.data,
                    &first.data,
                    first.h as i32,
                    first.w as i32,
                    c as i32,
                    slots as i64,
                    &mut pooled,
                )
            }
            .map_err(gpu("residual_pool"))?;
            // SAFETY: one thread per (slot, channel); `means` rows are `features` wide.
            unsafe {
                self.k.slot_means(
                    s,
                    grid(slots * c),
                    &pooled,
                    (h * w) as i32,
                    c as i32,
                    slots as i64,
                    &mut means,
                    features as i32,
                    at as i32,
                )
            }
            .map_err(gpu("slot_means"))?;
            at += c;
            x = DMap { h, w, c, data: pooled };
        }
        let last = s.clone_dtoh(&x.data).map_err(gpu("download maps"))?;
        let means = s.clone_dtoh(&means).map_err(gpu("download means"))?;
        Ok((last, means))
    }

    /// One DilatedDCNNV2 block over every window's slots.
    fn block(&self, x: &DMap, t: usize, windows: usize, b: &GBlock) -> Result<DMap, ShotsError> {
        let s = &self.dev.stream;
        let hw = x.h * x.w;
        let pixels = windows * t * hw;
        let (mid, f) = (2 * b.filters, b.filters);
        let wide = 4 * mid;
        let k = 9 * x.c;
        let mut spatial = s.alloc_zeros::<f32>(pixels * wide).map_err(gpu("alloc spatial"))?;
        let chunk = pixels.min((COL_FLOATS / k).max(1));
        let mut col = s.alloc_zeros::<f32>(chunk * k).map_err(gpu("alloc im2col"))?;
        for row0 in (0..pixels).step_by(chunk) {
            let rows = chunk.min(pixels - row0);
            // SAFETY: one thread per im2col float of `rows` rows; `col` holds chunk × k.
            unsafe { self.k.im2col3x3(s, grid(rows * k), &x.data, row0 as i64, rows as i64, x.h as i32, x.w as i32, x.c as i32, &mut col) }
                .map_err(gpu("im2col3x3"))?;
            let cfg = RowMajor::new(rows, wide, k).config(1.0f32, 0.0);
            let a = col.slice(0..rows * k);
            let mut c = spatial.slice_mut(row0 * wide..(row0 + rows) * wide);
            // SAFETY: im2col rows × k times the spatial kernels k × wide into rows × wide.
            unsafe { self.dev.blas.gemm(cfg, &b.spatial, &a, &mut c) }.map_err(gpu("cuBLAS spatial"))?;
        }
        let out_c = 4 * f;
        let mut out = s.alloc_zeros::<f32>(pixels * out_c).map_err(gpu("alloc block"))?;
        let per_window = t * hw;
        for (branch, d) in DILATIONS.iter().enumerate() {
            for (tap, w) in b.temporal[branch].iter().enumerate() {
                // Output frame i of a window reads its frame i + (tap − 1)·d.
                let shift = (tap as isize - 1) * *d as isize;
                let t0 = (-shift).max(0) as usize;
                let t1 = (t as isize - shift.max(0)).max(0) as usize;
                if t0 >= t1 {
                    continue;
                }
                let rows = (t1 - t0) * hw;
                let a_off = (t0 as isize + shift) as usize * hw * wide + branch * mid;
                let c_off = t0 * hw * out_c + branch * f;
                let cfg = RowMajor::new(rows, f, mid).lda(wide).ldc(out_c).strided(
                    1.0f32,
                    1.0,
                    windows,
                    [per_window * wide, 0, per_window * out_c],
                );
                let a = spatial.slice(a_off..);
                let mut c = out.slice_mut(c_off..);
                // SAFETY: window i's rows start per_window · i rows further in both maps and stay
                // inside its own frames (t0 .. t1 shifted by `shift` is within 0 .. t).
                unsafe { self.dev.blas.gemm_strided_batched(cfg, w, &a, &mut c) }.map_err(gpu("cuBLAS temporal"))?;
            }
        }
        let n = pixels * out_c;
        // SAFETY: one thread per float of `out`; scale and shift hold out_c values.
        unsafe { self.k.bn_act(s, grid(n), &mut out, &b.scale, &b.shift, out_c as i32, n as i64, b.relu as i32) }.map_err(gpu("bn_act"))?;
        Ok(DMap { h: x.h, w: x.w, c: out_c, data: out })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernel_declarations_match_the_cuda_source() {
        curator_gpu::check_signatures(super::KERNELS, super::Kernels::SIGNATURES).unwrap();
    }

    #[test]
    fn kernels_compile_with_nvrtc() {
        curator_gpu::testing::assert_kernels_compile("transnetv2", super::KERNELS, super::Kernels::SIGNATURES);
    }
}
