//! The reader's fast path: a line's top-level fields found by hand, the text field unescaped
//! straight into its Arrow column (no `String` per document, no second copy).
//!
//! It handles what real shards hold: string keys without escapes, a string text, string
//! values scanned sixteen bytes at a time, any other value measured by serde_json. Whatever it
//! would have to judge differently from serde_json (an escaped key, a repeated or non-string
//! text, a control character, an unknown escape, a lone surrogate, bytes after the object)
//! makes it give up with `None`, having appended nothing, and the line goes through the
//! serde_json path (`read.rs`), which accepts or rejects it with its own message. So both
//! paths accept the same lines and decode them to the same values (tested against each other
//! below).

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::text_column::TextColumn;
use crate::json_str::next_escape;

/// Top-level fields of one line, from either path.
pub(super) struct Fields<'a> {
    /// The text field: its value, or the name of the JSON type found instead.
    pub text: Option<Result<Text<'a>, &'static str>>,
    /// Every other field: its key (decoded) and its raw JSON value.
    pub others: Vec<(Cow<'a, str>, &'a str)>,
}

/// A text field's string value.
pub(super) enum Text<'a> {
    /// Already decoded into the text column, pending.
    Pending,
    /// Decoded by serde_json (borrowed when it has no escapes).
    Decoded(Cow<'a, str>),
}

/// Scan `line` (valid UTF-8, trimmed of its line end), appending the value of `text_field`
/// to `texts` as a pending value. `None` (nothing left pending): let serde_json judge it.
pub(super) fn scan<'a>(line: &'a str, text_field: &str, texts: &mut TextColumn) -> Option<Fields<'a>> {
    let mark = texts.pending_len();
    let out = scan_fields(line, text_field, texts);
    if out.is_none() {
        texts.truncate_pending(mark);
    }
    out
}

fn scan_fields<'a>(line: &'a str, text_field: &str, texts: &mut TextColumn) -> Option<Fields<'a>> {
    let b = line.as_bytes();
    let mut out = Fields { text: None, others: Vec::new() };
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (skip_ws(b, i + 1) == b.len()).then_some(out);
    }
    loop {
        // A key without escapes.
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = next_escape(b, i + 1);
        if b.get(end) != Some(&b'"') {
            return None;
        }
        let key = &line[i + 1..end];
        i = skip_ws(b, end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        if key == text_field {
            if out.text.is_some() || b.get(i) != Some(&b'"') {
                return None;
            }
            i = unescape(b, i + 1, texts.pending())?;
            out.text = Some(Ok(Text::Pending));
        } else {
            let start = i;
            i = value_end(line, i)?;
            out.others.push((Cow::Borrowed(key), &line[start..i]));
        }
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return (skip_ws(b, i + 1) == b.len()).then_some(out),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the JSON value starting at `i`: a string without escapes found here, anything
/// else measured by serde_json.
fn value_end(line: &str, i: usize) -> Option<usize> {
    let b = line.as_bytes();
    if b.get(i) == Some(&b'"') {
        let end = next_escape(b, i + 1);
        if b.get(end) == Some(&b'"') {
            return Some(end + 1);
        }
    }
    let mut values = serde_json::Deserializer::from_str(line.get(i..)?).into_iter::<&RawValue>();
    values.next()?.ok()?;
    Some(i + values.byte_offset())
}

/// Decode the JSON string body starting at `i` (just past its opening quote) into `out`;
/// the index just past its closing quote.
fn unescape(b: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    loop {
        let j = next_escape(b, i);
        out.extend_from_slice(b.get(i..j)?);
        match *b.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => {}
            _ => return None, // a control character: serde_json rejects it
        }
        let simple = match *b.get(j + 1)? {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let (c, next) = unicode_escape(b, j + 2)?;
                let mut utf8 = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                i = next;
                continue;
            }
            _ => return None,
        };
        out.push(simple);
        i = j + 2;
    }
}

/// The character of a `\u` escape whose four hex digits start at `i` (a surrogate pair takes
/// a second escape); the index after it. A lone surrogate is `None`, as serde_json refuses it.
fn unicode_escape(b: &[u8], i: usize) -> Option<(char, usize)> {
    let hi = hex4(b, i)?;
    match hi {
        0xD800..=0xDBFF => {
            if b.get(i + 4..i + 6)? != b"\\u" {
                return None;
            }
            let lo = hex4(b, i + 6)?;
            if !(0xDC00..=0xDFFF).contains(&lo) {
                return None;
            }
            Some((char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?, i + 10))
        }
        0xDC00..=0xDFFF => None,
        _ => Some((char::from_u32(hi)?, i + 4)),
    }
}

