//! datatrove's `C4QualityFilter` as a stage: C4's line rules (Raffel et al. 2020) — keeps
//! the lines that end in terminal punctuation, have enough words, no over-long word, no
//! "javascript" and no cookie/terms-of-use phrases; removes `[1]`-style citations; drops
//! documents with "lorem ipsum", a curly bracket, or fewer than `min_num_sentences`
//! sentences left. Kept documents carry only their kept lines, as in datatrove.

use curator_sdk::prelude::*;

// The params (names, types, defaults, docs) are the library's: `curator_heuristics::datatrove`.
curator_heuristics::datatrove_stage!(C4Quality,
    /// Keeps C4-quality lines; drops documents left with too few sentences.
    #[stage(name = "c4_quality_filter", cpus = 1.0, memory_mb = 128)]
    pub struct C4QualityFilter);

impl Rewrite for C4QualityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.rules = self.rules_from_params();
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
