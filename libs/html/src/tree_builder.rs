//! Tokens to a tree: html5gum (a WHATWG tokenizer) reads the page; the tree is built the way
//! libxml2's HTML parser builds it, by the rules of [`crate::tree_rules`]:
//!
//! - a start tag first closes the current element while the rules say it does, then implies
//!   `html`, and `head` or `body`, when they are missing;
//! - a second `html`, a `head` anywhere but right under `html`, and a `body` inside a `body`
//!   are dropped, and so is the end tag that matches one of them;
//! - `<tag/>` closes any element at once, and empty elements (`br`, `img`, …) never open;
//! - an end tag closes the nearest open element of its name and those above it, unless one
//!   of those ranks higher ([`crate::tree_rules::end_priority`]); one with no open element is
//!   ignored;
//! - text that is not whitespace, where only `html` or `head` is open, implies a `body`;
//! - the content of raw-text elements (`script`, `style`, `title`, …) is text;
//! - an element that would open a 257th level stops the parse: the tree is what was read
//!   before it, as lxml returns it (libxml2 halts there unless told `huge`). It also bounds
//!   the work per end tag, whatever the page.

use std::convert::Infallible;

use html5gum::{Emitter, Reader, State, Tokenizer};

use crate::tree_rules::{Raw, end_priority, implies_head, is_empty, raw, start_closes};

/// How many elements may be open at once (libxml2's limit without `huge`).
pub const MAX_DEPTH: usize = 256;

/// Where the builder's tree goes, as events in document order: each element opened (after
/// the rules closed and implied what they do), its text, its comments, and its end. Every
/// event lands in the element opened last and not yet closed, so the events are the tree's
/// depth-first walk: [`crate::dom::DomSink`] keeps them as a tree; a reader that needs only
/// the walk ([`crate::paragraphs`]) takes them as they come, and no tree is built.
pub trait TreeSink {
    /// Whether [`TreeSink::open`] reads the attributes of a `name` element: when not, the
    /// builder does not keep them.
    fn wants_attrs(&self, _name: &str) -> bool {
        true
    }
    /// An element opens, with its attributes (the first of a repeated name).
    fn open(&mut self, name: &str, attrs: Attrs<'_>);
    /// The element opened last, `name`, closes.
    fn close(&mut self, name: &str);
    /// Text in the element opened last (adjacent calls are one run of text).
    fn text(&mut self, text: &str);
    /// A comment in the element opened last (or in the document).
    fn comment(&mut self) {}
}

/// An attribute's name and value, as (start, end) spans of a string buffer.
pub(crate) type AttrSpan = ((usize, usize), (usize, usize));

/// An element's attributes: (name, value) spans in `strings`.
#[derive(Clone, Copy)]
pub struct Attrs<'a> {
    pub(crate) strings: &'a str,
    pub(crate) spans: &'a [AttrSpan],
}

impl<'a> Attrs<'a> {
    /// The value of attribute `name` (lower-case).
    pub fn get(self, name: &str) -> Option<&'a str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// (name, value), in the tag's order.
    pub fn iter(self) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.spans.iter().map(move |(n, v)| (&self.strings[n.0..n.1], &self.strings[v.0..v.1]))
    }
}

/// `html`'s tree, handed to `sink` as it is built.
pub fn build_into<S: TreeSink>(html: &str, sink: &mut S) {
    let mut builder = Builder::new(sink);
    // The emitter gives no tokens, so one call drives the tokenizer to the end of the page.
    if let Some(Ok(never)) = Tokenizer::new_with_emitter(PageReader::new(html.as_bytes()), TreeEmitter::new(&mut builder)).next() {
        match never {}
    }
    builder.finish();
}

/// The page's bytes, handed to the tokenizer. html5gum's own string reader finds the end of
/// a run of text with a word-at-a-time search that asks `needle.contains` for every byte class
/// it tests; on wasm32 (4-byte words) each of those is a call into `memchr`, an eighth of the
/// stage's time. This one makes the same split (the first byte alone when it is in the needle,
/// else everything before the first that is) against the needle as a 256-bit set: faster in
/// the sandbox, as fast natively (measured against word-at-a-time tests: no better in either).
struct PageReader<'a> {
    input: &'a [u8],
}

