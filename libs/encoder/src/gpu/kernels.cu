// The encoder's CUDA kernels, compiled at run time by NVRTC (gpu/mod.rs::kernels_ptx); each
// `extern "C"` signature here is matched by one typed launcher in gpu/launch.rs.
//
// The same source also compiles as C++ on the CPU under `CURATOR_EMULATED_CUDA`
// (tests/emulate/cuda.h: each thread of a block a CPU thread, warps' collectives and the
// tensor cores' mma emulated), where tests run the kernels against plain references: the only
// GPU-specific code that then changes is the inline PTX below.
#ifndef CURATOR_EMULATED_CUDA
__device__ __forceinline__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
#define DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

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

// Layer norm of `row` (n floats in shared memory) into out (fp16) and, when out32 is not null,
// into out32 as well (the post-norm encoders' residual stream, kept in f32).
__device__ void norm_row(float* row, int n, const float* gamma, const float* beta, float eps, unsigned short* out, float* red,
                         float* out32 = nullptr) {
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += row[j];
    float mean = block_sum(s, red) / n;
    float q = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { float d = row[j] - mean; q += d * d; }
    float inv = rsqrtf(block_sum(q, red) / n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float y = (row[j] - mean) * inv * gamma[j] + beta[j];
        out[j] = f2h(y);
        if (out32) out32[j] = y;
    }
}

// One block per token: word + position + token type, then layer norm, into out (fp16, the
// products' input) and res (f32, the residual stream).
extern "C" __global__ void embed(const int* ids, int L, int vocab, int max_pos, int pos_offset, const unsigned short* word,
                                 const unsigned short* pos, const unsigned short* type0, const float* gamma, const float* beta,
                                 float eps, int H, unsigned short* out, float* res) {
    DYNAMIC_SHARED(float, row);
    __shared__ float red[32];
    int t = blockIdx.x;
    int id = ids[t];
    if (id < 0 || id >= vocab) id = 0;
    int p = t % L + pos_offset;
    if (p >= max_pos) p = max_pos - 1;
    for (int j = threadIdx.x; j < H; j += blockDim.x)
        row[j] = h2f(word[(long long)id * H + j]) + h2f(pos[(long long)p * H + j]) + h2f(type0[j]);
    __syncthreads();
    norm_row(row, H, gamma, beta, eps, out + (long long)t * H, red, res + (long long)t * H);
}

// Post-norm layers (BERT, DeBERTa): res = LayerNorm(x + bias + res), the residual stream in
// f32 (as PyTorch's autocast keeps it: its layer norms run in f32), in place; out gets the
// same in fp16 for the next product. One block per row.
extern "C" __global__ void add_norm(const unsigned short* x, const float* bias, float* res, const float* gamma, const float* beta,
                                    float eps, int H, unsigned short* out) {
    DYNAMIC_SHARED(float, row);
    __shared__ float red[32];
    long long base = (long long)blockIdx.x * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) row[j] = h2f(x[base + j]) + bias[j] + res[base + j];
    __syncthreads();
    norm_row(row, H, gamma, beta, eps, out + base, red, res + base);
}

// CLIP's embeddings: x[t] = LayerNorm(a[t] + table[t % period]) (a: the patches' products, the
// class token's row zero; table: the positions with the class embedding added to row 0, zero
// rows past the tokens). One block per row.
extern "C" __global__ void patch_embed(const unsigned short* a, const unsigned short* table, int period, const float* gamma,
                                       const float* beta, float eps, int H, unsigned short* x) {
    DYNAMIC_SHARED(float, row);
    __shared__ float red[32];
    long long base = (long long)blockIdx.x * H;
    long long p = (long long)(blockIdx.x % period) * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) row[j] = h2f(a[base + j]) + h2f(table[p + j]);
    __syncthreads();
    norm_row(row, H, gamma, beta, eps, x + base, red);
}

// Pre-norm layers (CLIP): with `add`, the residual stream x[t] += a[t] + bias (kept in fp16, as
// PyTorch keeps it); then out[t] = LayerNorm(x[t]). One block per row.
extern "C" __global__ void residual_norm(const unsigned short* a, const float* bias, int add, unsigned short* x, const float* gamma,
                                         const float* beta, float eps, int H, unsigned short* out) {
    DYNAMIC_SHARED(float, row);
    __shared__ float red[32];
    long long base = (long long)blockIdx.x * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float v = h2f(x[base + j]);
        if (add) {
            unsigned short r = f2h(v + h2f(a[base + j]) + bias[j]);
            x[base + j] = r;
            v = h2f(r);
        }
        row[j] = v;
    }
    __syncthreads();
    norm_row(row, H, gamma, beta, eps, out + base, red);
}

