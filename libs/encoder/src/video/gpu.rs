//! InternVideo2's tower on the GPU, the clips of a pass together: f32 on the card, cuBLAS
//! products with TF32 tensor cores, the row operations in `kernels.cu`. The host cuts each
//! clip's patches (a reshuffle, with a zero row where the class token goes) and uploads them
//! once; the patch product adds onto a table of positions (the class token and the patch bias
//! folded in); per block: RMS norm, the QKV product, the queries' and keys' RMS norms in place,
//! per clip the heads' scores as one strided-batched product, a row softmax and the heads'
//! contexts as another, the output product, its bias and layer scale into the residual stream;
//! the MLP likewise with the exact GELU fused into its bias. The attention pool runs on the card
//! as well (the clips' token means, layer norms, the three projections, one query per head).
//! Only the `proj_dim`-wide embeddings come back.

use std::path::Path;

use cudarc::cublas::Gemm;
use cudarc::driver::{CudaSlice, LaunchConfig};
use curator_gpu::{CudaLib, RowMajor, SingleStream};

use super::{VideoConfig, VideoWeights};
use crate::EncoderError;
use crate::tensors::Linear;

const KERNELS: &str = include_str!("kernels.cu");
/// Threads of a row kernel's block (`THREADS` in kernels.cu).
const ROW_THREADS: u32 = 256;
const RMS_EPS: f32 = 1e-6;
const POOL_EPS: f32 = 1e-5;

curator_gpu::kernels! {
    /// Every kernel of `kernels.cu` (its signatures checked in this module's tests).
    pub(crate) struct Kernels {
        fn table_rows(table: *const f32, rows: i64, l: i32, d: i32, x: *mut f32);
        fn rms_norm(input: *const f32, ldi: i32, w: *const f32, d: i32, eps: f32, out: *mut f32, ldo: i32);
        fn rms_norm_inplace(x: *mut f32, ld: i32, w: *const f32, d: i32, eps: f32);
        fn layer_norm(input: *const f32, gamma: *const f32, beta: *const f32, d: i32, eps: f32, out: *mut f32);
        fn softmax_rows(x: *mut f32, n: i32);
        fn bias_gelu(x: *mut f32, b: *const f32, n: i32, total: i64);
        fn scale_residual(x: *mut f32, y: *const f32, b: *const f32, g: *const f32, d: i32, total: i64);
        fn add_bias(x: *mut f32, b: *const f32, n: i32, total: i64);
        fn mean_rows(x: *const f32, l: i32, d: i32, clips: i64, out: *mut f32);
    }
}

fn gpu<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> EncoderError {
    move |e| EncoderError::Gpu(format!("{what}: {e:?}"))
}

fn elems(n: usize) -> LaunchConfig {
    LaunchConfig::for_num_elems(n as u32)
}

