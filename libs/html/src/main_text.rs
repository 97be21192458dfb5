//! `main_text`: a page's main content, found the way content extractors such as trafilatura
//! and readability find it (our own rules, not a port of either):
//!
//! 1. **Never content**: elements dropped by tag (scripts, navigation, forms and their
//!    controls, media, asides, footers, headers outside an article) and by what their class,
//!    id or role says (menus, sidebars, comments, sharing, cookie banners, related links,
//!    ads, pagination, …) — unless the element also holds over half of the page's text
//!    in two or more blocks (a `<div class="wrapper nav-open">` is the page) or its class
//!    names content too (`<div id="content" class="has-sidebar">`).
//! 2. **The content root**: of the `article`, `main`, `[role=main]`, `[itemprop=articleBody]`
//!    and content-named elements (`content`, `article`, `post`, `entry`, `story`, …), the one
//!    holding the most text outside links, when it holds at least half of the page's;
//!    otherwise `body`.
//! 3. **Blocks**: the root cut at block tags (paragraphs, headings, list items, cells,
//!    quotes, `pre`), `<br>` a line break inside a block; a block is kept unless it is mostly
//!    links (link density over `max_link_density`); a heading is kept when text follows it.
//! 4. **Fallback**: when that leaves fewer than `min_chars` characters, jusText's good
//!    paragraphs (as trafilatura falls back to its baseline extractors).
//!
//! Blocks are joined by a newline. Compared with trafilatura (datatrove's settings) by word
//! overlap in `scripts/parity/compare_main_text.py`.

use curator_sdk::text::is_py_space;

use crate::dom::{Dom, NodeRef, NodeValue};
use crate::stoplists::Stoplist;

/// The extractor's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct MainTextParams {
    /// Blocks with more of their characters in links than this are dropped (headings kept).
    pub max_link_density: f64,
    /// Under this many characters of main text, jusText's good paragraphs are used instead.
    pub min_chars: usize,
}

impl Default for MainTextParams {
    fn default() -> Self {
        MainTextParams { max_link_density: 0.5, min_chars: 100 }
    }
}

/// Elements that are never content, with everything inside them.
const DROP_TAGS: &[&str] = &[
    "head", "script", "style", "noscript", "template", "nav", "aside", "footer", "form", "button", "input", "select", "textarea", "option",
    "optgroup", "label", "iframe", "object", "embed", "applet", "svg", "canvas", "video", "audio", "map", "menu", "dialog", "figure",
    "math",
];

/// Words (of a class or id) that name boilerplate: a word matches when it starts with one.
const BOILER_WORDS: &[&str] = &[
    "nav",
    "menu",
    "footer",
    "sidebar",
    "comment",
    "share",
    "sharing",
    "social",
    "related",
    "breadcrumb",
    "cookie",
    "consent",
    "banner",
    "advert",
    "sponsor",
    "promo",
    "subscribe",
    "newsletter",
    "pagination",
    "pager",
    "widget",
    "popup",
    "modal",
    "skip",
    "toolbar",
    "masthead",
    "login",
    "signup",
    "search",
    "disqus",
    "outbrain",
    "taboola",
];

/// Whole words (of a class or id) that name boilerplate.
const BOILER_EXACT: &[&str] = &["ad", "ads", "tags", "tagcloud", "meta", "author", "byline", "hidden"];

/// Roles that name boilerplate.
const BOILER_ROLES: &[&str] = &["navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog", "alert"];

/// Words (of a class or id) that name a content root.
const CONTENT_WORDS: &[&str] = &["content", "article", "post", "entry", "story", "main", "bodytext", "body-text", "articlebody", "text"];

/// Tags that cut a block.
const BLOCK_TAGS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "pre",
    "blockquote",
    "table",
    "tr",
    "td",
    "th",
    "caption",
    "figcaption",
    "address",
    "details",
    "summary",
    "hr",
    "center",
    "body",
];

