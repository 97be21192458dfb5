//! The CPU path: the reference the GPU kernel must match bit for bit.

use curator_sdk::shingle::{Scratch, Shingles, char_shingles, shingle_hashes};
pub use curator_sdk::shingle::{mix64, shingle_hash};

/// Signatures of every document of a UTF-8 column (`offsets`: rows + 1), `a.len()` values
/// each, row after row. An empty text gets `u32::MAX` everywhere.
pub fn signatures(data: &[u8], offsets: &[u32], n: usize, a: &[u64], b: &[u64]) -> Vec<u32> {
    signatures_of(data, offsets, Shingles::Chars(n), a, b)
}

/// Signatures over any kind of shingle (words are CPU only).
pub fn signatures_of(data: &[u8], offsets: &[u32], kind: Shingles, a: &[u64], b: &[u64]) -> Vec<u32> {
    let k = a.len();
    let rows = offsets.len().saturating_sub(1);
    let mut out = vec![u32::MAX; rows * k];
    let mut hashes = Vec::new();
    let mut scratch = Scratch::default();
    let mut starts = Vec::new();
    for r in 0..rows {
        let text = &data[offsets[r] as usize..offsets[r + 1] as usize];
        match kind {
            Shingles::Chars(n) => char_shingles(text, n, &mut starts, &mut hashes),
            // Arrow utf8 columns are valid UTF-8 (the host checks what it sends).
            Shingles::Words(_) => shingle_hashes(std::str::from_utf8(text).unwrap_or_default(), kind, &mut scratch, &mut hashes),
        }
        fold(&mut out[r * k..(r + 1) * k], &hashes, a, b);
    }
    out
}

/// `sig[i] = min(sig[i], (a[i] * h + b[i]) >> 32)` over every base hash `h`: the hot loop.
/// Compiled three times (AVX-512 with 64-bit multiplies, AVX2, baseline) and picked at run
/// time; integer arithmetic, so every version gives the same bits.
pub fn fold(sig: &mut [u32], hashes: &[u64], a: &[u64], b: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512dq") && std::arch::is_x86_feature_detected!("avx512vl") {
            // SAFETY: the features this function is compiled for were just detected.
            return unsafe { fold_avx512(sig, hashes, a, b) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { fold_avx2(sig, hashes, a, b) };
        }
    }
    fold_generic(sig, hashes, a, b)
}

#[inline(always)]
fn fold_generic(sig: &mut [u32], hashes: &[u64], a: &[u64], b: &[u64]) {
    let k = sig.len().min(a.len()).min(b.len());
    let (sig, a, b) = (&mut sig[..k], &a[..k], &b[..k]);
    for &h in hashes {
        for i in 0..k {
            let v = (a[i].wrapping_mul(h).wrapping_add(b[i]) >> 32) as u32;
            sig[i] = sig[i].min(v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
unsafe fn fold_avx512(sig: &mut [u32], hashes: &[u64], a: &[u64], b: &[u64]) {
    fold_generic(sig, hashes, a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fold_avx2(sig: &mut [u32], hashes: &[u64], a: &[u64], b: &[u64]) {
    fold_generic(sig, hashes, a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_HASHES, coefficients};
    use std::collections::HashSet;

    /// A deliberately naive MinHash: the set of character n-gram strings, each hashed, min
    /// per function. Written from the definition, sharing only the hash primitives.
    fn reference(text: &str, n: usize, a: &[u64], b: &[u64]) -> Vec<u32> {
        let chars: Vec<char> = text.chars().collect();
        let mut shingles: HashSet<String> = HashSet::new();
        if chars.is_empty() {
        } else if chars.len() <= n {
            shingles.insert(text.to_string());
        } else {
            for w in chars.windows(n) {
                shingles.insert(w.iter().collect());
            }
        }
        (0..a.len())
            .map(|i| {
                shingles
                    .iter()
                    .map(|s| {
                        let h = shingle_hash(s.as_bytes());
                        (a[i].wrapping_mul(h).wrapping_add(b[i]) >> 32) as u32
                    })
                    .min()
                    .unwrap_or(u32::MAX)
            })
            .collect()
    }

    fn column(texts: &[&str]) -> (Vec<u8>, Vec<u32>) {
        let mut data = Vec::new();
        let mut offsets = vec![0u32];
        for t in texts {
            data.extend_from_slice(t.as_bytes());
            offsets.push(data.len() as u32);
        }
        (data, offsets)
    }

    const FIXTURES: &[&str] = &[
        "",
        "short",
        "exactly twenty-four char",
        "The quick brown fox jumps over the lazy dog, again and again and again.",
        "Größenmaßstäbe: ünïcödé façade — ドキュメントの重複を検出する 🚀🚀🚀 with emoji and CJK text mixed in.",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore!",
    ];

    #[test]
    fn cpu_path_matches_the_reference_on_fixtures() {
        let (a, b) = coefficients(42, DEFAULT_HASHES);
        let (data, offsets) = column(FIXTURES);
        let sigs = signatures(&data, &offsets, 24, &a, &b);
        for (r, t) in FIXTURES.iter().enumerate() {
            assert_eq!(&sigs[r * DEFAULT_HASHES..(r + 1) * DEFAULT_HASHES], reference(t, 24, &a, &b).as_slice(), "{t:?}");
        }
        for n in [1, 3, 5, 100] {
            let s = signatures(&data, &offsets, n, &a, &b);
            assert_eq!(&s[3 * DEFAULT_HASHES..4 * DEFAULT_HASHES], reference(FIXTURES[3], n, &a, &b).as_slice(), "n={n}");
        }
    }

    #[test]
    fn signatures_estimate_jaccard_similarity() {
        let (a, b) = coefficients(7, DEFAULT_HASHES);
        let (data, offsets) = column(&[FIXTURES[5], FIXTURES[6], FIXTURES[3]]);
        let s = signatures(&data, &offsets, 5, &a, &b);
        let agree = |x: usize, y: usize| (0..DEFAULT_HASHES).filter(|i| s[x * DEFAULT_HASHES + i] == s[y * DEFAULT_HASHES + i]).count();
        assert!(agree(0, 1) > 200, "near duplicates agree on most hashes: {}", agree(0, 1));
        assert!(agree(0, 2) < 20, "unrelated texts rarely agree: {}", agree(0, 2));
        assert!(s[..DEFAULT_HASHES].iter().all(|v| *v != u32::MAX));
    }

    #[test]
    fn golden_values_stay_put() {
        // Pins the hash family: signatures persisted by a dedup run must stay comparable.
        let (a, b) = coefficients(42, 4);
        let (data, offsets) = column(&["The quick brown fox jumps over the lazy dog"]);
        let s = signatures(&data, &offsets, 24, &a, &b);
        assert_eq!(crate::to_hex(&s), GOLDEN);
    }
    const GOLDEN: &str = "2a9dead3054a754708d6e2f406966849";
}
