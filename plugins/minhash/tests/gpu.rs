//! The GPU path against the CPU path, on the card: every signature bit-identical, for text in
//! several scripts (multi-byte characters are where a byte-level kernel could go wrong), empty
//! and shorter-than-n texts included. Without a GPU the test says it skipped
//! (`curator_gpu::testing::gpu_or_skip`); `scripts/gpu-checks.sh` runs it on the GPU machine
//! with `CURATOR_REQUIRE_GPU=1`.

use curator_gpu::CudaLib;
use minhash::{DEFAULT_HASHES, coefficients, cpu, gpu};

/// `docs` documents of mixed scripts and lengths, as one UTF-8 buffer and its offsets.
fn corpus(docs: usize) -> (Vec<u8>, Vec<u32>) {
    let words = ["data", "corpus", "naïve", "Straße", "данные", "корпус", "数据", "语料库", "データ", "말뭉치", "🙂", "x"];
    let (mut data, mut offsets) = (Vec::new(), vec![0u32]);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for d in 0..docs {
        // A long tail of lengths: most short, some long; every 97th empty.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = if d % 97 == 0 { 0 } else { (state % 64) as usize * (1 + (state >> 58) as usize) };
        for w in 0..len {
            data.extend_from_slice(words[(state as usize + w * 7) % words.len()].as_bytes());
            data.push(b' ');
        }
        offsets.push(data.len() as u32);
    }
    (data, offsets)
}

#[test]
fn gpu_signatures_are_the_cpu_signatures_bit_for_bit() {
    if curator_gpu::testing::gpu_or_skip("minhash's GPU signatures", &[CudaLib::Nvrtc]).is_none() {
        return;
    }
    let g = gpu::Gpu::shared().expect("the GPU path starts");
    let (data, offsets) = corpus(3000);
    let (a, b) = coefficients(42, DEFAULT_HASHES);
    for n in [1, 5, 24] {
        let want = cpu::signatures(&data, &offsets, n, &a, &b);
        let got = g.signatures(&data, &offsets, n, &a, &b).expect("GPU signatures");
        let differ = (0..offsets.len() - 1)
            .filter(|r| want[r * DEFAULT_HASHES..(r + 1) * DEFAULT_HASHES] != got[r * DEFAULT_HASHES..(r + 1) * DEFAULT_HASHES])
            .count();
        assert_eq!(differ, 0, "{n}-grams: {differ} of {} documents differ", offsets.len() - 1);
    }
}