fn hex4(b: &[u8], i: usize) -> Option<u32> {
    b.get(i..i + 4)?.iter().try_fold(0u32, |n, &d| Some(n * 16 + (d as char).to_digit(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    type View = (Option<String>, Vec<(String, String)>);

    /// What the serde_json path makes of a line: the text and the other fields' raw values,
    /// or None where it refuses the line or the text is not a string.
    fn serde_view(line: &str, text_field: &str) -> Option<View> {
        use serde::de::DeserializeSeed;
        let mut de = serde_json::Deserializer::from_str(line);
        let f = super::super::read::FieldsSeed(text_field).deserialize(&mut de).ok()?;
        de.end().ok()?;
        let text = match f.text {
            None => None,
            Some(Ok(Text::Decoded(t))) => Some(t.into_owned()),
            Some(_) => return None,
        };
        Some((text, f.others.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()))
    }

    fn scan_view(line: &str, text_field: &str) -> Option<View> {
        let mut texts = TextColumn::default();
        let f = scan(line, text_field, &mut texts)?;
        let text = f.text.is_some().then(|| String::from_utf8(texts.pending().clone()).unwrap());
        Some((text, f.others.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()))
    }

    #[test]
    fn accepts_what_serde_accepts_and_decodes_the_same() {
        let lines = [
            r#"{"id": "a", "text": "plain"}"#,
            r#"{"text":"line\nbreak \"quoted\" back\\slash \/ \b\f\r\t tab"}"#,
            r#"  {  "text" : "x" , "n" : -1.5e3 , "o": {"a": [1, "}", null]}, "t": true }  "#,
            r#"{"text": "\u00e9\u4e2d\ud83d\ude80 \u0000"}"#,
            r#"{"text": "ünïcödé 中文 кириллица"}"#,
            r#"{"id": "esc\"aped", "text": ""}"#,
            r#"{}"#,
            r#"{"other": 1}"#,
        ];
        for line in lines {
            let want = serde_view(line, "text").expect(line);
            assert_eq!(scan_view(line, "text"), Some(want), "{line}");
        }
    }

    #[test]
    fn gives_up_where_serde_would_refuse_or_differ() {
        let lines = [
            "{\"text\": \"raw\tcontrol\"}",
            r#"{"text": "bad \x escape"}"#,
            r#"{"text": "lone \ud83d surrogate"}"#,
            r#"{"text": "lone \ude80 low"}"#,
            r#"{"text": "short \u12"}"#,
            r#"{"text": "unterminated}"#,
            r#"{"text": "a"} trailing"#,
            r#"{"text": "a",}"#,
            r#"{"text": "a" "id": 1}"#,
            r#"{"te\u0078t": "escaped key"}"#,
            r#"{"text": "a", "text": "repeated"}"#,
            r#"{"text": 5}"#,
            r#"{"id": 01, "text": "a"}"#,
            r#"{"id": tru, "text": "a"}"#,
            r#"["text", "a"]"#,
            r#""#,
        ];
        for line in lines {
            let mut texts = TextColumn::default();
            texts.pending().extend_from_slice(b"kept");
            assert!(scan(line, "text", &mut texts).is_none(), "{line}");
            assert_eq!(texts.pending().as_slice(), b"kept", "nothing left behind by {line}");
        }
    }

    #[test]
    fn random_lines_agree_with_serde() {
        // Lines built from pieces that stress escapes, nesting and whitespace; every one either
        // scans to what serde_json decodes or is left to serde_json.
        let pieces = ["a", "\\n", "\\\"", "\\u00e9", "\\ud83d\\ude80", "中", "\\", "\"", "\t", " ", "\\u", "\\ud800", "}", ",", "\\/"];
        let mut rng = curator_test_support::Xorshift::new(0x9e37_79b9_7f4a_7c15);
        let mut scanned = 0;
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..rng.below(12) {
                text.push_str(pieces[rng.below(pieces.len())]);
            }
            let line = match rng.below(3) {
                0 => format!(r#"{{"text": "{text}", "id": 7}}"#),
                1 => format!(r#"{{"id": "{text}", "text": "x"}}"#),
                _ => format!(r#"{{"m": {{"k": "{text}"}}, "text": "{text}"}}"#),
            };
            if let Some(got) = scan_view(&line, "text") {
                scanned += 1;
                assert_eq!(Some(got), serde_view(&line, "text"), "{line}");
            }
        }
        assert!(scanned > 5_000, "the fast path took only {scanned} of 20,000 lines");
    }
}
