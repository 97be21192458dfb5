//! GPU vs CPU MinHash: throughput and bit-identity.
//!
//!     cargo run --release -p minhash --example minhash-bench -- [DOCS]
//!
//! Generates DOCS documents (default 12,000, ~3 KB, mixed scripts, one in ten a near
//! duplicate of another), signs them on one CPU core and on the GPU, checks the signatures
//! are identical, and prints a Markdown table.

use std::time::Instant;

use minhash::{DEFAULT_HASHES, coefficients, cpu, gpu};

fn corpus(n: usize) -> (Vec<u8>, Vec<u32>) {
    let words = [
        "the",
        "of",
        "and",
        "data",
        "model",
        "training",
        "corpus",
        "quality",
        "filter",
        "language",
        "document",
        "token",
        "web",
        "page",
        "université",
        "naïve",
        "café",
        "straße",
        "über",
        "déjà",
        "重複",
        "検出",
        "данные",
        "модель",
        "🚀",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut docs: Vec<String> = Vec::with_capacity(n);
    for i in 0..n {
        if i % 10 == 9 {
            // A near duplicate: an earlier document with its tail replaced.
            let src = &docs[(rand() as usize) % i];
            let cut = src.char_indices().nth(src.chars().count() * 9 / 10).map(|(b, _)| b).unwrap_or(src.len());
            docs.push(format!("{} edited tail {i}", &src[..cut]));
            continue;
        }
        let len = 200 + (rand() % 700) as usize;
        let mut d = String::with_capacity(len * 6);
        for w in 0..len {
            if w > 0 {
                d.push(' ');
            }
            d.push_str(words[(rand() % words.len() as u64) as usize]);
        }
        docs.push(d);
    }
    let mut data = Vec::new();
    let mut offsets = vec![0u32];
    for d in &docs {
        data.extend_from_slice(d.as_bytes());
        offsets.push(data.len() as u32);
    }
    (data, offsets)
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(12_000);
    let (data, offsets) = corpus(n);
    let (a, b) = coefficients(42, DEFAULT_HASHES);
    let mb = data.len() as f64 / 1e6;
    println!("{n} documents, {mb:.1} MB, {DEFAULT_HASHES} hashes, 24-character shingles\n");

    let t = Instant::now();
    let cpu_sigs = cpu::signatures(&data, &offsets, 24, &a, &b);
    let cpu_s = t.elapsed().as_secs_f64();
    let cpu_rate = n as f64 / cpu_s;

    println!("| path | docs/s | MB/s | vs one CPU core |\n|---|---|---|---|");
    println!("| CPU, one core (baseline) | {cpu_rate:.0} | {:.1} | 1.00x |", mb / cpu_s);
    match gpu::Gpu::shared() {
        Err(e) => println!("\nno GPU: {e}"),
        Ok(g) => {
            let t = Instant::now();
            let warm = g.signatures(&data[..offsets[64] as usize], &offsets[..65], 24, &a, &b).expect("GPU warm-up");
            let warm_s = t.elapsed().as_secs_f64();
            assert_eq!(warm.len(), 64 * DEFAULT_HASHES);
            // Batches of 16,384 documents, as the stage's default batch size.
            let mut gpu_sigs = Vec::with_capacity(cpu_sigs.len());
            let t = Instant::now();
            for start in (0..n).step_by(16_384) {
                let end = (start + 16_384).min(n);
                gpu_sigs.extend(g.signatures(&data, &offsets[start..=end], 24, &a, &b).expect("GPU signatures"));
            }
            let gpu_s = t.elapsed().as_secs_f64();
            let gpu_rate = n as f64 / gpu_s;
            println!("| GPU, incl. transfers | {gpu_rate:.0} | {:.1} | {:.1}x |", mb / gpu_s, gpu_rate / cpu_rate);
            let same = (0..n)
                .filter(|r| {
                    cpu_sigs[r * DEFAULT_HASHES..(r + 1) * DEFAULT_HASHES] == gpu_sigs[r * DEFAULT_HASHES..(r + 1) * DEFAULT_HASHES]
                })
                .count();
            println!("\nfirst GPU batch (64 documents, after context set-up and NVRTC compile): {warm_s:.3} s");
            println!("bit-identical signatures: {same} of {n} documents");
            if same != n {
                std::process::exit(1);
            }
        }
    }
}
