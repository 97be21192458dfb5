//! `<tag/>` read as libxml2 reads it. An HTML5 parser ignores the slash of a self-closing
//! start tag on an element that is not void: `<a id="x"/>Title` opens a link that runs on
//! (and is reopened in later paragraphs), `<script src="x"/>` swallows the page up to the
//! next `</script>`. libxml2's HTML parser — the one the Python jusText and NeMo Curator run —
//! closes such elements at once, and XHTML pages (DocBook, older CMSs) depend on it. This
//! pass rewrites each such tag as `<tag …></tag>` before html5ever sees the page.
//!
//! It is a scanner of tag boundaries only (quoted attribute values, comments, and the raw
//! text of `script`, `style` and their kind are stepped over, as the HTML tokenizer steps over
//! them); the page is still parsed by html5ever.

use std::borrow::Cow;

/// Elements that have no end tag: their `/>` changes nothing.
const VOID: &[&str] = &[
    "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image", "img", "input", "keygen", "link", "meta", "param",
    "source", "track", "wbr",
];

/// Elements whose content is raw text (or RCDATA) to the tokenizer: no tags inside.
const RAW: &[&str] = &["script", "style", "xmp", "iframe", "noembed", "noframes", "title", "textarea", "plaintext"];

/// `html` with every self-closing start tag of a non-void element closed at once.
pub fn close_self_closing(html: &str) -> Cow<'_, str> {
    if !html.contains("/>") {
        return Cow::Borrowed(html);
    }
    let b = html.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'<', &b[i..]) {
        let j = i + off;
        match b.get(j + 1) {
            Some(b'!') if b[j..].starts_with(b"<!--") => match find(b, j + 4, b"-->") {
                Some(end) => i = end + 3,
                None => break,
            },
            Some(b'!' | b'?' | b'/') => match b[j..].iter().position(|&c| c == b'>') {
                Some(end) => i = j + end + 1,
                None => break,
            },
            Some(c) if c.is_ascii_alphabetic() => {
                let name_end =
                    j + 1 + b[j + 1..].iter().position(|&c| c.is_ascii_whitespace() || c == b'/' || c == b'>').unwrap_or(b.len() - j - 1);
                let name = html[j + 1..name_end].to_ascii_lowercase();
                let Some((end, self_closing)) = tag_end(b, name_end) else { break };
                if self_closing && !VOID.contains(&name.as_str()) {
                    let o = out.get_or_insert_with(|| String::with_capacity(html.len() + 64));
                    o.push_str(&html[copied..end]);
                    o.push_str("></");
                    o.push_str(&name);
                    o.push('>');
                    copied = end + 2;
                    i = end + 2;
                } else if !self_closing && RAW.contains(&name.as_str()) {
                    // Step over the raw text to its end tag (left for the loop to pass).
                    let close = format!("</{name}");
                    match find_ci(b, end + 1, close.as_bytes()) {
                        Some(k) => i = k,
                        None => break,
                    }
                } else {
                    i = end + if self_closing { 2 } else { 1 };
                }
            }
            _ => i = j + 1,
        }
    }
    match out {
        None => Cow::Borrowed(html),
        Some(mut o) => {
            o.push_str(&html[copied..]);
            Cow::Owned(o)
        }
    }
}

/// Where a start tag whose name ends at `k` ends: the index of its `>` (or of the `/` of its
/// `/>`), and whether it is self-closing. Attribute values are stepped over as the HTML
/// tokenizer reads them (quoted, or unquoted up to whitespace or `>`).
fn tag_end(b: &[u8], mut k: usize) -> Option<(usize, bool)> {
    loop {
        while b.get(k)?.is_ascii_whitespace() {
            k += 1;
        }
        match b[k] {
            b'>' => return Some((k, false)),
            b'/' if b.get(k + 1) == Some(&b'>') => return Some((k, true)),
            b'/' => k += 1,
            _ => {
                // An attribute name, then maybe `= value`.
                while !matches!(*b.get(k)?, b'=' | b'>' | b'/') && !b[k].is_ascii_whitespace() {
                    k += 1;
                }
                let mut v = k;
                while b.get(v)?.is_ascii_whitespace() {
                    v += 1;
                }
                if b[v] != b'=' {
                    continue;
                }
                v += 1;
                while b.get(v)?.is_ascii_whitespace() {
                    v += 1;
                }
                k = match b[v] {
                    q @ (b'"' | b'\'') => v + 1 + b[v + 1..].iter().position(|&c| c == q)? + 1,
                    _ => v + b[v..].iter().position(|&c| c.is_ascii_whitespace() || c == b'>').unwrap_or(b.len() - v),
                };
            }
        }
    }
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(b.get(from..)?, needle).map(|p| from + p)
}

fn find_ci(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle)).map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_void_self_closing_tags_are_closed_and_the_rest_is_left_alone() {
        assert_eq!(close_self_closing(r#"<h2><a id="x"/>Title</h2>"#), r#"<h2><a id="x"></a>Title</h2>"#);
        assert_eq!(close_self_closing(r#"<script src="a.js"/><p>kept</p>"#), r#"<script src="a.js"></script><p>kept</p>"#);
        assert_eq!(close_self_closing("<DIV class=a />x"), "<DIV class=a ></div>x");
        // Void elements, quoted `/>`, unquoted values ending in a slash, comments and raw text.
        for same in [
            "<br/><img src=x />",
            r#"<p title="a/>b">x</p>"#,
            "<a href=/path/>x</a>",
            "<!-- <a/> --><p>x</p>",
            "<script>if (a</b) { x = '<a/>'; }</script>",
            "<style>a/>b{}</style>",
            "no tags />",
        ] {
            assert!(matches!(close_self_closing(same), Cow::Borrowed(_)), "{same}");
        }
        // Cut-off pages end the scan without a panic.
        for cut in ["<a id=\"x", "<a id=x", "<a ", "<!-- x", "<script>x", "<a/"] {
            let _ = close_self_closing(&format!("{cut}/>"));
            let _ = close_self_closing(cut);
        }
    }
}
