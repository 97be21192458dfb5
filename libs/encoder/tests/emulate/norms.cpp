// The layer-norm kernels of src/gpu/kernels.cu run on the CPU (cuda.h) against a plain
// reference in double: `add_norm` (a block per row, the row in dynamic shared memory) and
// `add_norm_warp` (a warp per row, in registers), out = LayerNorm(x + bias + res) with res
// updated in f32 (the post-norm encoders' residual stream); `residual_norm` and
// `residual_norm_warp`, x += a + bias in fp16 (or not), out = LayerNorm(x) (the pre-norm
// towers'). Widths 128, 130 (pairs not a multiple of 32), 768 and 1024 (the warp kernels'
// limit), 13 rows (not a multiple of the warps per block).
//
// Built and run by tests/kernel_emulation.rs. Prints the largest differences; exits 1 if one
// is over its tolerance.
#include <cstdio>
#include <vector>

#include "cuda.h"
#include "../../src/gpu/kernels.cu"

namespace {

struct Rng {
    uint64_t s;
    float uniform(float lo, float hi) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return lo + (hi - lo) * (float)((s >> 40) & 0xFFFFFF) / (float)0x1000000;
    }
};

// LayerNorm of `v` in double.
std::vector<double> norm(const std::vector<double>& v, const std::vector<float>& gamma, const std::vector<float>& beta, double eps) {
    double mean = 0.0, var = 0.0;
    for (double x : v) mean += x;
    mean /= (double)v.size();
    for (double x : v) var += (x - mean) * (x - mean);
    var /= (double)v.size();
    std::vector<double> out(v.size());
    for (size_t j = 0; j < v.size(); j++) out[j] = (v[j] - mean) / std::sqrt(var + eps) * gamma[j] + beta[j];
    return out;
}

}  // namespace

int main() {
    const int rows = 13;
    const float eps = 1e-7f;
    int failed = 0;
    for (int H : {128, 130, 768, 1024}) {
        Rng rng{(uint64_t)H};
        std::vector<unsigned short> x(rows * H), a(rows * H);
        std::vector<float> res(rows * H), bias(H), gamma(H), beta(H);
        for (auto& v : x) v = f2h(rng.uniform(-3.0f, 3.0f));
        for (auto& v : a) v = f2h(rng.uniform(-3.0f, 3.0f));
        for (auto& v : res) v = rng.uniform(-3.0f, 3.0f);
        for (auto& v : bias) v = rng.uniform(-0.5f, 0.5f);
        for (auto& v : gamma) v = rng.uniform(0.5f, 1.5f);
        for (auto& v : beta) v = rng.uniform(-0.5f, 0.5f);

        // add_norm and add_norm_warp: out, and the residual stream they update in place.
        double worst_out = 0.0, worst_res = 0.0;
        for (int warp_kernel = 0; warp_kernel < 2; warp_kernel++) {
            std::vector<float> r = res;
            std::vector<unsigned short> out(rows * H, 0xFFFF);
            if (warp_kernel)
                emulate_launch(dim3{(unsigned)((rows + 7) / 8), 1, 1}, dim3{256, 1, 1},
                               [&] { add_norm_warp(x.data(), bias.data(), r.data(), gamma.data(), beta.data(), eps, H, rows, out.data()); });
            else
                emulate_launch(dim3{(unsigned)rows, 1, 1}, dim3{256, 1, 1},
                               [&] { add_norm(x.data(), bias.data(), r.data(), gamma.data(), beta.data(), eps, H, out.data()); });
            for (int i = 0; i < rows; i++) {
                std::vector<double> v(H);
                for (int j = 0; j < H; j++) v[j] = (double)h2f(x[i * H + j]) + bias[j] + res[i * H + j];
                auto want = norm(v, gamma, beta, eps);
                for (int j = 0; j < H; j++) {
                    worst_out = std::max(worst_out, std::abs(h2f(out[i * H + j]) - want[j]));
                    worst_res = std::max(worst_res, std::abs(r[i * H + j] - want[j]));
                }
            }
        }
        // residual_norm and residual_norm_warp, with and without the add.
        double worst_pre = 0.0, worst_x = 0.0;
        for (int warp_kernel = 0; warp_kernel < 2; warp_kernel++)
            for (int add = 0; add < 2; add++) {
                std::vector<unsigned short> xs = x, out(rows * H, 0xFFFF);
                if (warp_kernel)
                    emulate_launch(dim3{(unsigned)((rows + 7) / 8), 1, 1}, dim3{256, 1, 1}, [&] {
                        residual_norm_warp(a.data(), bias.data(), add, xs.data(), gamma.data(), beta.data(), eps, H, rows, out.data());
                    });
                else
                    emulate_launch(dim3{(unsigned)rows, 1, 1}, dim3{256, 1, 1}, [&] {
                        residual_norm(a.data(), bias.data(), add, xs.data(), gamma.data(), beta.data(), eps, H, out.data());
                    });
                for (int i = 0; i < rows; i++) {
                    std::vector<double> v(H);
                    for (int j = 0; j < H; j++) {
                        int at = i * H + j;
                        float sum = add ? h2f(f2h(h2f(x[at]) + h2f(a[at]) + bias[j])) : h2f(x[at]);
                        worst_x = std::max(worst_x, (double)std::abs(h2f(xs[at]) - sum));
                        v[j] = sum;
                    }
                    auto want = norm(v, gamma, beta, eps);
                    for (int j = 0; j < H; j++) worst_pre = std::max(worst_pre, std::abs(h2f(out[i * H + j]) - want[j]));
                }
            }
        // fp16 outputs of values up to ~6: half an ulp is 2e-3; the f32 residual to 1e-5.
        bool ok = worst_out <= 4e-3 && worst_res <= 1e-4 && worst_pre <= 4e-3 && worst_x == 0.0;
        std::printf("H %d: add_norm out %.1e, residual %.1e; residual_norm out %.1e, x %.1e %s\n", H, worst_out, worst_res, worst_pre, worst_x,
                    ok ? "ok" : "FAILED");
        failed += !ok;
    }
    return failed ? 1 : 0;
}
