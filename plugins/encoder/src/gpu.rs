//! The GPU back-end: the encoder in fp16 (f32 accumulation, f32 layer norms and softmax).
//!
//! Everything CUDA is loaded at run time through cudarc (the driver, cuBLAS, NVRTC), so this
//! builds with no CUDA toolkit and [`GpuModel::new`] answers [`EncoderError::NoGpu`] where
//! there is no driver. Matrix products go to cuBLAS (`GemmEx`, fp16 in and out, f32 compute);
//! the rest is six small kernels compiled by NVRTC at start-up (no headers: fp16 conversions
//! are inline PTX).
//!
//! One forward pass runs a batch of `B` sequences padded to the batch's longest `L` (the
//! batcher sorts by length, so padding is small): embeddings + layer norm; per layer one QKV
//! product, attention as two strided-batched products around a masked softmax, the output
//! product + bias + residual + layer norm, the feed-forward pair with the activation fused
//! into the bias add; then pooling on the device, and only `B × hidden` floats come back.
//!
//! Memory is checked before anything is allocated: weights + this batch's activations +
//! [`CONTEXT_BYTES`] must fit the stage's budget, else the batch is refused as out of memory
//! (the caller halves it), so the worker never grows past `gpu_memory_gb`.

use std::sync::Arc;

use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use half::f16;

use crate::EncoderError;
use crate::config::{Activation, ModelConfig, Pooling};
use crate::weights::{Linear, Norm, Weights};

/// What a CUDA context, cuBLAS' workspace and the kernels' modules take on the device besides
/// weights and activations (measured on an H100 with CUDA 13: see the issue note).
pub const CONTEXT_BYTES: u64 = 600 << 20;

const KERNELS: &str = r#"
__device__ __forceinline__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float total = 0.0f;
    int warps = blockDim.x / 32;
    for (int w = 0; w < warps; w++) total += shared[w];
    return total;
}

// Layer norm of `row` (n floats in shared memory) into out (fp16).
__device__ void norm_row(float* row, int n, const float* gamma, const float* beta, float eps, unsigned short* out, float* red) {
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += row[j];
    float mean = block_sum(s, red) / n;
    float q = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { float d = row[j] - mean; q += d * d; }
    float inv = rsqrtf(block_sum(q, red) / n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x) out[j] = f2h((row[j] - mean) * inv * gamma[j] + beta[j]);
}

// One block per token: word + position + token type, then layer norm.
extern "C" __global__ void embed(const int* ids, int L, int vocab, int max_pos, int pos_offset, const unsigned short* word,
                                 const unsigned short* pos, const unsigned short* type0, const float* gamma, const float* beta,
                                 float eps, int H, unsigned short* out) {
    extern __shared__ float row[];
    __shared__ float red[32];
    int t = blockIdx.x;
    int id = ids[t];
    if (id < 0 || id >= vocab) id = 0;
    int p = t % L + pos_offset;
    if (p >= max_pos) p = max_pos - 1;
    for (int j = threadIdx.x; j < H; j += blockDim.x)
        row[j] = h2f(word[(long long)id * H + j]) + h2f(pos[(long long)p * H + j]) + h2f(type0[j]);
    __syncthreads();
    norm_row(row, H, gamma, beta, eps, out + (long long)t * H, red);
}

// out = LayerNorm(x + bias + residual), one block per row; out may be residual or x.
extern "C" __global__ void add_norm(const unsigned short* x, const float* bias, const unsigned short* residual, const float* gamma,
                                    const float* beta, float eps, int H, unsigned short* out) {
    extern __shared__ float row[];
    __shared__ float red[32];
    long long base = (long long)blockIdx.x * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) row[j] = h2f(x[base + j]) + bias[j] + h2f(residual[base + j]);
    __syncthreads();
    norm_row(row, H, gamma, beta, eps, out + base, red);
}

