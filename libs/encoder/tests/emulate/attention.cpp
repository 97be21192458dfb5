// The fused attention kernels of src/gpu/kernels.cu run on the CPU (cuda.h) against a plain
// reference: `attention64` / `attention32` (BERT's) and `deberta_attention64` / `32` (DeBERTa's, with the content ->
// position and position -> content terms made in the kernel, one or both; its `_ring` variant,
// which keeps the content -> position products from step to step, and `_shared`, which also
// makes the position -> content products once per block), on a batch of two
// sequences whose lengths are not multiples of the kernel's tiles, with a bucketed distance ->
// row map that sends far distances to shared rows. The reference takes fp16 where the kernel
// does (Q with its bias and scale, K with its bias for the position -> content term) and sums
// in double; what is left is the kernel's fp16 probabilities and f32 sums, far under the
// tolerance, while a score that misses its term or takes the wrong distance's is far over it.
//
// Built and run by tests/kernel_emulation.rs (c++ -std=c++20 -O2 -pthread attention.cpp), which
// writes the fragment order the host uploads the relative embeddings in.
// Prints the largest difference per case; exits 1 if one is over the tolerance.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda.h"
#include "../../src/gpu/kernels.cu"

namespace {

constexpr double TOLERANCE = 2e-3;

struct Rng {
    uint64_t s;
    float uniform(float lo, float hi) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return lo + (hi - lo) * (float)((s >> 40) & 0xFFFFFF) / (float)0x1000000;
    }
};

float round16(float x) { return h2f(f2h(x)); }

// DeBERTa's fragment order of one row of DH values, as the host uploads it
// (`gpu::fragment_order`, read from the file the test writes: `ORDER[DH][i]` is the index in
// the natural row of value i).
std::vector<int> ORDER[65];

template <int DH>
std::vector<unsigned short> fragment_order(const std::vector<unsigned short>& row) {
    std::vector<unsigned short> out(row.size());
    for (int i = 0; i < DH; i++) out[i] = row[ORDER[DH][i]];
    return out;
}

// The DeBERTa kernel: as is, with c2p kept from step to step, and with p2c made once per block too.
enum Variant { PLAIN, RING, SHARED };
struct Case {
    const char* name;
    int dh;
    bool rel, c2p, p2c;
    Variant variant;
};

