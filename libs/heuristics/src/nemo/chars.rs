//! Character classes per byte: the counts behind the character-ratio filters in one pass.

use super::*;

/// Characters of NeMo's `regex_alphanum`: `[a-zA-Z0-9\n?!,.]` (the test oracle of
/// [`CHAR_CLASS`]).
#[cfg(test)]
pub(super) fn is_alphanum_mark(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '\n' | '?' | '!' | ',' | '.')
}

/// Per byte, counts packed in 12-bit fields (character start, non-alphanumeric, digit, white
/// space, bracket): one table load and one add per byte, the fields flushed before they can
/// overflow.
static CHAR_CLASS: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        t[b] = if c < 0x80 {
            let alnum = c.is_ascii_alphanumeric() || matches!(c, b'\n' | b'?' | b'!' | b',' | b'.');
            let white = matches!(c, b'\t' | b'\n' | b'\r' | 0x08 | b' ');
            let paren = matches!(c, b'{' | b'}' | b'[' | b']' | b'(' | b')');
            1 | ((!alnum as u64) << 12) | ((c.is_ascii_digit() as u64) << 24) | ((white as u64) << 36) | ((paren as u64) << 48)
        } else if c >= 0xc0 {
            1 | (1 << 12) // the first byte of a non-ASCII character
        } else {
            0 // a continuation byte
        };
        b += 1;
    }
    t
};

pub(super) fn char_counts(text: &str) -> CharCounts {
    let mut f = [0usize; 5];
    for chunk in text.as_bytes().chunks(4095) {
        // eight bytes per step (one loop check per eight table loads)
        let mut eights = chunk.chunks_exact(8);
        let mut acc: u64 = 0;
        for e in &mut eights {
            let w = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
            acc += CHAR_CLASS[(w & 0xff) as usize]
                + CHAR_CLASS[((w >> 8) & 0xff) as usize]
                + CHAR_CLASS[((w >> 16) & 0xff) as usize]
                + CHAR_CLASS[((w >> 24) & 0xff) as usize]
                + CHAR_CLASS[((w >> 32) & 0xff) as usize]
                + CHAR_CLASS[((w >> 40) & 0xff) as usize]
                + CHAR_CLASS[((w >> 48) & 0xff) as usize]
                + CHAR_CLASS[(w >> 56) as usize];
        }
        acc += eights.remainder().iter().map(|&b| CHAR_CLASS[b as usize]).sum::<u64>();
        for (k, v) in f.iter_mut().enumerate() {
            *v += ((acc >> (12 * k)) & 0xfff) as usize;
        }
    }
    if f[0] != text.len() {
        // non-ASCII text: the two non-ASCII brackets ⟨ ⟩
        f[4] += py::count(text, "\u{27e8}") + py::count(text, "\u{27e9}");
    }
    CharCounts { chars: f[0], non_alnum: f[1], digits: f[2], white: f[3], parens: f[4] }
}
