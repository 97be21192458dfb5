//! Python string semantics that scores depend on.

pub use curator_sdk::text::is_py_space;

/// `str.split()`: runs of Python whitespace separate words; no empty words (ASCII bytes
/// checked by a match, other characters decoded).
pub fn split(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        // skip whitespace
        loop {
            let b = *bytes.get(i)?;
            if b < 0x80 {
                if !is_ascii_py_space(b) {
                    break;
                }
                i += 1;
            } else {
                let c = text[i..].chars().next()?;
                if !is_py_space(c) {
                    break;
                }
                i += c.len_utf8();
            }
        }
        let start = i;
        while let Some(&b) = bytes.get(i) {
            if b < 0x80 {
                if is_ascii_py_space(b) {
                    break;
                }
                i += 1;
            } else {
                let c = text[i..].chars().next()?;
                if is_py_space(c) {
                    break;
                }
                i += c.len_utf8();
            }
        }
        Some(&text[start..i])
    })
}

fn is_ascii_py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r' | 0x1c..=0x1f)
}

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