template <int DH>
double run(const Case& c) {
    const int B = 2, heads = 2, H = heads * DH, L = 100;
    const int lens[B] = {100, 37};
    const int rows = 24, center = L - 1;
    Rng rng{0x5eed + (uint64_t)c.c2p * 2 + (uint64_t)c.p2c};
    std::vector<unsigned short> qkv((size_t)B * L * 3 * H);
    for (auto& v : qkv) v = f2h(rng.uniform(-2.0f, 2.0f));
    std::vector<float> bias(3 * H);
    for (auto& v : bias) v = rng.uniform(-0.5f, 0.5f);
    // Relative embeddings per head, `rows` of them; far distances share rows (log buckets in
    // spirit: 0..6 one row each, then one row per doubling, both signs).
    std::vector<unsigned short> pk((size_t)heads * rows * DH), pq((size_t)heads * rows * DH);
    for (auto& v : pk) v = f2h(rng.uniform(-2.0f, 2.0f));
    for (auto& v : pq) v = f2h(rng.uniform(-2.0f, 2.0f));
    std::vector<int> rel_index(2 * center + 1);
    for (int d = -center; d <= center; d++) {
        int a = d < 0 ? -d : d, r = a <= 6 ? a : std::min(6 + (int)std::log2((double)a / 6.0) + 1, rows / 2 - 1);
        rel_index[d + center] = rows / 2 + (d < 0 ? -r : r);
    }
    std::vector<unsigned short> pk_frag, pq_frag;
    for (int r = 0; r < heads * rows; r++) {
        auto row = [&](const std::vector<unsigned short>& p) { return std::vector<unsigned short>(p.begin() + r * DH, p.begin() + (r + 1) * DH); };
        auto a = fragment_order<DH>(row(pk)), b = fragment_order<DH>(row(pq));
        pk_frag.insert(pk_frag.end(), a.begin(), a.end());
        pq_frag.insert(pq_frag.end(), b.begin(), b.end());
    }
    const float scale = c.rel ? 1.0f / std::sqrt(3.0f * DH) : 1.0f / std::sqrt((float)DH);
    std::vector<unsigned short> out((size_t)B * L * H, 0);
    dim3 grid{(unsigned)((L + 63) / 64), (unsigned)heads, (unsigned)B}, block{128, 1, 1};
    if (c.rel)
        emulate_launch(grid, block, [&] {
            auto kernel = DH == 32 ? (c.variant == RING ? deberta_attention32_ring : c.variant == SHARED ? deberta_attention32_shared : deberta_attention32)
                                   : (c.variant == RING ? deberta_attention64_ring : c.variant == SHARED ? deberta_attention64_shared : deberta_attention64);
            kernel(qkv.data(), bias.data(), lens, L, H, heads, scale, out.data(), c.c2p ? pk_frag.data() : nullptr,
                   c.p2c ? pq_frag.data() : nullptr, rel_index.data(), rows, center, c.c2p, c.p2c);
        });
    else
        emulate_launch(grid, block, [&] { (DH == 32 ? attention32 : attention64)(qkv.data(), bias.data(), lens, L, H, heads, scale, out.data()); });

    double worst = 0.0;
    for (int b = 0; b < B; b++)
        for (int head = 0; head < heads; head++)
            for (int i = 0; i < lens[b]; i++) {
                auto at = [&](int t, int part, int d) { return h2f(qkv[((size_t)b * L + t) * 3 * H + part * H + head * DH + d]); };
                float q[DH];
                for (int d = 0; d < DH; d++) q[d] = round16((at(i, 0, d) + bias[head * DH + d]) * scale);
                std::vector<double> s(lens[b]);
                double m = -1e300;
                for (int j = 0; j < lens[b]; j++) {
                    double v = 0.0;
                    for (int d = 0; d < DH; d++) v += (double)q[d] * at(j, 1, d);
                    if (c.rel) {
                        int r = rel_index[std::min(std::max(i - j, -(L - 1)), L - 1) + center];
                        for (int d = 0; d < DH; d++) {
                            if (c.c2p) v += (double)q[d] * h2f(pk[((size_t)head * rows + r) * DH + d]);
                            if (c.p2c)
                                v += (double)round16(at(j, 1, d) + bias[H + head * DH + d]) * h2f(pq[((size_t)head * rows + r) * DH + d]) * scale;
                        }
                    }
                    s[j] = v;
                    m = std::max(m, v);
                }
                double sum = 0.0;
                for (auto& v : s) sum += (v = std::exp(v - m));
                for (int d = 0; d < DH; d++) {
                    double o = 0.0;
                    for (int j = 0; j < lens[b]; j++) o += s[j] * at(j, 2, d);
                    o = o / sum + bias[2 * H + head * DH + d];
                    double got = h2f(out[((size_t)b * L + i) * H + head * DH + d]);
                    worst = std::max(worst, std::abs(got - o));
                }
            }
    return worst;
}

}  // namespace

// ORDERS: for DH = 32, then 64, a line of DH indices.
bool read_orders(const char* path) {
    FILE* f = std::fopen(path, "r");
    if (!f) return false;
    for (int dh : {32, 64}) {
        ORDER[dh].resize(dh);
        for (int& i : ORDER[dh])
            if (std::fscanf(f, "%d", &i) != 1 || i < 0 || i >= dh) return false;
    }
    std::fclose(f);
    return true;
}

int main(int argc, char** argv) {
    if (argc != 2 || !read_orders(argv[1])) {
        std::fprintf(stderr, "usage: attention ORDERS (the fragment order for heads of 32 and 64)\n");
        return 2;
    }
    const Case cases[] = {
        {"attention64 (BERT)", 64, false, false, false, PLAIN},
        {"deberta_attention64, c2p + p2c", 64, true, true, true, PLAIN},
        {"deberta_attention64, c2p only", 64, true, true, false, PLAIN},
        {"deberta_attention64, p2c only", 64, true, false, true, PLAIN},
        {"deberta_attention64_ring, c2p + p2c", 64, true, true, true, RING},
        {"deberta_attention64_ring, c2p only", 64, true, true, false, RING},
        {"deberta_attention64_shared, c2p + p2c", 64, true, true, true, SHARED},
        {"deberta_attention64_shared, p2c only", 64, true, false, true, SHARED},
        {"attention32 (BERT)", 32, false, false, false, PLAIN},
        {"deberta_attention32, c2p + p2c", 32, true, true, true, PLAIN},
        {"deberta_attention32_ring, c2p + p2c", 32, true, true, true, RING},
        {"deberta_attention32_shared, c2p + p2c", 32, true, true, true, SHARED},
    };
    int failed = 0;
    for (const Case& c : cases) {
        double worst = c.dh == 32 ? run<32>(c) : run<64>(c);
        bool ok = worst <= TOLERANCE;
        std::printf("%s: max |kernel - reference| = %.2e (tolerance %.0e) %s\n", c.name, worst, TOLERANCE, ok ? "ok" : "FAILED");
        failed += !ok;
    }
    return failed ? 1 : 0;
}
