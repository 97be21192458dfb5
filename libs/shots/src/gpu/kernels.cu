// TransNetV2's convolution stacks on the GPU: the element-wise kernels between the cuBLAS
// products (src/gpu/mod.rs). Every map is f32, channels-last: row p = (slot · h + y) · w + x,
// `c` values per row; a slot is one frame of one window.

// Window slots from the video's frames: out[slot][pixel][rgb] = frames[index[slot]] / 255.
extern "C" __global__ void frames_to_float(const unsigned char* frames, const int* index, long long n, int frame_bytes, float* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long slot = i / frame_bytes;
    int rem = (int)(i - slot * frame_bytes);
    out[i] = (float)frames[(long long)index[slot] * frame_bytes + rem] / 255.0f;
}

// im2col for a 3x3 kernel with one pixel of zero padding: col[r][(kh·3 + kw)·c + ch] for the
// rows row0 .. row0 + rows of the map.
extern "C" __global__ void im2col3x3(const float* x, long long row0, long long rows, int h, int w, int c, float* col) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long k = 9LL * c;
    if (i >= rows * k) return;
    long long r = i / k;
    int j = (int)(i - r * k);
    int tap = j / c, ch = j - tap * c;
    int kh = tap / 3, kw = tap - kh * 3;
    long long p = row0 + r;
    long long hw = (long long)h * w;
    long long slot = p / hw;
    int q = (int)(p - slot * hw);
    int y = q / w + kh - 1, xx = q % w + kw - 1;
    col[i] = (y < 0 || xx < 0 || y >= h || xx >= w) ? 0.0f : x[((slot * h + y) * w + xx) * c + ch];
}

// Batch norm folded to a scale and shift per channel, then an optional ReLU.
extern "C" __global__ void bn_act(float* x, const float* scale, const float* shift, int c, long long n, int relu) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int ch = (int)(i % c);
    float v = x[i] * scale[ch] + shift[ch];
    x[i] = (relu && v < 0.0f) ? 0.0f : v;
}

// A stack's end: relu(last) + first, then a 2x2 average pool (floor) per slot.
extern "C" __global__ void residual_pool(const float* last, const float* first, int h, int w, int c, long long slots, float* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int ho = h / 2, wo = w / 2;
    if (i >= slots * ho * wo * c) return;
    int ch = (int)(i % c);
    long long px = i / c;
    int xo = (int)(px % wo);
    long long t = px / wo;
    int yo = (int)(t % ho);
    long long slot = t / ho;
    float s = 0.0f;
    for (int dy = 0; dy < 2; dy++) {
        for (int dx = 0; dx < 2; dx++) {
            long long q = ((slot * h + 2 * yo + dy) * w + 2 * xo + dx) * c + ch;
            s += fmaxf(last[q], 0.0f) + first[q];
        }
    }
    out[i] = s / 4.0f;
}

// Each slot's mean over its pixels, per channel, into columns offset .. offset + c of rows ld wide.
extern "C" __global__ void slot_means(const float* x, int hw, int c, long long slots, float* out, int ld, int offset) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= slots * c) return;
    long long slot = i / c;
    int ch = (int)(i - slot * c);
    float s = 0.0f;
    for (int p = 0; p < hw; p++) s += x[(slot * hw + p) * c + ch];
    out[slot * ld + offset + ch] = s / (float)hw;
}