impl<'a> PageReader<'a> {
    fn new(input: &'a [u8]) -> Self {
        PageReader { input }
    }
}

impl Reader for PageReader<'_> {
    type Error = Infallible;

    fn read_byte(&mut self) -> Result<Option<u8>, Infallible> {
        let Some((&first, rest)) = self.input.split_first() else { return Ok(None) };
        self.input = rest;
        Ok(Some(first))
    }

    fn try_read_string(&mut self, s: &[u8], case_sensitive: bool) -> Result<bool, Infallible> {
        match self.input.get(..s.len()) {
            Some(head) if head == s || (!case_sensitive && head.eq_ignore_ascii_case(s)) => {
                self.input = &self.input[s.len()..];
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    // Inlined into the tokenizer's states, whose needles are constants: the set is then a
    // constant too, and a one-byte run (most of them) costs one test.
    #[inline(always)]
    fn read_until<'b>(&'b mut self, needle: &[u8], _: &'b mut [u8; 4]) -> Result<Option<&'b [u8]>, Infallible> {
        let Some(&first) = self.input.first() else { return Ok(None) };
        let set = ByteSet::new(needle);
        let end = if set.contains(first) { 1 } else { first_of(self.input, needle, set) };
        let (run, rest) = self.input.split_at(end);
        self.input = rest;
        Ok(Some(run))
    }
}

/// A set of bytes as 256 bits.
#[derive(Clone, Copy)]
struct ByteSet([u64; 4]);

impl ByteSet {
    #[inline(always)]
    fn new(bytes: &[u8]) -> ByteSet {
        let mut set = [0u64; 4];
        for &b in bytes {
            set[(b >> 6) as usize] |= 1 << (b & 63);
        }
        ByteSet(set)
    }

    #[inline(always)]
    fn contains(self, b: u8) -> bool {
        self.0[(b >> 6) as usize] >> (b & 63) & 1 != 0
    }

    /// The index of `hay`'s first byte in the set (`hay.len()` when none is).
    #[inline(always)]
    fn first_in(self, hay: &[u8]) -> usize {
        hay.iter().position(|&b| self.contains(b)).unwrap_or(hay.len())
    }
}

/// The index of `hay`'s first byte that is in `needle` (`set` holds the same bytes;
/// `hay.len()` when none is): natively by the set, as fast as any vector search for the
/// tokenizer's short runs.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(always)]
fn first_of(hay: &[u8], _needle: &[u8], set: ByteSet) -> usize {
    set.first_in(hay)
}

/// The same in the sandbox: the first 16 bytes by the set, inline (most runs end there);
/// the rest of a longer run 16 bytes at a time with SIMD128, out of line.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn first_of(hay: &[u8], needle: &[u8], set: ByteSet) -> usize {
    let head = hay.len().min(16);
    let at = set.first_in(&hay[..head]);
    if at < head || head == hay.len() {
        return at;
    }
    head + simd_first_of(&hay[head..], needle, set)
}

/// `first_of` for the rest of a long run: a needle of at most eight bytes (the tokenizer's
/// are, with the `\r` it adds) is compared with 16 bytes at a time (a short needle padded
/// with its own first byte); a longer one, and the last bytes, by the set.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(never)]
fn simd_first_of(hay: &[u8], needle: &[u8], set: ByteSet) -> usize {
    use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_load, v128_or};
    const KEYS: usize = 8;
    let Some(&pad) = needle.first() else { return hay.len() };
    if needle.len() > KEYS {
        return set.first_in(hay);
    }
    let mut keys = [pad; KEYS];
    keys[..needle.len()].copy_from_slice(needle);
    let splats = keys.map(|k| u8x16_splat(k));
    let (chunks, tail) = hay.as_chunks::<16>();
    for (c, chunk) in chunks.iter().enumerate() {
        // SAFETY: `chunk` is 16 readable bytes; a v128 load needs no alignment.
        let v = unsafe { v128_load(chunk.as_ptr().cast::<v128>()) };
        let eq = splats.iter().fold(u8x16_splat(0), |m, &k| v128_or(m, u8x16_eq(v, k)));
        let hits = u8x16_bitmask(eq);
        if hits != 0 {
            return c * 16 + hits.trailing_zeros() as usize;
        }
    }
    let at = hay.len() - tail.len();
    at + set.first_in(tail)
}

