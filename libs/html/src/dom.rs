//! A page's tree, as an arena: nodes in document order (an element's descendants are the ids
//! right after it, up to its `end`), their strings in one buffer. Built by
//! [`crate::tree_builder`] the way libxml2 builds it; read by the extractors.

use std::ops::Range;

use crate::tree_builder::{AttrSpan, Attrs, TreeSink};

/// A node's place in its [`Dom`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) usize);

impl NodeId {
    /// The node's index: ids run from 0 (the document) in document order.
    pub fn index(self) -> usize {
        self.0
    }
}

const NONE: usize = usize::MAX;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Document,
    /// Name, and the element's range in [`Dom::attrs`].
    Element {
        name: (usize, usize),
        attrs: (usize, usize),
    },
    Text((usize, usize)),
    Comment,
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) first_child: usize,
    pub(crate) last_child: usize,
    pub(crate) next_sibling: usize,
    /// One past the node's last descendant.
    pub(crate) end: usize,
}

/// A parsed page.
#[derive(Debug, Clone, Default)]
pub struct Dom {
    pub(crate) nodes: Vec<Node>,
    /// Names, attribute names and values, and text, one after another.
    pub(crate) strings: String,
    /// (name, value) spans in `strings`.
    pub(crate) attrs: Vec<AttrSpan>,
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeValue<'a> {
    Document,
    /// An element, by its lower-cased name.
    Element(&'a str),
    Text(&'a str),
    Comment,
}

impl Dom {
    /// `html` parsed as libxml2 parses it.
    pub fn parse(html: &str) -> Dom {
        let mut dom = DomSink::default();
        crate::tree_builder::build_into(html, &mut dom);
        dom.finish()
    }

    pub(crate) fn empty() -> Dom {
        let root = Node { kind: Kind::Document, first_child: NONE, last_child: NONE, next_sibling: NONE, end: 1 };
        Dom { nodes: vec![root], strings: String::new(), attrs: Vec::new() }
    }

    /// The document node.
    pub fn root(&self) -> NodeRef<'_> {
        NodeRef { dom: self, id: NodeId(0) }
    }

    pub fn get(&self, id: NodeId) -> NodeRef<'_> {
        NodeRef { dom: self, id }
    }

    /// How many nodes: every [`NodeId::index`] is below it.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the page holds no node but the document.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    fn str(&self, (start, end): (usize, usize)) -> &str {
        &self.strings[start..end]
    }

    pub(crate) fn push_str(&mut self, s: &str) -> (usize, usize) {
        crate::tree_builder::push_span(&mut self.strings, s)
    }

    /// Hand the tree to `sink` as the builder would: its events in document order.
    pub fn replay<S: TreeSink>(&self, sink: &mut S) {
        // The ends of the open elements (innermost last), with their names.
        let mut open: Vec<(usize, &str)> = Vec::new();
        for (id, node) in self.nodes.iter().enumerate().skip(1) {
            while open.last().is_some_and(|&(end, _)| end <= id) {
                if let Some((_, name)) = open.pop() {
                    sink.close(name);
                }
            }
            match node.kind {
                Kind::Element { name, attrs: (from, to) } => {
                    let name = self.str(name);
                    sink.open(name, Attrs { strings: &self.strings, spans: &self.attrs[from..to] });
                    open.push((node.end, name));
                }
                Kind::Text(span) => sink.text(self.str(span)),
                Kind::Comment => sink.comment(),
                Kind::Document => {}
            }
        }
        while let Some((_, name)) = open.pop() {
            sink.close(name);
        }
    }

    /// Add `kind` as `parent`'s last child.
    pub(crate) fn append(&mut self, parent: usize, kind: Kind) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node { kind, first_child: NONE, last_child: NONE, next_sibling: NONE, end: id + 1 });
        let p = &mut self.nodes[parent];
        let last = std::mem::replace(&mut p.last_child, id);
        if last == NONE {
            p.first_child = id;
        } else {
            self.nodes[last].next_sibling = id;
        }
        id
    }

    /// Text added to `parent`: joined to its last child when that is text (as libxml2 joins
    /// adjacent character data), else a new node.
    pub(crate) fn append_text(&mut self, parent: usize, text: &str) {
        let last = self.nodes[parent].last_child;
        if let Some(Node { kind: Kind::Text((start, end)), .. }) = self.nodes.get(last) {
            let (start, end) = (*start, *end);
            // The text must end the buffer to grow in place; else it moves to the end (a
            // dropped tag's attributes were written after it).
            let start = if end == self.strings.len() {
                start
            } else {
                let moved = self.strings.len();
                self.strings.extend_from_within(start..end);
                moved
            };
            self.strings.push_str(text);
            self.nodes[last].kind = Kind::Text((start, self.strings.len()));
            return;
        }
        let span = self.push_str(text);
        self.append(parent, Kind::Text(span));
    }
}

