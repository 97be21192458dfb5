//! datatrove's `C4QualityFilter` as a stage: C4's line rules (Raffel et al. 2020) — keeps
//! the lines that end in terminal punctuation, have enough words, no over-long word, no
//! "javascript" and no cookie/terms-of-use phrases; removes `[1]`-style citations; drops
//! documents with "lorem ipsum", a curly bracket, or fewer than `min_num_sentences`
//! sentences left. Kept documents carry only their kept lines, as in datatrove.

use curator_heuristics::datatrove::C4Quality;
use curator_sdk::prelude::*;

/// Keeps C4-quality lines; drops documents left with too few sentences.
#[stage(name = "c4_quality_filter", cpus = 1.0, memory_mb = 128)]
pub struct C4QualityFilter {
    /// Remove Wikipedia-style citations (`[12]`, `[edit]`, `[citation needed]`).
    #[param(default = true)]
    pub remove_citations: bool,
    /// Drop lines that do not end in `.` `?` `!` `"` `'` (or end in `...`).
    #[param(default = true)]
    pub filter_no_terminal_punct: bool,
    /// Fewest sentences left in a kept document (-1: no minimum).
    #[param(default = 5)]
    pub min_num_sentences: i64,
    /// Fewest words in a kept line.
    #[param(default = 3)]
    pub min_words_per_line: i64,
    /// Drop lines with a longer word (-1: no limit).
    #[param(default = 1000)]
    pub max_word_length: i64,
    /// Drop documents containing "lorem ipsum".
    #[param(default = true)]
    pub filter_lorem_ipsum: bool,
    /// Drop lines mentioning "javascript".
    #[param(default = true)]
    pub filter_javascript: bool,
    /// Drop documents with a `{`.
    #[param(default = true)]
    pub filter_curly_bracket: bool,
    /// Drop lines about cookies, privacy policies and terms of use.
    #[param(default = true)]
    pub filter_policy: bool,
    /// The rules, built from the params once.
    #[state]
    rules: C4Quality,
}

impl Rewrite for C4QualityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = C4Quality {
            remove_citations: self.remove_citations,
            filter_no_terminal_punct: self.filter_no_terminal_punct,
            min_num_sentences: self.min_num_sentences,
            min_words_per_line: self.min_words_per_line,
            max_word_length: self.max_word_length,
            filter_lorem_ipsum: self.filter_lorem_ipsum,
            filter_javascript: self.filter_javascript,
            filter_curly_bracket: self.filter_curly_bracket,
            filter_policy: self.filter_policy,
        };
        Ok(())
    }

    fn rewrite<'a>(&self, doc: &Doc<'a>) -> Option<Cow<'a, str>> {
        let text = doc.text();
        match self.rules.apply(text) {
            Ok(kept) if kept == text => Some(Cow::Borrowed(text)),
            Ok(kept) => Some(Cow::Owned(kept)),
            Err(_) => None,
        }
    }
}
