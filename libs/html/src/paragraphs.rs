//! A page cut into paragraphs the way jusText cuts it: the page parsed, cleaned as jusText's
//! preprocessor cleans it (lxml's `Cleaner` with jusText's options), then walked in document
//! order, a paragraph ending at every block-level tag and at `<br><br>`. The tree is libxml2's
//! ([`crate::tree_builder`]), as lxml gives it to jusText.
//!
//! The maker takes the tree builder's events as they come (a [`TreeSink`]; no tree is built),
//! or a built tree's ([`Dom::replay`]). What the cleaner does, and how the maker mirrors it:
//! - elements *killed* with their content (`head`, `script`, `style`, `base`, `applet`, form
//!   controls `button`, `input`, `select`, `textarea`, stylesheet `link`s, and comments) are
//!   skipped; the text after them joins the text before, as lxml's `drop_tree` joins tails;
//! - elements *unwrapped* (`form`, `iframe`, `embed`, `layer`, `object`, `param`) give no
//!   start or end event, their content stays in place, and text on both sides joins;
//! - adjacent text is handed to the paragraph maker as one piece, as lxml's SAX does after
//!   cleaning (a blank piece is ignored, so where pieces are cut matters).

use curator_sdk::text::is_py_space;

use crate::dom::Dom;
use crate::tree_builder::{Attrs, TreeSink};

/// A paragraph's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Good,
    NearGood,
    Short,
    Bad,
}

/// Tags that end a paragraph and start the next (jusText's `PARAGRAPH_TAGS`).
fn is_paragraph_tag(name: &str) -> bool {
    matches!(
        name,
        "body"
            | "blockquote"
            | "caption"
            | "center"
            | "col"
            | "colgroup"
            | "dd"
            | "div"
            | "dl"
            | "dt"
            | "fieldset"
            | "form"
            | "legend"
            | "optgroup"
            | "option"
            | "p"
            | "pre"
            | "table"
            | "td"
            | "textarea"
            | "tfoot"
            | "th"
            | "thead"
            | "tr"
            | "ul"
            | "li"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
    )
}

/// Removed with their content by the cleaner.
fn is_killed(name: &str) -> bool {
    matches!(name, "head" | "script" | "style" | "base" | "applet" | "button" | "input" | "select" | "textarea")
}

/// Removed, their content kept, by the cleaner.
fn is_unwrapped(name: &str) -> bool {
    matches!(name, "form" | "iframe" | "embed" | "layer" | "object" | "param")
}

/// One block of text and what jusText measures of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Paragraph {
    /// Whitespace normalised: runs of whitespace are one space, or one newline when the run
    /// holds a line break.
    pub text: String,
    /// `len(text)` in code points.
    pub chars: usize,
    /// Characters of the paragraph's text inside links.
    pub chars_in_links: usize,
    /// Whether the path of tags to it holds a heading (`h1`…`h6`).
    pub heading: bool,
    /// Whether the path of tags to it holds a `select`.
    pub in_select: bool,
    /// Set by [`crate::classify`].
    pub class: Class,
    /// The context-free class, before revision.
    pub cf_class: Class,
}

/// The paragraphs of `html`, made as the page is parsed (no tree is kept).
pub fn paragraphs(html: &str) -> Vec<Paragraph> {
    let mut maker = Maker::default();
    crate::tree_builder::build_into(html, &mut maker);
    maker.finish()
}

/// The paragraphs of a parsed page.
pub fn paragraphs_of(dom: &Dom) -> Vec<Paragraph> {
    let mut maker = Maker::default();
    dom.replay(&mut maker);
    maker.finish()
}

/// The cleaner, over the tree's events: what it removes never reaches the [`Maker`].
impl TreeSink for Maker {
    fn wants_attrs(&self, name: &str) -> bool {
        name == "link" && self.killed == 0
    }

    fn open(&mut self, name: &str, attrs: Attrs<'_>) {
        if self.killed > 0 {
            self.killed += 1;
        } else if is_killed(name) || (name == "link" && attrs.get("rel").is_some_and(|r| r.to_lowercase().contains("stylesheet"))) {
            self.killed = 1;
        } else if !is_unwrapped(name) {
            self.flush();
            self.start(name);
        }
    }

    fn close(&mut self, name: &str) {
        if self.killed > 0 {
            self.killed -= 1;
        } else if !is_unwrapped(name) {
            self.flush();
            self.end(name);
        }
    }