/// The main text of `html` (empty when there is none).
pub fn main_text(html: &str, stoplist: &Stoplist, params: &MainTextParams) -> String {
    let dom = Dom::parse(html);
    let Some(body) = dom.root().subtree().find(|n| n.name() == Some("body")) else {
        return String::new();
    };
    let sizes = text_sizes(&dom, body);
    let page_text = sizes[body.id().index()].map_or(0, |s| s.0 - s.1);
    let root = content_root(body, &sizes, page_text);
    let mut blocks = Blocks::default();
    let page_all = sizes[body.id().index()].map_or(0, |s| s.0);
    walk(root, &sizes, page_all, &mut blocks);
    blocks.cut();
    let kept: Vec<&Block> =
        blocks.done.iter().filter(|b| b.heading || (b.link_chars as f64) <= params.max_link_density * b.chars as f64).collect();
    // A heading with no text under it (the next kept block is a heading, or none) heads nothing.
    let kept: Vec<&str> = kept
        .iter()
        .enumerate()
        .filter(|(i, b)| !b.heading || kept.get(i + 1).is_some_and(|n| !n.heading))
        .map(|(_, b)| b.text.as_str())
        .collect();
    let text = kept.join("\n");
    if text.chars().count() >= params.min_chars {
        return text;
    }
    let fallback = crate::kept_text(&crate::justext_of(&dom, stoplist, &crate::Params::default()), false);
    if fallback.chars().count() > text.chars().count() { fallback } else { text }
}