/// A node, to read.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    dom: &'a Dom,
    id: NodeId,
}

impl<'a> NodeRef<'a> {
    pub fn id(self) -> NodeId {
        self.id
    }

    pub fn value(self) -> NodeValue<'a> {
        match self.dom.nodes[self.id.0].kind {
            Kind::Document => NodeValue::Document,
            Kind::Element { name, .. } => NodeValue::Element(self.dom.str(name)),
            Kind::Text(span) => NodeValue::Text(self.dom.str(span)),
            Kind::Comment => NodeValue::Comment,
        }
    }

    /// The element's name; `None` for other nodes.
    pub fn name(self) -> Option<&'a str> {
        match self.value() {
            NodeValue::Element(name) => Some(name),
            _ => None,
        }
    }

    /// The value of the element's attribute `name` (lower-case), its first when repeated.
    pub fn attr(self, name: &str) -> Option<&'a str> {
        let Kind::Element { attrs: (start, end), .. } = self.dom.nodes[self.id.0].kind else { return None };
        self.dom.attrs[start..end].iter().find(|(n, _)| self.dom.str(*n) == name).map(|(_, v)| self.dom.str(*v))
    }

    /// The children, in order.
    pub fn children(self) -> Children<'a> {
        Children { dom: self.dom, next: self.dom.nodes[self.id.0].first_child }
    }

    /// The ids of the node's descendants, in document order.
    pub fn descendant_ids(self) -> Range<usize> {
        self.id.0 + 1..self.dom.nodes[self.id.0].end
    }

    /// The node and its descendants, in document order (`rev()`: every node before its parent).
    pub fn subtree(self) -> impl DoubleEndedIterator<Item = NodeRef<'a>> + 'a {
        let dom = self.dom;
        (self.id.0..dom.nodes[self.id.0].end).map(move |i| dom.get(NodeId(i)))
    }
}

/// A node's children.
pub struct Children<'a> {
    dom: &'a Dom,
    next: usize,
}

impl<'a> Iterator for Children<'a> {
    type Item = NodeRef<'a>;

    fn next(&mut self) -> Option<NodeRef<'a>> {
        if self.next == NONE {
            return None;
        }
        let id = self.next;
        self.next = self.dom.nodes[id].next_sibling;
        Some(self.dom.get(NodeId(id)))
    }
}

/// Push `node`'s children onto a depth-first stack (wrapped by `wrap`) so that they pop in
/// document order.
pub fn push_children<'a, T>(stack: &mut Vec<T>, node: NodeRef<'a>, wrap: impl Fn(NodeRef<'a>) -> T) {
    let at = stack.len();
    stack.extend(node.children().map(wrap));
    stack[at..].reverse();
}

/// The builder's events kept as a [`Dom`].
pub struct DomSink {
    dom: Dom,
    /// The open elements' ids, innermost last.
    open: Vec<usize>,
}

impl Default for DomSink {
    fn default() -> Self {
        DomSink { dom: Dom::empty(), open: Vec::new() }
    }
}

impl DomSink {
    /// The tree, once the builder has closed every element.
    pub fn finish(mut self) -> Dom {
        while let Some(id) = self.open.pop() {
            self.dom.nodes[id].end = self.dom.nodes.len();
        }
        self.dom.nodes[0].end = self.dom.nodes.len();
        self.dom
    }

    fn parent(&self) -> usize {
        self.open.last().copied().unwrap_or(0)
    }
}

impl TreeSink for DomSink {
    fn open(&mut self, name: &str, attrs: Attrs<'_>) {
        let from = self.dom.attrs.len();
        for (n, v) in attrs.iter() {
            let pair = (self.dom.push_str(n), self.dom.push_str(v));
            self.dom.attrs.push(pair);
        }
        let span = self.dom.push_str(name);
        let id = self.dom.append(self.parent(), Kind::Element { name: span, attrs: (from, self.dom.attrs.len()) });
        self.open.push(id);
    }

    fn close(&mut self, _name: &str) {
        if let Some(id) = self.open.pop() {
            self.dom.nodes[id].end = self.dom.nodes.len();
        }
    }

    fn text(&mut self, text: &str) {
        self.dom.append_text(self.parent(), text);
    }

    fn comment(&mut self) {
        self.dom.append(self.parent(), Kind::Comment);
    }
}