// out = LayerNorm(x + bias + residual) for rows of H <= 1024 values (H even): one warp per
// row, the row read once into registers (two fp16 values per 32-bit load), warp shuffles only.
#define NORM_PAIRS 16
// The warp's row (its lane's pairs in v, their sum in s) layer-normed into o2, two fp16 values
// per 32-bit store (and, when o32 is not null, the f32 values two per 64-bit store): what the
// warp-per-row norm kernels end with.
__device__ __forceinline__ void warp_norm(const float* v, float s, int lane, int pairs, int H, const float* gamma, const float* beta,
                                          float eps, unsigned int* o2, float2* o32 = nullptr) {
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
        if (p < pairs) {
            float y0 = (v[2 * k] - mean) * inv * gamma[2 * p] + beta[2 * p];
            float y1 = (v[2 * k + 1] - mean) * inv * gamma[2 * p + 1] + beta[2 * p + 1];
            o2[p] = (unsigned int)f2h(y0) | ((unsigned int)f2h(y1) << 16);
            if (o32) o32[p] = make_float2(y0, y1);
        }
    }
}

// The warp's row read into registers: lane's pairs p = lane + 32k (below `pairs`) in v, two
// values each from `load(p, v0, v1)`; their sum (the others zero). What the warp-per-row
// norm kernels begin with.
template <typename Load>
__device__ __forceinline__ float warp_row(float* v, int lane, int pairs, Load load) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_PAIRS; k++) {
        int p = lane + 32 * k;
        v[2 * k] = 0.0f;
        v[2 * k + 1] = 0.0f;
        if (p < pairs) {
            load(p, v[2 * k], v[2 * k + 1]);
            s += v[2 * k] + v[2 * k + 1];
        }
    }
    return s;
}
extern "C" __global__ void add_norm_warp(const unsigned short* x, const float* bias, float* res, const float* gamma,
                                         const float* beta, float eps, int H, long long rows, unsigned short* out) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const unsigned int* x2 = (const unsigned int*)(x + r * H);
    float2* r2 = (float2*)(res + r * H);
    unsigned int* o2 = (unsigned int*)(out + r * H);
    int pairs = H / 2;
    float v[2 * NORM_PAIRS];
    float s = warp_row(v, lane, pairs, [&](int p, float& v0, float& v1) {
        unsigned int a = x2[p];
        float2 c = r2[p];
        v0 = h2f((unsigned short)(a & 0xffff)) + bias[2 * p] + c.x;
        v1 = h2f((unsigned short)(a >> 16)) + bias[2 * p + 1] + c.y;
    });
    // Every lane has read its pairs of res before any writes them: in place is safe.
    warp_norm(v, s, lane, pairs, H, gamma, beta, eps, o2, r2);
}

// residual_norm for rows of H <= 1024 values (H even): one warp per row, the row in registers
// (two fp16 values per 32-bit access), warp shuffles only.
extern "C" __global__ void residual_norm_warp(const unsigned short* a, const float* bias, int add, unsigned short* x,
                                              const float* gamma, const float* beta, float eps, int H, long long rows,
                                              unsigned short* out) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const unsigned int* a2 = (const unsigned int*)(a + r * H);
    unsigned int* x2 = (unsigned int*)(x + r * H);
    unsigned int* o2 = (unsigned int*)(out + r * H);
    int pairs = H / 2;
    float v[2 * NORM_PAIRS];
    float s = warp_row(v, lane, pairs, [&](int p, float& v0, float& v1) {
        unsigned int u = x2[p];
        if (add) {
            unsigned int c = a2[p];
            u = (unsigned int)f2h(h2f((unsigned short)(u & 0xffff)) + h2f((unsigned short)(c & 0xffff)) + bias[2 * p])
              | ((unsigned int)f2h(h2f((unsigned short)(u >> 16)) + h2f((unsigned short)(c >> 16)) + bias[2 * p + 1]) << 16);
            x2[p] = u;
        }
        v0 = h2f((unsigned short)(u & 0xffff));
        v1 = h2f((unsigned short)(u >> 16));
    });
    warp_norm(v, s, lane, pairs, H, gamma, beta, eps, o2);
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
    if (act == 3) return v / (1.0f + expf(-1.702f * v));
    return fmaxf(v, 0.0f);
}

