//! The GPU back-end: the encoder in fp16 (f32 accumulation, f32 layer norms and softmax).
//!
//! Everything CUDA is loaded at run time through cudarc (the driver, cuBLAS, NVRTC), so this
//! builds with no CUDA toolkit and [`GpuModel::new`] answers [`EncoderError::NoGpu`] where
//! there is no driver. Matrix products go to cuBLAS (`GemmEx`, fp16 in and out, f32 compute);
//! the rest is seven small kernels compiled by NVRTC for the device's architecture (no
//! headers: fp16 conversions are inline PTX) and cached on disk per (source, NVRTC version,
//! architecture), so a second worker or run loads them instead of compiling.
//!
//! One forward pass runs a batch of `B` sequences padded to the batch's longest `L` (the
//! batcher sorts by length, so padding is small): embeddings + layer norm; per layer one QKV
//! product, attention as two strided-batched products around a masked softmax, the output
//! product + bias + residual + layer norm, the feed-forward pair with the activation fused
//! into the bias add; then pooling on the device. [`GpuModel::pooled_batches`] queues a
//! whole group of passes on the stream (ids uploaded once, activations in a reused
//! workspace, every pass pooling into one output buffer) and copies the vectors back once, so
//! the device never waits for the host between passes.
//!
//! Memory is checked before anything is allocated: weights + the group's workspace and
//! buffers + [`CONTEXT_BYTES`] must fit the stage's budget, else the group is refused as out
//! of memory (the caller halves its passes), so the worker never grows past `gpu_memory_gb`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, Ptx};
use half::f16;

use crate::EncoderError;
use crate::config::{Activation, ModelConfig, Pooling};
use crate::weights::{Linear, Norm, Weights};

/// What a CUDA context, cuBLAS' workspace and the kernels' modules take on the device besides
/// weights and activations (measured on an H100 with CUDA 13: see the issue note).
pub const CONTEXT_BYTES: u64 = 600 << 20;

/// cuBLAS' workspace (part of [`CONTEXT_BYTES`]).
const BLAS_WORKSPACE: usize = 32 << 20;

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

// out = LayerNorm(x + bias + residual) for rows of H <= 1024 values (H even): one warp per
// row, the row read once into registers (two fp16 values per 32-bit load), warp shuffles only.
#define NORM_PAIRS 16
extern "C" __global__ void add_norm_warp(const unsigned short* x, const float* bias, const unsigned short* residual,
                                         const float* gamma, const float* beta, float eps, int H, long long rows,
                                         unsigned short* out) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const unsigned int* x2 = (const unsigned int*)(x + r * H);
    const unsigned int* r2 = (const unsigned int*)(residual + r * H);
    unsigned int* o2 = (unsigned int*)(out + r * H);
    int pairs = H / 2;
    float v[2 * NORM_PAIRS];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_PAIRS; k++) {
        int p = lane + 32 * k;
        v[2 * k] = 0.0f;
        v[2 * k + 1] = 0.0f;
        if (p < pairs) {
            unsigned int a = x2[p], c = r2[p];
            v[2 * k] = h2f((unsigned short)(a & 0xffff)) + bias[2 * p] + h2f((unsigned short)(c & 0xffff));
            v[2 * k + 1] = h2f((unsigned short)(a >> 16)) + bias[2 * p + 1] + h2f((unsigned short)(c >> 16));
            s += v[2 * k] + v[2 * k + 1];
        }
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    float mean = s / H;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_PAIRS; k++) {
        if (lane + 32 * k < pairs) {
            float d0 = v[2 * k] - mean, d1 = v[2 * k + 1] - mean;
            q += d0 * d0 + d1 * d1;
        }
    }
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffff, q, o);
    float inv = rsqrtf(q / H + eps);
#pragma unroll
    for (int k = 0; k < NORM_PAIRS; k++) {
        int p = lane + 32 * k;
        if (p < pairs)
            o2[p] = (unsigned int)f2h((v[2 * k] - mean) * inv * gamma[2 * p] + beta[2 * p])
                  | ((unsigned int)f2h((v[2 * k + 1] - mean) * inv * gamma[2 * p + 1] + beta[2 * p + 1]) << 16);
    }
}

// [T, 3H] (+ bias) into q, k, v as [B, heads, L, dh]: one block per token row (no 64-bit
// division per element).
extern "C" __global__ void split_qkv(const unsigned short* qkv, const float* bias, int L, int H, int heads, int dh,
                                     unsigned short* q, unsigned short* k, unsigned short* v) {
    int t = blockIdx.x;
    int b = t / L, l = t - b * L;
    const unsigned short* row = qkv + (long long)t * 3 * H;
    for (int c = threadIdx.x; c < 3 * H; c += blockDim.x) {
        int which = c / H, hc = c - which * H, head = hc / dh, d = hc - head * dh;
        long long dst = (((long long)b * heads + head) * L + l) * dh + d;
        unsigned short val = f2h(h2f(row[c]) + bias[c]);
        if (which == 0) q[dst] = val; else if (which == 1) k[dst] = val; else v[dst] = val;
    }
}

// [B, heads, L, dh] back to [T, H]: one block per token row.
extern "C" __global__ void merge_heads(const unsigned short* ctx, int L, int H, int heads, int dh, unsigned short* out) {
    int t = blockIdx.x;
    int b = t / L, l = t - b * L;
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
        int head = c / dh, d = c - head * dh;
        out[(long long)t * H + c] = ctx[(((long long)b * heads + head) * L + l) * dh + d];
    }
}

