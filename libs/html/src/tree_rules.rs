//! How libxml2's HTML parser shapes a page's tree: the rules, as pure functions of tag names.
//!
//! The Python tools this crate is compared with (jusText, NeMo Curator's extractors,
//! trafilatura) parse with lxml, that is libxml2's HTML parser (2.14 and 2.15 behave alike
//! here). Its tokenizer follows the WHATWG spec, as html5gum does; its tree rules do not. They
//! are the HTML 4 DTD's omitted-tag rules: no foster parenting, no adoption agency, no
//! templates, and a few closures of their own (a `<p>` closes an open `<h1>`). These are the
//! facts of libxml2's `HTMLparser.c` (MIT) — its start-tag closure table, end-tag priorities,
//! empty elements and raw-text elements — grouped here by the element they close;
//! [`crate::tree_builder`] applies them.

/// The tokenizer state an element's content is read in, when it is not markup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raw {
    /// Text up to the element's end tag, character references decoded (`title`, `textarea`).
    RcData,
    /// Text up to the element's end tag, as it is.
    RawText,
    /// A script's text (its own escape rules).
    Script,
    /// The rest of the page, as text.
    PlainText,
}

/// Whether a start tag `new` closes the open element `open` when `open` is the current node
/// (libxml2 checks the current node only, again and again, until one does not close).
pub fn start_closes(open: &str, new: &str) -> bool {
    match open {
        "a" => matches!(new, "a" | "fieldset" | "table" | "td" | "th"),
        "address" => matches!(new, "dd" | "dl" | "dt" | "form" | "li" | "ul"),
        "b" | "i" => matches!(new, "center" | "p" | "td" | "th"),
        "big" | "s" | "small" | "strike" | "tt" => new == "p",
        "u" => matches!(new, "p" | "td" | "th"),
        "font" => matches!(new, "center" | "td" | "th"),
        "span" => matches!(new, "td" | "th"),
        "caption" | "col" => matches!(new, "col" | "colgroup" | "tbody" | "tfoot" | "thead" | "tr"),
        "colgroup" => matches!(new, "colgroup" | "tbody" | "tfoot" | "thead" | "tr"),
        "dd" => new == "dt",
        "dt" => matches!(new, "dd" | "dl"),
        "dir" => matches!(new, "dd" | "dl" | "dt" | "form" | "ul"),
        "menu" => matches!(new, "dd" | "dl" | "dt" | "form" | "ul"),
        "dl" => matches!(new, "form" | "li"),
        "form" => new == "form",
        "hr" | "ol" => new == "form",
        "ul" => matches!(new, "address" | "form" | "menu" | "pre"),
        _ if is_heading(open) => matches!(new, "fieldset" | "form" | "li" | "p" | "table"),
        "legend" => new == "fieldset",
        "li" => new == "li",
        "listing" | "pre" | "xmp" => matches!(new, "dd" | "dl" | "dt" | "fieldset" | "form" | "li" | "table" | "ul"),
        "option" => matches!(new, "optgroup" | "option"),
        "script" => new == "noscript",
        "link" | "style" | "title" => matches!(new, "body" | "frameset"),
        "tbody" => matches!(new, "tbody" | "tfoot"),
        "thead" => matches!(new, "tbody" | "tfoot"),
        "tfoot" => new == "tbody",
        "td" | "th" => matches!(new, "tbody" | "td" | "tfoot" | "th" | "tr"),
        "tr" => matches!(new, "tbody" | "tfoot" | "tr"),
        "head" => {
            is_heading(new)
                || matches!(
                    new,
                    "a" | "abbr"
                        | "acronym"
                        | "address"
                        | "b"
                        | "bdo"
                        | "big"
                        | "blockquote"
                        | "body"
                        | "br"
                        | "center"
                        | "cite"
                        | "code"
                        | "dd"
                        | "dfn"
                        | "dir"
                        | "div"
                        | "dl"
                        | "dt"
                        | "em"
                        | "fieldset"
                        | "font"
                        | "form"
                        | "frameset"
                        | "hr"
                        | "i"
                        | "iframe"
                        | "img"
                        | "kbd"
                        | "li"
                        | "listing"
                        | "map"
                        | "menu"
                        | "ol"
                        | "p"
                        | "pre"
                        | "q"
                        | "s"
                        | "samp"
                        | "small"
                        | "span"
                        | "strike"
                        | "strong"
                        | "sub"
                        | "sup"
                        | "table"
                        | "tt"
                        | "u"
                        | "ul"
                        | "var"
                        | "xmp"
                )
        }
        "p" => {
            is_heading(new)
                || matches!(
                    new,
                    "address"
                        | "blockquote"
                        | "body"
                        | "caption"
                        | "center"
                        | "col"
                        | "colgroup"
                        | "dd"
                        | "dir"
                        | "div"
                        | "dl"
                        | "dt"
                        | "fieldset"
                        | "form"
                        | "frameset"
                        | "head"
                        | "hr"
                        | "li"
                        | "listing"
                        | "menu"
                        | "ol"
                        | "p"
                        | "pre"
                        | "table"
                        | "tbody"
                        | "td"
                        | "tfoot"
                        | "th"
                        | "title"
                        | "tr"
                        | "ul"
                        | "xmp"
                )
        }
        _ => false,
    }
}