/// The tokenizer's emitter: html5gum's events straight into the [`Builder`], which tells the
/// tokenizer which state an element's content is read in (the tree builder's call, as in a
/// browser). Text is kept until the next tag, comment, doctype or the end, then handed over
/// as one run; a tag is acted on when it is complete; attributes are kept only when the sink
/// reads them ([`TreeSink::wants_attrs`]).
struct TreeEmitter<'b, 's, S: TreeSink> {
    builder: &'b mut Builder<'s, S>,
    /// The tag being read: start or end, its name, whether it ends with `/>`.
    start: bool,
    tag: Vec<u8>,
    self_closing: bool,
    /// The name of the last start tag: an end tag of that name ends raw text.
    last_start_tag: Vec<u8>,
    /// Whether the current tag's attributes are kept: decided at its first attribute.
    keep_attrs: Option<bool>,
    /// The attribute being read, as bytes (the tokenizer may hand a character over in
    /// pieces), and where its value starts in them (`None`: not in an attribute, or not
    /// keeping it).
    attr: Option<Option<usize>>,
    attr_bytes: Vec<u8>,
    /// The tag's attributes kept: (name, value) spans in `attr_strings`.
    attr_strings: String,
    attrs: Vec<AttrSpan>,
}

impl<'b, 's, S: TreeSink> TreeEmitter<'b, 's, S> {
    fn new(builder: &'b mut Builder<'s, S>) -> Self {
        TreeEmitter {
            builder,
            start: false,
            tag: Vec::new(),
            self_closing: false,
            last_start_tag: Vec::new(),
            keep_attrs: None,
            attr: None,
            attr_bytes: Vec::new(),
            attr_strings: String::new(),
            attrs: Vec::new(),
        }
    }

    /// The attribute being read, added to the tag's unless its name repeats an earlier one.
    fn finish_attribute(&mut self) {
        let Some(value_at) = self.attr.take() else { return };
        let (name, value) = self.attr_bytes.split_at(value_at.unwrap_or(self.attr_bytes.len()));
        let name = text_of(name);
        if !name.is_empty() && !self.attrs.iter().any(|(n, _)| self.attr_strings[n.0..n.1] == *name) {
            let name = push_span(&mut self.attr_strings, &name);
            let value = push_span(&mut self.attr_strings, &text_of(value));
            self.attrs.push((name, value));
        }
        self.attr_bytes.clear();
    }
}

impl<S: TreeSink> Emitter for TreeEmitter<'_, '_, S> {
    type Token = Infallible;

    fn set_last_start_tag(&mut self, last_start_tag: Option<&[u8]>) {
        self.last_start_tag.clear();
        self.last_start_tag.extend_from_slice(last_start_tag.unwrap_or_default());
    }

    fn emit_eof(&mut self) {
        self.builder.flush_text();
    }

    fn emit_error(&mut self, _: html5gum::Error) {}

    /// Parse errors change nothing in the tree: the tokenizer need not look for them (its
    /// per-character checks are a tenth of the parse).
    fn should_emit_errors(&mut self) -> bool {
        false
    }

    fn pop_token(&mut self) -> Option<Infallible> {
        None
    }

    // The tokenizer may hand a character over in pieces (after a `&` that starts no
    // reference): the text is kept as bytes until the next tag, comment or the end.
    fn emit_string(&mut self, s: &[u8]) {
        self.builder.text_bytes.extend_from_slice(s);
    }

    fn init_start_tag(&mut self) {
        self.start = true;
        self.tag.clear();
        self.self_closing = false;
        self.keep_attrs = None;
        self.attr = None;
        self.attrs.clear();
        self.attr_strings.clear();
    }

    fn init_end_tag(&mut self) {
        self.start = false;
        self.tag.clear();
        self.keep_attrs = Some(false);
        self.attr = None;
    }

