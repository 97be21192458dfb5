//! Shingles for MinHash and Jaccard similarity: what the `minhash` plugin hashes and what the
//! host's dedup compares candidate pairs on. One definition, so the two never drift.
//!
//! A shingle's UTF-8 bytes get a 64-bit base hash: FNV-1a, then splitmix64's finaliser, low
//! bit set (0 never occurs). Character shingles are every window of `n` characters (the
//! whole text when it is shorter, none when it is empty). Word shingles are every window of
//! `n` words, where a word is a maximal run of alphanumeric characters, lowercased; a word
//! shingle's hash combines the hashes of its words in order ([`combine_words`]), so each word
//! is hashed once (a text with fewer words is one shingle).

/// splitmix64's finaliser.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Base hash of one shingle's bytes (never 0).
#[inline]
pub fn shingle_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = FNV_OFFSET;
    for &c in bytes {
        h ^= c as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    mix64(h) | 1
}

#[inline]
fn is_char_start(b: u8) -> bool {
    b & 0xC0 != 0x80
}

/// What a shingle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shingles {
    /// Windows of this many characters.
    Chars(usize),
    /// Windows of this many words.
    Words(usize),
}

/// Reusable buffers for [`shingle_hashes`].
#[derive(Default)]
pub struct Scratch {
    starts: Vec<usize>,
    word_hashes: Vec<u64>,
}

/// Base hashes of a text's shingles, in text order (repeats included), into `out`.
pub fn shingle_hashes(text: &str, kind: Shingles, scratch: &mut Scratch, out: &mut Vec<u64>) {
    out.clear();
    match kind {
        Shingles::Chars(n) => char_shingles(text.as_bytes(), n, &mut scratch.starts, out),
        Shingles::Words(n) => word_shingles(text, n, scratch, out),
    }
}

/// Character windows of `text` (UTF-8 bytes).
pub fn char_shingles(text: &[u8], n: usize, starts: &mut Vec<usize>, out: &mut Vec<u64>) {
    out.clear();
    if text.is_empty() {
        return;
    }
    starts.clear();
    starts.extend((0..text.len()).filter(|&i| is_char_start(text[i])));
    if starts.len() <= n {
        out.push(shingle_hash(text));
        return;
    }
    for w in 0..=starts.len() - n {
        let end = if w + n < starts.len() { starts[w + n] } else { text.len() };
        out.push(shingle_hash(&text[starts[w]..end]));
    }
}

/// Hash of a sequence of word hashes (a word shingle): each word's bytes are hashed once
/// ([`shingle_hash`]) and a shingle combines its words' hashes in order.
#[inline]
pub fn combine_words(words: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &w in words {
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    }
    mix64(h) | 1
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// Each ASCII byte as it enters a word (lowercased), or 0 for a byte that ends one.
const WORD_BYTE: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            t[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    t
};

/// The words' base hashes, each word's lowercased bytes fed to FNV-1a as they are read (no
/// copy of the word is made: the same bytes, so the same hash as [`shingle_hash`] of it), then
/// windows of `n` of them combined.
fn word_shingles(text: &str, n: usize, scratch: &mut Scratch, out: &mut Vec<u64>) {
    let n = n.max(1);
    let hashes = &mut scratch.word_hashes;
    hashes.clear();
    let bytes = text.as_bytes();
    let (mut h, mut in_word) = (FNV_OFFSET, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // ASCII fast path; other characters are decoded.
        let lower = if b < 0x80 {
            i += 1;
            WORD_BYTE[b as usize]
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            i += c.len_utf8();
            if c.is_alphanumeric() {
                let mut buf = [0u8; 4];
                for l in c.to_lowercase() {
                    for &x in l.encode_utf8(&mut buf).as_bytes() {
                        h = (h ^ x as u64).wrapping_mul(FNV_PRIME);
                    }
                }
                in_word = true;
                continue;
            }
            0
        };
        if lower != 0 {
            h = (h ^ lower as u64).wrapping_mul(FNV_PRIME);
            in_word = true;
        } else if in_word {
            hashes.push(mix64(h) | 1);
            (h, in_word) = (FNV_OFFSET, false);
        }
    }
    if in_word {
        hashes.push(mix64(h) | 1);
    }
    if hashes.is_empty() {
        return;
    }
    if hashes.len() <= n {
        out.push(combine_words(hashes));
        return;
    }
    out.extend(hashes.windows(n).map(combine_words));
}

/// Sorted, deduplicated base hashes: the shingle set Jaccard similarity is computed on.
pub fn shingle_set(text: &str, kind: Shingles, scratch: &mut Scratch) -> Vec<u64> {
    let mut out = Vec::new();
    shingle_hashes(text, kind, scratch, &mut out);
    out.sort_unstable();
    out.dedup();
    out
}

/// Jaccard similarity of two sorted, deduplicated sets (1 when both are empty).
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut both) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                both += 1;
                i += 1;
                j += 1;
            }
        }
    }
    both as f64 / (a.len() + b.len() - both) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn words_reference(text: &str, n: usize) -> HashSet<u64> {
        let words: Vec<String> = text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_lowercase()).collect();
        if words.is_empty() {
            return HashSet::new();
        }
        let h: Vec<u64> = words.iter().map(|w| shingle_hash(w.as_bytes())).collect();
        if words.len() <= n {
            return HashSet::from([combine_words(&h)]);
        }
        h.windows(n).map(combine_words).collect()
    }

    #[test]
    fn word_shingles_match_their_definition() {
        let mut s = Scratch::default();
        for text in [
            "The quick brown fox, jumps over the LAZY dog!",
            "a b",
            "",
            "  ...  ",
            "Größe über Straße und mehr Wörter hier",
            // Lowercasing that grows (İ → i̇), digits of other scripts, CJK, emoji between
            // words, combining marks, a word at the very end.
            "İSTANBUL ΣΟΦΊΑ x²³ ٣٤٥ 東京タワー🚀rocket e\u{301}te\u{301} Ǆemal ﬁne ends",
            "word",
        ] {
            for n in [1, 2, 5] {
                let got: HashSet<u64> = shingle_set(text, Shingles::Words(n), &mut s).into_iter().collect();
                assert_eq!(got, words_reference(text, n), "{text:?} n={n}");
            }
        }
    }

    #[test]
    fn jaccard_of_sets() {
        let mut s = Scratch::default();
        let a = shingle_set("one two three four five six", Shingles::Words(2), &mut s);
        let b = shingle_set("one two three four five seven", Shingles::Words(2), &mut s);
        assert!((jaccard(&a, &b) - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(jaccard(&a, &a), 1.0);
        assert_eq!(jaccard(&[], &[]), 1.0);
        assert_eq!(jaccard(&a, &[]), 0.0);
    }
}
