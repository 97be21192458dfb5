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
        while let Some(&b) = bytes.get(i) {
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

/// `len(str)`: code points.
pub fn len(text: &str) -> usize {
    text.chars().count()
}

/// NeMo's `get_sentences`: lines (split on `\n`) that are not blank.
pub fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').filter(|l| !strip(l).is_empty())
}

/// NeMo's `get_paragraphs`: split on a blank line (`\n\n`).
pub fn paragraphs(text: &str) -> std::str::Split<'_, &'static str> {
    text.split("\n\n")
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
        // random strings over whitespace and look-alikes of every byte class
        let alphabet = [
            'a', ' ', '\t', '\n', '\x1c', '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}', '\u{200b}', '\u{2028}', '\u{205f}', '\u{3000}', 'é',
            '日', '€', '\u{2060}', '\u{e000}',
        ];
        let mut x = 12345u64;
        for _ in 0..3000 {
            let mut t = String::new();
            for _ in 0..(x % 12) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                t.push(alphabet[(x >> 33) as usize % alphabet.len()]);
            }
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            assert_eq!(split(&t).collect::<Vec<_>>(), t.split(is_py_space).filter(|c| !c.is_empty()).collect::<Vec<_>>(), "{t:?}");
        }
        assert_eq!(count("aaaa", "aa"), 2);
        assert_eq!(count("a...b....", "..."), 2);
        assert!(contains("privacy policy here", "policy") && !contains("x", "xy"));
        let n = Needles::new(&["cookie", "terms"]);
        assert!(n.any_in("our terms apply") && !n.any_in("nothing"));
        assert_eq!(strip("\x1f x \u{85}"), "x");
        assert_eq!(len("héllo 🚀"), 7);
        assert_eq!(sentences("a\n\n  \nb\n").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(paragraphs("a\n\nb\n\n\nc").collect::<Vec<_>>(), ["a", "b", "\nc"]);
    }
}
