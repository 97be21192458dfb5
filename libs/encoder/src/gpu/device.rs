//! One GPU opened for a model: the context and its one stream, cuBLAS with its workspace, the
//! compiled kernels; and the weights' upload (matrices in fp16, vectors in f32). What the text
//! encoder ([`super::GpuModel`]) and the vision tower (`crate::vision::gpu`) share.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use cudarc::cublas::{CudaBlas, Gemm};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use curator_gpu::RowMajor;
use half::f16;

use super::launch::Kernels;
use super::{BLAS_WORKSPACE, GLayer, GLinear, GNorm, driver, kernels_ptx};
use crate::EncoderError;
use crate::weights::{Elem, Layer, Linear, Norm};

/// GPU 0 (the worker's `CUDA_VISIBLE_DEVICES` picks the card), ready to run kernels on a
/// (non-blocking) stream of its own.
pub(crate) struct GpuDevice {
    ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// Dropped before its workspace (fields drop in order).
    pub(crate) blas: CudaBlas,
    _blas_workspace: CudaSlice<u8>,
    pub(crate) k: Kernels,
    /// How the kernels were obtained ("compiled", "cached").
    pub(crate) kernels_from: &'static str,
    /// Seconds the driver took to create the context (the part of a worker's start-up that
    /// the driver may serialise between processes).
    pub(crate) context_s: f64,
    /// Device milliseconds per step of the forward passes, when `CURATOR_ENCODER_PROFILE` is
    /// set (events between the steps; for benchmarks, not for runs).
    profile: Option<Mutex<BTreeMap<&'static str, f64>>>,
}

/// Events between the steps of a group of passes (profiling only).
pub(crate) type Marks = Option<Vec<(&'static str, cudarc::driver::CudaEvent)>>;

/// Which CUDA library this machine lacks (the driver, NVRTC, cuBLAS), if any: without one
/// there is no GPU path to try.
pub(crate) fn cuda_missing() -> Option<&'static str> {
    use curator_gpu::CudaLib;
    curator_gpu::require(&[CudaLib::Driver, CudaLib::Nvrtc, CudaLib::Cublas]).err()
}

