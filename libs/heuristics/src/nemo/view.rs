//! One document, examined once: the pieces NeMo's filters share (character counts, words,
//! lines, paragraphs, n-gram classes), each computed the first time a filter asks.

use super::*;

/// A document as NeMo's filters see it: each piece (character counts, words, lines,
/// paragraphs, n-gram classes) is computed the first time a filter asks and shared with every
/// later one, so a chain of filters splits, counts and hashes a document once.
pub struct View<'a> {
    text: &'a str,
    chars: Option<CharCounts>,
    words: Option<Words<'a>>,
    lines: Option<Vec<&'a str>>,
    stripped_lines: Option<Vec<&'a str>>,
    line_uniques: Option<Uniques>,
    paragraph_uniques: Option<Uniques>,
    ngrams: Option<NGrams>,
    boilerplate: Option<bool>,
}

/// Counts over a text's characters (code points).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CharCounts {
    pub chars: usize,
    /// Outside NeMo's `[a-zA-Z0-9\n?!,.]`.
    pub non_alnum: usize,
    /// `0-9`.
    pub digits: usize,
    /// [`WHITE_SPACE`].
    pub white: usize,
    /// `{}⟨⟩[]()`.
    pub parens: usize,
}

/// `text.strip().split()`, with each word's length in code points.
pub struct Words<'a> {
    pub words: Vec<&'a str>,
    pub lens: Vec<u32>,
}

/// Distinct items of a list (lines or paragraphs), by count and by characters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uniques {
    pub total: usize,
    pub unique: usize,
    pub total_chars: usize,
    pub unique_chars: usize,
}

impl<'a> View<'a> {
    pub fn new(text: &'a str) -> View<'a> {
        View {
            text,
            chars: None,
            words: None,
            lines: None,
            stripped_lines: None,
            line_uniques: None,
            paragraph_uniques: None,
            ngrams: None,
            boilerplate: None,
        }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    pub fn chars(&mut self) -> CharCounts {
        *self.chars.get_or_insert_with(|| char_counts(self.text))
    }

    pub fn words(&mut self) -> &Words<'a> {
        let text = self.text;
        self.words.get_or_insert_with(|| {
            let (mut words, mut lens) = (Vec::with_capacity(text.len() / 5), Vec::with_capacity(text.len() / 5));
            py::split_with_lens(text, &mut words, &mut lens);
            Words { words, lens }
        })
    }

    /// `len(text.split())`, without splitting when no filter needed the words.
    pub fn word_count(&self) -> usize {
        match &self.words {
            Some(w) => w.words.len(),
            None => curator_sdk::text::count_words(self.text),
        }
    }

    /// NeMo's `get_sentences`: the non-blank lines.
    pub fn lines(&mut self) -> &[&'a str] {
        let text = self.text;
        self.lines.get_or_insert_with(|| py::sentences(text).collect())
    }

    /// [`View::lines`], stripped.
    pub fn stripped_lines(&mut self) -> &[&'a str] {
        if self.stripped_lines.is_none() {
            let s = self.lines().iter().map(|l| py::strip(l)).collect();
            self.stripped_lines = Some(s);
        }
        self.stripped_lines.as_deref().unwrap_or_default()
    }

    pub fn line_uniques(&mut self) -> Uniques {
        if let Some(u) = self.line_uniques {
            return u;
        }
        let u = uniques(self.lines());
        *self.line_uniques.insert(u)
    }

    pub fn paragraph_uniques(&mut self) -> Uniques {
        let text = self.text;
        *self.paragraph_uniques.get_or_insert_with(|| uniques(&py::paragraphs(text).collect::<Vec<_>>()))
    }

    /// Word n-gram classes of [`View::words`].
    pub fn ngrams(&mut self) -> &mut NGrams {
        self.ngrams_and_lens().0
    }

    /// Word n-gram classes and the words' lengths.
    pub fn ngrams_and_lens(&mut self) -> (&mut NGrams, &[u32]) {
        self.words();
        let Some(words) = &self.words else { unreachable!("words were just computed") };
        let ngrams = self.ngrams.get_or_insert_with(|| NGrams::new(&words.words));
        (ngrams, &words.lens)
    }

    /// False when no paragraph can hold a [`POLICY_SUBSTRINGS`] needle or "lorem ipsum": none
    /// of "cookie", "privacy", "terms of use", "lorem ipsum" occurs in the ASCII-lower-cased
    /// text (every needle holds one of them) and no character that lower-cases to ASCII
    /// letters (`İ` U+0130, `K` U+212A) does.
    pub fn may_hold_boilerplate(&mut self) -> bool {
        let text = self.text;
        *self.boilerplate.get_or_insert_with(|| {
            let lower = text.to_ascii_lowercase();
            // (the two characters searched as bytes: a `char` pattern decodes every character)
            boilerplate_keys().any_in(&lower) || (!text.is_ascii() && ascii_lookalikes().any_in(text))
        })
    }
}

/// The words every [`POLICY_SUBSTRINGS`] needle (and "lorem ipsum") contains one of.
pub(super) const BOILERPLATE_KEYS: [&str; 4] = ["cookie", "privacy", "terms of use", "lorem ipsum"];

fn boilerplate_keys() -> &'static py::Needles {
    static N: std::sync::OnceLock<py::Needles> = std::sync::OnceLock::new();
    N.get_or_init(|| py::Needles::new(&BOILERPLATE_KEYS))
}

/// The characters that lower-case to ASCII letters: `İ` (U+0130) and the Kelvin sign `K`.
fn ascii_lookalikes() -> &'static py::Needles {
    static N: std::sync::OnceLock<py::Needles> = std::sync::OnceLock::new();
    N.get_or_init(|| py::Needles::new(&["\u{130}", "\u{212a}"]))
}

fn uniques(items: &[&str]) -> Uniques {
    let mut seen = FirstSeen::default();
    seen.reset(items.len());
    let mut u = Uniques::default();
    for (i, s) in items.iter().enumerate() {
        let chars = py::len_fast(s);
        u.total += 1;
        u.total_chars += chars;
        if seen.first_or_insert(word_hash(s.as_bytes()), i as u32, |p| items[p as usize] == *s) == i as u32 {
            u.unique += 1;
            u.unique_chars += chars;
        }
    }
    u
}
