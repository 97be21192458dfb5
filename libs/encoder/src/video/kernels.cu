// InternVideo2's tower on the GPU: the row operations between the cuBLAS products
// (src/video/gpu.rs). Every matrix is f32, row-major; a row kernel runs one block of 256
// threads per row and reduces with warp shuffles.

#define THREADS 256

__device__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = lane < THREADS / 32 ? shared[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffff, t, o);
    __syncthreads();
    return t;
}

__device__ float block_max(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = lane < THREADS / 32 ? shared[lane] : __int_as_float(0xff800000);
    for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffff, t, o));
    __syncthreads();
    return t;
}

// Every clip's first rows: x[r][j] = table[r % l][j] (positions, plus the class token on row 0
// and the patch bias on the others), what the patch product adds to.
extern "C" __global__ void table_rows(const float* table, long long rows, int l, int d, float* x) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * d) return;
    long long r = i / d;
    int j = (int)(i - r * d);
    x[i] = table[(r % l) * d + j];
}

__device__ void rms_row(const float* x, const float* w, int d, float eps, float* y) {
    __shared__ float shared[THREADS / 32];
    float s = 0.0f;
    for (int j = threadIdx.x; j < d; j += THREADS) s += x[j] * x[j];
    float inv = rsqrtf(block_sum(s, shared) / d + eps);
    for (int j = threadIdx.x; j < d; j += THREADS) y[j] = x[j] * inv * w[j];
}

// RMS norm of row blockIdx.x: out[j] = in[j] / sqrt(mean(in^2) + eps) * w[j]; rows `ldi` and
// `ldo` values apart.
extern "C" __global__ void rms_norm(const float* in, int ldi, const float* w, int d, float eps, float* out, int ldo) {
    rms_row(in + (long long)blockIdx.x * ldi, w, d, eps, out + (long long)blockIdx.x * ldo);
}

// The same in place, rows `ld` values apart (the queries' and keys' norms inside the QKV rows).
extern "C" __global__ void rms_norm_inplace(float* x, int ld, const float* w, int d, float eps) {
    float* row = x + (long long)blockIdx.x * ld;
    rms_row(row, w, d, eps, row);
}

// Layer norm of row blockIdx.x (packed rows of d).
extern "C" __global__ void layer_norm(const float* in, const float* gamma, const float* beta, int d, float eps, float* out) {
    __shared__ float shared[THREADS / 32];
    const float* x = in + (long long)blockIdx.x * d;
    float* y = out + (long long)blockIdx.x * d;
    float s = 0.0f;
    for (int j = threadIdx.x; j < d; j += THREADS) s += x[j];
    float mean = block_sum(s, shared) / d;
    float v = 0.0f;
    for (int j = threadIdx.x; j < d; j += THREADS) v += (x[j] - mean) * (x[j] - mean);
    float inv = rsqrtf(block_sum(v, shared) / d + eps);
    for (int j = threadIdx.x; j < d; j += THREADS) y[j] = (x[j] - mean) * inv * gamma[j] + beta[j];
}

// Softmax of row blockIdx.x of n values, in place.
extern "C" __global__ void softmax_rows(float* x, int n) {
    __shared__ float shared[THREADS / 32];
    float* row = x + (long long)blockIdx.x * n;
    float m = __int_as_float(0xff800000);
    for (int j = threadIdx.x; j < n; j += THREADS) m = fmaxf(m, row[j]);
    m = block_max(m, shared);
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += THREADS) {
        float e = expf(row[j] - m);
        row[j] = e;
        s += e;
    }
    float inv = 1.0f / block_sum(s, shared);
    for (int j = threadIdx.x; j < n; j += THREADS) row[j] *= inv;
}

// x = gelu(x + b) (the exact, erf GELU), b per column of n.
extern "C" __global__ void bias_gelu(float* x, const float* b, int n, long long total) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    float v = x[i] + b[i % n];
    x[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

// x += g * (y + b): a block's branch, its bias and layer scale, into the residual stream.
extern "C" __global__ void scale_residual(float* x, const float* y, const float* b, const float* g, int d, long long total) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int j = (int)(i % d);
    x[i] += g[j] * (y[i] + b[j]);
}

// x += b, b per column of n.
extern "C" __global__ void add_bias(float* x, const float* b, int n, long long total) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    x[i] += b[i % n];
}

// The mean of each clip's l rows: out[c][j] = sum_r x[c·l + r][j] / l.
extern "C" __global__ void mean_rows(const float* x, int l, int d, long long clips, float* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= clips * d) return;
    long long c = i / d;
    int j = (int)(i - c * d);
    const float* base = x + c * l * d + j;
    float s = 0.0f;
    for (int r = 0; r < l; r++) s += base[(long long)r * d];
    out[i] = s / l;
}