// [T, 3H] (+ bias) into q, k, v as [B, heads, L, dh].
extern "C" __global__ void split_qkv(const unsigned short* qkv, const float* bias, long long total, int L, int H, int heads, int dh,
                                     unsigned short* q, unsigned short* k, unsigned short* v) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    long long t = i / (3 * H);
    int c = (int)(i % (3 * H));
    int which = c / H, hc = c % H, head = hc / dh, d = hc % dh;
    long long b = t / L, l = t % L;
    long long dst = ((b * heads + head) * L + l) * dh + d;
    unsigned short val = f2h(h2f(qkv[i]) + bias[c]);
    if (which == 0) q[dst] = val; else if (which == 1) k[dst] = val; else v[dst] = val;
}

// [B, heads, L, dh] back to [T, H].
extern "C" __global__ void merge_heads(const unsigned short* ctx, long long total, int L, int H, int heads, int dh, unsigned short* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    long long t = i / H;
    int c = (int)(i % H), head = c / dh, d = c % dh;
    long long b = t / L, l = t % L;
    out[i] = ctx[((b * heads + head) * L + l) * dh + d];
}

// Softmax over each row of scores [B * heads * L, L], keys at or past the sequence's length
// masked out. One warp per row.
extern "C" __global__ void softmax_rows(unsigned short* s, long long rows, int L, int heads, const int* lens) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    int len = lens[r / ((long long)heads * L)];
    unsigned short* row = s + r * L;
    float m = -1e30f;
    for (int j = lane; j < len; j += 32) m = fmaxf(m, h2f(row[j]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    float sum = 0.0f;
    for (int j = lane; j < len; j += 32) sum += __expf(h2f(row[j]) - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
    float inv = 1.0f / sum;
    for (int j = lane; j < L; j += 32) row[j] = j < len ? f2h(__expf(h2f(row[j]) - m) * inv) : (unsigned short)0;
}

// x[T, N] = act(x + bias); act 0 gelu (erf), 1 gelu (tanh), 2 relu.
extern "C" __global__ void bias_act(unsigned short* x, const float* bias, long long total, int N, int act) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    float v = h2f(x[i]) + bias[i % N];
    if (act == 0) v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    else if (act == 1) v = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    else v = fmaxf(v, 0.0f);
    x[i] = f2h(v);
}

// One block per sequence: the mean of its first len token states (mode 0) or the first (1).
extern "C" __global__ void pool(const unsigned short* x, const int* lens, int L, int H, int mode, float* out) {
    int b = blockIdx.x;
    int len = lens[b];
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const unsigned short* base = x + (long long)b * L * H + j;
        float acc;
        if (mode == 1 || len <= 0) acc = h2f(base[0]);
        else {
            acc = 0.0f;
            for (int l = 0; l < len; l++) acc += h2f(base[(long long)l * H]);
            acc /= len;
        }
        out[(long long)b * H + j] = acc;
    }
}
"#;

struct GLinear {
    w: CudaSlice<f16>,
    b: CudaSlice<f32>,
    out: usize,
    inp: usize,
}

struct GNorm {
    gamma: CudaSlice<f32>,
    beta: CudaSlice<f32>,
}

struct GLayer {
    qkv: GLinear,
    attn_out: GLinear,
    attn_norm: GNorm,
    up: GLinear,
    down: GLinear,
    out_norm: GNorm,
}

struct Kernels {
    embed: CudaFunction,
    add_norm: CudaFunction,
    split_qkv: CudaFunction,
    merge_heads: CudaFunction,
    softmax_rows: CudaFunction,
    bias_act: CudaFunction,
    pool: CudaFunction,
}

/// A model's weights on the GPU and what runs them.
pub struct GpuModel {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    k: Kernels,
    word: CudaSlice<f16>,
    position: CudaSlice<f16>,
    token_type: CudaSlice<f16>,
    embed_norm: GNorm,
    layers: Vec<GLayer>,
    dims: Dims,
    weight_bytes: u64,
    budget: Option<u64>,
}

#[derive(Clone, Copy)]
struct Dims {
    hidden: usize,
    inter: usize,
    heads: usize,
    head_dim: usize,
    vocab: usize,
    max_pos: usize,
    pos_offset: usize,
    eps: f32,
    act: i32,
}