    fn text(&mut self, text: &str) {
        if self.killed == 0 {
            self.pending.push_str(text);
        }
    }
}

/// jusText's `ParagraphMaker`, fed the cleaned page's events.
#[derive(Default)]
struct Maker {
    /// For each open element: whether its name holds a heading word, and `select`. (jusText
    /// searches the dotted path for them; neither pattern can span a dot, so counting the
    /// open elements that hold one is the same test.)
    path: Vec<(bool, bool)>,
    headings: usize,
    selects: usize,
    done: Vec<Paragraph>,
    current: Current,
    link: bool,
    br: bool,
    /// Text not yet handed over (joined across removed elements).
    pending: String,
    /// How deep inside an element the cleaner kills the events are (0: not inside one).
    killed: usize,
}

/// The paragraph being built.
#[derive(Default)]
struct Current {
    /// The joined text pieces (each whitespace-normalised as it came).
    text: String,
    /// `text`'s length in code points.
    chars: usize,
    chars_in_links: usize,
    heading: bool,
    in_select: bool,
}

impl Maker {
    /// The paragraphs, once the page's events are all in.
    fn finish(mut self) -> Vec<Paragraph> {
        self.flush();
        self.new_paragraph();
        self.done
    }

    fn new_paragraph(&mut self) {
        let next = Current { heading: self.headings > 0, in_select: self.selects > 0, ..Current::default() };
        let done = std::mem::replace(&mut self.current, next);
        // jusText keeps a paragraph when it has text pieces *and* is truthy: `Paragraph`
        // has a `__len__`, so one whose text is empty once stripped (a lone `<br>`) is dropped.
        // The text is normalised as it grows: at most one space or newline to trim at each end.
        let (mut text, mut chars) = (done.text, done.chars);
        if text.ends_with([' ', '\n']) {
            text.pop();
            chars -= 1;
        }
        if text.starts_with([' ', '\n']) {
            text.remove(0);
            chars -= 1;
        }
        if !text.is_empty() {
            self.done.push(Paragraph {
                text,
                chars,
                chars_in_links: done.chars_in_links,
                heading: done.heading,
                in_select: done.in_select,
                class: Class::Bad,
                cf_class: Class::Bad,
            });
        }
    }

    fn start(&mut self, name: &str) {
        let marks = (has_heading_word(name), name.len() >= 6 && name.contains("select"));
        self.headings += marks.0 as usize;
        self.selects += marks.1 as usize;
        self.path.push(marks);
        if is_paragraph_tag(name) || (name == "br" && self.br) {
            self.new_paragraph();
        } else {
            self.br = name == "br";
            if self.br {
                self.current.push(" ");
            } else if name == "a" {
                self.link = true;
            }
        }
    }

    fn end(&mut self, name: &str) {
        if let Some((h, s)) = self.path.pop() {
            self.headings -= h as usize;
            self.selects -= s as usize;
        }
        if is_paragraph_tag(name) {
            self.new_paragraph();
        }
        if name == "a" {
            self.link = false;
        }
    }

    /// Hand the pending text over as one piece (`characters` in jusText).
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.pending.chars().all(is_py_space) {
            self.pending.clear();
            return;
        }
        let chars = self.current.push(&self.pending);
        if self.link {
            self.current.chars_in_links += chars;
        }
        self.pending.clear();
        self.br = false;
    }
}

/// Python's `re.sub(r"\s+", …)` of jusText: a run of whitespace becomes "\n" when it holds
/// "\n" or "\r", else " ". The text is copied a slice at a time, broken only where a run
/// changes (a lone " " between words, most runs, stays in the slice); ASCII letters are
/// stepped over byte by byte, other characters decoded.
pub fn normalize_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    normalize_into(&mut out, text);
    out
}

impl Current {
    /// `text` normalised (as [`normalize_whitespace`]) onto the paragraph's text, itself
    /// normalised: a run of whitespace that `text` starts with joins the one the text ends
    /// with, so the text stays what normalising the whole of it would give, and `chars`
    /// counts it. Returns the characters of `text` normalised alone (what jusText counts of
    /// a piece of text in a link).
    fn push(&mut self, text: &str) -> usize {
        let at = self.text.len();
        normalize_into(&mut self.text, text);
        let out = &mut self.text;
        let chars = out[at..].chars().count();
        self.chars += chars;
        let run_at = |i: usize| matches!(out.as_bytes().get(i), Some(b' ' | b'\n'));
        if at > 0 && run_at(at - 1) && run_at(at) {
            let line_break = out.as_bytes()[at - 1] == b'\n' || out.as_bytes()[at] == b'\n';
            out.replace_range(at - 1..at + 1, if line_break { "\n" } else { " " });
            self.chars -= 1;
        }
        chars
    }
}