/// The lower-cased words of an element's class and id.
fn class_id_words(e: NodeRef<'_>) -> Vec<String> {
    let mut s = String::new();
    for attr in ["class", "id"] {
        if let Some(v) = e.attr(attr) {
            s.push(' ');
            s.push_str(&v.to_ascii_lowercase());
        }
    }
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .flat_map(|w| w.split('-'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether an element is boilerplate by its tag, class, id or role.
fn is_boilerplate(e: NodeRef<'_>, name: &str, in_article: bool) -> bool {
    if DROP_TAGS.contains(&name) || (name == "header" && !in_article) {
        return true;
    }
    if matches!(name, "html" | "body" | "main" | "article") {
        return false;
    }
    if e.attr("role").is_some_and(|r| BOILER_ROLES.contains(&r.trim().to_ascii_lowercase().as_str())) {
        return true;
    }
    if e.attr("hidden").is_some() || e.attr("aria-hidden") == Some("true") {
        return true;
    }
    let words = class_id_words(e);
    let content = words.iter().any(|w| CONTENT_WORDS.contains(&w.as_str()));
    !content && words.iter().any(|w| BOILER_EXACT.contains(&w.as_str()) || BOILER_WORDS.iter().any(|b| w.starts_with(b)))
}

/// Per node (by index): (text bytes, text bytes inside links), counting only text outside
/// never-content tags; `None` for nodes outside `body`, never-content elements and comments.
type Sizes = Vec<Option<(usize, usize)>>;

fn text_sizes(dom: &Dom, body: NodeRef<'_>) -> Sizes {
    let mut sizes: Sizes = vec![None; dom.len()];
    // Text first, in document order: the ends of the links open around it are kept on a stack.
    let mut links: Vec<usize> = Vec::new();
    for n in body.subtree() {
        let i = n.id().index();
        while links.last().is_some_and(|&end| end <= i) {
            links.pop();
        }
        match n.value() {
            NodeValue::Element("a") => links.push(n.descendant_ids().end),
            NodeValue::Text(t) => {
                let len = t.trim().len();
                sizes[i] = Some((len, if links.is_empty() { 0 } else { len }));
            }
            _ => {}
        }
    }
    // Then elements, children before parents (a child's id is above its parent's).
    for n in body.subtree().rev() {
        let Some(name) = n.name() else { continue };
        if DROP_TAGS.contains(&name) {
            continue;
        }
        sizes[n.id().index()] = Some(n.children().filter_map(|c| sizes[c.id().index()]).fold((0, 0), |a, s| (a.0 + s.0, a.1 + s.1)));
    }
    sizes
}

/// The element holding the article, or `body`.
fn content_root<'a>(body: NodeRef<'a>, sizes: &Sizes, page_text: usize) -> NodeRef<'a> {
    let prose = |n: NodeRef<'_>| sizes[n.id().index()].map_or(0, |s| s.0 - s.1);
    body.subtree()
        .filter(|n| match n.name() {
            Some(name) => {
                matches!(name, "article" | "main")
                    || n.attr("role") == Some("main")
                    || n.attr("itemprop") == Some("articleBody")
                    || (matches!(name, "div" | "section") && class_id_words(*n).iter().any(|w| CONTENT_WORDS.contains(&w.as_str())))
            }
            None => false,
        })
        .max_by_key(|n| prose(*n))
        .filter(|n| prose(*n) * 2 >= page_text && page_text > 0)
        .unwrap_or(body)
}

/// One block of text.
#[derive(Debug, Default)]
struct Block {
    text: String,
    chars: usize,
    link_chars: usize,
    heading: bool,
}

#[derive(Default)]
struct Blocks {
    done: Vec<Block>,
    current: Block,
}

impl Blocks {
    fn cut(&mut self) {
        let mut b = std::mem::take(&mut self.current);
        let trimmed = b.text.trim_matches(is_py_space);
        if !trimmed.is_empty() {
            b.text = trimmed.lines().map(|l| l.trim_matches(is_py_space)).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
            b.chars = b.text.chars().count();
            self.done.push(b);
        }
    }

    fn push_text(&mut self, text: &str, in_link: bool, pre: bool) {
        let mut n = 0;
        let mut space = self.current.text.ends_with([' ', '\n']) || self.current.text.is_empty();
        for c in text.chars() {
            if pre && c == '\n' {
                self.current.text.push('\n');
                space = true;
            } else if is_py_space(c) {
                if !space {
                    self.current.text.push(' ');
                    space = true;
                }
            } else {
                self.current.text.push(c);
                space = false;
                n += 1;
            }
        }
        if in_link {
            self.current.link_chars += n;
        }
    }
}

/// `page_all`: the page's text, links included (an element holding over half of it is a
/// wrapper of the page, kept whatever its class says).
fn walk(root: NodeRef<'_>, sizes: &Sizes, page_all: usize, out: &mut Blocks) {
    enum Step<'a> {
        Enter(NodeRef<'a>),
        Leave { block: bool, link: bool, pre: bool, article: bool },
    }
    let (mut links, mut pres, mut articles) = (0usize, 0usize, 0usize);
    let mut stack = vec![Step::Enter(root)];
    while let Some(step) = stack.pop() {
        let node = match step {
            Step::Leave { block, link, pre, article } => {
                links -= link as usize;
                pres -= pre as usize;
                articles -= article as usize;
                if block {
                    out.cut();
                }
                continue;
            }
            Step::Enter(n) => n,
        };
        match node.value() {
            NodeValue::Text(t) => out.push_text(t, links > 0, pres > 0),
            NodeValue::Element(name) => {
                // A wrapper: over half of the page's text, in two or more blocks.
                let holds_page = sizes[node.id().index()].is_some_and(|s| s.0 * 2 > page_all)
                    && node.children().filter(|c| c.name().is_some_and(|n| BLOCK_TAGS.contains(&n))).nth(1).is_some();
                // An element that holds most of the page is kept whatever its class says.
                if (!holds_page || DROP_TAGS.contains(&name)) && is_boilerplate(node, name, articles > 0) {
                    continue;
                }
                if name == "br" {
                    out.current.text.push('\n');
                    continue;
                }
                let block = BLOCK_TAGS.contains(&name);
                if block {
                    out.cut();
                }
                if matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6") {
                    out.current.heading = true;
                }
                let (link, pre, article) = (name == "a", name == "pre", matches!(name, "article" | "main"));
                links += link as usize;
                pres += pre as usize;
                articles += article as usize;
                stack.push(Step::Leave { block, link, pre, article });
                crate::dom::push_children(&mut stack, node, Step::Enter);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARTICLE: &str = "The old harbour was built in the years after the great storm, when the town decided that it could no longer depend on the beach for its boats.";

    fn extract(html: &str) -> String {
        main_text(html, &Stoplist::for_language("English").unwrap(), &MainTextParams::default())
    }

    #[test]
    fn the_article_is_kept_and_the_chrome_around_it_dropped() {
        let page = format!(
            r#"<html><head><title>T</title></head><body>
            <header><a href=/>Home</a> <a href=/n>News</a></header>
            <div class="sidebar"><h3>Popular</h3><ul><li><a href=/1>One</a></li><li><a href=/2>Two</a></li></ul></div>
            <article><header><h1>The harbour</h1></header><p>{ARTICLE}</p><p>It took ten years.<br>The stone came from the hill.</p>
            <div class="share-buttons"><a href=/fb>Share</a></div></article>
            <div id="comments"><p>Great post!</p></div>
            <footer>Copyright 2024</footer></body></html>"#
        );
        assert_eq!(extract(&page), format!("The harbour\n{ARTICLE}\nIt took ten years.\nThe stone came from the hill."));
    }

    #[test]
    fn link_lists_are_dropped_and_a_page_named_like_boilerplate_is_kept() {
        let page = format!(
            r#"<body><div id="content" class="has-sidebar"><p>{ARTICLE}</p><p>{ARTICLE}</p>
            <p><a href=/a>Previous article</a> | <a href=/b>Next article</a></p></div></body>"#
        );
        assert_eq!(extract(&page), format!("{ARTICLE}\n{ARTICLE}"));
    }

    #[test]
    fn a_page_without_much_main_text_falls_back_to_justext_or_nothing() {
        assert_eq!(extract("<body><nav><a href=/>Home</a></nav></body>"), "");
        assert_eq!(extract(""), "");
    }
}