fn rows(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (n as u32, 1, 1), block_dim: (ROW_THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// A linear layer on the device: `w` `[out, inp]`, `b` `[out]`.
struct GLinear {
    w: CudaSlice<f32>,
    b: CudaSlice<f32>,
    out: usize,
    inp: usize,
}

struct GBlock {
    norm1: CudaSlice<f32>,
    qkv: CudaSlice<f32>,
    q_norm: CudaSlice<f32>,
    k_norm: CudaSlice<f32>,
    proj: GLinear,
    ls1: CudaSlice<f32>,
    norm2: CudaSlice<f32>,
    fc1: GLinear,
    fc2: GLinear,
    ls2: CudaSlice<f32>,
}

struct GNorm {
    gamma: CudaSlice<f32>,
    beta: CudaSlice<f32>,
}

struct GPool {
    norm_q: GNorm,
    norm_k: GNorm,
    norm_v: GNorm,
    q: GLinear,
    k: GLinear,
    v: GLinear,
    proj: GLinear,
}

/// GPU 0 (the worker's `CUDA_VISIBLE_DEVICES` picks the card) with the tower's weights.
pub struct GpuVideo {
    k: Kernels,
    config: VideoConfig,
    patch: CudaSlice<f32>,
    /// `[tokens × dim]`: positions, the class token on row 0, the patch bias on the others.
    table: CudaSlice<f32>,
    blocks: Vec<GBlock>,
    pool: GPool,
    projection: GLinear,
    /// GPU 0, its stream and cuBLAS (dropped after the buffers above).
    dev: SingleStream,
}

impl GpuVideo {
    /// Whether this machine has the CUDA libraries the GPU path loads.
    pub fn available() -> bool {
        curator_gpu::missing(&[CudaLib::Driver, CudaLib::Nvrtc, CudaLib::Cublas]).is_none()
    }

    /// Open GPU 0, compile (or read from `kernel_cache`) the kernels and upload the weights.
    pub fn open(config: &VideoConfig, w: &VideoWeights, kernel_cache: Option<&Path>) -> Result<GpuVideo, EncoderError> {
        let dev = SingleStream::open("internvideo2", KERNELS, "rms_norm", kernel_cache).map_err(EncoderError::NoGpu)?;
        let k = Kernels::load(&dev.module).map_err(|(name, e)| EncoderError::Gpu(format!("kernel {name}: {e:?}")))?;
        let stream = dev.stream.clone();
        let up = |v: &[f32]| stream.clone_htod(v).map_err(gpu("upload weights"));
        let linear = |l: &Linear| -> Result<GLinear, EncoderError> { Ok(GLinear { w: up(&l.w)?, b: up(&l.b)?, out: l.out, inp: l.inp }) };
        let norm = |n: &crate::tensors::Norm| -> Result<GNorm, EncoderError> { Ok(GNorm { gamma: up(&n.gamma)?, beta: up(&n.beta)? }) };
        let d = config.embed_dim;
        let mut table = w.position.clone();
        table[..d].iter_mut().zip(&w.class).for_each(|(t, c)| *t += c);
        for row in table[d..].chunks_exact_mut(d) {
            row.iter_mut().zip(&w.patch.b).for_each(|(t, b)| *t += b);
        }
        let blocks = w
            .blocks
            .iter()
            .map(|b| {
                Ok(GBlock {
                    norm1: up(&b.norm1)?,
                    qkv: up(&b.qkv.w)?,
                    q_norm: up(&b.q_norm)?,
                    k_norm: up(&b.k_norm)?,
                    proj: linear(&b.proj)?,
                    ls1: up(&b.ls1)?,
                    norm2: up(&b.norm2)?,
                    fc1: linear(&b.fc1)?,
                    fc2: linear(&b.fc2)?,
                    ls2: up(&b.ls2)?,
                })
            })
            .collect::<Result<Vec<_>, EncoderError>>()?;
        let p = &w.pool;
        let pool = GPool {
            norm_q: norm(&p.norm_q)?,
            norm_k: norm(&p.norm_k)?,
            norm_v: norm(&p.norm_v)?,
            q: linear(&p.q)?,
            k: linear(&p.k)?,
            v: linear(&p.v)?,
            proj: linear(&p.proj)?,
        };
        Ok(GpuVideo {
            patch: up(&w.patch.w)?,
            table: up(&table)?,
            blocks,
            pool,
            projection: linear(&w.projection)?,
            config: config.clone(),
            k,
            dev,
        })
    }

    /// `y[m × l.out] = x[m × l.inp] Wᵀ` (no bias), into a new buffer.
    fn product(&self, l: &GLinear, x: &CudaSlice<f32>, m: usize) -> Result<CudaSlice<f32>, EncoderError> {
        let mut y = self.dev.stream.alloc_zeros::<f32>(m * l.out).map_err(gpu("alloc"))?;
        self.product_into(l, x, m, &mut y)?;
        Ok(y)
    }

    /// `y[m × l.out] = x[m × l.inp] Wᵀ` (no bias) into `y`, which holds at least that.
    fn product_into(&self, l: &GLinear, x: &CudaSlice<f32>, m: usize, y: &mut CudaSlice<f32>) -> Result<(), EncoderError> {
        let cfg = RowMajor::rows_dot(m, l.out, l.inp).config(1.0f32, 0.0);
        // SAFETY: x holds m × inp, W out × inp, y at least m × out (beta 0: overwritten).
        unsafe { self.dev.blas.gemm(cfg, &l.w, x, y) }.map_err(gpu("cuBLAS product"))
    }

    /// The embeddings (unit length) of the clips whose patches are `patches`
    /// (`[clips × tokens × 3·patch²]`, zero rows at the class token).
    pub fn embed(&self, patches: &[f32], clips: usize) -> Result<Vec<f32>, EncoderError> {
        let c = &self.config;
        let (d, l, s) = (c.embed_dim, c.tokens(), &self.dev.stream);
        let n = clips * l;
        let kp = 3 * c.patch_size * c.patch_size;
        let input = s.clone_htod(patches).map_err(gpu("upload patches"))?;
        let mut x = s.alloc_zeros::<f32>(n * d).map_err(gpu("alloc"))?;
        // SAFETY: one thread per float of x (n × d); the table holds l × d.
        unsafe { self.k.table_rows(s, elems(n * d), &self.table, n as i64, l as i32, d as i32, &mut x) }.map_err(gpu("table_rows"))?;
        let cfg = RowMajor::rows_dot(n, d, kp).config(1.0f32, 1.0);
        // SAFETY: the patches hold n × kp, the kernel d × kp, x n × d.
        unsafe { self.dev.blas.gemm(cfg, &self.patch, &input, &mut x) }.map_err(gpu("cuBLAS patches"))?;
        let (heads, dh) = (c.num_heads, d / c.num_heads);
        let scale = 1.0 / (dh as f32).sqrt();
        let mut normed = s.alloc_zeros::<f32>(n * d).map_err(gpu("alloc"))?;
        let mut scores = s.alloc_zeros::<f32>(heads * l * l).map_err(gpu("alloc scores"))?;
        let mut ctx = s.alloc_zeros::<f32>(n * d).map_err(gpu("alloc"))?;
        // The blocks' scratch, made once a pass (the products overwrite it).
        let mut qkv = s.alloc_zeros::<f32>(n * 3 * d).map_err(gpu("alloc qkv"))?;
        let mlp = self.blocks.first().map_or(0, |b| b.fc1.out);
        let mut up = s.alloc_zeros::<f32>(n * mlp).map_err(gpu("alloc mlp"))?;
        let mut branch = s.alloc_zeros::<f32>(n * d).map_err(gpu("alloc"))?;
        for b in &self.blocks {
            // SAFETY: one block per row of x and `normed` (n rows of d).
            unsafe { self.k.rms_norm(s, rows(n), &x, d as i32, &b.norm1, d as i32, RMS_EPS, &mut normed, d as i32) }
                .map_err(gpu("rms_norm"))?;
            let cfg = RowMajor::rows_dot(n, 3 * d, d).config(1.0f32, 0.0);
            // SAFETY: normed n × d, the QKV weight 3d × d, qkv n × 3d.
            unsafe { self.dev.blas.gemm(cfg, &b.qkv, &normed, &mut qkv) }.map_err(gpu("cuBLAS qkv"))?;
            for (offset, w) in [(0, &b.q_norm), (d, &b.k_norm)] {
                let mut view = qkv.slice_mut(offset..);
                // SAFETY: one block per row: d values from `offset`, rows 3d apart, all inside qkv.
                unsafe { self.k.rms_norm_inplace(s, rows(n), &mut view, 3 * d as i32, w, d as i32, RMS_EPS) }
                    .map_err(gpu("qk rms_norm"))?;
            }
            for clip in 0..clips {
                let base = clip * l * 3 * d;
                let q = qkv.slice(base..);
                let kk = qkv.slice(base + d..);
                let cfg = RowMajor::rows_dot(l, l, dh).lda(3 * d).ldb(3 * d).strided(scale, 0.0, heads, [dh, dh, l * l]);
                // SAFETY: head h reads the clip's l rows (3d apart) at column h·dh of the queries
                // and of the keys, dh values each, and writes its l × l scores.
                unsafe { self.dev.blas.gemm_strided_batched(cfg, &kk, &q, &mut scores) }.map_err(gpu("cuBLAS scores"))?;
                // SAFETY: one block per row of heads × l rows of l.
                unsafe { self.k.softmax_rows(s, rows(heads * l), &mut scores, l as i32) }.map_err(gpu("softmax"))?;
                let v = qkv.slice(base + 2 * d..);
                let mut out = ctx.slice_mut(clip * l * d..);
                let cfg = RowMajor::new(l, dh, l).ldb(3 * d).ldc(d).strided(1.0f32, 0.0, heads, [l * l, dh, dh]);
                // SAFETY: head h's l × l weights times the clip's values at column h·dh (rows 3d
                // apart) into its dh columns of the context (rows d apart).
                unsafe { self.dev.blas.gemm_strided_batched(cfg, &v, &scores, &mut out) }.map_err(gpu("cuBLAS context"))?;
            }
            self.product_into(&b.proj, &ctx, n, &mut branch)?;
            // SAFETY: one thread per float of x; `branch` holds as many, the vectors d.
            unsafe { self.k.scale_residual(s, elems(n * d), &mut x, &branch, &b.proj.b, &b.ls1, d as i32, (n * d) as i64) }
                .map_err(gpu("scale_residual"))?;
            // SAFETY: as above.
            unsafe { self.k.rms_norm(s, rows(n), &x, d as i32, &b.norm2, d as i32, RMS_EPS, &mut normed, d as i32) }
                .map_err(gpu("rms_norm"))?;
            self.product_into(&b.fc1, &normed, n, &mut up)?;
            let m = b.fc1.out;
            // SAFETY: one thread per float of up (n × m); the bias holds m.
            unsafe { self.k.bias_gelu(s, elems(n * m), &mut up, &b.fc1.b, m as i32, (n * m) as i64) }.map_err(gpu("bias_gelu"))?;
            self.product_into(&b.fc2, &up, n, &mut branch)?;
            // SAFETY: as the attention's residual.
            unsafe { self.k.scale_residual(s, elems(n * d), &mut x, &branch, &b.fc2.b, &b.ls2, d as i32, (n * d) as i64) }
                .map_err(gpu("scale_residual"))?;
        }
        let pooled = self.pool(&x, clips)?;
        let mut e = self.product(&self.projection, &pooled, clips)?;
        let e_dim = self.projection.out;
        // SAFETY: one thread per float of e (clips × proj_dim).
        unsafe { self.k.add_bias(s, elems(clips * e_dim), &mut e, &self.projection.b, e_dim as i32, (clips * e_dim) as i64) }
            .map_err(gpu("add_bias"))?;
        let mut out = s.clone_dtoh(&e).map_err(gpu("download embeddings"))?;
        crate::vision::normalize_rows(&mut out, e_dim);
        Ok(out)
    }

    /// The attention pool of every clip: `[clips × clip_embed_dim]` on the device.
    fn pool(&self, x: &CudaSlice<f32>, clips: usize) -> Result<CudaSlice<f32>, EncoderError> {
        let c = &self.config;
        let (d, l, s, p) = (c.embed_dim, c.tokens(), &self.dev.stream, &self.pool);
        let n = clips * l;
        let mut mean = s.alloc_zeros::<f32>(clips * d).map_err(gpu("alloc"))?;
        // SAFETY: one thread per (clip, column); x holds clips × l rows of d.
        unsafe { self.k.mean_rows(s, elems(clips * d), x, l as i32, d as i32, clips as i64, &mut mean) }.map_err(gpu("mean_rows"))?;
        let norm = |input: &CudaSlice<f32>, rows_n: usize, g: &GNorm| -> Result<CudaSlice<f32>, EncoderError> {
            let mut out = s.alloc_zeros::<f32>(rows_n * d).map_err(gpu("alloc"))?;
            // SAFETY: one block per row of `rows_n` rows of d.
            unsafe { self.k.layer_norm(s, rows(rows_n), input, &g.gamma, &g.beta, d as i32, POOL_EPS, &mut out) }
                .map_err(gpu("layer_norm"))?;
            Ok(out)
        };
        let biased = |l: &GLinear, input: &CudaSlice<f32>, m: usize| -> Result<CudaSlice<f32>, EncoderError> {
            let mut y = self.product(l, input, m)?;
            // SAFETY: one thread per float of y (m × out).
            unsafe { self.k.add_bias(s, elems(m * l.out), &mut y, &l.b, l.out as i32, (m * l.out) as i64) }.map_err(gpu("add_bias"))?;
            Ok(y)
        };
        let q = biased(&p.q, &norm(&mean, clips, &p.norm_q)?, clips)?;
        let k = biased(&p.k, &norm(x, n, &p.norm_k)?, n)?;
        let v = biased(&p.v, &norm(x, n, &p.norm_v)?, n)?;
        let heads = c.attn_pool_num_heads;
        let dh = d / heads;
        let mut scores = s.alloc_zeros::<f32>(heads * l).map_err(gpu("alloc"))?;
        let mut ctx = s.alloc_zeros::<f32>(clips * d).map_err(gpu("alloc"))?;
        for clip in 0..clips {
            let cfg = RowMajor::rows_dot(1, l, dh).lda(d).ldb(d).strided(1.0 / (dh as f32).sqrt(), 0.0, heads, [dh, dh, l]);
            let (qc, kc) = (q.slice(clip * d..), k.slice(clip * l * d..));
            // SAFETY: head h: the clip's query at column h·dh against its l keys (rows d apart).
            unsafe { self.dev.blas.gemm_strided_batched(cfg, &kc, &qc, &mut scores) }.map_err(gpu("cuBLAS pool scores"))?;
            // SAFETY: one block per head's row of l.
            unsafe { self.k.softmax_rows(s, rows(heads), &mut scores, l as i32) }.map_err(gpu("softmax"))?;
            let vc = v.slice(clip * l * d..);
            let mut out = ctx.slice_mut(clip * d..);
            let cfg = RowMajor::new(1, dh, l).ldb(d).ldc(d).strided(1.0f32, 0.0, heads, [l, dh, dh]);
            // SAFETY: head h's l weights times the clip's values at column h·dh into its dh columns.
            unsafe { self.dev.blas.gemm_strided_batched(cfg, &vc, &scores, &mut out) }.map_err(gpu("cuBLAS pool context"))?;
        }
        biased(&p.proj, &ctx, clips)
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
        curator_gpu::testing::assert_kernels_compile("internvideo2", super::KERNELS, super::Kernels::SIGNATURES);
    }
}