    fn init_comment(&mut self) {}

    fn emit_current_tag(&mut self) -> Option<State> {
        self.builder.flush_text();
        self.finish_attribute();
        let name = text_of(&self.tag);
        if self.start {
            let attrs = Attrs { strings: &self.attr_strings, spans: &self.attrs };
            self.builder.start_tag(&name, self.self_closing, attrs);
            self.last_start_tag.clear();
            self.last_start_tag.extend_from_slice(&self.tag);
            self.builder.next_state.take()
        } else {
            self.builder.end_tag(&name);
            self.last_start_tag.clear();
            None
        }
    }

    fn emit_current_comment(&mut self) {
        self.builder.flush_text();
        self.builder.comment();
    }

    fn emit_current_doctype(&mut self) {
        self.builder.flush_text();
    }

    fn set_self_closing(&mut self) {
        self.self_closing |= self.start;
    }

    fn set_force_quirks(&mut self) {}

    fn push_tag_name(&mut self, s: &[u8]) {
        self.tag.extend_from_slice(s);
    }

    fn push_comment(&mut self, _: &[u8]) {}

    fn push_doctype_name(&mut self, _: &[u8]) {}

    fn init_doctype(&mut self) {}

    fn init_attribute(&mut self) {
        self.finish_attribute();
        let keep = *self.keep_attrs.get_or_insert_with(|| self.builder.sink.wants_attrs(&text_of(&self.tag)));
        self.attr = keep.then_some(None);
        self.attr_bytes.clear();
    }

    fn init_attribute_value(&mut self) {
        if let Some(value) = &mut self.attr {
            *value = Some(self.attr_bytes.len());
        }
    }

    fn push_attribute_name(&mut self, s: &[u8]) {
        if self.attr.is_some() {
            self.attr_bytes.extend_from_slice(s);
        }
    }

    fn push_attribute_value(&mut self, s: &[u8]) {
        if let Some(value) = &mut self.attr {
            // A value pushed without its start marked (html5gum marks it) starts here.
            value.get_or_insert(self.attr_bytes.len());
            self.attr_bytes.extend_from_slice(s);
        }
    }

    fn set_doctype_public_identifier(&mut self, _: &[u8]) {}

    fn set_doctype_system_identifier(&mut self, _: &[u8]) {}

    fn push_doctype_public_identifier(&mut self, _: &[u8]) {}

    fn push_doctype_system_identifier(&mut self, _: &[u8]) {}

    fn current_is_appropriate_end_tag_token(&mut self) -> bool {
        !self.start && !self.last_start_tag.is_empty() && self.last_start_tag == self.tag
    }
}

/// Builds the tree from complete tags and text, by libxml2's rules.
struct Builder<'s, S: TreeSink> {
    sink: &'s mut S,
    /// The open elements' names, outermost first: spans in `names`.
    open: Vec<(usize, usize)>,
    names: String,
    /// Whether a `head` / `body` was opened (implied or not): libxml2 implies each once.
    seen_head: bool,
    seen_body: bool,
    /// Start tags of `html`, `head`, `body` dropped as misplaced: as many of their end tags
    /// are dropped too.
    dropped: usize,
    next_state: Option<State>,
    /// The page nested deeper than [`MAX_DEPTH`]: nothing after that point is read.
    halted: bool,
    /// Text read since the last tag, comment or doctype.
    text_bytes: Vec<u8>,
}