fn is_heading(name: &str) -> bool {
    matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6")
}

/// An end tag closes the open elements above its own only when none of them ranks higher:
/// a stray `</div>` inside a cell is ignored rather than closing the table.
pub fn end_priority(name: &str) -> u8 {
    match name {
        "div" => 150,
        "td" | "th" => 160,
        "tr" => 170,
        "thead" | "tbody" | "tfoot" => 180,
        "table" => 190,
        "head" | "body" => 200,
        "html" => 220,
        _ => 100,
    }
}

/// Elements that never hold content: closed as soon as they open.
pub fn is_empty(name: &str) -> bool {
    matches!(name, "area" | "base" | "basefont" | "br" | "col" | "frame" | "hr" | "img" | "input" | "isindex" | "link" | "meta" | "param")
}

/// How an element's content is read when it is not markup. (`noscript` is markup: libxml2
/// parses without scripting.)
pub fn raw(name: &str) -> Option<Raw> {
    match name {
        "title" | "textarea" => Some(Raw::RcData),
        "style" | "iframe" | "xmp" | "noembed" | "noframes" => Some(Raw::RawText),
        "script" => Some(Raw::Script),
        "plaintext" => Some(Raw::PlainText),
        _ => None,
    }
}

/// Elements that belong in `head`: before any `head` or `body`, they imply a `head`.
pub fn implies_head(name: &str) -> bool {
    matches!(name, "script" | "style" | "meta" | "link" | "title" | "base")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closures_are_of_the_current_node_by_the_new_tag() {
        assert!(start_closes("p", "div") && start_closes("p", "p") && !start_closes("div", "p"));
        assert!(start_closes("h2", "p") && start_closes("li", "li") && !start_closes("li", "ul"));
        assert!(start_closes("head", "div") && !start_closes("head", "section"), "HTML 4's list only");
        assert!(start_closes("td", "tr") && start_closes("tr", "tr") && !start_closes("table", "tr"));
    }

    #[test]
    fn priorities_rank_table_parts_over_divs() {
        assert!(end_priority("table") > end_priority("tr") && end_priority("tr") > end_priority("td"));
        assert!(end_priority("td") > end_priority("div") && end_priority("div") > end_priority("span"));
    }

    #[test]
    fn raw_and_empty_elements() {
        assert_eq!(raw("script"), Some(Raw::Script));
        assert_eq!(raw("noscript"), None);
        assert!(is_empty("br") && is_empty("img") && !is_empty("embed") && !is_empty("wbr"));
    }
}
