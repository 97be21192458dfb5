//! Python string semantics that scores depend on.

pub use curator_sdk::text::is_py_space;

/// `str.split()`: runs of Python whitespace separate words; no empty words.
pub fn split(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_py_space).filter(|w| !w.is_empty())
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
        assert_eq!(strip("\x1f x \u{85}"), "x");
        assert_eq!(len("héllo 🚀"), 7);
        assert_eq!(sentences("a\n\n  \nb\n").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(paragraphs("a\n\nb\n\n\nc").collect::<Vec<_>>(), ["a", "b", "\nc"]);
    }
}
