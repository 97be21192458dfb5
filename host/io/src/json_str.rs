//! A string as JSON text, quoted and escaped exactly as serde_json escapes it, the bytes to
//! escape found sixteen at a time: the JSONL writer's texts and the `_meta` cells a Parquet read folds.

/// How serde_json escapes each byte: 0 for none, the letter after `\\` otherwise (`u` for
/// `\\u00XX`).
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Whether any of the eight bytes of `x` is a control character, a quote or a backslash (the
/// bit tricks of "Bit Twiddling Hacks": a byte below n, a byte equal to c).
fn needs_escape(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    let equal = |c: u8| {
        let y = x ^ (ONES * c as u64);
        y.wrapping_sub(ONES) & !y & HIGH
    };
    (below_space | equal(b'"') | equal(b'\\')) != 0
}

/// Sixteen bytes at a time from `i`: `Ok(index)` of the first byte JSON escapes, or
/// `Err(index)` of the first byte of the tail shorter than sixteen.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn scan16(b: &[u8], mut i: usize) -> Result<usize, usize> {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8};
    let (below_space, quote, backslash) = (_mm_set1_epi8(0x1f), _mm_set1_epi8(b'"' as i8), _mm_set1_epi8(b'\\' as i8));
    while let Some(chunk) = b.get(i..i + 16) {
        // SAFETY: `chunk` is 16 readable bytes; the load is unaligned (`loadu`).
        let x = unsafe { _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>()) };
        // A byte is a control character when min(byte, 0x1f) is the byte itself.
        let control = _mm_cmpeq_epi8(_mm_min_epu8(x, below_space), x);
        let special = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash));
        let mask = _mm_movemask_epi8(_mm_or_si128(control, special)) as u32;
        if mask != 0 {
            return Ok(i + mask.trailing_zeros() as usize);
        }
        i += 16;
    }
    Err(i)
}

/// The index of the first byte at or after `i` that JSON escapes, or `b.len()`: sixteen bytes
/// at a time with SSE2 (every x86-64 has it), then eight at a time, then byte by byte.
pub fn next_escape(b: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86-64 baseline: every CPU this code runs on has it.
    match unsafe { scan16(b, i) } {
        Ok(at) => return at,
        Err(tail) => i = tail,
    }
    while let Some(word) = b.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if needs_escape(u64::from_le_bytes(w)) {
            break;
        }
        i += 8;
    }
    while i < b.len() && ESCAPE[b[i] as usize] == 0 {
        i += 1;
    }
    i
}

/// `s` as a JSON string, quoted and escaped byte for byte as serde_json escapes it; the runs
/// with nothing to escape are found many bytes at a time ([`next_escape`]) and copied whole
/// (serde_json looks at every byte: this is most of a JSONL writer's time).
pub fn push_json_str(line: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    line.reserve(b.len() + 2);
    line.push(b'"');
    let mut start = 0;
    loop {
        let i = next_escape(b, start);
        line.extend_from_slice(&b[start..i]);
        let Some(&c) = b.get(i) else { break };
        match ESCAPE[c as usize] {
            b'u' => {
                line.extend_from_slice(b"\\u00");
                line.extend_from_slice(&[HEX[(c >> 4) as usize], HEX[(c & 0xf) as usize]]);
            }
            e => line.extend_from_slice(&[b'\\', e]),
        }
        start = i + 1;
    }
    line.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_exactly_as_serde_json_escapes_them() {
        let mut cases: Vec<String> = (0u8..128).map(|b| format!("ab{}cdefghij", b as char)).collect();
        cases.extend((0u8..128).map(|b| (b as char).to_string()));
        cases.extend(
            ["", "plain text longer than eight bytes", "ünïcödé «»\u{7f}\u{80}\u{2028} 🚀", "\"\"\\\\\n\t", "12345678\"", "1234567\u{1f}"]
                .map(String::from),
        );
        // Every position of an escape within and across 16- and 8-byte blocks.
        for at in 0..40 {
            for c in ['"', '\\', '\n', '\u{1}', '\u{1f}', ' ', 'é', '\u{7f}'] {
                let mut t: String = "x".repeat(40);
                t.insert(at, c);
                cases.push(t);
            }
        }
        for t in &cases {
            let mut ours = Vec::new();
            push_json_str(&mut ours, t);
            assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(t).unwrap(), "{t:?}");
        }
    }
}
