//! Text helpers shared by stages, written to give the same answers as the Python
//! implementations users compare against (NeMo Curator, datatrove).

/// GPT-2's byte-level alphabet: the printable character that stands for each byte in a
/// byte-level BPE vocabulary (GPT-2, Llama-3, Qwen): bytes 33–126, 161–172 and 174–255 stand
/// for themselves, the others, in order, for U+0100 onward (`bytes_to_unicode` in GPT-2's
/// `encoder.py`). Built once.
pub fn gpt2_byte_chars() -> &'static [char; 256] {
    static TABLE: std::sync::OnceLock<[char; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = ['\0'; 256];
        let mut extra = 0u32;
        for (i, slot) in t.iter_mut().enumerate() {
            let i = i as u32;
            *slot = if (33..=126).contains(&i) || (161..=172).contains(&i) || (174..=255).contains(&i) {
                char::from_u32(i).unwrap_or('\0')
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap_or('\0')
            };
        }
        t
    })
}

/// Python's `str.isspace()` for one character: Unicode White_Space plus the ASCII
/// information separators U+001C..U+001F, which Python also treats as whitespace.
#[inline]
pub fn is_py_space(c: char) -> bool {
    matches!(c, '\u{1c}'..='\u{1f}') || c.is_whitespace()
}

const HI: u64 = 0x8080_8080_8080_8080;
const ONES: u64 = 0x0101_0101_0101_0101;

/// Per byte of an all-ASCII word: high bit set where the byte is `>= c` (`1 <= c <= 0x80`).
#[inline(always)]
fn ge(x: u64, c: u8) -> u64 {
    x.wrapping_add((0x80 - c as u64) * ONES) & HI
}

/// Python's ASCII whitespace: `\t \n \v \f \r`, `\x1c..\x1f` and space.
#[inline(always)]
fn is_ascii_py_space(b: u8) -> bool {
    (0x09..=0x0d).contains(&b) || (0x1c..=0x20).contains(&b)
}

/// Per byte of eight ASCII bytes (little-endian): the high bit set where the byte is Python
/// whitespace (`\t \n \x0b \x0c \r`, `\x1c`–`\x1f`, space). Bytes above a non-ASCII byte
/// may be wrong (carries); those below it are exact.
#[inline(always)]
pub fn ascii_space_mask(w: u64) -> u64 {
    (ge(w, 0x09) & !ge(w, 0x0e)) | (ge(w, 0x1c) & !ge(w, 0x21))
}

/// `len(text.split())` in Python.
///
/// Eight bytes at a time while the text is ASCII (SWAR: no SIMD instructions needed, so the
/// native and `wasm32` builds run the same algorithm), one character at a time otherwise.
pub fn count_words(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut count = 0usize;
    let mut prev_space = true;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8) {
            let w = u64::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7]]);
            if w & HI == 0 {
                // High bit of each byte: is it whitespace? (0x09..=0x0d or 0x1c..=0x20)
                let space = ascii_space_mask(w);
                // A word starts at a non-space byte whose predecessor is a space.
                let prev = (space << 8) | if prev_space { 0x80 } else { 0 };
                count += (!space & HI & prev).count_ones() as usize;
                prev_space = space >> 63 != 0;
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        let space = if b < 0x80 {
            i += 1;
            is_ascii_py_space(b)
        } else {
            let width = match b {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            // `text` is valid UTF-8 and `i` is on a character boundary.
            let c = text.get(i..i + width).and_then(|s| s.chars().next()).unwrap_or('\u{fffd}');
            i += width;
            c.is_whitespace()
        };
        count += (prev_space && !space) as usize;
        prev_space = space;
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
            assert_eq!(s.split(is_py_space).filter(|w| !w.is_empty()).count(), *n, "{s:?}");
        }
    }

    #[test]
    fn fast_path_agrees_with_reference_on_random_text() {
        let alphabet = [
            'a', 'B', '7', ' ', '\t', '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1f', '\x00', '\x08', '\x0e', '\x1b', '!', '~', '\x7f', 'é',
            '\u{a0}', '\u{3000}', '\u{2028}', '\u{200b}', '日', '\u{85}', '\u{1680}',
        ];
        let mut state = 0x1234_5678_9abc_def0u64;
        for len in 0..400 {
            let s: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Mostly ASCII, so the 8-byte path runs, with every kind of space mixed in.
                    let k = (state % 64) as usize;
                    if k < 40 { alphabet[k % 8] } else { alphabet[k % alphabet.len()] }
                })
                .collect();
            let reference = s.split(is_py_space).filter(|w| !w.is_empty()).count();
            assert_eq!(count_words(&s), reference, "{s:?}");
        }
    }
}
