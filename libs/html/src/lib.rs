//! HTML to text for web crawls.
//!
//! - [`justext`]: jusText (Pomikálek 2011), as the `justext` Python package does it and as
//!   NeMo Curator calls it: the page cleaned and cut into paragraphs ([`paragraphs`]), each
//!   classified by length, stop-word density and link density, then revised by its neighbours
//!   ([`classify`]). Checked paragraph for paragraph against the Python package in
//!   `tests/parity.rs`.
//! - [`stoplists`]: jusText's stop-word lists for 100 languages; [`language`]: which one a
//!   page needs when nobody said (`language: auto`).
//!
//! The HTML is tokenized by html5gum (a WHATWG tokenizer) and built into a tree by libxml2's
//! rules ([`tree_builder`], [`tree_rules`]): the parser the Python tools run, through lxml.

pub mod classify;
pub mod dom;
pub mod language;
pub mod main_text;
pub mod paragraphs;
pub mod stoplists;
pub mod tree_builder;
pub mod tree_rules;

pub use classify::Params;
pub use paragraphs::{Class, Paragraph};

/// The page's paragraphs, classified: keep those whose class is [`Class::Good`].
pub fn justext(html: &str, stoplist: &stoplists::Stoplist, params: &Params) -> Vec<Paragraph> {
    let mut paragraphs = paragraphs::paragraphs(html);
    classify::classify(&mut paragraphs, stoplist, params);
    paragraphs
}

/// [`justext`] of a parsed page.
pub fn justext_of(dom: &dom::Dom, stoplist: &stoplists::Stoplist, params: &Params) -> Vec<Paragraph> {
    let mut paragraphs = paragraphs::paragraphs_of(dom);
    classify::classify(&mut paragraphs, stoplist, params);
    paragraphs
}

/// The text NeMo Curator's jusText extractor keeps: good paragraphs joined by a blank line
/// (all paragraphs when `keep_boilerplate`, as it does for languages written without spaces).
pub fn justext_text(html: &str, stoplist: &stoplists::Stoplist, params: &Params, keep_boilerplate: bool) -> String {
    kept_text(&justext(html, stoplist, params), keep_boilerplate)
}

/// Classified paragraphs as NeMo Curator's extractor returns them: the good ones (all when
/// `keep_boilerplate`) joined by a blank line.
pub fn kept_text(paragraphs: &[Paragraph], keep_boilerplate: bool) -> String {
    let kept: Vec<&str> = paragraphs.iter().filter(|p| keep_boilerplate || p.class == Class::Good).map(|p| p.text.as_str()).collect();
    kept.join("\n\n")
}
