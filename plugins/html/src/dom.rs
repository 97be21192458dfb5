//! A page parsed into a tree: html5ever (the WHATWG parser) into `scraper`'s tree, read as the
//! Python tools' parser (libxml2) reads it where the two differ in ways that change the text:
//! `<noscript>` content is markup (a parser without scripting), and `<tag/>` closes the
//! element ([`crate::self_closing`]).

use html5ever::tendril::TendrilSink;
use scraper::{Html, HtmlTreeSink};

/// A node of the tree.
pub type NodeRef<'a> = ego_tree::NodeRef<'a, scraper::Node>;

/// The page's tree.
pub fn parse(html: &str) -> Html {
    let opts = html5ever::ParseOpts {
        tree_builder: html5ever::tree_builder::TreeBuilderOpts { scripting_enabled: false, ..Default::default() },
        ..Default::default()
    };
    let html = crate::self_closing::close_self_closing(html);
    html5ever::parse_document(HtmlTreeSink::new(Html::new_document()), opts).one(&*html)
}

/// Push `node`'s children onto a depth-first stack (wrapped by `wrap`) so that they pop in
/// document order.
pub fn push_children<'a, T>(stack: &mut Vec<T>, node: NodeRef<'a>, wrap: impl Fn(NodeRef<'a>) -> T) {
    let at = stack.len();
    stack.extend(node.children().map(wrap));
    stack[at..].reverse();
}