// Softmax over each row of scores [B * heads * L, L], keys at or past the sequence's length
// masked out. One warp per row. Rows of up to 1024 scores are read once into registers (two
// fp16 values per 32-bit load) and written once; longer rows take three passes.
#define SOFTMAX_PAIRS 16
extern "C" __global__ void softmax_rows(unsigned short* s, long long rows, int L, int heads, const int* lens) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    int len = lens[r / ((long long)heads * L)];
    unsigned short* row = s + r * L;
    if (L % 2 == 0 && L <= 64 * SOFTMAX_PAIRS) {
        unsigned int* row2 = (unsigned int*)row;
        int pairs = L / 2;
        float e[2 * SOFTMAX_PAIRS];
        float m = -1e30f;
#pragma unroll
        for (int k = 0; k < SOFTMAX_PAIRS; k++) {
            int p = lane + 32 * k;
            e[2 * k] = -1e30f;
            e[2 * k + 1] = -1e30f;
            if (p < pairs && 2 * p < len) {
                unsigned int u = row2[p];
                e[2 * k] = h2f((unsigned short)(u & 0xffff));
                if (2 * p + 1 < len) e[2 * k + 1] = h2f((unsigned short)(u >> 16));
                m = fmaxf(m, fmaxf(e[2 * k], e[2 * k + 1]));
            }
        }
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < SOFTMAX_PAIRS; k++) {
            int p = lane + 32 * k;
            float a = (p < pairs && 2 * p < len) ? __expf(e[2 * k] - m) : 0.0f;
            float c = (p < pairs && 2 * p + 1 < len) ? __expf(e[2 * k + 1] - m) : 0.0f;
            e[2 * k] = a;
            e[2 * k + 1] = c;
            sum += a + c;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
        float inv = 1.0f / sum;
#pragma unroll
        for (int k = 0; k < SOFTMAX_PAIRS; k++) {
            int p = lane + 32 * k;
            if (p < pairs) row2[p] = (unsigned int)f2h(e[2 * k] * inv) | ((unsigned int)f2h(e[2 * k + 1] * inv) << 16);
        }
        return;
    }
    float m = -1e30f;
    for (int j = lane; j < len; j += 32) m = fmaxf(m, h2f(row[j]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    float sum = 0.0f;
    for (int j = lane; j < len; j += 32) sum += __expf(h2f(row[j]) - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
    float inv = 1.0f / sum;
    for (int j = lane; j < L; j += 32) row[j] = j < len ? f2h(__expf(h2f(row[j]) - m) * inv) : (unsigned short)0;
}

__device__ __forceinline__ float act_fn(float v, int act) {
    if (act == 0) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    if (act == 1) return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    return fmaxf(v, 0.0f);
}

// Each row of x[rows, N] = act(row + bias); act 0 gelu (erf), 1 gelu (tanh), 2 relu. One block
// per row, two fp16 values per 32-bit access when N is even.
extern "C" __global__ void bias_act(unsigned short* x, const float* bias, int N, int act) {
    unsigned short* row = x + (long long)blockIdx.x * N;
    if (N % 2 == 0) {
        unsigned int* row2 = (unsigned int*)row;
        for (int p = threadIdx.x; p < N / 2; p += blockDim.x) {
            unsigned int u = row2[p];
            float a = act_fn(h2f((unsigned short)(u & 0xffff)) + bias[2 * p], act);
            float c = act_fn(h2f((unsigned short)(u >> 16)) + bias[2 * p + 1], act);
            row2[p] = (unsigned int)f2h(a) | ((unsigned int)f2h(c) << 16);
        }
        return;
    }
    for (int j = threadIdx.x; j < N; j += blockDim.x) row[j] = f2h(act_fn(h2f(row[j]) + bias[j], act));
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
// Fused attention (FlashAttention-2's scheme on the tensor cores, mma.m16n8k16, fp16 in, f32
// accumulation), straight from the QKV product [T, 3H] (bias not yet added) into the context
// [T, H]: no split, no score matrix, no merge. One warp per 16 query rows of one (sequence,
// head); keys in blocks of 16, softmax online. Keys at or past the sequence's length are
// masked (their values read as 0, so garbage in padded rows never reaches real ones); query
// tiles wholly past it are skipped (padded rows are never read for real tokens). The key bias
// shifts every score of a row equally and softmax ignores that, so it is dropped; the value
// bias is added once at the end (the weights of a row sum to 1).
__device__ __forceinline__ unsigned int pack2(float lo, float hi) {
    return (unsigned int)f2h(lo) | ((unsigned int)f2h(hi) << 16);
}
__device__ __forceinline__ void mma16816(float* c, const unsigned int* a, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <int DH>
__device__ void attention(const unsigned short* qkv, const float* bias, const int* lens, int L, int H, int heads, float scale,
                          unsigned short* out) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int g = lane >> 2, tig = lane & 3;
    int head = blockIdx.y, b = blockIdx.z;
    int q0 = blockIdx.x * 64 + warp * 16;
    int len = lens[b];
    if (q0 >= len) return;
    long long H3 = 3LL * H;
    const unsigned short* base = qkv + (long long)b * L * H3;
    int qc = head * DH, kc = H + head * DH, vc = 2 * H + head * DH;
    // Q fragments (rows q0+g, q0+g+8), bias added and scaled.
    unsigned int qa[DH / 16][4];
#pragma unroll
    for (int s = 0; s < DH / 16; s++) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            int col = 16 * s + tig * 2 + 8 * half;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                int row = q0 + g + 8 * r;
                float x0 = 0.0f, x1 = 0.0f;
                if (row < L) {
                    unsigned int u = *(const unsigned int*)(base + row * H3 + qc + col);
                    x0 = (h2f((unsigned short)(u & 0xffff)) + bias[qc + col]) * scale;
                    x1 = (h2f((unsigned short)(u >> 16)) + bias[qc + col + 1]) * scale;
                }
                qa[s][half * 2 + r] = pack2(x0, x1);
            }
        }
    }
    float o[DH / 8][4];
#pragma unroll
    for (int j = 0; j < DH / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = -1e30f, m1 = -1e30f, l0 = 0.0f, l1 = 0.0f;
    for (int k0 = 0; k0 < len; k0 += 16) {
        float sc[2][4];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
            int key = k0 + 8 * j + g;
#pragma unroll
            for (int s = 0; s < DH / 16; s++) {
                unsigned int b0 = 0, b1 = 0;
                if (key < L) {
                    const unsigned short* kp = base + key * H3 + kc + 16 * s + tig * 2;
                    b0 = *(const unsigned int*)kp;
                    b1 = *(const unsigned int*)(kp + 8);
                }
                mma16816(sc[j], qa[s], b0, b1);
            }
        }
        // Mask keys past the sequence, then the online softmax of rows g (c0, c1) and g+8 (c2, c3).
        float mx0 = -1e30f, mx1 = -1e30f;
#pragma unroll
        for (int j = 0; j < 2; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = k0 + 8 * j + tig * 2 + (e & 1);
                if (key >= len) sc[j][e] = -1e30f;
            }
            mx0 = fmaxf(mx0, fmaxf(sc[j][0], sc[j][1]));
            mx1 = fmaxf(mx1, fmaxf(sc[j][2], sc[j][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 2));
        float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        float f0 = __expf(m0 - n0), f1 = __expf(m1 - n1);
        m0 = n0;
        m1 = n1;
        l0 *= f0;
        l1 *= f1;
#pragma unroll
        for (int j = 0; j < DH / 8; j++) {
            o[j][0] *= f0;
            o[j][1] *= f0;
            o[j][2] *= f1;
            o[j][3] *= f1;
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            sc[j][0] = __expf(sc[j][0] - n0);
            sc[j][1] = __expf(sc[j][1] - n0);
            sc[j][2] = __expf(sc[j][2] - n1);
            sc[j][3] = __expf(sc[j][3] - n1);
            l0 += sc[j][0] + sc[j][1];
            l1 += sc[j][2] + sc[j][3];
        }
        // P as the A operand (16 rows x 16 keys), straight from the score registers.
        unsigned int pa[4] = {pack2(sc[0][0], sc[0][1]), pack2(sc[0][2], sc[0][3]), pack2(sc[1][0], sc[1][1]), pack2(sc[1][2], sc[1][3])};
        int ka = k0 + tig * 2;
#pragma unroll
        for (int j = 0; j < DH / 8; j++) {
            int col = vc + 8 * j + g;
            unsigned short v[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = ka + (e & 1) + 8 * (e >> 1);
                v[e] = key < len ? base[key * H3 + col] : (unsigned short)0;
            }
            mma16816(o[j], pa, (unsigned int)v[0] | ((unsigned int)v[1] << 16), (unsigned int)v[2] | ((unsigned int)v[3] << 16));
        }
    }
    l0 += __shfl_xor_sync(0xffffffff, l0, 1);
    l0 += __shfl_xor_sync(0xffffffff, l0, 2);
    l1 += __shfl_xor_sync(0xffffffff, l1, 1);
    l1 += __shfl_xor_sync(0xffffffff, l1, 2);
    float i0 = 1.0f / l0, i1 = 1.0f / l1;
    unsigned short* ob = out + (long long)b * L * H + head * DH;
#pragma unroll
    for (int j = 0; j < DH / 8; j++) {
        int col = 8 * j + tig * 2;
        float bv0 = bias[vc + col], bv1 = bias[vc + col + 1];
        int r0 = q0 + g, r1 = q0 + g + 8;
        if (r0 < L) *(unsigned int*)(ob + (long long)r0 * H + col) = pack2(o[j][0] * i0 + bv0, o[j][1] * i0 + bv1);
        if (r1 < L) *(unsigned int*)(ob + (long long)r1 * H + col) = pack2(o[j][2] * i1 + bv0, o[j][3] * i1 + bv1);
    }
}
extern "C" __global__ void attention32(const unsigned short* qkv, const float* bias, const int* lens, int L, int H, int heads, float scale, unsigned short* out) {
    attention<32>(qkv, bias, lens, L, H, heads, scale, out);
}
extern "C" __global__ void attention64(const unsigned short* qkv, const float* bias, const int* lens, int L, int H, int heads, float scale, unsigned short* out) {
    attention<64>(qkv, bias, lens, L, H, heads, scale, out);
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

/// The compiled kernels, each behind a typed launcher whose parameter list is the kernel's C
/// signature in `KERNELS`, in order.
struct Kernels {
    embed: CudaFunction,
    add_norm: CudaFunction,
    add_norm_warp: CudaFunction,
    split_qkv: CudaFunction,
    merge_heads: CudaFunction,
    softmax_rows: CudaFunction,
    bias_act: CudaFunction,
    pool: CudaFunction,
    /// Fused attention for heads of 32 and 64 dimensions.
    attention32: CudaFunction,
    attention64: CudaFunction,
}

/// Threads per block of the row kernels.
const THREADS: u32 = 256;

/// One block per row, `floats` floats of shared memory (the row kernels' layout).
fn rows_cfg(rows: usize, floats: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: (floats * 4) as u32 }
}

/// The device buffers of one forward pass, sized for the largest pass so far and reused:
/// nothing is allocated or zeroed per batch.
struct Workspace {
    tokens: usize,
    scores_len: usize,
    x: CudaSlice<f16>,
    qkv: CudaSlice<f16>,
    q: CudaSlice<f16>,
    k: CudaSlice<f16>,
    v: CudaSlice<f16>,
    ctx: CudaSlice<f16>,
    merged: CudaSlice<f16>,
    a: CudaSlice<f16>,
    inter: CudaSlice<f16>,
    scores: CudaSlice<f16>,
}

/// Device bytes of a workspace for `tokens` tokens and `scores` attention scores (0: fused
/// attention, without the q, k, v and context buffers).
fn workspace_bytes(hidden: usize, inter: usize, tokens: usize, scores: usize) -> u64 {
    let per_token = if scores > 0 { 10 * hidden + inter } else { 6 * hidden + inter };
    2 * (tokens as u64 * per_token as u64 + scores as u64)
}

impl Workspace {
    /// Buffers for passes of `tokens` tokens; the split-attention buffers (q, k, v, ctx and
    /// `scores_len` scores) only when the fused kernel does not fit the model (`scores_len` 0).
    fn new(stream: &Arc<CudaStream>, d: &Dims, tokens: usize, scores_len: usize) -> Result<Workspace, EncoderError> {
        // SAFETY: every buffer is written by a kernel or a product before it is read, within
        // the `tokens` (or `scores_len`) elements a pass uses; nothing reads past them.
        let alloc = |n: usize| unsafe { stream.alloc::<f16>(n.max(1)) }.map_err(driver("allocate activations"));
        let (h, i) = (d.hidden, d.inter);
        Ok(Workspace {
            tokens,
            scores_len,
            x: alloc(tokens * h)?,
            qkv: alloc(tokens * 3 * h)?,
            q: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            k: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            v: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            ctx: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            merged: alloc(tokens * h)?,
            a: alloc(tokens * h)?,
            inter: alloc(tokens * i)?,
            scores: alloc(scores_len)?,
        })
    }
}

/// A model's weights on the GPU and what runs them.
pub struct GpuModel {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    /// Held for cuBLAS (set on the handle), never read here.
    _blas_workspace: CudaSlice<u8>,
    k: Kernels,
    word: CudaSlice<f16>,
    position: CudaSlice<f16>,
    token_type: CudaSlice<f16>,
    embed_norm: GNorm,
    layers: Vec<GLayer>,
    dims: Dims,
    weight_bytes: u64,
    budget: Option<u64>,
    workspace: Mutex<Option<Workspace>>,
    /// How the kernels were obtained ("compiled", "cached").
    pub kernels_from: &'static str,
    /// Device milliseconds per step of the forward pass, when `CURATOR_ENCODER_PROFILE` is set
    /// (events between the steps; for benchmarks, not for runs).
    profile: Option<Mutex<std::collections::BTreeMap<&'static str, f64>>>,
}

/// Events between the steps of a group of passes (profiling only).
type Marks = Option<Vec<(&'static str, cudarc::driver::CudaEvent)>>;

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

/// Device bytes one forward pass of `batch` sequences padded to `len` tokens needs
/// (activations, scores, its ids, lengths and pooled vectors).
pub fn activation_bytes(config: &ModelConfig, batch: usize, len: usize) -> u64 {
    forward_bytes(config.hidden_size, config.intermediate_size, config.num_heads, batch, len)
}

fn forward_bytes(hidden: usize, inter: usize, heads: usize, batch: usize, len: usize) -> u64 {
    let scores = if fused_attention(hidden / heads.max(1), batch) { 0 } else { batch * heads * len * len };
    workspace_bytes(hidden, inter, batch * len, scores) + io_bytes(hidden, batch, batch * len)
}

/// Whether a pass of `batch` sequences with heads of `head_dim` runs the fused attention
/// kernel (heads of 32 or 64; at most 65,535 sequences, the grid's z limit).
fn fused_attention(head_dim: usize, batch: usize) -> bool {
    matches!(head_dim, 32 | 64) && batch <= 65_535 && std::env::var_os("CURATOR_ENCODER_SPLIT_ATTENTION").is_none()
}

/// Device bytes of a group's ids, lengths and pooled vectors.
fn io_bytes(hidden: usize, seqs: usize, tokens: usize) -> u64 {
    4 * tokens as u64 + seqs as u64 * (4 + 4 * hidden as u64)
}

/// The kernels' PTX for this device: from `cache` when an earlier process compiled it for
/// the same source, NVRTC and architecture, else compiled by NVRTC (and written there).
fn kernels_ptx(cache: Option<&Path>, arch: (i32, i32)) -> Result<(Ptx, &'static str), EncoderError> {
    let mut nvrtc = (0, 0);
    // SAFETY: NVRTC is present (checked by the caller); the call only writes two ints.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut nvrtc.0, &mut nvrtc.1) };
    let key = xxhash_rust::xxh3::xxh3_128(format!("{KERNELS}\0nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
    let file = cache.map(|d| d.join(format!("encoder-{key:032x}-compute_{}{}.ptx", arch.0, arch.1)));
    if let Some(text) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok())
        && text.contains(".entry embed")
    {
        return Ok((Ptx::from_src(text), "cached"));
    }
    // NVRTC wants a 'static name; one per architecture and process.
    let name: &'static str = Box::leak(format!("compute_{}{}", arch.0, arch.1).into_boxed_str());
    let opts = CompileOptions { arch: Some(name), ..Default::default() };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(KERNELS, opts).map_err(|e| EncoderError::Gpu(format!("NVRTC: {e:?}")))?;
    if let (Some(file), Some(bytes)) = (&file, ptx.as_bytes()) {
        // Written under a temporary name, then renamed: a reader never sees half a file.
        let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
        let tmp = file.with_extension(format!("tmp-{}", std::process::id()));
        let written = file
            .parent()
            .map(std::fs::create_dir_all)
            .transpose()
            .and_then(|_| std::fs::write(&tmp, text))
            .and_then(|_| std::fs::rename(&tmp, file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok((ptx, "compiled"))
}

impl GpuModel {
    /// Open GPU 0 (the worker's `CUDA_VISIBLE_DEVICES` picks the card), load the kernels
    /// (from `kernel_cache` when present) and upload the weights in fp16. `budget`: the bytes
    /// this model may use in all.
    pub fn new(config: &ModelConfig, w: &Weights, budget: Option<u64>, kernel_cache: Option<&Path>) -> Result<GpuModel, EncoderError> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| GpuModel::open(config, w, budget, kernel_cache))) {
            Ok(r) => r,
            Err(_) => Err(EncoderError::NoGpu("CUDA set-up panicked (a CUDA library is missing)".into())),
        }
    }

    fn open(config: &ModelConfig, w: &Weights, budget: Option<u64>, kernel_cache: Option<&Path>) -> Result<GpuModel, EncoderError> {
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
        // SAFETY: this model uses one stream for everything, so no buffer is ever shared
        // between streams and cudarc's cross-stream events are not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(driver("cuBLAS"))?;
        // cuBLAS' own workspace, as PyTorch gives it on Hopper (its faster kernels need one).
        let blas_workspace = stream.alloc_zeros::<u8>(BLAS_WORKSPACE).map_err(driver("cuBLAS workspace"))?;
        {
            let (ptr, _record) = blas_workspace.device_ptr(&stream);
            // SAFETY: the buffer is BLAS_WORKSPACE bytes on this handle's device and stream, and
            // outlives the handle (the model drops `blas` before `_blas_workspace`).
            unsafe { cudarc::cublas::sys::cublasSetWorkspace_v2(*blas.handle(), ptr as *mut std::ffi::c_void, BLAS_WORKSPACE) }
                .result()
                .map_err(driver("cuBLAS workspace"))?;
        }
        let arch = ctx.compute_capability().map_err(driver("compute capability"))?;
        let (ptx, kernels_from) = kernels_ptx(kernel_cache, arch)?;
        let module = ctx.load_module(ptx).map_err(driver("load kernels"))?;
        let f = |name: &str| module.load_function(name).map_err(driver("kernel"));
        let k = Kernels {
            embed: f("embed")?,
            add_norm: f("add_norm")?,
            add_norm_warp: f("add_norm_warp")?,
            split_qkv: f("split_qkv")?,
            merge_heads: f("merge_heads")?,
            softmax_rows: f("softmax_rows")?,
            bias_act: f("bias_act")?,
            pool: f("pool")?,
            attention32: f("attention32")?,
            attention64: f("attention64")?,
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
        Ok(GpuModel {
            word: half(&w.word)?,
            position: half(&w.position)?,
            token_type: half(&w.token_type[..h])?,
            embed_norm: norm(&w.embed_norm)?,
            layers,
            _ctx: ctx,
            stream,
            blas,
            _blas_workspace: blas_workspace,
            k,
            dims,
            weight_bytes,
            budget,
            workspace: Mutex::new(None),
            kernels_from,
            profile: std::env::var_os("CURATOR_ENCODER_PROFILE").map(|_| Mutex::new(Default::default())),
        })
    }

    /// `y[t × out] = x[t × inp] Wᵀ` (no bias: the next kernel adds it).
    fn matmul(&self, l: &GLinear, x: &CudaSlice<f16>, t: usize, y: &mut CudaSlice<f16>) -> Result<(), EncoderError> {
        debug_assert!(x.len() >= t * l.inp && y.len() >= t * l.out);
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
        // SAFETY: W is out × inp, x holds t × inp and y t × out, all row-major (the workspace
        // holds at least the pass's tokens).
        unsafe { self.blas.gemm(cfg, &l.w, x, y) }.map_err(driver("cuBLAS gemm"))
    }

    /// Pooled vectors of `batches` (each a list of indices into `seqs`, padded to its own
    /// longest): `[Σ batch sizes × hidden]` f32, in batch order. Every pass of the group is
    /// queued on the stream and the vectors come back in one copy: the host waits once.
    pub fn pooled_batches(&self, seqs: &[Vec<u32>], batches: &[Vec<usize>], pooling: Pooling) -> Result<Vec<f32>, EncoderError> {
        let d = self.dims;
        let h = d.hidden;
        let shapes: Vec<(usize, usize)> = batches
            .iter()
            .map(|b| (b.len(), crate::batching::padded_len(b.iter().map(|&i| seqs[i].len()).max().unwrap_or(1).max(1))))
            .collect();
        let n: usize = shapes.iter().map(|s| s.0).sum();
        let total: usize = shapes.iter().map(|(b, l)| b * l).sum();
        if n == 0 {
            return Ok(Vec::new());
        }
        let tokens = shapes.iter().map(|(b, l)| b * l).max().unwrap_or(0);
        let scores = shapes.iter().filter(|(b, _)| !fused_attention(d.head_dim, *b)).map(|(b, l)| b * d.heads * l * l).max().unwrap_or(0);
        if let Some(budget) = self.budget {
            let need = self.weight_bytes + CONTEXT_BYTES + workspace_bytes(h, d.inter, tokens, scores) + io_bytes(h, n, total);
            if need > budget {
                return Err(EncoderError::OutOfMemory(format!(
                    "{n} sequences in passes of up to {tokens} padded tokens need {} MiB, over the budget of {} MiB",
                    need >> 20,
                    budget >> 20
                )));
            }
        }
        let mut ids = vec![0i32; total];
        let mut lens = Vec::with_capacity(n);
        let mut at = 0;
        for (batch, &(b, l)) in batches.iter().zip(&shapes) {
            for (r, &i) in batch.iter().enumerate() {
                for (j, &id) in seqs[i].iter().enumerate() {
                    ids[at + r * l + j] = id as i32;
                }
                lens.push(seqs[i].len() as i32);
            }
            at += b * l;
        }
        let s = &self.stream;
        let mut guard = self.workspace.lock().map_err(|_| EncoderError::Gpu("the workspace lock is poisoned".into()))?;
        if guard.as_ref().is_none_or(|w| w.tokens < tokens || w.scores_len < scores) {
            let (t0, s0) = guard.as_ref().map_or((0, 0), |w| (w.tokens, w.scores_len));
            *guard = None; // free the old one first
            *guard = Some(Workspace::new(s, &d, tokens.max(t0), scores.max(s0))?);
        }
        let Some(ws) = guard.as_mut() else { return Err(EncoderError::Gpu("no workspace".into())) };
        let d_ids = s.clone_htod(&ids).map_err(driver("copy ids"))?;
        let d_lens = s.clone_htod(&lens).map_err(driver("copy lengths"))?;
        let mut pooled = s.alloc_zeros::<f32>(n * h).map_err(driver("allocate output"))?;
        let (mut t_at, mut s_at) = (0, 0);
        let mut marks: Marks = self.profile.as_ref().map(|_| Vec::new());
        for &(b, l) in &shapes {
            let pass_ids = d_ids.slice(t_at..t_at + b * l);
            let pass_lens = d_lens.slice(s_at..s_at + b);
            let mut out = pooled.slice_mut(s_at * h..(s_at + b) * h);
            self.forward(ws, &pass_ids, &pass_lens, b, l, pooling, &mut out, &mut marks)?;
            t_at += b * l;
            s_at += b;
        }
        self.mark(&mut marks, "end")?;
        let vectors = s.clone_dtoh(&pooled).map_err(driver("copy results back"))?;
        if let (Some(marks), Some(profile)) = (marks, &self.profile)
            && let Ok(mut totals) = profile.lock()
        {
            for w in marks.windows(2) {
                if w[0].0 != "end" {
                    *totals.entry(w[0].0).or_default() += f64::from(w[0].1.elapsed_ms(&w[1].1).unwrap_or(0.0));
                }
            }
        }
        Ok(vectors)
    }

    /// Record that step `name` starts here (profiling only).
    fn mark(&self, marks: &mut Marks, name: &'static str) -> Result<(), EncoderError> {
        if let Some(m) = marks {
            let flags = cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
            m.push((name, self.stream.record_event(Some(flags)).map_err(driver("event"))?));
        }
        Ok(())
    }

    /// Device milliseconds per step so far (empty unless `CURATOR_ENCODER_PROFILE` is set).
    pub fn profile(&self) -> Vec<(String, f64)> {
        let Some(Ok(p)) = self.profile.as_ref().map(|p| p.lock()) else { return Vec::new() };
        p.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// One pass: `b` sequences padded to `l` tokens, pooled into `out` (`b × hidden`).
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &self,
        ws: &mut Workspace,
        ids: &CudaView<i32>,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        pooling: Pooling,
        out: &mut CudaViewMut<f32>,
        marks: &mut Marks,
    ) -> Result<(), EncoderError> {
        let d = self.dims;
        let (t, h) = (b * l, d.hidden);
        let k = &self.k;
        self.mark(marks, "embed")?;
        k.embed(&self.stream, ids, l, &d, self, &mut ws.x)?;
        let fused = fused_attention(d.head_dim, b);
        for layer in &self.layers {
            self.mark(marks, "gemm qkv")?;
            self.matmul(&layer.qkv, &ws.x, t, &mut ws.qkv)?;
            if fused {
                self.mark(marks, "attention")?;
                k.attention(&self.stream, &ws.qkv, &layer.qkv.b, lens, b, l, &d, &mut ws.merged)?;
            } else {
                self.split_attention(ws, &layer.qkv.b, lens, b, l, marks)?;
            }
            self.mark(marks, "gemm attn_out")?;
            self.matmul(&layer.attn_out, &ws.merged, t, &mut ws.a)?;
            self.mark(marks, "add_norm")?;
            // merged = LN(a + bias + x); then it is the layer's attention output.
            k.add_norm(&self.stream, &ws.a, &layer.attn_out.b, &ws.x, &layer.attn_norm, t, &d, &mut ws.merged)?;
            std::mem::swap(&mut ws.a, &mut ws.merged);
            self.mark(marks, "gemm up")?;
            self.matmul(&layer.up, &ws.a, t, &mut ws.inter)?;
            self.mark(marks, "bias_act")?;
            k.bias_act(&self.stream, &mut ws.inter, &layer.up.b, t, d.inter, d.act)?;
            self.mark(marks, "gemm down")?;
            self.matmul(&layer.down, &ws.inter, t, &mut ws.merged)?;
            // x = LN(down + bias + a)
            self.mark(marks, "add_norm")?;
            k.add_norm(&self.stream, &ws.merged, &layer.down.b, &ws.a, &layer.out_norm, t, &d, &mut ws.x)?;
        }
        self.mark(marks, "pool")?;
        k.pool(&self.stream, &ws.x, lens, b, l, h, pooling, out)
    }

    /// Attention as separate steps (heads the fused kernel does not cover): split into
    /// per-head Q, K, V, scores by cuBLAS, softmax, context by cuBLAS, heads merged into
    /// `ws.merged`.
    fn split_attention(
        &self,
        ws: &mut Workspace,
        qkv_bias: &CudaSlice<f32>,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        marks: &mut Marks,
    ) -> Result<(), EncoderError> {
        let d = self.dims;
        let t = b * l;
        let k = &self.k;
        let scale = f16::from_f32(1.0 / (d.head_dim as f32).sqrt());
        self.mark(marks, "split_qkv")?;
        k.split_qkv(&self.stream, &ws.qkv, qkv_bias, t, l, &d, &mut ws.q, &mut ws.k, &mut ws.v)?;
        // scores[bh] = Q Kᵀ / √dh, row-major L × L.
        let (l_i, dh_i) = (l as i32, d.head_dim as i32);
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
        // SAFETY: b × heads matrices of L × dh (K, Q) and L × L (scores), within the
        // workspace's sizes for this pass.
        self.mark(marks, "gemm scores")?;
        unsafe { self.blas.gemm_strided_batched(cfg, &ws.k, &ws.q, &mut ws.scores) }.map_err(driver("cuBLAS scores"))?;
        self.mark(marks, "softmax")?;
        k.softmax_rows(&self.stream, &mut ws.scores, b * d.heads * l, l, d.heads, lens)?;
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
        // SAFETY: V (L × dh), P (L × L), ctx (L × dh) per head, within the workspace.
        self.mark(marks, "gemm context")?;
        unsafe { self.blas.gemm_strided_batched(cfg, &ws.v, &ws.scores, &mut ws.ctx) }.map_err(driver("cuBLAS context"))?;
        self.mark(marks, "merge_heads")?;
        k.merge_heads(&self.stream, &ws.ctx, t, l, &d, &mut ws.merged)?;
        Ok(())
    }
}

impl Kernels {
    /// `attention32` / `attention64(qkv, bias, lens, L, H, heads, scale, out)`: a block of
    /// four warps per 64 queries of one (sequence, head).
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        s: &Arc<CudaStream>,
        qkv: &CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        d: &Dims,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let f = match d.head_dim {
            32 => &self.attention32,
            64 => &self.attention64,
            other => return Err(EncoderError::Gpu(format!("no fused attention for heads of {other}"))),
        };
        let (l_i, h_i, heads_i) = (l as i32, d.hidden as i32, d.heads as i32);
        let scale = 1.0 / (d.head_dim as f32).sqrt();
        debug_assert!(qkv.len() >= b * l * 3 * d.hidden && out.len() >= b * l * d.hidden && bias.len() == 3 * d.hidden);
        debug_assert!(lens.len() == b && l.is_multiple_of(8) && d.hidden.is_multiple_of(2) && b <= 65_535);
        let mut a = s.launch_builder(f);
        a.arg(qkv).arg(bias).arg(lens).arg(&l_i).arg(&h_i).arg(&heads_i).arg(&scale).arg(out);
        let cfg = LaunchConfig { grid_dim: (l.div_ceil(64) as u32, d.heads as u32, b as u32), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the C parameters of `attention32`/`attention64` in order and type (unsigned
        // short* qkv, float* bias, int* lens, int L, int H, int heads, float scale, unsigned
        // short* out), the variant matching the head size; block (x, head, seq) reads rows of
        // sequence `seq` only (b × L rows of 3H) and only below L, and writes its queries' rows
        // (below L) of `out` (b × L × H); lens holds b lengths ≤ L. Every 32-bit access is at
        // an even element offset (H, L and the head size are even).
        unsafe { a.launch(cfg) }.map(drop).map_err(driver("attention"))
    }

    /// `embed(ids, L, vocab, max_pos, pos_offset, word, pos, type0, gamma, beta, eps, H, out)`:
    /// one block per token of the pass (`ids.len()` of them).
    fn embed(
        &self,
        s: &Arc<CudaStream>,
        ids: &CudaView<i32>,
        l: usize,
        d: &Dims,
        m: &GpuModel,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (l, vocab, max_pos, off, h) = (l as i32, d.vocab as i32, d.max_pos as i32, d.pos_offset as i32, d.hidden as i32);
        debug_assert!(out.len() >= ids.len() * d.hidden);
        let mut a = s.launch_builder(&self.embed);
        a.arg(ids).arg(&l).arg(&vocab).arg(&max_pos).arg(&off).arg(&m.word).arg(&m.position).arg(&m.token_type);
        a.arg(&m.embed_norm.gamma).arg(&m.embed_norm.beta).arg(&d.eps).arg(&h).arg(out);
        // SAFETY: the arguments are `embed`'s C parameters in order and type (int* ids,
        // int L, int vocab, int max_pos, int pos_offset, 3 × unsigned short* tables,
        // 2 × float* norm, float eps, int H, unsigned short* out); the kernel clamps ids to the
        // vocabulary and positions to the table, and writes ids.len() rows of H into `out`.
        unsafe { a.launch(rows_cfg(ids.len(), d.hidden)) }.map(drop).map_err(driver("embed"))
    }

    /// `add_norm(x, bias, residual, gamma, beta, eps, H, out)` over `t` rows.
    #[allow(clippy::too_many_arguments)]
    fn add_norm(
        &self,
        s: &Arc<CudaStream>,
        x: &CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        residual: &CudaSlice<f16>,
        norm: &GNorm,
        t: usize,
        d: &Dims,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let h = d.hidden as i32;
        debug_assert!(x.len() >= t * d.hidden && residual.len() >= t * d.hidden && out.len() >= t * d.hidden && bias.len() == d.hidden);
        if d.hidden <= 1024 && d.hidden.is_multiple_of(2) {
            let rows = t as i64;
            let mut a = s.launch_builder(&self.add_norm_warp);
            a.arg(x).arg(bias).arg(residual).arg(&norm.gamma).arg(&norm.beta).arg(&d.eps).arg(&h).arg(&rows).arg(out);
            let cfg = LaunchConfig { grid_dim: (t.div_ceil(8) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: `add_norm_warp`'s C parameters in order and type (unsigned short* x,
            // float* bias, unsigned short* residual, float* gamma, float* beta, float eps, int H,
            // long long rows, unsigned short* out); warp r < rows reads row r of x and residual
            // (H ≤ 1024 even values, 32-bit aligned) into registers before writing row r of out.
            return unsafe { a.launch(cfg) }.map(drop).map_err(driver("add_norm"));
        }
        let mut a = s.launch_builder(&self.add_norm);
        a.arg(x).arg(bias).arg(residual).arg(&norm.gamma).arg(&norm.beta).arg(&d.eps).arg(&h).arg(out);
        // SAFETY: `add_norm`'s C parameters in order and type (unsigned short* x, float* bias,
        // unsigned short* residual, float* gamma, float* beta, float eps, int H, unsigned
        // short* out); t blocks each read and write one row of H inside the t × H buffers.
        unsafe { a.launch(rows_cfg(t, d.hidden)) }.map(drop).map_err(driver("add_norm"))
    }

    /// `split_qkv(qkv, bias, L, H, heads, dh, q, k, v)`: one block per token of `t`.
    #[allow(clippy::too_many_arguments)]
    fn split_qkv(
        &self,
        s: &Arc<CudaStream>,
        qkv: &CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        t: usize,
        l: usize,
        d: &Dims,
        q: &mut CudaSlice<f16>,
        k: &mut CudaSlice<f16>,
        v: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (l, h, heads, dh) = (l as i32, d.hidden as i32, d.heads as i32, d.head_dim as i32);
        debug_assert!(qkv.len() >= t * 3 * d.hidden && q.len() >= t * d.hidden && k.len() >= t * d.hidden && v.len() >= t * d.hidden);
        let mut a = s.launch_builder(&self.split_qkv);
        a.arg(qkv).arg(bias).arg(&l).arg(&h).arg(&heads).arg(&dh).arg(q).arg(k).arg(v);
        // SAFETY: `split_qkv`'s C parameters in order and type (unsigned short* qkv, float*
        // bias, int L, int H, int heads, int dh, 3 × unsigned short* out); block r reads row r
        // of the t × 3H product and writes its 3H values inside the three t × H buffers.
        unsafe { a.launch(rows_cfg(t, 0)) }.map(drop).map_err(driver("split_qkv"))
    }

    /// `merge_heads(ctx, L, H, heads, dh, out)`: one block per token of `t`.
    fn merge_heads(
        &self,
        s: &Arc<CudaStream>,
        ctx: &CudaSlice<f16>,
        t: usize,
        l: usize,
        d: &Dims,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (l, h, heads, dh) = (l as i32, d.hidden as i32, d.heads as i32, d.head_dim as i32);
        debug_assert!(ctx.len() >= t * d.hidden && out.len() >= t * d.hidden);
        let mut a = s.launch_builder(&self.merge_heads);
        a.arg(ctx).arg(&l).arg(&h).arg(&heads).arg(&dh).arg(out);
        // SAFETY: `merge_heads`'s C parameters in order and type (unsigned short* ctx, int L,
        // int H, int heads, int dh, unsigned short* out); block r writes row r of `out` from
        // the same token's values in ctx, both t × H.
        unsafe { a.launch(rows_cfg(t, 0)) }.map(drop).map_err(driver("merge_heads"))
    }

    /// `softmax_rows(s, rows, L, heads, lens)`: one warp per row of `L` scores.
    fn softmax_rows(
        &self,
        s: &Arc<CudaStream>,
        scores: &mut CudaSlice<f16>,
        rows: usize,
        l: usize,
        heads: usize,
        lens: &CudaView<i32>,
    ) -> Result<(), EncoderError> {
        let (rows_i, l_i, heads_i) = (rows as i64, l as i32, heads as i32);
        debug_assert!(scores.len() >= rows * l && lens.len() * heads * l == rows);
        let mut a = s.launch_builder(&self.softmax_rows);
        a.arg(scores).arg(&rows_i).arg(&l_i).arg(&heads_i).arg(lens);
        let warps = 8u32;
        let cfg = LaunchConfig {
            grid_dim: ((rows as u64).div_ceil(warps as u64) as u32, 1, 1),
            block_dim: (warps * 32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `softmax_rows`'s C parameters in order and type (unsigned short* s, long
        // long rows, int L, int heads, int* lens); warps past `rows` return, each row is L
        // values inside the scores buffer, and lens holds one length per sequence (rows /
        // (heads × L) of them).
        unsafe { a.launch(cfg) }.map(drop).map_err(driver("softmax"))
    }

    /// `bias_act(x, bias, N, act)` over `rows` rows of `n` values.
    fn bias_act(
        &self,
        s: &Arc<CudaStream>,
        x: &mut CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        rows: usize,
        n: usize,
        act: i32,
    ) -> Result<(), EncoderError> {
        let n_i = n as i32;
        debug_assert!(x.len() >= rows * n && bias.len() == n);
        let mut a = s.launch_builder(&self.bias_act);
        a.arg(x).arg(bias).arg(&n_i).arg(&act);
        // SAFETY: `bias_act`'s C parameters in order and type (unsigned short* x, float* bias,
        // int N, int act); block r updates row r of x (N values) in place, inside rows × N.
        unsafe { a.launch(rows_cfg(rows, 0)) }.map(drop).map_err(driver("bias_act"))
    }

    /// `pool(x, lens, L, H, mode, out)`: one block per sequence.
    #[allow(clippy::too_many_arguments)]
    fn pool(
        &self,
        s: &Arc<CudaStream>,
        x: &CudaSlice<f16>,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        h: usize,
        pooling: Pooling,
        out: &mut CudaViewMut<f32>,
    ) -> Result<(), EncoderError> {
        let (l_i, h_i, mode) = (l as i32, h as i32, i32::from(pooling == Pooling::Cls));
        debug_assert!(x.len() >= b * l * h && lens.len() == b && out.len() == b * h);
        let mut a = s.launch_builder(&self.pool);
        a.arg(x).arg(lens).arg(&l_i).arg(&h_i).arg(&mode).arg(out);
        let cfg = LaunchConfig { grid_dim: (b as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: `pool`'s C parameters in order and type (unsigned short* x, int* lens, int
        // L, int H, int mode, float* out); block i reads sequence i's first lens[i] ≤ L rows
        // of H and writes row i of `out` (b × H).
        unsafe { a.launch(cfg) }.map(drop).map_err(driver("pool"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels compile (NVRTC needs no GPU). Skipped, with the reason printed, where no
    /// NVRTC library is found; scripts/models/gpu-models.sh runs them on a GPU.
    #[test]
    fn kernels_compile_with_nvrtc() {
        // SAFETY: only probes for the shared library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: no NVRTC library (libnvrtc) on this machine");
            return;
        }
        let dir = std::env::temp_dir().join(format!("curator-kernels-{}", std::process::id()));
        let (ptx, from) = kernels_ptx(Some(&dir), (9, 0)).unwrap();
        assert_eq!(from, "compiled");
        for entry in [
            "embed",
            "add_norm",
            "split_qkv",
            "merge_heads",
            "softmax_rows",
            "bias_act",
            "pool",
            "attention32",
            "attention64",
            "add_norm_warp",
        ] {
            assert!(ptx.to_src().contains(&format!(".entry {entry}")), "{entry} missing");
        }
        // The second time it comes from the cache.
        assert_eq!(kernels_ptx(Some(&dir), (9, 0)).unwrap().1, "cached");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn activation_memory_is_the_workspace_and_the_io_of_a_pass() {
        let minilm = ModelConfig::parse(
            r#"{"hidden_size":384,"intermediate_size":1536,"num_attention_heads":12,"num_hidden_layers":6,"vocab_size":30522}"#,
        )
        .unwrap();
        // Heads of 32: fused attention, no q/k/v/context buffers and no scores. 64 × 128 tokens:
        // 2 B × T × (6 H + I) of activations, 4 B per id, and per sequence its length and its
        // pooled vector.
        let t: u64 = 64 * 128;
        assert_eq!(activation_bytes(&minilm, 64, 128), 2 * t * (6 * 384 + 1536) + 4 * t + 64 * (4 + 4 * 384));
        // At equal tokens, the fused path's memory does not grow with the sequence length.
        assert!(activation_bytes(&minilm, 32, 256) <= activation_bytes(&minilm, 64, 128));
        // Heads of 48 take the split path: four more buffers of T × H and the L² scores.
        let odd = ModelConfig::parse(
            r#"{"hidden_size":384,"intermediate_size":1536,"num_attention_heads":8,"num_hidden_layers":6,"vocab_size":30522}"#,
        )
        .unwrap();
        let scores: u64 = 2 * 64 * 8 * 128 * 128;
        assert_eq!(activation_bytes(&odd, 64, 128), 2 * t * (10 * 384 + 1536) + scores + 4 * t + 64 * (4 + 4 * 384));
        assert!(activation_bytes(&odd, 32, 256) > activation_bytes(&odd, 64, 128), "L² scores");
    }
}
