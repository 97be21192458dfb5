//! One document as a stage sees it.

/// A document of a batch: its row index, id and text.
#[derive(Debug, Clone, Copy)]
pub struct Doc<'a> {
    index: usize,
    id: &'a str,
    text: &'a str,
}

impl<'a> Doc<'a> {
    pub fn new(index: usize, id: &'a str, text: &'a str) -> Doc<'a> {
        Doc { index, id, text }
    }

    /// Row index within the batch.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The document id (`""` when the batch has no `id` column).
    pub fn id(&self) -> &'a str {
        self.id
    }

    /// The document text.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Number of whitespace-separated words, exactly as Python's `len(text.split())`.
    pub fn words(&self) -> usize {
        crate::text::count_words(self.text)
    }
}
