//! NeMo Curator's document modifiers (`nemo_curator.stages.text.modifiers`, version 1.4.0)
//! with the same parameters and outputs, checked against NeMo's own classes
//! (`tests/parity/modifier_reference.jsonl`, made by
//! `scripts/parity/make_modifier_reference.py`). `UnicodeReformatter` is in [`crate::ftfy`].
//! Indices count code points, as Python's do. Every modifier returns the input unchanged
//! (borrowed) when it has nothing to do.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex_lite::Regex;

use crate::py;

/// BoilerPlateStringModifier: drops the paragraphs (split on `\n\n`) that mention privacy
/// policies, cookies or terms of use when they sit only at the top or bottom; empties the
/// document when boilerplate is elsewhere (or anywhere, with `remove_if_at_top_or_bottom`
/// false) or when it contains "lorem ipsum".
pub fn boiler_plate_string(text: &str, remove_if_at_top_or_bottom: bool) -> Cow<'_, str> {
    let paragraphs: Vec<&str> = text.split("\n\n").collect();
    let mut found = Vec::new();
    for (i, p) in paragraphs.iter().enumerate() {
        let p = py::strip(p).to_lowercase();
        if p.contains("lorem ipsum") {
            return Cow::Borrowed("");
        }
        if crate::nemo::policy_needles().any_in(&p) {
            if !remove_if_at_top_or_bottom {
                return Cow::Borrowed("");
            }
            found.push(i);
        }
    }
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let contiguous = found.windows(2).all(|w| w[0] + 1 == w[1]);
    let at_edge = found[0] == 0 || found[found.len() - 1] == paragraphs.len() - 1;
    if found.len() == paragraphs.len() || !contiguous || !at_edge {
        return Cow::Borrowed(text);
    }
    let kept: Vec<&str> = paragraphs.iter().enumerate().filter(|(i, _)| !found.contains(i)).map(|(_, p)| *p).collect();
    Cow::Owned(kept.join("\n\n"))
}

/// LineRemover: drops the lines (split on `\n`) equal to one of `patterns`.
pub fn line_remover<'a>(text: &'a str, patterns: &[String]) -> Cow<'a, str> {
    if !text.split('\n').any(|l| patterns.iter().any(|p| p == l)) {
        return Cow::Borrowed(text);
    }
    let kept: Vec<&str> = text.split('\n').filter(|l| !patterns.iter().any(|p| p == l)).collect();
    Cow::Owned(kept.join("\n"))
}

struct Markdown {
    bold: Regex,
    italic: Regex,
    underline: Regex,
    link: Regex,
}

fn markdown() -> &'static Markdown {
    static M: OnceLock<Markdown> = OnceLock::new();
    M.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("pattern {p}: {e}"));
        Markdown { bold: re(r"\*\*(.*?)\*\*"), italic: re(r"\*(.*?)\*"), underline: re(r"_(.*?)_"), link: re(r"\[.*?\]\((.*?)\)") }
    })
}

/// MarkdownRemover: per line, `**x**`, `*x*` and `_x_` become `x`; `[text](url)` becomes `url`
/// (NeMo keeps the link target, not its text).
pub fn markdown_remover(text: &str) -> Cow<'_, str> {
    if !text.contains(['*', '_', '[']) {
        return Cow::Borrowed(text);
    }
    let m = markdown();
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            let line = m.bold.replace_all(line, "$1");
            let line = m.italic.replace_all(&line, "$1");
            let line = m.underline.replace_all(&line, "$1");
            m.link.replace_all(&line, "$1").into_owned()
        })
        .collect();
    let out = lines.join("\n");
    if out == text { Cow::Borrowed(text) } else { Cow::Owned(out) }
}

/// Replaces runs of 3 or more `unit`s with 2.
fn squeeze<'a>(text: &'a str, unit: &str) -> Cow<'a, str> {
    let three = unit.repeat(3);
    if !text.contains(&three) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(&three) {
        out.push_str(&rest[..i]);
        out.push_str(unit);
        out.push_str(unit);
        let mut j = i;
        while rest[j..].starts_with(unit) {
            j += unit.len();
        }
        rest = &rest[j..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// NewlineNormalizer: 3 or more `\n` become 2, then 3 or more `\r\n` become 2.
pub fn newline_normalizer(text: &str) -> Cow<'_, str> {
    match squeeze(text, "\n") {
        Cow::Borrowed(t) => squeeze(t, "\r\n"),
        Cow::Owned(t) => Cow::Owned(squeeze(&t, "\r\n").into_owned()),
    }
}

/// QuotationRemover: a document wrapped in double quotes loses them, unless its first line
/// (of several) ends with a quote itself.
pub fn quotation_remover(text: &str) -> Cow<'_, str> {
    let stripped = py::strip(text);
    if py::len(stripped) > 2 && text.starts_with('"') && text.ends_with('"') {
        let first_line_quoted = text.split('\n').next().is_some_and(|l| l.ends_with('"'));
        if !stripped.contains('\n') || !first_line_quoted {
            return Cow::Borrowed(&text[1..text.len() - 1]);
        }
    }
    Cow::Borrowed(text)
}

