//! Python string semantics that scores depend on.

pub use curator_sdk::text::is_py_space;

/// `str.split()`: runs of Python whitespace separate words; no empty words (ASCII bytes
/// checked by a match, other characters decoded).
pub fn split(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    // Whether the character at `i` (a byte of class 2) is whitespace, and its length.
    let wide = move |i: usize| text[i..].chars().next().map_or((false, 1), |c| (is_py_space(c), c.len_utf8()));
    std::iter::from_fn(move || {
        // skip whitespace
        loop {
            match BYTE_CLASS[*bytes.get(i)? as usize] {
                0 => break,
                1 => i += 1,
                _ => match wide(i) {
                    (true, n) => i += n,
                    (false, _) => break,
                },
            }
        }
        let start = i;
        loop {
            let run = ascii_word_run(bytes, i);
            i += run;
            if run == 8 {
                continue;
            }
            // `i` is at a space or non-ASCII byte (a shorter run stops at one), or near the end
            let Some(&b) = bytes.get(i) else { break };
            match BYTE_CLASS[b as usize] {
                0 => i += 1,
                1 => break,
                _ => match wide(i) {
                    (true, _) => break,
                    (false, n) => i += n,
                },
            }
        }
        Some(&text[start..i])
    })
}

/// [`split`] into `words`, each word's length in code points into `lens`: one pass over the
/// bytes, for callers that need all the words.
pub fn split_with_lens<'a>(text: &'a str, words: &mut Vec<&'a str>, lens: &mut Vec<u32>) {
    let (b, n) = (text.as_bytes(), text.len());
    let wide = |i: usize| text[i..].chars().next().map_or((false, 1), |c| (is_py_space(c), c.len_utf8()));
    let mut i = 0;
    'words: loop {
        let start = loop {
            if i >= n {
                break 'words;
            }
            match BYTE_CLASS[b[i] as usize] {
                0 => break i,
                1 => i += 1,
                _ => match wide(i) {
                    (true, w) => i += w,
                    (false, _) => break i,
                },
            }
        };
        let mut continuation = 0usize;
        while i < n {
            let run = ascii_word_run(b, i);
            i += run;
            if run == 8 {
                continue;
            }
            // `i` is at a space or non-ASCII byte (a shorter run stops at one), or near the end
            let Some(&c) = b.get(i) else { break };
            match BYTE_CLASS[c as usize] {
                0 => {
                    continuation += usize::from(c & 0xc0 == 0x80);
                    i += 1;
                }
                1 => break,
                _ => match wide(i) {
                    (true, _) => break,
                    (false, w) => {
                        continuation += w - 1;
                        i += w;
                    }
                },
            }
        }
        words.push(&text[start..i]);
        lens.push((i - start - continuation) as u32);
    }
}

/// How many of the (up to) eight bytes from `i` are ASCII and not whitespace: word bytes
/// skipped in one step (0 near the end of the text, where the byte loop takes over).
#[inline]
fn ascii_word_run(b: &[u8], i: usize) -> usize {
    let Some(c) = b.get(i..i + 8) else { return 0 };
    let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    // exact for the bytes below the first non-ASCII one (whose own high bit stops the run)
    let stop = curator_sdk::text::ascii_space_mask(w) | (w & 0x8080_8080_8080_8080);
    if stop == 0 { 8 } else { (stop.trailing_zeros() / 8) as usize }
}

/// Per byte: 0 part of a word, 1 ASCII whitespace, 2 the lead byte of a character that may be
/// whitespace (U+0085, U+00A0, U+1680, U+2000–U+205F, U+3000).
static BYTE_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let spaces = [b' ', b'\t', b'\n', 0x0b, 0x0c, b'\r', 0x1c, 0x1d, 0x1e, 0x1f];
    let mut k = 0;
    while k < spaces.len() {
        t[spaces[k] as usize] = 1;
        k += 1;
    }
    t[0xC2] = 2;
    t[0xE1] = 2;
    t[0xE2] = 2;
    t[0xE3] = 2;
    t
};

/// `needle in hay` (the standard library's search; see [`Needles`] for fixed needles).
pub fn contains(hay: &str, needle: &str) -> bool {
    hay.contains(needle)
}

