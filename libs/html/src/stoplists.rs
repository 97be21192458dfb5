//! jusText's stop-word lists (from the `justext` package, BSD-2-Clause:
//! `stoplists/LICENSE-justext.rst`), embedded by `build.rs`, and the set a classification
//! looks words up in.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

/// (language, words one per line), sorted by language.
static STOPLISTS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/stoplists.rs"));

/// The languages that have a list (`English`, `German`, …: jusText's names).
pub fn languages() -> impl Iterator<Item = &'static str> {
    STOPLISTS.iter().map(|(l, _)| *l)
}

/// A set of lower-cased stop words.
#[derive(Debug, Clone, Default)]
pub struct Stoplist {
    /// Fx: the set is fixed, so lookups of hostile words cannot grow its collisions.
    words: HashSet<String, BuildHasherDefault<FxHasher>>,
}

impl Stoplist {
    /// jusText's list for `language` (its name, case-insensitive: `english`, `Norwegian_Nynorsk`).
    pub fn for_language(language: &str) -> Option<Stoplist> {
        let (_, words) = STOPLISTS.iter().find(|(l, _)| l.eq_ignore_ascii_case(language))?;
        Some(Stoplist::from_words(words.lines()))
    }

    /// A list of one's own (lower-cased here, as jusText does).
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Stoplist {
        Stoplist { words: words.into_iter().map(|w| w.trim_end_matches('\r').to_lowercase()).collect() }
    }

    /// Whether `word` (as it appears in the text) is a stop word: compared lower-cased.
    pub fn contains(&self, word: &str) -> bool {
        if word.bytes().all(|b| !b.is_ascii_uppercase()) && word.is_ascii() {
            self.words.contains(word)
        } else {
            self.words.contains(word.to_lowercase().as_str())
        }
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_list_loads_and_names_are_case_insensitive() {
        assert_eq!(languages().count(), 100);
        let en = Stoplist::for_language("english").unwrap();
        assert!(en.contains("the") && en.contains("The") && !en.contains("curator"));
        assert!(Stoplist::for_language("Klingon").is_none());
        for l in languages() {
            assert!(!Stoplist::for_language(l).unwrap().is_empty(), "{l}");
        }
    }
}
