// CUDA on the CPU, enough of it to run the encoder's kernels (src/gpu/kernels.cu) in tests on
// machines without a GPU: every thread of a block is a CPU thread; the blocks of a grid run one
// after another (so `__shared__` arrays can be function statics); `__syncthreads` is a barrier
// of the block, and the warp-wide operations (`__syncwarp`, the shuffles, the tensor cores'
// `mma.m16n8k16`) are barriers of the warp's 32 threads around an exchange of values. The
// mma follows the fragment layouts of the PTX ISA (m16n8k16, .f16 A row-major and B
// column-major, .f32 C/D), multiplying the fp16 values exactly and summing in f32 in k order,
// which is not the hardware's order: results agree to f32 rounding, not bit for bit.
//
// What it does not model: timing, memory ordering between threads other than at the
// barriers, warps that diverge (a warp's lanes must all reach each warp-wide call, as
// `mma.sync` also requires), and everything the kernels do not use.
#pragma once
#define CURATOR_EMULATED_CUDA 1

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
// Dynamic shared memory: one arena for every kernel that asks for some (blocks run one at a time).
inline float emulated_dynamic_shared[1 << 16];
#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(emulated_dynamic_shared)

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct float2 {
    float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
struct uint4 {
    unsigned int x, y, z, w;
};

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
template <class T>
inline T __ldg(const T* p) { return *p; }

// fp16 as the GPU converts it: round to nearest even on the way in, exact on the way out.
inline float h2f(unsigned short h) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return (float)v;
}
inline unsigned short f2h(float f) {
    _Float16 v = (_Float16)f;
    unsigned short h;
    std::memcpy(&h, &v, 2);
    return h;
}

// One warp's meeting place: its barrier and a slot of values per lane.
struct EmulatedWarp {
    std::barrier<> meet{32};
    uint32_t slot[32][10];
};
struct EmulatedBlock {
    std::barrier<> all;
    std::vector<std::unique_ptr<EmulatedWarp>> warps;
    explicit EmulatedBlock(unsigned threads) : all((std::ptrdiff_t)threads) {
        for (unsigned w = 0; w < threads / 32; w++) warps.push_back(std::make_unique<EmulatedWarp>());
    }
};
inline thread_local EmulatedBlock* emulated_block = nullptr;
inline EmulatedWarp& emulated_warp() { return *emulated_block->warps[threadIdx.x / 32]; }

inline void __syncthreads() { emulated_block->all.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emulated_warp().meet.arrive_and_wait(); }

template <class T>
inline T emulated_shuffle(T v, int (*from)(int lane, int arg), int arg) {
    static_assert(sizeof(T) == 4, "32-bit values");
    EmulatedWarp& w = emulated_warp();
    int lane = threadIdx.x % 32;
    std::memcpy(&w.slot[lane][0], &v, 4);
    w.meet.arrive_and_wait();
    T out;
    std::memcpy(&out, &w.slot[from(lane, arg) & 31][0], 4);
    w.meet.arrive_and_wait();
    return out;
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src) {
    return emulated_shuffle(v, [](int, int s) { return s; }, src);
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask) {
    return emulated_shuffle(v, [](int lane, int m) { return lane ^ m; }, mask);
}

// mma.m16n8k16.row.col.f32.f16.f16.f32, D = A B + C, with lane = 4 g + t (g = lane / 4):
// A (16 x 16): a[0] = (row g, cols 2t, 2t+1), a[1] = (row g+8, same), a[2] = (row g, cols 2t+8,
// 2t+9), a[3] = (row g+8, same); B (16 x 8): b0 = (rows 2t, 2t+1, col g), b1 = (rows 2t+8, 2t+9,
// col g); C, D (16 x 8): c[0], c[1] = (row g, cols 2t, 2t+1), c[2], c[3] = (row g+8, same).
inline float emulated_half(uint32_t word, int high) { return h2f((unsigned short)(high ? word >> 16 : word & 0xffff)); }
inline void mma16816(float* c, const unsigned int* a, unsigned int b0, unsigned int b1) {
    EmulatedWarp& w = emulated_warp();
    int lane = threadIdx.x % 32;
    uint32_t* mine = w.slot[lane];
    for (int i = 0; i < 4; i++) mine[i] = a[i];
    mine[4] = b0;
    mine[5] = b1;
    w.meet.arrive_and_wait();
    auto A = [&](int row, int k) {
        const uint32_t* s = w.slot[(row % 8) * 4 + (k % 8) / 2];
        return emulated_half(s[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
    };
    auto B = [&](int k, int col) {
        const uint32_t* s = w.slot[col * 4 + (k % 8) / 2];
        return emulated_half(s[4 + (k >= 8 ? 1 : 0)], k % 2);
    };
    int g = lane / 4, t = lane % 4;
    float d[4];
    for (int e = 0; e < 4; e++) {
        int row = g + 8 * (e / 2), col = 2 * t + e % 2;
        float sum = c[e];
        for (int k = 0; k < 16; k++) sum += A(row, k) * B(k, col);
        d[e] = sum;
    }
    w.meet.arrive_and_wait();
    for (int e = 0; e < 4; e++) c[e] = d[e];
}

// Run `kernel` over `grid` blocks of `block` threads, a block at a time.
template <class F>
inline void emulate_launch(dim3 grid, dim3 block, F kernel) {
    gridDim = grid;
    blockDim = block;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                EmulatedBlock b(block.x);
                std::vector<std::thread> threads;
                for (unsigned t = 0; t < block.x; t++)
                    threads.emplace_back([&, t] {
                        emulated_block = &b;
                        threadIdx = dim3{t, 0, 0};
                        blockIdx = dim3{x, y, z};
                        kernel();
                    });
                for (auto& th : threads) th.join();
            }
}
