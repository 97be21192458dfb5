// The GPU image path's preprocessing kernels of src/gpu/kernels.cu (`resize_rows`, then
// `resize_patches`: Pillow's bicubic taps restricted to the crop, the byte -> value table, the
// patch rows of the vision tower) run on the CPU (cuda.h) on the inputs tests/kernel_emulation.rs
// writes: decoded images and their plans as the host lays them out for the device
// (src/vision/jpeg.rs). The patches are written back for the test to compare, bit for bit,
// with curator-image's CPU path.
//
//   resize INPUT OUTPUT
//
// INPUT, little-endian: i64 images, S, P, L, tokens, K, raw bytes, tmp bytes, coef values; then
// images x 11 i64 descriptors, the i32 taps, 768 f32 (the table), the raw RGB bytes.
// OUTPUT: images x L x K fp16 values.
#include <cstdio>
#include <vector>

#include "cuda.h"
#include "../../src/gpu/kernels.cu"

template <class T>
bool read(FILE* f, std::vector<T>& v, size_t n) {
    v.resize(n);
    return std::fread(v.data(), sizeof(T), n, f) == n;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: resize INPUT OUTPUT\n");
        return 2;
    }
    FILE* in = std::fopen(argv[1], "rb");
    std::vector<long long> head, desc;
    std::vector<int> coef;
    std::vector<float> table;
    std::vector<unsigned char> raw;
    if (!in || !read(in, head, 9)) return 2;
    long long images = head[0], S = head[1], P = head[2], L = head[3], tokens = head[4], K = head[5];
    if (!read(in, desc, images * PREP_DESC) || !read(in, coef, head[8]) || !read(in, table, 768) || !read(in, raw, head[6])) return 2;
    std::fclose(in);
    std::vector<unsigned char> tmp(head[7]);
    std::vector<unsigned short> patches(images * L * K, 0xFFFF);
    // As gpu/launch.rs launches them: blocks along x (fewer here), one row of blocks per image.
    emulate_launch(dim3{2, (unsigned)images, 1}, dim3{64, 1, 1}, [&] { resize_rows(raw.data(), desc.data(), coef.data(), (int)S, tmp.data()); });
    emulate_launch(dim3{2, (unsigned)images, 1}, dim3{64, 1, 1}, [&] {
        resize_patches(tmp.data(), desc.data(), coef.data(), table.data(), (int)S, (int)P, (int)L, (int)tokens, (int)K, patches.data());
    });
    FILE* out = std::fopen(argv[2], "wb");
    if (!out || std::fwrite(patches.data(), 2, patches.size(), out) != patches.size()) return 2;
    std::fclose(out);
    return 0;
}