fn driver<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> EncoderError {
    move |err| {
        let text = format!("{err:?}");
        if text.contains("OUT_OF_MEMORY") || text.contains("ALLOC_FAILED") {
            EncoderError::OutOfMemory(format!("{what}: {text}"))
        } else {
            EncoderError::Gpu(format!("{what}: {text}"))
        }
    }
}

/// Device bytes one forward pass of `batch` sequences padded to `len` tokens needs.
pub fn activation_bytes(config: &ModelConfig, batch: usize, len: usize) -> u64 {
    forward_bytes(config.hidden_size, config.intermediate_size, config.num_heads, batch, len)
}

fn forward_bytes(hidden: usize, inter: usize, heads: usize, batch: usize, len: usize) -> u64 {
    let (t, h, i, heads, b) = ((batch * len) as u64, hidden as u64, inter as u64, heads as u64, batch as u64);
    // x, qkv (3H), q/k/v (3H), ctx, merged, attention out: 10 H per token, plus the FFN's I
    // (fp16); scores B × heads × L × L (fp16); ids, lengths and pooled vectors.
    t * 2 * (10 * h + i) + 2 * b * heads * (len * len) as u64 + t * 4 + b * (4 + 4 * h)
}

impl GpuModel {
    /// Open GPU 0 (the worker's `CUDA_VISIBLE_DEVICES` picks the card), compile the kernels
    /// and upload the weights in fp16. `budget`: the bytes this model may use in all.
    pub fn new(config: &ModelConfig, w: &Weights, budget: Option<u64>) -> Result<GpuModel, EncoderError> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| GpuModel::open(config, w, budget))) {
            Ok(r) => r,
            Err(_) => Err(EncoderError::NoGpu("CUDA set-up panicked (a CUDA library is missing)".into())),
        }
    }

    fn open(config: &ModelConfig, w: &Weights, budget: Option<u64>) -> Result<GpuModel, EncoderError> {
        // SAFETY: only probe for the shared libraries; cudarc panics on first use without them.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(EncoderError::NoGpu("no CUDA driver library (libcuda) found".into()));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(EncoderError::NoGpu("no NVRTC library found".into()));
        }
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(EncoderError::NoGpu("no cuBLAS library found".into()));
        }
        let ctx = CudaContext::new(0).map_err(|e| EncoderError::NoGpu(format!("cannot open GPU 0: {e:?}")))?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(driver("cuBLAS"))?;
        let ptx = cudarc::nvrtc::compile_ptx(KERNELS).map_err(|e| EncoderError::Gpu(format!("NVRTC: {e:?}")))?;
        let module = ctx.load_module(ptx).map_err(driver("load kernels"))?;
        let f = |name: &str| module.load_function(name).map_err(driver("kernel"));
        let k = Kernels {
            embed: f("embed")?,
            add_norm: f("add_norm")?,
            split_qkv: f("split_qkv")?,
            merge_heads: f("merge_heads")?,
            softmax_rows: f("softmax_rows")?,
            bias_act: f("bias_act")?,
            pool: f("pool")?,
        };
        let weight_bytes = w.gpu_bytes() as u64;
        if let Some(b) = budget
            && weight_bytes + CONTEXT_BYTES > b
        {
            return Err(EncoderError::OutOfMemory(format!(
                "the model's weights ({} MiB) and CUDA's context ({} MiB) do not fit the stage's GPU memory budget ({} MiB)",
                weight_bytes >> 20,
                CONTEXT_BYTES >> 20,
                b >> 20
            )));
        }
        let half = |v: &[f32]| -> Result<CudaSlice<f16>, EncoderError> {
            let h: Vec<f16> = v.iter().map(|x| f16::from_f32(*x)).collect();
            stream.clone_htod(&h).map_err(driver("upload weights"))
        };
        let full = |v: &[f32]| stream.clone_htod(v).map_err(driver("upload weights"));
        let lin = |l: &Linear| -> Result<GLinear, EncoderError> { Ok(GLinear { w: half(&l.w)?, b: full(&l.b)?, out: l.out, inp: l.inp }) };
        let norm = |n: &Norm| -> Result<GNorm, EncoderError> { Ok(GNorm { gamma: full(&n.gamma)?, beta: full(&n.beta)? }) };
        let mut layers = Vec::with_capacity(w.layers.len());
        for l in &w.layers {
            // Q, K and V as one [3H, H] product.
            let qkv = Linear {
                w: [l.query.w.as_slice(), &l.key.w, &l.value.w].concat(),
                b: [l.query.b.as_slice(), &l.key.b, &l.value.b].concat(),
                out: 3 * l.query.out,
                inp: l.query.inp,
            };
            layers.push(GLayer {
                qkv: lin(&qkv)?,
                attn_out: lin(&l.attn_out)?,
                attn_norm: norm(&l.attn_norm)?,
                up: lin(&l.up)?,
                down: lin(&l.down)?,
                out_norm: norm(&l.out_norm)?,
            });
        }
        let h = config.hidden_size;
        let dims = Dims {
            hidden: h,
            inter: config.intermediate_size,
            heads: config.num_heads,
            head_dim: config.head_dim(),
            vocab: config.vocab_size,
            max_pos: config.max_positions,
            pos_offset: config.position_offset(),
            eps: config.layer_norm_eps,
            act: match config.activation {
                Activation::Gelu => 0,
                Activation::GeluTanh => 1,
                Activation::Relu => 2,
            },
        };
        let model = GpuModel {
            word: half(&w.word)?,
            position: half(&w.position)?,
            token_type: half(&w.token_type[..h])?,
            embed_norm: norm(&w.embed_norm)?,
            layers,
            _ctx: ctx,
            stream,
            blas,
            k,
            dims,
            weight_bytes,
            budget,
        };
        Ok(model)
    }

    /// `y[t × out] = x[t × inp] Wᵀ` (no bias: the next kernel adds it).
    fn matmul(&self, l: &GLinear, x: &impl DevicePtr<f16>, t: usize, y: &mut impl DevicePtrMut<f16>) -> Result<(), EncoderError> {
        let cfg = GemmConfig {
            transa: CUBLAS_OP_T,
            transb: CUBLAS_OP_N,
            m: l.out as i32,
            n: t as i32,
            k: l.inp as i32,
            alpha: f16::ONE,
            lda: l.inp as i32,
            ldb: l.inp as i32,
            beta: f16::ZERO,
            ldc: l.out as i32,
        };
        // SAFETY: W is out × inp, x is t × inp and y is t × out, all row-major, as sized here.
        unsafe { self.blas.gemm(cfg, &l.w, x, y) }.map_err(driver("cuBLAS gemm"))
    }

    /// One pooled vector per sequence (`[seqs.len() × hidden]`, f32).
    pub fn pooled(&self, seqs: &[&[u32]], pooling: Pooling) -> Result<Vec<f32>, EncoderError> {
        let d = self.dims;
        let (b, h) = (seqs.len(), d.hidden);
        if b == 0 {
            return Ok(Vec::new());
        }
        let l = crate::batching::padded_len(seqs.iter().map(|s| s.len()).max().unwrap_or(1).max(1));
        let t = b * l;
        if let Some(budget) = self.budget {
            let need = self.weight_bytes + CONTEXT_BYTES + forward_bytes(d.hidden, d.inter, d.heads, b, l);
            if need > budget {
                return Err(EncoderError::OutOfMemory(format!(
                    "{b} sequences × {l} tokens need {} MiB, over the budget of {} MiB",
                    need >> 20,
                    budget >> 20
                )));
            }
        }
        let mut ids = vec![0i32; t];
        let mut lens = vec![0i32; b];
        for (i, s) in seqs.iter().enumerate() {
            for (j, &id) in s.iter().enumerate() {
                ids[i * l + j] = id as i32;
            }
            lens[i] = s.len() as i32;
        }
        let s = &self.stream;
        let d_ids = s.clone_htod(&ids).map_err(driver("copy ids"))?;
        let d_lens = s.clone_htod(&lens).map_err(driver("copy lengths"))?;
        let alloc = |n: usize| s.alloc_zeros::<f16>(n).map_err(driver("allocate activations"));
        let mut x = alloc(t * h)?;
        let mut qkv = alloc(t * 3 * h)?;
        let mut q = alloc(t * h)?;
        let mut kk = alloc(t * h)?;
        let mut v = alloc(t * h)?;
        let mut scores = alloc(b * d.heads * l * l)?;
        let mut ctx = alloc(t * h)?;
        let mut merged = alloc(t * h)?;
        let mut a = alloc(t * h)?;
        let mut inter = alloc(t * d.inter)?;
        let mut pooled = s.alloc_zeros::<f32>(b * h).map_err(driver("allocate output"))?;

        let threads = 256u32;
        let norm_cfg =
            |rows: usize| LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: (h * 4) as u32 };
        let flat = |n: usize| LaunchConfig {
            grid_dim: (n.div_ceil(threads as usize) as u32, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let (l_i, h_i, heads_i, dh_i) = (l as i32, h as i32, d.heads as i32, d.head_dim as i32);
        let (vocab_i, max_pos_i, off_i) = (d.vocab as i32, d.max_pos as i32, d.pos_offset as i32);

        let mut launch = s.launch_builder(&self.k.embed);
        launch
            .arg(&d_ids)
            .arg(&l_i)
            .arg(&vocab_i)
            .arg(&max_pos_i)
            .arg(&off_i)
            .arg(&self.word)
            .arg(&self.position)
            .arg(&self.token_type)
            .arg(&self.embed_norm.gamma)
            .arg(&self.embed_norm.beta)
            .arg(&d.eps)
            .arg(&h_i)
            .arg(&mut x);
        // SAFETY: the arguments match the kernel's signature; buffers are sized for t tokens.
        unsafe { launch.launch(norm_cfg(t)) }.map_err(driver("embed"))?;

        let scale = f16::from_f32(1.0 / (d.head_dim as f32).sqrt());
        let (total_qkv, total_h) = ((t * 3 * h) as i64, (t * h) as i64);
        let rows = (b * d.heads * l) as i64;
        for layer in &self.layers {
            self.matmul(&layer.qkv, &x, t, &mut qkv)?;
            let mut launch = s.launch_builder(&self.k.split_qkv);
            launch
                .arg(&qkv)
                .arg(&layer.qkv.b)
                .arg(&total_qkv)
                .arg(&l_i)
                .arg(&h_i)
                .arg(&heads_i)
                .arg(&dh_i)
                .arg(&mut q)
                .arg(&mut kk)
                .arg(&mut v);
            // SAFETY: as above.
            unsafe { launch.launch(flat(t * 3 * h)) }.map_err(driver("split_qkv"))?;
            // scores[bh] = Q Kᵀ / √dh, row-major L × L.
            let cfg = StridedBatchedConfig {
                gemm: GemmConfig {
                    transa: CUBLAS_OP_T,
                    transb: CUBLAS_OP_N,
                    m: l_i,
                    n: l_i,
                    k: dh_i,
                    alpha: scale,
                    lda: dh_i,
                    ldb: dh_i,
                    beta: f16::ZERO,
                    ldc: l_i,
                },
                batch_size: (b * d.heads) as i32,
                stride_a: (l * d.head_dim) as i64,
                stride_b: (l * d.head_dim) as i64,
                stride_c: (l * l) as i64,
            };
            // SAFETY: b × heads matrices of L × dh (K, Q) and L × L (scores), as allocated.
            unsafe { self.blas.gemm_strided_batched(cfg, &kk, &q, &mut scores) }.map_err(driver("cuBLAS scores"))?;
            let mut launch = s.launch_builder(&self.k.softmax_rows);
            launch.arg(&mut scores).arg(&rows).arg(&l_i).arg(&heads_i).arg(&d_lens);
            let warps = 8u32;
            let cfg_sm = LaunchConfig {
                grid_dim: ((rows as u64).div_ceil(warps as u64) as u32, 1, 1),
                block_dim: (warps * 32, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: as above.
            unsafe { launch.launch(cfg_sm) }.map_err(driver("softmax"))?;
            // ctx[bh] = P V, row-major L × dh.
            let cfg = StridedBatchedConfig {
                gemm: GemmConfig {
                    transa: CUBLAS_OP_N,
                    transb: CUBLAS_OP_N,
                    m: dh_i,
                    n: l_i,
                    k: l_i,
                    alpha: f16::ONE,
                    lda: dh_i,
                    ldb: l_i,
                    beta: f16::ZERO,
                    ldc: dh_i,
                },
                batch_size: (b * d.heads) as i32,
                stride_a: (l * d.head_dim) as i64,
                stride_b: (l * l) as i64,
                stride_c: (l * d.head_dim) as i64,
            };
            // SAFETY: V (L × dh), P (L × L), ctx (L × dh) per head, as allocated.
            unsafe { self.blas.gemm_strided_batched(cfg, &v, &scores, &mut ctx) }.map_err(driver("cuBLAS context"))?;
            let mut launch = s.launch_builder(&self.k.merge_heads);
            launch.arg(&ctx).arg(&total_h).arg(&l_i).arg(&h_i).arg(&heads_i).arg(&dh_i).arg(&mut merged);
            // SAFETY: as above.
            unsafe { launch.launch(flat(t * h)) }.map_err(driver("merge_heads"))?;
            self.matmul(&layer.attn_out, &merged, t, &mut a)?;
            // a = LN(a + bias + x)
            let mut launch = s.launch_builder(&self.k.add_norm);
            launch
                .arg(&a)
                .arg(&layer.attn_out.b)
                .arg(&x)
                .arg(&layer.attn_norm.gamma)
                .arg(&layer.attn_norm.beta)
                .arg(&d.eps)
                .arg(&h_i)
                .arg(&mut merged);
            // SAFETY: as above (the result lands in `merged`, free at this point).
            unsafe { launch.launch(norm_cfg(t)) }.map_err(driver("add_norm"))?;
            std::mem::swap(&mut a, &mut merged);
            self.matmul(&layer.up, &a, t, &mut inter)?;
            let total_i = (t * d.inter) as i64;
            let inter_i = d.inter as i32;
            let mut launch = s.launch_builder(&self.k.bias_act);
            launch.arg(&mut inter).arg(&layer.up.b).arg(&total_i).arg(&inter_i).arg(&d.act);
            // SAFETY: as above.
            unsafe { launch.launch(flat(t * d.inter)) }.map_err(driver("bias_act"))?;
            self.matmul(&layer.down, &inter, t, &mut merged)?;
            // x = LN(down + bias + a)
            let mut launch = s.launch_builder(&self.k.add_norm);
            launch
                .arg(&merged)
                .arg(&layer.down.b)
                .arg(&a)
                .arg(&layer.out_norm.gamma)
                .arg(&layer.out_norm.beta)
                .arg(&d.eps)
                .arg(&h_i)
                .arg(&mut x);
            // SAFETY: as above.
            unsafe { launch.launch(norm_cfg(t)) }.map_err(driver("add_norm"))?;
        }
        let mode: i32 = if pooling == Pooling::Cls { 1 } else { 0 };
        let mut launch = s.launch_builder(&self.k.pool);
        launch.arg(&x).arg(&d_lens).arg(&l_i).arg(&h_i).arg(&mode).arg(&mut pooled);
        let cfg = LaunchConfig { grid_dim: (b as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: as above.
        unsafe { launch.launch(cfg) }.map_err(driver("pool"))?;
        s.clone_dtoh(&pooled).map_err(driver("copy results back"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activation_memory_grows_with_tokens_and_attention() {
        let c = ModelConfig::parse(
            r#"{"hidden_size":384,"intermediate_size":1536,"num_attention_heads":12,"num_hidden_layers":6,"vocab_size":30522}"#,
        )
        .unwrap();
        let small = activation_bytes(&c, 64, 128);
        assert_eq!(small, activation_bytes(&c, 64, 128));
        assert!(activation_bytes(&c, 128, 128) > 2 * small - 1);
        // At equal tokens, longer sequences cost more (L² attention scores).
        assert!(activation_bytes(&c, 32, 256) > small);
        // ~12 KB per token for MiniLM plus scores.
        assert!(small > 64 * 128 * 11_000 && small < 64 * 128 * 20_000, "{small}");
    }
}
