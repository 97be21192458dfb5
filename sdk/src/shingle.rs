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

/// What a character of the Basic Multilingual Plane is to a word: [`NOT_WORD`] (it ends
/// one), [`SLOW`] (its lowercase is not one character of the plane: decoded the long way), or
/// its lowercase character, which enters the word.
const NOT_WORD: u16 = 0;
const SLOW: u16 = 0xFFFF;

/// [`NOT_WORD`], [`SLOW`] or the lowercase of every BMP code point, made once per process
/// from `char::is_alphanumeric` and `char::to_lowercase` (so it says what they say): one
/// load per character instead of two Unicode table searches and a case mapping, which made
/// Cyrillic or Hangul text several times slower to shingle per byte than ASCII.
fn bmp_words() -> &'static [u16] {
    static TABLE: std::sync::OnceLock<Box<[u16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=0xFFFFu32)
            .map(|cp| match char::from_u32(cp) {
                Some(c) if c.is_alphanumeric() => {
                    let mut lower = c.to_lowercase();
                    match (lower.next(), lower.next()) {
                        (Some(l), None) if (l as u32) < 0xFFFF => l as u16,
                        _ => SLOW,
                    }
                }
                _ => NOT_WORD,
            })
            .collect()
    })
}

/// Feed `bytes` to the FNV-1a state `h`.
#[inline(always)]
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &x| (h ^ x as u64).wrapping_mul(FNV_PRIME))
}

/// The words' base hashes, each word's lowercased bytes fed to FNV-1a as they are read (no
/// copy of the word is made: the same bytes, so the same hash as [`shingle_hash`] of it), then
/// windows of `n` of them combined. A word is a run of characters `char::is_alphanumeric`
/// calls so, each lowercased on its own by `char::to_lowercase`.
fn word_shingles(text: &str, n: usize, scratch: &mut Scratch, out: &mut Vec<u64>) {
    let n = n.max(1);
    let hashes = &mut scratch.word_hashes;
    hashes.clear();
    let bytes = text.as_bytes();
    let table = if bytes.is_ascii() { &[][..] } else { bmp_words() };
    let (mut h, mut in_word) = (FNV_OFFSET, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // ASCII by its own table; the rest of the plane by `table`; the other planes (and
        // the few characters whose lowercase is not one character of this plane) decoded.
        let word = if b < 0x80 {
            i += 1;
            let lower = WORD_BYTE[b as usize];
            if lower != 0 {
                h = (h ^ lower as u64).wrapping_mul(FNV_PRIME);
            }
            lower != 0
        } else if b < 0xF0 {
            // `text` is UTF-8: a lead byte below 0xF0 starts a 2- or 3-byte character.
            let (cp, len) = if b < 0xE0 {
                (((b as u32 & 0x1F) << 6) | (bytes[i + 1] as u32 & 0x3F), 2)
            } else {
                (((b as u32 & 0x0F) << 12) | ((bytes[i + 1] as u32 & 0x3F) << 6) | (bytes[i + 2] as u32 & 0x3F), 3)
            };
            let word = match table[cp as usize] {
                NOT_WORD => false,
                SLOW => slow_char(text, i, &mut h),
                l if l as u32 == cp => {
                    h = fnv(h, &bytes[i..i + len]);
                    true
                }
                l => {
                    h = fnv(h, char::from_u32(l as u32).unwrap_or(' ').encode_utf8(&mut [0u8; 4]).as_bytes());
                    true
                }
            };
            i += len;
            word
        } else {
            let word = slow_char(text, i, &mut h);
            i += 4;
            word
        };
        if word {
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

/// The character at byte `i` of `text` the long way: whether it is alphanumeric, its
/// lowercase (one or more characters) fed to `h` when it is.
#[cold]
fn slow_char(text: &str, i: usize, h: &mut u64) -> bool {
    let c = text[i..].chars().next().unwrap_or(' ');
    if !c.is_alphanumeric() {
        return false;
    }
    let mut buf = [0u8; 4];
    for l in c.to_lowercase() {
        *h = fnv(*h, l.encode_utf8(&mut buf).as_bytes());
    }
    true
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

    /// The word splitting as it was before the table (each non-ASCII character decoded and
    /// looked up by `char`'s own methods): the table must give the same hashes for every
    /// character, or dedup decisions would change.
    fn words_before(text: &str) -> Vec<u64> {
        let mut hashes = Vec::new();
        let (mut h, mut in_word) = (FNV_OFFSET, false);
        for c in text.chars() {
            if c.is_ascii() {
                let lower = WORD_BYTE[c as usize];
                if lower != 0 {
                    h = (h ^ lower as u64).wrapping_mul(FNV_PRIME);
                    in_word = true;
                    continue;
                }
            } else if c.is_alphanumeric() {
                let mut buf = [0u8; 4];
                for l in c.to_lowercase() {
                    for &x in l.encode_utf8(&mut buf).as_bytes() {
                        h = (h ^ x as u64).wrapping_mul(FNV_PRIME);
                    }
                }
                in_word = true;
                continue;
            }
            if in_word {
                hashes.push(mix64(h) | 1);
                (h, in_word) = (FNV_OFFSET, false);
            }
        }
        if in_word {
            hashes.push(mix64(h) | 1);
        }
        hashes
    }

    #[test]
    fn every_character_splits_and_lowercases_as_before() {
        let mut s = Scratch::default();
        let mut out = Vec::new();
        // Every scalar value of the Basic Multilingual Plane and a stride through the others,
        // alone, inside an ASCII word, doubled and beside a separator.
        let chars =
            (0x80..=0xFFFFu32).chain((0x10000..=0x10FFFF).step_by(97)).chain([0x1F680, 0x10400, 0x1D400]).filter_map(char::from_u32);
        let mut text = String::new();
        for (k, c) in chars.enumerate() {
            use std::fmt::Write;
            let _ = write!(text, "a{c}b {c}{c} .{c}, ");
            if k % 512 == 511 {
                word_shingles(&text, 1, &mut s, &mut out);
                assert_eq!(s.word_hashes, words_before(&text), "near {c:?} (U+{:04X})", c as u32);
                text.clear();
            }
        }
        word_shingles(&text, 1, &mut s, &mut out);
        assert_eq!(s.word_hashes, words_before(&text));
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