/// One end of a [`Slicer`]: a code-point index (negative counts from the end) or a marker
/// string.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    Index(i64),
    Text(String),
    None,
}

/// Slicer: `text[left:right]`, each end an index or the first (left) / last (right)
/// occurrence of a string (a missing marker empties the document); `strip` after.
#[derive(Debug, Clone, PartialEq)]
pub struct Slicer {
    pub left: Bound,
    pub right: Bound,
    pub include_left: bool,
    pub include_right: bool,
    pub strip: bool,
}

impl Slicer {
    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        // byte offset of each code point, plus the end
        let offsets: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
        let n = offsets.len() as i64 - 1;
        let clamp = |i: i64| -> usize { (if i < 0 { (n + i).max(0) } else { i.min(n) }) as usize };
        let start = match &self.left {
            Bound::Index(i) => offsets[clamp(*i)],
            Bound::Text(s) => match text.find(s.as_str()) {
                Some(at) => at + if self.include_left { 0 } else { s.len() },
                None => return Cow::Borrowed(""),
            },
            Bound::None => 0,
        };
        let end = match &self.right {
            Bound::Index(i) => offsets[clamp(*i)],
            Bound::Text(s) => match text.rfind(s.as_str()) {
                Some(at) => at + if self.include_right { s.len() } else { 0 },
                None => return Cow::Borrowed(""),
            },
            Bound::None => text.len(),
        };
        let out = if start < end { &text[start..end] } else { "" };
        Cow::Borrowed(if self.strip { py::strip(out) } else { out })
    }
}

/// UrlRemover: removes `https?://\S+` and `www\.\S+` (any case).
pub fn url_remover(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let starts_ci = |i: usize, p: &str| bytes.len() >= i + p.len() && bytes[i..i + p.len()].eq_ignore_ascii_case(p.as_bytes());
    let mut out = String::new();
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        let prefix = if starts_ci(i, "http://") {
            7
        } else if starts_ci(i, "https://") {
            8
        } else if starts_ci(i, "www.") {
            4
        } else {
            0
        };
        if prefix > 0 {
            let rest = &text[i + prefix..];
            let run = rest.find(py::is_py_space).unwrap_or(rest.len());
            if run > 0 {
                out.push_str(&text[copied..i]);
                i += prefix + run;
                copied = i;
                continue;
            }
        }
        i += 1;
        while i < bytes.len() && !text.is_char_boundary(i) {
            i += 1;
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_modifier_on_small_cases() {
        assert_eq!(boiler_plate_string("Privacy policy.\n\nBody.", true), "Body.");
        assert_eq!(boiler_plate_string("A.\n\nTerms of use.\n\nB.", true), "A.\n\nTerms of use.\n\nB.");
        assert_eq!(boiler_plate_string("A.\n\nTerms of use.", false), "");
        assert_eq!(line_remover("a\nRead more\nb", &["Read more".into()]), "a\nb");
        assert_eq!(markdown_remover("**b** *i* _u_ [t](http://x)"), "b i u http://x");
        assert_eq!(newline_normalizer("a\n\n\n\nb\r\n\r\n\r\nc"), "a\n\nb\r\n\r\nc");
        assert_eq!(quotation_remover("\"quoted\""), "quoted");
        assert_eq!(quotation_remover("\"a\"\nb\""), "\"a\"\nb\"");
        assert_eq!(url_remover("see https://x.y/z, www.a.b and http:// alone"), "see   and http:// alone");
        let s = Slicer { left: Bound::Index(2), right: Bound::Index(-2), include_left: true, include_right: true, strip: true };
        assert_eq!(s.apply("héllo wörld"), "llo wör");
        let s = Slicer {
            left: Bound::Text("[".into()),
            right: Bound::Text("]".into()),
            include_left: false,
            include_right: true,
            strip: false,
        };
        assert_eq!(s.apply("a[b]c]d"), "b]c]");
        assert_eq!(s.apply("no markers"), "");
    }
}