// Each row of x[rows, N] = act(row + bias); act 0 gelu (erf), 1 gelu (tanh), 2 relu, 3 quick gelu. One block
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

// One block per sequence: the mean of its first len token states (mode 0) or the first (1),
// from the f32 residual stream.
extern "C" __global__ void pool(const float* x, const int* lens, int L, int H, int mode, float* out) {
    int b = blockIdx.x;
    int len = lens[b];
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        const float* base = x + (long long)b * L * H + j;
        float acc;
        if (mode == 1 || len <= 0) acc = base[0];
        else {
            acc = 0.0f;
            for (int l = 0; l < len; l++) acc += base[(long long)l * H];
            acc /= len;
        }
        out[(long long)b * H + j] = acc;
    }
}
// Fused attention (FlashAttention-2's scheme on the tensor cores, mma.m16n8k16, fp16 in, f32
// accumulation), straight from the QKV product [T, 3H] (bias not yet added) into the context
// [T, H]: no split, no score matrix, no merge. One warp per 16 query rows of one (sequence,
// head), four warps per block sharing the keys and values in shared memory 64 at a time; keys
// in blocks of 16 within a tile, softmax online (one step per 64 keys measured slower: the
// scores of 64 keys take registers the warp needs). Keys at or past the sequence's length are
// masked (their values read as 0, so garbage in padded rows never reaches real ones); query
// tiles wholly past it are skipped (padded rows are never read for real tokens). The key bias
// shifts every score of a row equally and softmax ignores that, so it is dropped; the value
// bias is added once at the end (the weights of a row sum to 1).
__device__ __forceinline__ unsigned int pack2(float lo, float hi) {
    return (unsigned int)f2h(lo) | ((unsigned int)f2h(hi) << 16);
}
#ifndef CURATOR_EMULATED_CUDA
__device__ __forceinline__ void mma16816(float* c, const unsigned int* a, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif
// DeBERTa's disentangled attention takes the same kernel with REL: each score (i, j) also gets
// the content→position term (q_i + b_q)·pos_key[r] and the position→content term
// (k_j + b_k)·pos_query[r], r = rel_index[i - j + center], over the score divisor, in f32 before
// the mask and the softmax; both made inside the kernel on the tensor cores (no tables, no
// score matrix, no probabilities written, no context product). `RelArgs`: each layer's
// projected relative embeddings per head (`[heads, rows, DH]`, their projections' biases
// included), stored in fragment order (see `fragment_order` in device.rs), and each distance's
// row.
struct RelArgs {
    const unsigned short* pos_key;    // content -> position (c2p), or null
    const unsigned short* pos_query;  // position -> content (p2c), or null
    const int* rel_index;
    int rows, center, use_c2p, use_p2c;
};
// Per warp, the step's position terms by distance: rows of 16 (queries for c2p, keys for p2c)
// by 32 distances, 39 floats apart (two-way bank conflicts at most, writes and reads).
#define REL_STRIDE 39
// DeBERTa: one n-tile of a position term, acc = A × the embeddings of 8 distances (lane's
// distance: embedding row `row`), A being the 16 rows' fragments `a`. The embeddings are stored
// in fragment order: this lane's B words for every k-step are DH/4 consecutive halves, DH/32
// 16-byte loads.
template <int DH>
__device__ __forceinline__ void rel_tile(const unsigned int (*a)[4], const unsigned short* pos, int row, int tig, float* acc) {
    const uint4* src = (const uint4*)(pos + row * DH + tig * (DH / 4));
    unsigned int w[DH / 8];
#pragma unroll
    for (int v = 0; v < DH / 32; v++) {
        uint4 x = __ldg(src + v);
        w[4 * v] = x.x; w[4 * v + 1] = x.y; w[4 * v + 2] = x.z; w[4 * v + 3] = x.w;
    }
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
#pragma unroll
    for (int s = 0; s < DH / 16; s++) mma16816(acc, a[s], w[2 * s], w[2 * s + 1]);
}
// DeBERTa with REUSE (below): c2p's n-tiles [NT0, NT1) of the distances D0 + 8 nt + (0..7) (lane
// l's embedding row, that of distance D0 + l, in `my_row`), the products of the queries'
// fragments `qa` and the distances' key embeddings, into the warp's ring `cs`: distance d in
// column d & 31.
template <int DH>
__device__ __forceinline__ void c2p_ring_tiles(const unsigned int (*qa)[4], const unsigned short* pos_k, int my_row, int D0, int nt0,
                                               int nt1, float* cs, int g, int tig) {
#pragma unroll
    for (int nt = nt0; nt < nt1; nt++) {
        float acc[4];
        rel_tile<DH>(qa, pos_k, __shfl_sync(0xffffffff, my_row, 8 * nt + g), tig, acc);
        int c0 = (D0 + 8 * nt + 2 * tig) & 31, c1 = (D0 + 8 * nt + 2 * tig + 1) & 31;
        cs[g * REL_STRIDE + c0] = acc[0];
        cs[g * REL_STRIDE + c1] = acc[1];
        cs[(g + 8) * REL_STRIDE + c0] = acc[2];
        cs[(g + 8) * REL_STRIDE + c1] = acc[3];
    }
}
// DeBERTa with SHARE (below): the block's p2c products of one step of 16 keys, their fragments
// (K with its bias, from `kstep`, the step's first row of the key tile) by the query embeddings
// of the 80 distances Db + c (c < 80) that the block's 64 queries have with them. Warp w makes
// n-tiles w, w + 4 and w + 8 (those under 10), scaled, into `out`: 16 keys by 80 distances,
// P2C_STRIDE floats apart (7 mod 32, as REL_STRIDE: two-way bank conflicts at most).
#define P2C_STRIDE 103
template <int DH>
__device__ __forceinline__ void p2c_block_tiles(const unsigned short* kstep, const unsigned short* pos_q, const int* rel_index, int center,
                                                int dmax, int Db, float scale, float* out, int warp, int g, int tig) {
    if (pos_q == nullptr) return;
    unsigned int a[DH / 16][4];
#pragma unroll
    for (int s = 0; s < DH / 16; s++) {
        const unsigned short* kr = kstep + g * (DH + 8) + 16 * s + tig * 2;
        a[s][0] = *(const unsigned int*)kr;
        a[s][1] = *(const unsigned int*)(kr + 8 * (DH + 8));
        a[s][2] = *(const unsigned int*)(kr + 8);
        a[s][3] = *(const unsigned int*)(kr + 8 * (DH + 8) + 8);
    }
#pragma unroll
    for (int i = 0; i < 3; i++) {
        int nt = warp + 4 * i;
        if (nt >= 10) break;
        float acc[4];
        rel_tile<DH>(a, pos_q, __ldg(rel_index + min(max(Db + 8 * nt + g, -dmax), dmax) + center), tig, acc);
        out[g * P2C_STRIDE + 8 * nt + 2 * tig] = acc[0] * scale;
        out[g * P2C_STRIDE + 8 * nt + 2 * tig + 1] = acc[1] * scale;
        out[(g + 8) * P2C_STRIDE + 8 * nt + 2 * tig] = acc[2] * scale;
        out[(g + 8) * P2C_STRIDE + 8 * nt + 2 * tig + 1] = acc[3] * scale;
    }
}
// REUSE (DeBERTa only): a warp's queries are the same at every step and each step's 32
// distances are the previous step's less 16, so c2p's half of them were made one step before.
// Its 32 columns are then a ring, distance d in column d & 31: the first step makes all 32, each
// later one the 16 new ones (in the columns of the 16 no longer needed), halving c2p's products,
// embedding loads and stores.
// SHARE (DeBERTa only): the four warps' p2c products of a step share its keys (the A operand)
// and their distances overlap (each warp's are the next one's plus 16): the block makes the 80
// distinct ones once (`p2c_block_tiles`, 10 n-tiles where the warps made 16), in a shared
// buffer (two, by step parity, so one barrier a step keeps writes and reads apart). Warps whose
// queries are all padding still make their share.
template <int DH, bool REL, bool REUSE = false, bool SHARE = false>
__device__ void attention(const unsigned short* qkv, const float* bias, const int* lens, int L, int H, int heads, float scale,
                          unsigned short* out, RelArgs rel) {
    // The block's keys and values, 64 at a time, shared by its four warps: K as rows, V
    // transposed (so a pair of consecutive keys of one dimension is one 32-bit word, the mma's
    // B operand); rows padded by 8 so the warps' fragment loads hit 32 different banks.
    __shared__ unsigned short ks[64 * (DH + 8)];
    __shared__ unsigned short vt[DH * (64 + 8)];
    __shared__ float rel_s[REL ? 4 : 1][REL ? (SHARE ? 1 : 2) * 16 * REL_STRIDE : 1];
    __shared__ float p2c_s[SHARE ? 2 : 1][SHARE ? 16 * P2C_STRIDE : 1];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int g = lane >> 2, tig = lane & 3;
    int head = blockIdx.y, b = blockIdx.z;
    int q0 = blockIdx.x * 64 + warp * 16;
    int len = lens[b];
    if (blockIdx.x * 64 >= len) return;  // the whole block is padding
    bool active = q0 < len;               // this warp's rows (the others still help load)
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
    // DeBERTa: the head's projected relative embeddings, the farthest distance.
    const unsigned short* pos_k = REL && rel.use_c2p ? rel.pos_key + (long long)head * rel.rows * DH : nullptr;
    const unsigned short* pos_q = REL && rel.use_p2c ? rel.pos_query + (long long)head * rel.rows * DH : nullptr;
    int dmax = L - 1;
    if (REL && REUSE && pos_k != nullptr && active) {
        // The first step's 16 far distances (D0 + 16 ... D0 + 31), which no step before made.
        int D0 = q0 - 15;
        int my_row = __ldg(rel.rel_index + min(max(D0 + lane, -dmax), dmax) + rel.center);
        c2p_ring_tiles<DH>(qa, pos_k, my_row, D0, 2, 4, rel_s[warp], g, tig);
    }
    for (int t0 = 0; t0 < len; t0 += 64) {
        __syncthreads();  // every warp is done with the previous tile
        for (int i = threadIdx.x; i < 64 * DH / 2; i += blockDim.x) {
            int key = i / (DH / 2), pr = i % (DH / 2);
            unsigned int kv = 0, vv = 0;
            if (t0 + key < len) {
                const unsigned short* row = base + (long long)(t0 + key) * H3;
                kv = *(const unsigned int*)(row + kc + 2 * pr);
                vv = *(const unsigned int*)(row + vc + 2 * pr);
                // DeBERTa's p2c term reads K with its bias (in Q Kᵀ it adds q·b_k to a whole
                // row of scores, which the softmax cancels).
                if (REL) kv = pack2(h2f((unsigned short)(kv & 0xffff)) + bias[kc + 2 * pr], h2f((unsigned short)(kv >> 16)) + bias[kc + 2 * pr + 1]);
            }
            *(unsigned int*)(ks + key * (DH + 8) + 2 * pr) = kv;
            vt[(2 * pr) * (64 + 8) + key] = (unsigned short)(vv & 0xffff);
            vt[(2 * pr + 1) * (64 + 8) + key] = (unsigned short)(vv >> 16);
        }
        __syncthreads();
        if (!active && !SHARE) continue;
        for (int k16 = 0; k16 < 64 && t0 + k16 < len; k16 += 16) {
            if (SHARE && !active) {
                // Padding queries: only this warp's share of the block's p2c products.
                p2c_block_tiles<DH>(ks + k16 * (DH + 8), pos_q, rel.rel_index, rel.center, dmax, blockIdx.x * 64 - (t0 + k16) - 15, scale,
                                    p2c_s[((t0 + k16) >> 4) & 1], warp, g, tig);
                __syncthreads();
                continue;
            }
            float sc[2][4];
#pragma unroll
            for (int j = 0; j < 2; j++) {
                sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
                const unsigned short* kp = ks + (k16 + 8 * j + g) * (DH + 8) + tig * 2;
#pragma unroll
                for (int s = 0; s < DH / 16; s++)
                    mma16816(sc[j], qa[s], *(const unsigned int*)(kp + 16 * s), *(const unsigned int*)(kp + 16 * s + 8));
            }
            if (REL) {
                // The step's 16 queries and 16 keys have 31 distances, d = D0 + m for m < 31:
                // the position terms by distance, as products on the tensor cores (c2p: the
                // queries' fragments by the distances' key embeddings; p2c: the keys' by their
                // query embeddings), through shared memory to the scores they belong to:
                // score (i, j) reads c2p row i and p2c row j at m = 15 + i - j.
                int D0 = q0 - (t0 + k16) - 15;
                int my_row = __ldg(rel.rel_index + min(max(D0 + lane, -dmax), dmax) + rel.center);
                float* cs = rel_s[warp];
                float* ps = cs + 16 * REL_STRIDE;
                __syncwarp();  // the previous step's reads are done
#pragma unroll
                for (int term = 0; term < 2; term++) {
                    const unsigned short* pos = term == 0 ? pos_k : pos_q;
                    if (pos == nullptr) continue;
                    if (REUSE && term == 0) {
                        // The step's 16 new distances; the other 16 were made one step before
                        // (or, at the first, before the loop).
                        c2p_ring_tiles<DH>(qa, pos_k, my_row, D0, 0, 2, cs, g, tig);
                        continue;
                    }
                    if (SHARE && term == 1) {
                        p2c_block_tiles<DH>(ks + k16 * (DH + 8), pos_q, rel.rel_index, rel.center, dmax, D0 - 16 * warp, scale,
                                            p2c_s[((t0 + k16) >> 4) & 1], warp, g, tig);
                        continue;
                    }
                    // A: Q's fragments (c2p, scaled already) or the step's keys' (p2c).
                    unsigned int a[DH / 16][4];
#pragma unroll
                    for (int s = 0; s < DH / 16; s++) {
                        if (term == 0) {
                            a[s][0] = qa[s][0]; a[s][1] = qa[s][1]; a[s][2] = qa[s][2]; a[s][3] = qa[s][3];
                        } else {
                            const unsigned short* kr = ks + (k16 + g) * (DH + 8) + 16 * s + tig * 2;
                            a[s][0] = *(const unsigned int*)kr;
                            a[s][1] = *(const unsigned int*)(kr + 8 * (DH + 8));
                            a[s][2] = *(const unsigned int*)(kr + 8);
                            a[s][3] = *(const unsigned int*)(kr + 8 * (DH + 8) + 8);
                        }
                    }
                    float* dst = term == 0 ? cs : ps;
                    float f = term == 0 ? 1.0f : scale;
#pragma unroll
                    for (int nt = 0; nt < 4; nt++) {
                        float acc[4];
                        rel_tile<DH>(a, pos, __shfl_sync(0xffffffff, my_row, 8 * nt + g), tig, acc);
                        dst[g * REL_STRIDE + 8 * nt + 2 * tig] = acc[0] * f;
                        dst[g * REL_STRIDE + 8 * nt + 2 * tig + 1] = acc[1] * f;
                        dst[(g + 8) * REL_STRIDE + 8 * nt + 2 * tig] = acc[2] * f;
                        dst[(g + 8) * REL_STRIDE + 8 * nt + 2 * tig + 1] = acc[3] * f;
                    }
                }
                if (SHARE)
                    __syncthreads();  // the block's p2c products, and this warp's c2p, are made
                else
                    __syncwarp();
#pragma unroll
                for (int j = 0; j < 2; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int qi = g + 8 * (e >> 1), kj = 8 * j + 2 * tig + (e & 1);
                        int m = 15 + qi - kj;
                        float v = 0.0f;
                        if (pos_k != nullptr) v += cs[qi * REL_STRIDE + (REUSE ? (D0 + m) & 31 : m)];
                        if (pos_q != nullptr)
                            v += SHARE ? p2c_s[((t0 + k16) >> 4) & 1][kj * P2C_STRIDE + 16 * warp + m] : ps[kj * REL_STRIDE + m];
                        sc[j][e] += v;
                    }
            }
            // Mask keys past the sequence, then the online softmax of rows g (c0, c1) and g+8 (c2, c3).
            float mx0 = -1e30f, mx1 = -1e30f;
#pragma unroll
            for (int j = 0; j < 2; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = t0 + k16 + 8 * j + tig * 2 + (e & 1);
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
            // P as the A operand (16 rows x 16 keys), straight from the score registers; V's
            // fragments from the transposed tile (keys past the sequence are zero there).
            unsigned int pa[4] = {pack2(sc[0][0], sc[0][1]), pack2(sc[0][2], sc[0][3]), pack2(sc[1][0], sc[1][1]), pack2(sc[1][2], sc[1][3])};
#pragma unroll
            for (int j = 0; j < DH / 8; j++) {
                const unsigned short* vp = vt + (8 * j + g) * (64 + 8) + k16 + tig * 2;
                mma16816(o[j], pa, *(const unsigned int*)vp, *(const unsigned int*)(vp + 8));
            }
        }
    }
    if (!active) return;
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
    attention<32, false>(qkv, bias, lens, L, H, heads, scale, out, RelArgs{});
}
extern "C" __global__ void attention64(const unsigned short* qkv, const float* bias, const int* lens, int L, int H, int heads, float scale, unsigned short* out) {
    attention<64, false>(qkv, bias, lens, L, H, heads, scale, out, RelArgs{});
}
// At most 128 registers, so that four blocks share an SM (the bound spills 12 bytes; at three
// blocks, 130 registers and no spill, the forward pass took 2.87 s against 2.75 s on an H200).
#define DEBERTA_ATTENTION(NAME, DH, REUSE, SHARE)                                                                               \
    extern "C" __global__ void __launch_bounds__(128, 4) NAME(const unsigned short* qkv, const float* bias, const int* lens, int L, int H, \
                                                     int heads, float scale, unsigned short* out, const unsigned short* pos_key,  \
                                                     const unsigned short* pos_query, const int* rel_index, int rows, int center, \
                                                     int use_c2p, int use_p2c) {                                                   \
        attention<DH, true, REUSE, SHARE>(qkv, bias, lens, L, H, heads, scale, out, RelArgs{pos_key, pos_query, rel_index, rows, center, use_c2p, use_p2c}); \
    }
DEBERTA_ATTENTION(deberta_attention32, 32, false, false)
DEBERTA_ATTENTION(deberta_attention64, 64, false, false)
// c2p made once per distance (REUSE above), and also p2c once per block (SHARE); chosen by
// CURATOR_ENCODER_DEBERTA_KERNEL=ring / shared until a GPU machine has timed them against the
// kernels above (launch.rs, `DebertaKernel`).
DEBERTA_ATTENTION(deberta_attention32_ring, 32, true, false)
DEBERTA_ATTENTION(deberta_attention64_ring, 64, true, false)
DEBERTA_ATTENTION(deberta_attention32_shared, 32, true, true)
DEBERTA_ATTENTION(deberta_attention64_shared, 64, true, true)

// DeBERTa's disentangled attention, one warp per row of scores [B * heads * L, L] (Q Kᵀ,
// already scaled): adds the content→position term c2p[(head, b, i), idx(i - j)] and the
// position→content term p2c[(head, b, j), idx(i - j)] (tables [heads * B * L, W], scaled, over
// the window of table rows [lo, lo + W) that distances under L reach; products of Q and K
// before their biases, which add tb[idx] to the two: `rel_bias`, [heads, rows]), then the masked softmax,
// written back in place as fp16 probabilities. Every sum is taken in f32. `rel_index[i - j +
// center]` is a distance's table row (computed on the host, as transformers buckets it).
// Rows of up to 512 scores are computed once, into registers; longer ones take three passes.
#define DEBERTA_REGS 16
__device__ __forceinline__ float deberta_score(const unsigned short* row, const unsigned short* c_row, const unsigned short* p_base,
                                               const float* tb, const int* rel_index, int i, int j, int center, int lo, int W,
                                               int use_c2p, int use_p2c) {
    int t = rel_index[i - j + center] - lo;
    float v = h2f(row[j]) + tb[t];
    if (use_c2p) v += h2f(c_row[t]);
    if (use_p2c) v += h2f(p_base[(long long)j * W + t]);
    return v;
}

extern "C" __global__ void disentangled_softmax(unsigned short* s, const unsigned short* c2p, const unsigned short* p2c,
                                                const int* rel_index, const float* rel_bias, int table_rows, int center, int lo,
                                                int W, long long rows, int L, int heads, const int* lens, int use_c2p, int use_p2c) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    long long bh = r / L;
    int i = (int)(r - bh * L);
    long long B = rows / ((long long)heads * L);
    int b = (int)(bh / heads), head = (int)(bh - (long long)b * heads);
    int len = lens[b];
    unsigned short* row = s + r * L;
    long long hb = ((long long)head * B + b) * L;
    const unsigned short* c_row = c2p + (hb + i) * (long long)W;
    const unsigned short* p_base = p2c + hb * (long long)W;
    // Column t of the tables is table row lo + t.
    const float* tb = rel_bias + head * table_rows + lo;
    if (L <= 32 * DEBERTA_REGS) {
        float e[DEBERTA_REGS];
        float m = -1e30f;
#pragma unroll
        for (int k = 0; k < DEBERTA_REGS; k++) {
            int j = lane + 32 * k;
            e[k] = j < len ? deberta_score(row, c_row, p_base, tb, rel_index, i, j, center, lo, W, use_c2p, use_p2c) : -1e30f;
            m = fmaxf(m, e[k]);
        }
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < DEBERTA_REGS; k++) {
            int j = lane + 32 * k;
            e[k] = j < len ? __expf(e[k] - m) : 0.0f;
            sum += e[k];
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
        float inv = 1.0f / sum;
#pragma unroll
        for (int k = 0; k < DEBERTA_REGS; k++) {
            int j = lane + 32 * k;
            if (j < L) row[j] = f2h(e[k] * inv);
        }
        return;
    }
    float m = -1e30f;
    for (int j = lane; j < len; j += 32) m = fmaxf(m, deberta_score(row, c_row, p_base, tb, rel_index, i, j, center, lo, W, use_c2p, use_p2c));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    float sum = 0.0f;
    for (int j = lane; j < len; j += 32) sum += __expf(deberta_score(row, c_row, p_base, tb, rel_index, i, j, center, lo, W, use_c2p, use_p2c) - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
    float inv = 1.0f / sum;
    // Each lane reads its own scores before writing them: in place is safe.
    for (int j = lane; j < L; j += 32) {
        float p = j < len ? __expf(deberta_score(row, c_row, p_base, tb, rel_index, i, j, center, lo, W, use_c2p, use_p2c) - m) * inv : 0.0f;
        row[j] = f2h(p);
    }
}

// CLIP's preprocessing of images nvJPEG decoded (interleaved RGB bytes), as curator-image's
// `Plan` computes it on the CPU: Pillow's bicubic passes in its 22-bit fixed point, restricted
// to the pixels the centre crop keeps. Per image (blockIdx.y) a descriptor of PREP_DESC values:
// 0 offset of its pixels in `raw`, 1 row pitch, 2 width, 3 first row read, 4 rows read,
// 5 offset of the horizontal taps in `coef` (first input column per output column, then k
// weights each), 6 their k, 7 offset of the vertical taps (first row, relative to 3), 8 their
// k, 9 offset of its rows in `tmp`, 10 its slot in the pass.
#define PREP_DESC 11
__device__ __forceinline__ int clip8(int acc) { int v = acc >> 22; return v < 0 ? 0 : (v > 255 ? 255 : v); }

// Pass 1: the image's rows [d3, d3 + d4) resized to W columns, into tmp (RGB bytes, W a row).
extern "C" __global__ void resize_rows(const unsigned char* raw, const long long* desc, const int* coef, int W, unsigned char* tmp) {
    const long long* d = desc + (long long)blockIdx.y * PREP_DESC;
    const unsigned char* src = raw + d[0];
    long long pitch = d[1];
    int width = (int)d[2], row_lo = (int)d[3], k = (int)d[6];
    const int* first = coef + d[5];
    const int* w = first + W;
    unsigned char* out = tmp + d[9];
    long long total = d[4] * W;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        int r = (int)(i / W), x = (int)(i % W);
        const unsigned char* row = src + (long long)(row_lo + r) * pitch;
        int f = first[x], a0 = 1 << 21, a1 = 1 << 21, a2 = 1 << 21;
        for (int j = 0; j < k; j++) {
            int c = min(f + j, width - 1) * 3, wt = w[x * k + j];
            a0 += row[c] * wt;
            a1 += row[c + 1] * wt;
            a2 += row[c + 2] * wt;
        }
        out[i * 3] = (unsigned char)clip8(a0);
        out[i * 3 + 1] = (unsigned char)clip8(a1);
        out[i * 3 + 2] = (unsigned char)clip8(a2);
    }
}

// Pass 2: the vertical pass at each value of the image's slot in `patches` ([L, K] fp16 rows:
// row 0 the class token's and rows past `tokens` zero, then one row per P×P patch as the patch
// convolution's weight is laid out, channel, row, column, zero past 3·P²), each byte through
// `table` (the normalised value per channel and byte). S: the crop's side (W of pass 1).
extern "C" __global__ void resize_patches(const unsigned char* tmp, const long long* desc, const int* coef, const float* table, int S,
                                          int P, int L, int tokens, int K, unsigned short* patches) {
    const long long* d = desc + (long long)blockIdx.y * PREP_DESC;
    const unsigned char* src = tmp + d[9];
    int rows = (int)d[4], k = (int)d[8];
    const int* first = coef + d[7];
    const int* w = first + S;
    unsigned short* out = patches + d[10] * (long long)L * K;
    int g = S / P, pp = P * P;
    long long total = (long long)L * K;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        int row = (int)(i / K), col = (int)(i % K);
        float v = 0.0f;
        if (row >= 1 && row < tokens && col < 3 * pp) {
            int patch = row - 1, c = col / pp, rem = col % pp;
            int y = (patch / g) * P + rem / P, x = (patch % g) * P + rem % P;
            int f = first[y], acc = 1 << 21;
            for (int j = 0; j < k; j++) acc += src[((long long)min(f + j, rows - 1) * S + x) * 3 + c] * w[y * k + j];
            v = table[c * 256 + clip8(acc)];
        }
        out[i] = f2h(v);
    }
}
