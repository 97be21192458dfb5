//! Text helpers shared by stages, written to give the same answers as the Python
//! implementations users compare against (NeMo Curator, datatrove).

/// Python's `str.isspace()` for one character: Unicode White_Space plus the ASCII
/// information separators U+001C..U+001F, which Python also treats as whitespace.
#[inline]
pub fn is_py_space(c: char) -> bool {
    matches!(c, '\u{1c}'..='\u{1f}') || c.is_whitespace()
}

/// `len(text.split())` in Python, in one pass over the bytes with an ASCII fast path.
pub fn count_words(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut count = 0usize;
    let mut in_word = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let space = if b < 0x80 {
            i += 1;
            // ' ', \t \n \v \f \r, and \x1c..\x1f
            b == b' ' || (0x09..=0x0d).contains(&b) || (0x1c..=0x1f).contains(&b)
        } else {
            // Decode one multi-byte character; `text` is valid UTF-8, so `i` is on a boundary.
            let width = match b {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            let c = text
                .get(i..i + width)
                .and_then(|s| s.chars().next())
                .unwrap_or('\u{fffd}');
            i += width;
            c.is_whitespace()
        };
        if space {
            in_word = false;
        } else if !in_word {
            in_word = true;
            count += 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_split() {
        // Expected values are Python 3's len(s.split()).
        let cases: &[(&str, usize)] = &[
            ("", 0),
            ("   ", 0),
            ("one", 1),
            (" two  words ", 2),
            ("tab\tnew\nline\r\nvt\x0bff\x0c", 5),
            ("sep\x1cfile\x1dgroup\x1erecord\x1funit", 5),
            ("nbsp\u{a0}ideographic\u{3000}space", 3),
            ("em\u{2003}space and\u{2028}line sep", 5),
            ("zero\u{200b}width", 1), // U+200B is not whitespace in Python
            ("日本語のテキスト", 1),
            ("héllo wörld ünïcode", 3),
        ];
        for (s, n) in cases {
            assert_eq!(count_words(s), *n, "{s:?}");
            assert_eq!(
                s.split(is_py_space).filter(|w| !w.is_empty()).count(),
                *n,
                "{s:?}"
            );
        }
    }
}