/// The tokenizer's bytes as text (they come from a `&str`, so the check passes). A short
/// run (a tag or attribute name, most text between two tags) is checked inline for ASCII;
/// a longer one by simdutf8 (16 bytes a step with SIMD128 in the sandbox, where `from_utf8`
/// goes 4 bytes a step, out of line: justext's stage is 2 % faster on Debian's pages).
#[inline]
fn text_of(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if bytes.len() <= 32 && bytes.iter().all(u8::is_ascii) {
        // SAFETY: ASCII bytes are UTF-8.
        return std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    match simdutf8::basic::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// `s` added to `buf`; its span there.
pub(crate) fn push_span(buf: &mut String, s: &str) -> (usize, usize) {
    let start = buf.len();
    buf.push_str(s);
    (start, buf.len())
}

/// No attributes (of an element the rules imply).
const NO_ATTRS: Attrs<'static> = Attrs { strings: "", spans: &[] };

/// HTML's whitespace, as libxml2 counts it.
fn is_html_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

impl<'s, S: TreeSink> Builder<'s, S> {
    fn new(sink: &'s mut S) -> Self {
        Builder {
            sink,
            open: Vec::new(),
            names: String::new(),
            seen_head: false,
            seen_body: false,
            dropped: 0,
            next_state: None,
            halted: false,
            text_bytes: Vec::new(),
        }
    }

    fn name_at(&self, (start, end): (usize, usize)) -> &str {
        &self.names[start..end]
    }

    fn current_name(&self) -> Option<&str> {
        self.open.last().map(|&span| self.name_at(span))
    }

    fn is_open(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.open.iter().any(|&span| pred(self.name_at(span)))
    }

    /// Open an element under the current one (the document when none is open).
    fn open_element(&mut self, name: &str, attrs: Attrs<'_>) {
        if self.open.len() >= MAX_DEPTH {
            self.halted = true;
        }
        if self.halted {
            return;
        }
        self.seen_head |= name == "head";
        self.seen_body |= name == "body";
        let span = push_span(&mut self.names, name);
        self.open.push(span);
        self.sink.open(name, attrs);
    }

    fn pop(&mut self) {
        if let Some(span) = self.open.pop() {
            self.sink.close(&self.names[span.0..span.1]);
            self.names.truncate(span.0);
        }
    }

    /// Close the current element while `new` closes it.
    fn auto_close(&mut self, new: &str) {
        while self.current_name().is_some_and(|open| start_closes(open, new)) {
            self.pop();
        }
    }

    /// Open the `html`, `head` or `body` that `new` needs and the page left out.
    fn imply(&mut self, new: &str) {
        if new == "html" {
            return;
        }
        if self.open.is_empty() {
            self.open_element("html", NO_ATTRS);
        }
        if new == "body" || new == "head" {
            return;
        }
        if self.open.len() <= 1 && implies_head(new) {
            // libxml2 keeps one level (head, then body): after a body, no head is implied.
            if !self.seen_head && !self.seen_body {
                self.open_element("head", NO_ATTRS);
            }
        } else if !matches!(new, "noframes" | "frame" | "frameset") && !self.seen_body && !self.is_open(|n| matches!(n, "body" | "head")) {
            self.open_element("body", NO_ATTRS);
        }
    }

    fn start_tag(&mut self, name: &str, self_closing: bool, attrs: Attrs<'_>) {
        if self.halted {
            return;
        }
        self.auto_close(name);
        self.imply(name);
        if self.halted {
            return;
        }
        let misplaced = (name == "html" && !self.open.is_empty())
            || (name == "head" && self.open.len() != 1)
            || (name == "body" && self.is_open(|n| n == "body"));
        if misplaced {
            self.dropped += 1;
            // libxml2 reads the `/>` of a dropped tag as closing the current element.
            if self_closing {
                self.pop();
            }
            return;
        }
        self.open_element(name, attrs);
        if self.halted {
            return;
        }
        if self_closing || is_empty(name) {
            self.pop();
            return;
        }
        self.next_state = raw(name).map(|r| match r {
            Raw::RcData => State::RcData,
            Raw::RawText => State::RawText,
            Raw::Script => State::ScriptData,
            Raw::PlainText => State::PlainText,
        });
    }

    fn end_tag(&mut self, name: &str) {
        if self.halted {
            return;
        }
        if self.dropped > 0 && matches!(name, "html" | "body" | "head") {
            self.dropped -= 1;
            return;
        }
        let Some(at) = self.open.iter().rposition(|&span| self.name_at(span) == name) else { return };
        let priority = end_priority(name);
        if self.open[at + 1..].iter().any(|&span| end_priority(self.name_at(span)) > priority) {
            return;
        }
        while self.open.len() > at {
            self.pop();
        }
    }

    fn text(&mut self, mut text: &str) {
        if self.halted {
            return;
        }
        if self.current_name().is_none_or(|n| n == "html" || n == "head") {
            // Whitespace stays where it is (dropped outside any element); text implies a body.
            let ws = text.len() - text.trim_start_matches(is_html_space).len();
            if ws > 0 && !self.open.is_empty() {
                self.sink.text(&text[..ws]);
            }
            text = &text[ws..];
            if text.is_empty() {
                return;
            }
            if self.current_name() == Some("head") {
                self.auto_close("p");
            }
            self.imply("p");
        }
        if self.halted {
            return;
        }
        if !self.open.is_empty() {
            self.sink.text(text);
        }
    }

    /// Hand the text read so far to the tree.
    fn flush_text(&mut self) {
        if self.text_bytes.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.text_bytes);
        self.text(&text_of(&bytes));
        self.text_bytes = bytes;
        self.text_bytes.clear();
    }

    fn comment(&mut self) {
        if !self.halted {
            self.sink.comment();
        }
    }

    fn finish(&mut self) {
        self.flush_text();
        while !self.open.is_empty() {
            self.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::dom::{Dom, NodeRef, NodeValue};

    /// The tree as `name(children…)`, text quoted, comments `#c`.
    fn shape(html: &str) -> String {
        fn go(n: NodeRef<'_>, out: &mut String) {
            let name = match n.value() {
                NodeValue::Text(t) => return out.push_str(&format!("{t:?}")),
                NodeValue::Comment => return out.push_str("#c"),
                NodeValue::Element(name) => name,
                NodeValue::Document => "doc",
            };
            out.push_str(name);
            for (i, k) in n.children().enumerate() {
                out.push(if i == 0 { '(' } else { ' ' });
                go(k, out);
            }
            if n.children().next().is_some() {
                out.push(')');
            }
        }
        let mut out = String::new();
        go(Dom::parse(html).root(), &mut out);
        out
    }

    /// After a `&` that starts no reference the tokenizer hands the next character over a
    /// byte at a time: text and attribute values still come out whole.
    #[test]
    fn characters_after_a_bare_ampersand_stay_whole() {
        assert_eq!(shape("<body><p>‘&’ &été</p>"), r#"doc(html(body(p("‘&’ &été"))))"#);
        let dom = Dom::parse("<body><p title=\"a&’b\" data-x=&é>x");
        let p = dom.root().subtree().find(|n| n.name() == Some("p")).unwrap();
        assert_eq!((p.attr("title"), p.attr("data-x")), (Some("a&’b"), Some("&é")));
    }

    #[test]
    fn missing_html_head_and_body_are_implied() {
        assert_eq!(shape("<title>T</title><p>x"), r#"doc(html(head(title("T")) body(p("x"))))"#);
        assert_eq!(shape("hello"), r#"doc(html(body("hello")))"#);
        assert_eq!(shape("  <!-- c -->"), "doc(#c)");
        // A head left open is closed by body content in HTML 4's list, not by HTML5's elements.
        assert_eq!(shape("<head><title>T</title><div>x</div>"), r#"doc(html(head(title("T")) body(div("x"))))"#);
        assert_eq!(shape("<head><title>T</title><section>x</section>"), r#"doc(html(head(title("T") section("x"))))"#);
    }

    #[test]
    fn start_tags_close_the_current_element_by_libxml2s_table() {
        assert_eq!(shape("<body><p>a<div>b</div>"), r#"doc(html(body(p("a") div("b"))))"#);
        assert_eq!(shape("<body><ul><li>a<li>b</ul>"), r#"doc(html(body(ul(li("a") li("b")))))"#);
        assert_eq!(shape("<body><h2>T<p>x</p></h2>"), r#"doc(html(body(h2("T") p("x"))))"#);
        // Only the current node is checked: a <span> inside the <p> stops the closing.
        assert_eq!(shape("<body><p><span>a<div>b"), r#"doc(html(body(p(span("a" div("b"))))))"#);
    }

    #[test]
    fn end_tags_close_up_to_their_element_unless_a_higher_one_is_between() {
        assert_eq!(shape("<body><div><b>x</div>y"), r#"doc(html(body(div(b("x")) "y")))"#);
        // A stray </div> in a cell does not close the table.
        assert_eq!(shape("<body><div><table><tr><td>a</div>b</td></tr></table>"), r#"doc(html(body(div(table(tr(td("ab")))))))"#);
        assert_eq!(shape("<body>a</p>b</br>c"), r#"doc(html(body("abc")))"#);
    }

    #[test]
    fn self_closing_empty_raw_and_misplaced_tags() {
        assert_eq!(shape(r#"<body><a id="x"/>T<br>u<script src="s"/>v"#), r#"doc(html(body(a "T" br "u" script "v")))"#);
        assert_eq!(
            shape("<body><script>a<b>c</script><noscript><p>n</p></noscript>"),
            r#"doc(html(body(script("a<b>c") noscript(p("n")))))"#
        );
        assert_eq!(shape("<html><body><body class=x><html>a</body></html>b"), r#"doc(html(body("ab")))"#);
        assert_eq!(Dom::parse("<body><p class=a class=b id=i>x").root().subtree().find_map(|n| n.attr("class")), Some("a"));
    }

    /// The reader splits as its definition says: the first byte alone when it is in the
    /// needle, else everything before the first byte that is.
    #[test]
    fn the_reader_splits_at_the_first_needle_byte() {
        use html5gum::Reader;
        let check = |needle: &[u8], hay: &[u8]| {
            let mut r = super::PageReader::new(hay);
            let mut runs = Vec::new();
            while let Ok(Some(run)) = r.read_until(needle, &mut [0u8; 4]) {
                runs.push(run.to_vec());
            }
            let mut want = Vec::new();
            let mut rest = hay;
            while !rest.is_empty() {
                let end = if needle.contains(&rest[0]) { 1 } else { rest.iter().position(|b| needle.contains(b)).unwrap_or(rest.len()) };
                want.push(rest[..end].to_vec());
                rest = &rest[end..];
            }
            assert_eq!(runs, want, "{needle:?} in {hay:?}");
        };
        // Needle bytes at every place in and across the 16-byte chunks, and a needle longer
        // than the eight keys compared at once.
        let long: Vec<String> =
            (0..40).flat_map(|at| [format!("{}<{}", "a".repeat(at), "b".repeat(at)), format!("{}\rz", "q".repeat(at))]).collect();
        let short = ["", "<", "ab", "abcdefghijklmn<op", "abcdefgh&", "\u{e9}\u{e9}\u{e9}\u{e9}\r\n", "a b\tc/>d", "zyxwvutsrqponm"];
        for needle in [&b"<&\r"[..], b"\t\n\x0c />\0\r", b"x", b"\t\n\x0c />=\"'`<m\r"] {
            for hay in short.iter().copied().chain(long.iter().map(String::as_str)) {
                check(needle, hay.as_bytes());
            }
        }
        // Seeded haystacks and needles over a small alphabet.
        let mut rng = curator_test_support::Xorshift::new(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"ab<&\r\n\0 =\"'>/-x";
        for _ in 0..2_000 {
            let hay: Vec<u8> = (0..rng.below(80)).map(|_| alphabet[rng.below(alphabet.len())]).collect();
            let needle: Vec<u8> = (0..1 + rng.below(9)).map(|_| alphabet[rng.below(alphabet.len())]).collect();
            check(&needle, &hay);
        }
    }

    #[test]
    fn nesting_past_the_limit_stops_the_parse_where_it_went_too_deep() {
        // html and body are two levels: 254 spans fit, the 255th does not.
        let page = format!("<body>{}x{}tail", "<span>".repeat(255), "</span>".repeat(255));
        let dom = Dom::parse(&page);
        let spans = dom.root().subtree().filter(|n| n.name() == Some("span")).count();
        assert_eq!(spans, super::MAX_DEPTH - 2);
        assert!(dom.root().subtree().all(|n| n.value() != NodeValue::Text("tail")));
        // A million unclosed tags cost no more than their reading.
        let hostile = "<div>".repeat(1_000_000) + &"</b>".repeat(1_000_000);
        assert_eq!(Dom::parse(&hostile).len(), super::MAX_DEPTH + 1);
    }
}
