//! A string as JSON text, quoted and escaped exactly as serde_json escapes it, found eight
//! bytes at a time: the JSONL writer's texts and the `_meta` cells a Parquet read folds.

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

/// `s` as a JSON string, quoted and escaped byte for byte as serde_json escapes it; runs with
/// nothing to escape are found eight bytes at a time and copied whole (serde_json looks at
/// every byte: this is most of a JSONL writer's time).
pub fn push_json_str(line: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    line.reserve(b.len() + 2);
    line.push(b'"');
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        if let Some(word) = b.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            if !needs_escape(u64::from_le_bytes(w)) {
                i += 8;
                continue;
            }
        }
        let c = b[i];
        i += 1;
        match ESCAPE[c as usize] {
            0 => continue,
            b'u' => {
                line.extend_from_slice(&b[start..i - 1]);
                line.extend_from_slice(b"\\u00");
                line.extend_from_slice(&[HEX[(c >> 4) as usize], HEX[(c & 0xf) as usize]]);
            }
            e => {
                line.extend_from_slice(&b[start..i - 1]);
                line.extend_from_slice(&[b'\\', e]);
            }
        }
        start = i;
    }
    line.extend_from_slice(&b[start..]);
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
        // Every position of an escape within and across eight-byte words.
        for at in 0..20 {
            for c in ['"', '\\', '\n', '\u{1}', 'é'] {
                let mut t: String = "x".repeat(20);
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
