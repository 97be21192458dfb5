//! Word-shingle MinHash signatures per language, on real text: Debian's manual pages in each
//! language this machine has (`/usr/share/man/<lang>/man1`, gzip'd roff, request lines
//! dropped), so a script's cost per byte is seen beside English's in the same run.
//!
//!     cargo run --release -p minhash --example shingle-bench -- [HASHES] [N]
//!
//! HASHES permutations (default 112: 14 bands × 8 rows), shingles of N words (default 5);
//! one core. Prints a Markdown table: MB/s of shingling alone and of whole signatures, and
//! each language's signatures per byte against English's.

use std::io::Read;
use std::time::Instant;

use curator_sdk::shingle::{Scratch, Shingles, shingle_hashes};
use minhash::{coefficients, cpu};

/// Up to 400 manual pages of one language, as text.
fn pages(lang: &str) -> Vec<String> {
    let dir = if lang == "en" { "/usr/share/man/man1".to_string() } else { format!("/usr/share/man/{lang}/man1") };
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut names: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    names.sort();
    let mut out = Vec::new();
    for path in names.into_iter().take(400) {
        let mut roff = String::new();
        let Ok(file) = std::fs::File::open(&path) else { continue };
        if flate2::read::GzDecoder::new(file).read_to_string(&mut roff).is_ok() {
            out.push(roff.lines().filter(|l| !l.starts_with(['.', '\''])).collect::<Vec<_>>().join("\n"));
        }
    }
    out
}

/// Seconds per pass of `f` over about `budget` bytes of `bytes`-sized input (the best of 3).
fn best_rate(bytes: usize, budget: usize, mut f: impl FnMut()) -> f64 {
    let reps = (budget / bytes.max(1)).max(1);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    (bytes * reps) as f64 / best / 1e6
}

fn main() {
    let arg = |i: usize, default: usize| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (hashes, n) = (arg(1, 112), arg(2, 5));
    let (a, b) = coefficients(42, hashes);
    println!("{hashes} hashes, {n}-word shingles, one core, best of 3\n");
    println!("| language | pages | MB | shingling MB/s | signatures MB/s | signatures per byte vs English |\n|---|---|---|---|---|---|");
    let mut english = None;
    for lang in ["en", "de", "fr", "pl", "ru", "ja", "zh_CN", "ko"] {
        let texts = pages(lang);
        if texts.is_empty() {
            println!("| {lang} | not on this machine | | | | |");
            continue;
        }
        let mut data = Vec::new();
        let mut offsets = vec![0u32];
        for t in &texts {
            data.extend_from_slice(t.as_bytes());
            offsets.push(data.len() as u32);
        }
        let (mut scratch, mut out) = (Scratch::default(), Vec::new());
        let shingling = best_rate(data.len(), 100 << 20, || {
            for t in &texts {
                shingle_hashes(t, Shingles::Words(n), &mut scratch, &mut out);
            }
        });
        let signing = best_rate(data.len(), 20 << 20, || {
            std::hint::black_box(cpu::signatures_of(&data, &offsets, Shingles::Words(n), &a, &b));
        });
        let base = *english.get_or_insert(signing);
        println!("| {lang} | {} | {:.2} | {shingling:.0} | {signing:.0} | {:.2}x |", texts.len(), data.len() as f64 / 1e6, signing / base);
    }
}