impl GpuDevice {
    /// The device's context.
    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Open GPU 0 and load the kernels (from `kernel_cache` when an earlier process compiled
    /// them); [`EncoderError::NoGpu`] where the driver, NVRTC or cuBLAS is missing.
    pub(crate) fn open(kernel_cache: Option<&Path>) -> Result<GpuDevice, EncoderError> {
        if let Some(missing) = cuda_missing() {
            return Err(EncoderError::NoGpu(missing.into()));
        }
        let opening = std::time::Instant::now();
        let ctx = CudaContext::new(0).map_err(|e| EncoderError::NoGpu(format!("cannot open GPU 0: {e:?}")))?;
        let context_s = opening.elapsed().as_secs_f64();
        // SAFETY: a model uses one stream for everything, so no buffer is ever shared between
        // streams and cudarc's cross-stream events are not needed.
        unsafe { ctx.disable_event_tracking() };
        // A stream of its own, not the legacy default stream: libraries that copy on the legacy
        // stream (nvJPEG does) would otherwise wait for every pass queued here, and the
        // vision tower's second stream could not overlap its decodes with the forward passes.
        let stream = ctx.new_stream().map_err(driver("create a stream"))?;
        let blas = CudaBlas::new(stream.clone()).map_err(driver("cuBLAS"))?;
        // cuBLAS' own workspace, as PyTorch gives it on Hopper (its faster kernels need one).
        let blas_workspace = stream.alloc_zeros::<u8>(BLAS_WORKSPACE).map_err(driver("cuBLAS workspace"))?;
        {
            let (ptr, _record) = blas_workspace.device_ptr(&stream);
            // SAFETY: the buffer is BLAS_WORKSPACE bytes on this handle's device and stream, and
            // outlives the handle (`blas` is dropped before `_blas_workspace`).
            unsafe { cudarc::cublas::sys::cublasSetWorkspace_v2(*blas.handle(), ptr as *mut std::ffi::c_void, BLAS_WORKSPACE) }
                .result()
                .map_err(driver("cuBLAS workspace"))?;
        }
        let arch = ctx.compute_capability().map_err(driver("compute capability"))?;
        let (ptx, kernels_from) = kernels_ptx(kernel_cache, arch)?;
        let module = ctx.load_module(ptx).map_err(driver("load kernels"))?;
        let k = Kernels::load(&module)?;
        let profile = std::env::var_os("CURATOR_ENCODER_PROFILE").map(|_| Mutex::new(BTreeMap::new()));
        Ok(GpuDevice { ctx, stream, blas, _blas_workspace: blas_workspace, k, kernels_from, context_s, profile })
    }

    /// Marks for a group of passes: `Some` when profiling.
    pub(crate) fn marks(&self) -> Marks {
        self.profile.as_ref().map(|_| Vec::new())
    }

    /// Record that step `name` starts here (profiling only).
    pub(crate) fn mark(&self, marks: &mut Marks, name: &'static str) -> Result<(), EncoderError> {
        if let Some(m) = marks {
            let flags = cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
            m.push((name, self.stream.record_event(Some(flags)).map_err(driver("event"))?));
        }
        Ok(())
    }

    /// Add a finished group's time per step (its last mark is `end`) to the totals.
    pub(crate) fn add_profile(&self, marks: Marks) {
        if let (Some(marks), Some(profile)) = (marks, &self.profile)
            && let Ok(mut totals) = profile.lock()
        {
            for w in marks.windows(2) {
                if w[0].0 != "end" {
                    *totals.entry(w[0].0).or_default() += f64::from(w[0].1.elapsed_ms(&w[1].1).unwrap_or(0.0));
                }
            }
        }
    }

    /// Add the host time since `start` to step `name` (profiling only: a call that blocks
    /// the host, waiting for the device, shows here).
    pub(crate) fn add_host_time(&self, name: &'static str, start: std::time::Instant) {
        if let Some(Ok(mut totals)) = self.profile.as_ref().map(|p| p.lock()) {
            *totals.entry(name).or_default() += start.elapsed().as_secs_f64() * 1e3;
        }
    }

    /// Device milliseconds per step so far (empty unless `CURATOR_ENCODER_PROFILE` is set).
    pub(crate) fn profile(&self) -> Vec<(String, f64)> {
        let Some(Ok(p)) = self.profile.as_ref().map(|p| p.lock()) else { return Vec::new() };
        p.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// `y[t × out] = x[t × inp] Wᵀ` (no bias: the next kernel adds it).
    pub(crate) fn matmul(&self, l: &GLinear, x: &CudaSlice<f16>, t: usize, y: &mut CudaSlice<f16>) -> Result<(), EncoderError> {
        debug_assert!(x.len() >= t * l.inp && y.len() >= t * l.out);
        let cfg = RowMajor::rows_dot(t, l.out, l.inp).config(f16::ONE, f16::ZERO);
        // SAFETY: W is out × inp, x holds t × inp and y t × out, all row-major (the workspace
        // holds at least the pass's tokens).
        unsafe { self.blas.gemm(cfg, &l.w, x, y) }.map_err(driver("cuBLAS gemm"))
    }
}

/// `v` on the device in fp16 (copied as it is when it is fp16 on the host already).
pub(crate) fn upload_half<M: Elem>(stream: &Arc<CudaStream>, v: &[M]) -> Result<CudaSlice<f16>, EncoderError> {
    stream.clone_htod(&*M::narrow(v)).map_err(driver("upload weights"))
}

pub(crate) fn upload_linear<M: Elem>(stream: &Arc<CudaStream>, l: &Linear<M>) -> Result<GLinear, EncoderError> {
    Ok(GLinear { w: upload_half(stream, &l.w)?, b: stream.clone_htod(&l.b).map_err(driver("upload weights"))?, out: l.out, inp: l.inp })
}

pub(crate) fn upload_norm(stream: &Arc<CudaStream>, n: &Norm) -> Result<GNorm, EncoderError> {
    let full = |v: &[f32]| stream.clone_htod(v).map_err(driver("upload weights"));
    Ok(GNorm { gamma: full(&n.gamma)?, beta: full(&n.beta)? })
}

/// What the query and key biases add to DeBERTa's position terms, per (head, table row), over
/// the score divisor `scale`: `[heads, rows]` (one zero for a model without the terms). The
/// kernels' tables are products of the QKV product before its bias, and `(q + b_q)·p_k +
/// (k + b_k)·p_q = q·p_k + k·p_q + (b_q·p_k + b_k·p_q)`, the last part one value per head and
/// row (both terms of a score read the same row). `pos_key` / `pos_query`: `[rows, H]`, empty
/// when the model has no such term; `bq`, `bk`: `[H]`.
pub(crate) fn rel_bias(pos_key: &[f32], bq: &[f32], pos_query: &[f32], bk: &[f32], heads: usize, scale: f32) -> Vec<f32> {
    let h = bq.len();
    let dh = h / heads.max(1);
    let rows = pos_key.len().max(pos_query.len()) / h.max(1);
    let mut out = vec![0f32; (heads * rows).max(1)];
    for (pos, bias) in [(pos_key, bq), (pos_query, bk)] {
        if pos.is_empty() {
            continue;
        }
        for head in 0..heads {
            let b = &bias[head * dh..(head + 1) * dh];
            for r in 0..rows {
                let p = &pos[r * h + head * dh..r * h + (head + 1) * dh];
                out[head * rows + r] += b.iter().zip(p).map(|(x, y)| x * y).sum::<f32>() / scale;
            }
        }
    }
    out
}

/// One head's row of `dh` values (a multiple of 16) in the order the fused attention's lanes
/// read them as the tensor cores' B operand: lane `tig` (0..4) of each group of four uses, for
/// k-step `s`, the pairs of dimensions `16·s + 2·tig` and `16·s + 2·tig + 8`; stored here as
/// the `dh / 4` consecutive values at `tig · dh / 4` (step by step, the two pairs in turn), so
/// that a lane loads all its steps' words with 16-byte loads.
pub fn fragment_order(row: &[f32]) -> Vec<f32> {
    let dh = row.len();
    let mut out = vec![0f32; dh];
    for pair in 0..dh / 2 {
        let (s, half, tig) = (pair / 8, (pair % 8) / 4, pair % 4);
        let at = tig * (dh / 8) + 2 * s + half;
        out[2 * at] = row[2 * pair];
        out[2 * at + 1] = row[2 * pair + 1];
    }
    out
}

/// A layer on the device: Q, K and V as one `[3H, H]` product; DeBERTa's projected relative
/// embeddings as `[heads, 2·span, head_dim]` (one matrix per head for cuBLAS), and what the
/// query and key biases add to each position term (`rel_scale` divides every score).
pub(crate) fn upload_layer<M: Elem>(stream: &Arc<CudaStream>, l: &Layer<M>, heads: usize, rel_scale: f32) -> Result<GLayer, EncoderError> {
    let qkv = Linear {
        w: [l.query.w.as_slice(), &l.key.w, &l.value.w].concat(),
        b: [l.query.b.as_slice(), &l.key.b, &l.value.b].concat(),
        out: 3 * l.query.out,
        inp: l.query.inp,
    };
    let h = l.query.out;
    let dh = h / heads;
    let per_head = |pos: &[f32], frag: bool| -> Result<Option<CudaSlice<f16>>, EncoderError> {
        if pos.is_empty() {
            return Ok(None);
        }
        let rows = pos.len() / h;
        let mut out = Vec::with_capacity(pos.len());
        for head in 0..heads {
            for r in 0..rows {
                let row = &pos[r * h + head * dh..r * h + (head + 1) * dh];
                if frag {
                    out.extend(fragment_order(row));
                } else {
                    out.extend_from_slice(row);
                }
            }
        }
        upload_half(stream, &out).map(Some)
    };
    let rel_bias = rel_bias(&l.pos_key, &l.query.b, &l.pos_query, &l.key.b, heads, rel_scale);
    Ok(GLayer {
        rel_bias: stream.clone_htod(&rel_bias).map_err(driver("upload weights"))?,
        pos_key: per_head(&l.pos_key, false)?,
        pos_query: per_head(&l.pos_query, false)?,
        pos_key_frag: per_head(&l.pos_key, true)?,
        pos_query_frag: per_head(&l.pos_query, true)?,
        qkv: upload_linear(stream, &qkv)?,
        attn_out: upload_linear(stream, &l.attn_out)?,
        attn_norm: upload_norm(stream, &l.attn_norm)?,
        up: upload_linear(stream, &l.up)?,
        down: upload_linear(stream, &l.down)?,
        out_norm: upload_norm(stream, &l.out_norm)?,
    })
}

#[cfg(test)]
mod tests {
    use super::{fragment_order, rel_bias};

    #[test]
    fn fragment_order_gives_each_lane_its_pairs_in_turn() {
        let row: Vec<f32> = (0..64).map(|x| x as f32).collect();
        let f = fragment_order(&row);
        // Lane tig: steps s = 0..4, each the pair at 16s + 2tig, then the one 8 further.
        for tig in 0..4 {
            let mine = &f[tig * 16..(tig + 1) * 16];
            let want: Vec<f32> =
                (0..4).flat_map(|s| [16 * s + 2 * tig, 16 * s + 2 * tig + 8]).flat_map(|d| [d as f32, d as f32 + 1.0]).collect();
            assert_eq!(mine, want.as_slice(), "lane {tig}");
        }
        let mut sorted = f.clone();
        sorted.sort_by(f32::total_cmp);
        assert_eq!(sorted, row, "a permutation");
    }

    /// Position terms made from Q and K without their biases, plus `rel_bias`, are the terms
    /// made from Q and K with them, for every head and table row.
    #[test]
    fn the_bias_part_of_the_position_terms_is_split_off_exactly() {
        let (heads, dh, rows, scale) = (3, 4, 5, 2.5f32);
        let h = heads * dh;
        let val =
            |seed: usize, n: usize| -> Vec<f32> { (0..n).map(|i| (((i * 7919 + seed * 104_729) % 97) as f32 - 48.0) / 31.0).collect() };
        let (pk, pq, bq, bk, q, k) = (val(1, rows * h), val(2, rows * h), val(3, h), val(4, h), val(5, h), val(6, h));
        let bias = rel_bias(&pk, &bq, &pq, &bk, heads, scale);
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        for head in 0..heads {
            let cols = head * dh..(head + 1) * dh;
            let with = |x: &[f32], b: &[f32]| -> Vec<f32> { x[cols.clone()].iter().zip(&b[cols.clone()]).map(|(x, b)| x + b).collect() };
            for r in 0..rows {
                let row = |p: &[f32]| p[r * h + head * dh..r * h + (head + 1) * dh].to_vec();
                let want = (dot(&with(&q, &bq), &row(&pk)) + dot(&with(&k, &bk), &row(&pq))) / scale;
                let got = (dot(&q[cols.clone()], &row(&pk)) + dot(&k[cols.clone()], &row(&pq))) / scale + bias[head * rows + r];
                assert!((want - got).abs() < 1e-4, "head {head} row {r}: {want} vs {got}");
            }
        }
        // Without the content→position term only the key bias counts; without either, nothing.
        let only_p2c = rel_bias(&[], &bq, &pq, &bk, heads, scale);
        assert!((only_p2c[rows + 1] - dot(&bk[dh..2 * dh], &pq[h + dh..h + 2 * dh]) / scale).abs() < 1e-5);
        assert_eq!(rel_bias(&[], &bq, &[], &bk, heads, scale), vec![0.0]);
    }
}