/// Fixed needles searched for again and again, each prepared once (memchr's searchers: SIMD
/// on x86-64 and on wasm32 with simd128, where the standard library falls back to a scalar
/// two-way search).
pub struct Needles(Vec<memchr::memmem::Finder<'static>>);

impl Needles {
    pub fn new(needles: &[&'static str]) -> Needles {
        Needles(needles.iter().map(|n| memchr::memmem::Finder::new(n.as_bytes())).collect())
    }
    /// Whether any needle occurs in `hay`.
    pub fn any_in(&self, hay: &str) -> bool {
        self.0.iter().any(|f| f.find(hay.as_bytes()).is_some())
    }
}

/// `hay.count(needle)`: non-overlapping occurrences (0 for an empty needle).
pub fn count(hay: &str, needle: &str) -> usize {
    if needle.is_empty() { 0 } else { memchr::memmem::find_iter(hay.as_bytes(), needle.as_bytes()).count() }
}

/// `str.strip()`.
pub fn strip(text: &str) -> &str {
    text.trim_matches(is_py_space)
}

/// `len(str)`: code points, i.e. bytes that are not UTF-8 continuation bytes (`10xxxxxx`),
/// counted 8 bytes per step (the standard library steps by `usize`: 4 bytes on wasm32).
pub fn len(text: &str) -> usize {
    let b = text.as_bytes();
    let mut chunks = b.chunks_exact(8);
    let mut continuation = 0usize;
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        continuation += (w & !(w << 1) & 0x8080_8080_8080_8080).count_ones() as usize;
    }
    continuation += chunks.remainder().iter().filter(|&&x| x & 0xc0 == 0x80).count();
    b.len() - continuation
}

/// [`len`], with a fast path for short ASCII strings (most words).
#[inline]
pub fn len_fast(text: &str) -> usize {
    if text.len() <= 16 && text.is_ascii() { text.len() } else { len(text) }
}

/// NeMo's `get_sentences`: lines (split on `\n`) that are not blank.
pub fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').filter(|l| !strip(l).is_empty())
}

/// NeMo's `get_paragraphs`: split on a blank line (`\n\n`, non-overlapping, left to right).
pub fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let (mut start, mut from, mut done) = (0, 0, false);
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        // the next "\n\n" at or after `from`: a newline followed by a newline
        while let Some(k) = memchr::memchr(b'\n', &b[from..]).map(|k| from + k) {
            if b.get(k + 1) == Some(&b'\n') {
                let p = &text[start..k];
                start = k + 2;
                from = start;
                return Some(p);
            }
            from = k + 1;
        }
        done = true;
        Some(&text[start..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_whitespace_and_lengths() {
        assert_eq!(split(" a\tb\x1cc\u{3000}d  ").collect::<Vec<_>>(), ["a", "b", "c", "d"]);
        let t = " a\tb\u{3000}c\u{85}d\x1ce  é\u{a0}f \u{2028}";
        assert_eq!(split(t).collect::<Vec<_>>(), t.split(is_py_space).filter(|c| !c.is_empty()).collect::<Vec<_>>());
        assert_eq!(split("   ").count(), 0);
        let check = |t: &str| {
            let (mut w, mut l) = (Vec::new(), Vec::new());
            split_with_lens(t, &mut w, &mut l);
            assert_eq!(w, split(t).collect::<Vec<_>>(), "{t:?}");
            assert_eq!(l, w.iter().map(|w| len(w) as u32).collect::<Vec<_>>(), "{t:?}");
        };
        // random strings over whitespace and look-alikes of every byte class
        let alphabet = [
            'a', 'b', 'c', 'd', ' ', '\t', '\n', '\x1c', '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}', '\u{200b}', '\u{2028}', '\u{205f}',
            '\u{3000}', 'é', '日', '€', '\u{2060}', '\u{e000}',
        ];
        let mut rng = crate::Lcg(12345);
        for _ in 0..3000 {
            let t = rng.string(&alphabet, 40);
            assert_eq!(split(&t).collect::<Vec<_>>(), t.split(is_py_space).filter(|c| !c.is_empty()).collect::<Vec<_>>(), "{t:?}");
            check(&t);
        }
        assert_eq!(count("aaaa", "aa"), 2);
        assert_eq!(count("a...b....", "..."), 2);
        assert!(contains("privacy policy here", "policy") && !contains("x", "xy"));
        let n = Needles::new(&["cookie", "terms"]);
        assert!(n.any_in("our terms apply") && !n.any_in("nothing"));
        assert_eq!(strip("\x1f x \u{85}"), "x");
        assert_eq!(len("héllo 🚀"), 7);
        for t in [
            "",
            "a",
            "ünïcödé and more ascii text here",
            "日本語のテキストです。",
            "🚀🚀🚀🚀🚀🚀🚀🚀🚀 x",
            "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}",
        ] {
            for i in (0..=t.len()).filter(|&i| t.is_char_boundary(i)) {
                assert_eq!(len(&t[i..]), t[i..].chars().count(), "{:?}", &t[i..]);
            }
        }
        assert_eq!(sentences("a\n\n  \nb\n").collect::<Vec<_>>(), ["a", "b"]);
        for t in ["a\n\nb\n\n\nc", "", "\n\n", "\n\n\n\n", "x\n", "é\n\n\n\n\nü"] {
            assert_eq!(paragraphs(t).collect::<Vec<_>>(), t.split("\n\n").collect::<Vec<_>>(), "{t:?}");
        }
    }
}
