//! An HTML page's bytes to UTF-8: the encoding from a byte-order mark, else the HTTP
//! `Content-Type` charset, else a `<meta>` charset in the page's first 1024 bytes, else
//! detection (chardetng, Firefox's detector, with the URL's top-level domain as a hint).
//! Labels are resolved as browsers do (WHATWG: `iso-8859-1` is windows-1252, unknown labels
//! are ignored). One departure from browsers, for training data: a page whose bytes are valid
//! UTF-8 with non-ASCII characters is read as UTF-8 even when it declares a legacy single-byte
//! charset (Common Crawl holds many such pages; legacy text is almost never valid UTF-8).

use std::borrow::Cow;

use encoding_rs::{Encoding, UTF_8};

/// Where the encoding came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Bom,
    Header,
    Meta,
    /// Valid UTF-8 (declared otherwise, or not declared).
    Utf8,
    Detected,
}

/// `body` decoded (malformed bytes become U+FFFD), with the encoding used and where it came from.
pub fn decode<'a>(body: &'a [u8], content_type: Option<&str>, url: &str) -> (Cow<'a, str>, &'static Encoding, Source) {
    if let Some((enc, bom)) = Encoding::for_bom(body) {
        return (enc.decode_without_bom_handling(&body[bom..]).0, enc, Source::Bom);
    }
    let declared = content_type
        .and_then(header_charset)
        .and_then(|l| Encoding::for_label(l.as_bytes()))
        .map(|e| (e, Source::Header))
        .or_else(|| meta_charset(body).map(|e| (e, Source::Meta)));
    let utf8 = std::str::from_utf8(body).ok();
    let (enc, source) = match (declared, utf8) {
        // UTF-16 declared without a BOM is trusted (its bytes are often valid UTF-8 too).
        (Some((e, s)), _) if e == UTF_8 || e == encoding_rs::UTF_16LE || e == encoding_rs::UTF_16BE => (e, s),
        (Some(_), Some(text)) if !text.is_ascii() => return (Cow::Borrowed(text), UTF_8, Source::Utf8),
        (Some((e, s)), _) => (e, s),
        (None, Some(text)) => return (Cow::Borrowed(text), UTF_8, Source::Utf8),
        (None, None) => (detect(body, url), Source::Detected),
    };
    if enc == UTF_8
        && let Some(text) = utf8
    {
        return (Cow::Borrowed(text), UTF_8, source);
    }
    (enc.decode_without_bom_handling(body).0, enc, source)
}

/// The `charset` parameter of a `Content-Type` value.
fn header_charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case("charset").then(|| v.trim().trim_matches(['"', '\'']))
    })
}

/// The charset a `<meta charset=…>` or `<meta http-equiv … content="…; charset=…">` declares
/// in the first 1024 bytes (the window browsers scan before parsing). As browsers do, a
/// UTF-16 declaration there means UTF-8, and `x-user-defined` means windows-1252.
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(1024)];
    let mut rest = head;
    while let Some(i) = find_ci(rest, b"<meta") {
        let tag = &rest[i + 5..];
        let end = tag.iter().position(|&b| b == b'>').unwrap_or(tag.len());
        let tag = &tag[..end];
        if let Some(j) = find_ci(tag, b"charset") {
            let mut v = &tag[j + 7..];
            v = trim_start(v);
            if let Some(after) = v.strip_prefix(b"=") {
                let v = trim_start(after);
                let v = v.strip_prefix(b"\"").or_else(|| v.strip_prefix(b"'")).unwrap_or(v);
                let len =
                    v.iter().position(|&b| matches!(b, b'"' | b'\'' | b';' | b'/' | b'>') || b.is_ascii_whitespace()).unwrap_or(v.len());
                if let Some(enc) = Encoding::for_label(&v[..len]) {
                    return Some(match enc.name() {
                        "UTF-16LE" | "UTF-16BE" => UTF_8,
                        "x-user-defined" => encoding_rs::WINDOWS_1252,
                        _ => enc,
                    });
                }
            }
        }
        rest = &rest[i + 5 + end..];
    }
    None
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// chardetng's guess, with the URL's top-level domain (`.ru`, `.jp`, …) as its hint.
fn detect(body: &[u8], url: &str) -> &'static Encoding {
    let host = url.split("://").nth(1).unwrap_or(url).split(['/', ':', '?', '#']).next().unwrap_or("");
    let tld = host.rsplit('.').next().filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphabetic()));
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(body, true);
    detector.guess(tld.map(str::as_bytes), chardetng::Utf8Detection::Deny)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(body: &[u8], ct: Option<&str>, url: &str) -> (String, &'static str, Source) {
        let (t, e, s) = decode(body, ct, url);
        (t.into_owned(), e.name(), s)
    }

    #[test]
    fn bom_then_header_then_meta_then_detection() {
        // "café" in windows-1252 and in UTF-8.
        let latin = b"<p>caf\xe9</p>";
        let utf8 = "<p>café</p>".as_bytes();
        assert_eq!(
            name(&[b"\xef\xbb\xbf", utf8].concat(), Some("text/html; charset=iso-8859-1"), ""),
            ("<p>café</p>".into(), "UTF-8", Source::Bom)
        );
        assert_eq!(name(latin, Some("text/html; charset=ISO-8859-1"), ""), ("<p>café</p>".into(), "windows-1252", Source::Header));
        assert_eq!(name(latin, Some("text/html; charset=\"utf-8\""), "").2, Source::Header);
        assert_eq!(name(latin, Some("text/html; charset=utf-8"), "").0, "<p>caf\u{fffd}</p>");
        let meta = [
            b"<html><head><META http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1251\">".as_slice(),
            b"\xcf\xf0\xe8\xe2\xe5\xf2",
        ]
        .concat();
        let (text, enc, src) = name(&meta, Some("text/html"), "");
        assert!(text.ends_with("Привет"), "{text}");
        assert_eq!((enc, src), ("windows-1251", Source::Meta));
        assert_eq!(name(b"<meta charset='koi8-r'>\xf0\xd2\xc9", None, "").1, "KOI8-R");
        // An unknown label is ignored; a UTF-16 meta means UTF-8.
        assert_eq!(name(b"<meta charset=bogus>abc", None, "").2, Source::Utf8);
        assert_eq!(name(b"<meta charset=utf-16>abc", None, "").1, "UTF-8");
        // Valid UTF-8 with non-ASCII bytes wins over a legacy declaration.
        assert_eq!(name(utf8, Some("text/html; charset=iso-8859-1"), ""), ("<p>café</p>".into(), "UTF-8", Source::Utf8));
        // Nothing declared and not UTF-8: detected, the TLD helping.
        let sjis = b"<p>\x82\xb1\x82\xf1\x82\xc9\x82\xbf\x82\xcd\x90\xa2\x8a\x45</p>";
        let (text, enc, src) = name(sjis, Some("text/html"), "http://example.jp/a");
        assert_eq!((text.as_str(), enc, src), ("<p>こんにちは世界</p>", "Shift_JIS", Source::Detected));
    }
}