/// [`normalize_whitespace`], onto the end of `out`.
fn normalize_into(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    // The character at byte `i` (ASCII read directly, the rest decoded).
    let char_at = |i: usize| match bytes[i] {
        b if b < 0x80 => b as char,
        _ => text[i..].chars().next().unwrap_or('\u{fffd}'),
    };
    let mut start = 0; // where the text not yet copied starts
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b > b' ' && b < 0x80 {
            i += 1;
            continue;
        }
        let c = char_at(i);
        if !is_py_space(c) {
            i += c.len_utf8();
            continue;
        }
        let (mut end, mut line_break) = (i, false);
        while end < bytes.len() {
            let c = char_at(end);
            if !is_py_space(c) {
                break;
            }
            line_break |= c == '\n' || c == '\r';
            end += c.len_utf8();
        }
        if !(b == b' ' && end == i + 1) {
            out.push_str(&text[start..i]);
            out.push(if line_break { '\n' } else { ' ' });
            start = end;
        }
        i = end;
    }
    out.push_str(&text[start..]);
}

/// Python's `re.search(r"\bh\d\b", name)`: jusText searches the dotted path of tag names.
fn has_heading_word(name: &str) -> bool {
    if name.is_ascii() {
        // Most names: the same test on bytes, without a search per tag.
        let b = name.as_bytes();
        let word = |i: usize| b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
        return (0..b.len())
            .any(|i| b[i] == b'h' && (i == 0 || !word(i - 1)) && b.get(i + 1).is_some_and(u8::is_ascii_digit) && !word(i + 2));
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    name.match_indices('h').any(|(i, _)| {
        let mut after = name[i + 1..].chars();
        !name[..i].chars().next_back().is_some_and(word) && after.next().is_some_and(|c| c.is_numeric()) && !after.next().is_some_and(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(html: &str) -> Vec<String> {
        paragraphs(html).into_iter().map(|p| p.text).collect()
    }

    #[test]
    fn block_tags_and_double_br_cut_paragraphs() {
        let got = texts(
            "<html><head><title>T</title></head><body><div>one <b>bold</b> two<p>three</p>four<br>five<br><br>six</div></body></html>",
        );
        assert_eq!(got, ["one bold two", "three", "four five", "six"]);
    }

    #[test]
    fn killed_and_unwrapped_elements_join_the_text_around_them() {
        // The script's tail joins "a"; the form is unwrapped (its text stays); comments go.
        // (Checked against the Python package: a <form> ends a <p> in both parsers.)
        let got = texts("<div>a<script>x()</script>b<!-- c -->c<form>in form</form>d<select><option>o</option></select></div>");
        assert_eq!(got, ["abcin formd"]);
        let got = texts("<p>a<script>x()</script>b<!-- c -->c<form>in form</form>d</p>");
        assert_eq!(got, ["abc", "in formd"]);
        // A blank piece between two texts joins them rather than being dropped.
        assert_eq!(texts("<p>x<script></script> <style>s</style>y</p>"), ["x y"]);
    }

    #[test]
    fn links_headings_and_whitespace_are_measured() {
        let ps = paragraphs("<body><h2>Head <a href=x>line</a></h2><p>a\n\n b  c <a>link text</a></p></body>");
        assert_eq!(ps[0].text, "Head line");
        assert!(ps[0].heading && !ps[1].heading);
        assert_eq!(ps[0].chars_in_links, 4);
        assert_eq!(ps[1].text, "a\nb c link text");
        assert_eq!(ps[1].chars_in_links, "link text".len());
    }

    /// The paragraphs made as the page is parsed are those of its tree walked: on seeded tag
    /// soup of the elements the cleaner and the paragraph maker treat apart.
    #[test]
    fn paragraphs_while_parsing_equal_those_of_the_tree() {
        let pieces = [
            "<p>",
            "</p>",
            "<div class=x>",
            "</div>",
            "<a href=y>",
            "</a>",
            "<br>",
            "<br/>",
            "<h2>",
            "</h2>",
            "<script>s()</script>",
            "<style>p{}</style>",
            "<link rel=Stylesheet href=s>",
            "<link rel=next>",
            "<form>",
            "</form>",
            "<iframe>f</iframe>",
            "<select><option>o</select>",
            "<head>",
            "<body>",
            "</body>",
            "<html>",
            "<!-- c -->",
            "<td>",
            "<table>",
            "</table>",
            "<li>",
            "<b>",
            "</b>",
            "word ",
            " \n ",
            "\u{a0}",
            "text",
            "<textarea>t</textarea>",
            "<title>T</title>",
            "<span>",
        ];
        let mut rng = curator_test_support::Xorshift::new(0x5eed_cafe_f00d_d00d);
        for case in 0..3_000 {
            let page: String = (0..rng.below(60)).map(|_| pieces[rng.below(pieces.len())]).collect();
            // Some pages nest past the parser's depth limit.
            let page = if case % 100 == 0 { format!("{}{page}", "<span>".repeat(300)) } else { page };
            assert_eq!(paragraphs(&page), paragraphs_of(&Dom::parse(&page)), "{page:?}");
        }
    }

    #[test]
    fn whitespace_runs_become_one_space_or_one_newline() {
        assert_eq!(normalize_whitespace("a  b\t\n c\u{a0}\u{2003}d "), "a b\nc d ");
        assert_eq!(normalize_whitespace("\r\nx\u{1c}y"), "\nx y");
        assert_eq!(normalize_whitespace(""), "");
        assert_eq!(normalize_whitespace("é—ü"), "é—ü");
        assert_eq!(normalize_whitespace(" a b  "), " a b ");
        // Against the definition, char by char, on seeded strings of spaces, breaks,
        // letters and non-ASCII spaces.
        let reference = |t: &str| {
            let mut out = String::new();
            let mut run: Option<bool> = None;
            for c in t.chars() {
                if is_py_space(c) {
                    run = Some(run.unwrap_or(false) || c == '\n' || c == '\r');
                } else {
                    if let Some(br) = run.take() {
                        out.push(if br { '\n' } else { ' ' });
                    }
                    out.push(c);
                }
            }
            if let Some(br) = run {
                out.push(if br { '\n' } else { ' ' });
            }
            out
        };
        let alphabet = [" ", "  ", "\n", "\r", "\t", "a", "bc", "\u{a0}", "\u{2003}", "é", "\u{1c}", "x y"];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5_000 {
            let mut t = String::new();
            for _ in 0..(seed % 12) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                t.push_str(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            assert_eq!(normalize_whitespace(&t), reference(&t), "{t:?}");
            seed = seed.wrapping_add(1);
        }
    }

    /// Pieces normalised onto a normalised text give the whole normalised at once.
    #[test]
    fn pieces_pushed_one_by_one_normalise_as_the_whole() {
        let alphabet = [" ", "  ", "\n", "\r", "\t", "a", "bc", "\u{a0}", "é", "x y", " z "];
        let mut rng = curator_test_support::Xorshift::new(0x0dd_ba11);
        for _ in 0..5_000 {
            let pieces: Vec<String> =
                (0..1 + rng.below(5)).map(|_| (0..rng.below(5)).map(|_| alphabet[rng.below(alphabet.len())]).collect()).collect();
            let mut out = Current::default();
            for p in &pieces {
                assert_eq!(out.push(p), normalize_whitespace(p).chars().count(), "{pieces:?}");
            }
            assert_eq!(out.text, normalize_whitespace(&pieces.concat()), "{pieces:?}");
            assert_eq!(out.chars, out.text.chars().count(), "{pieces:?}");
        }
    }

    #[test]
    fn heading_pattern_is_a_whole_word() {
        let p = |s: &[&str]| s.iter().any(|n| has_heading_word(n));
        assert!(p(&["html", "body", "h1"]) && p(&["h3", "span"]) && p(&["h2-x"]));
        assert!(!p(&["html", "body", "h12"]) && !p(&["th1"]) && !p(&["div"]));
        assert!(p(&["x-h1"]) && p(&["a_b.h4"]) && !p(&["a_h1"]) && !p(&["h1_"]) && !p(&["h"]) && !p(&["xh"]));
        // Names that are not ASCII take the Unicode rules: `ñ` is a word character, `·` not.
        assert!(!p(&["ñh1"]) && p(&["·h1"]) && !p(&["h1ñ"]) && p(&["é-h2"]));
    }
}
