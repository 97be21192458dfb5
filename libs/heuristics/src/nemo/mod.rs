//! NeMo Curator's heuristic filters (`heuristic/string.py` and `repetition.py`, 1.4.0), one
//! struct each, with NeMo's parameter names and defaults (written once, in `params.rs`). By
//! job: the string filters here, `repetition.rs`, `view.rs` (a document examined once), `chars.rs` (character tables),
//! `ngrams.rs`, `urls.rs`, and `registry.rs` (filters by stage name).

use crate::py;

macro_rules! heuristic {
    ($(#[$doc:meta])* $name:ident) => {
        crate::__nemo_params!($name, __rules_struct($(#[$doc])* $name));
    };
}

mod chars;
mod ngrams;
mod params;
mod registry;
mod repetition;
mod urls;
mod view;

use chars::char_counts;
#[cfg(test)]
use chars::is_alphanum_mark;
pub(crate) use ngrams::{FirstSeen, word_hash};
pub use ngrams::{Level, NGrams};
pub use registry::AnyHeuristic;
pub(crate) use repetition::FxMap;
pub use repetition::*;
pub use urls::urls;
pub use view::{CharCounts, Uniques, View, Words};

/// A document filter: a score, and whether a score keeps the document (NeMo's
/// `score_document` / `keep_document`).
pub trait Heuristic {
    /// NeMo Curator's class name.
    const NAME: &'static str;
    /// The score of a document whose shared pieces (words, lines, n-gram classes) `doc`
    /// computes once for every filter that asks.
    fn score_view(&self, doc: &mut View<'_>) -> f64;
    fn keep(&self, score: f64) -> bool;
    /// Whether the params make sense together (each on its own is checked by its type).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    /// The score of one text.
    fn score(&self, text: &str) -> f64 {
        self.score_view(&mut View::new(text))
    }
}

pub const END_MARKS: [&str; 5] = [".", "?", "!", "\"", "'"];
pub const ELLIPSIS_MARKS: [&str; 8] = ["...", "[...]", "…", "(...)", "[…]", "-»", "read more..", "read more"];
pub const WHITE_SPACE: [char; 5] = ['\t', '\n', '\r', '\u{8}', ' '];
pub const COMMON_ENGLISH_WORDS: [&str; 8] = ["the", "be", "to", "of", "and", "that", "have", "with"];
pub const BULLETS: [char; 12] = ['•', '‣', '⁃', '⁌', '⁍', '∙', '○', '●', '◘', '◦', '⦾', '⦿'];
pub const POLICY_SUBSTRINGS: [&str; 14] = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "privacy overview",
    "use of cookies",
    "use cookies",
    "privacy & cookies policy",
    "privacy and cookies policy",
    "this website uses cookies to improve your experience while you navigate through the website. out of these cookies, the cookies that are categorized as necessary are stored on your browser as they are essential for the working of basic functionalities of the website. we also use third-party cookies that help us analyze and understand how you use this website. these cookies will be stored in your browser only with your consent. you also have the option to opt-out of these cookies. but opting out of some of these cookies may have an effect on your browsing experience.",
    "necessary cookies are absolutely essential for the website to function properly. this category only includes cookies that ensures basic functionalities and security features of the website. these cookies do not store any personal information.",
    "any cookies that may not be particularly necessary for the website to function and is used specifically to collect user personal data via analytics, ads, other embedded contents are termed as non-necessary cookies. it is mandatory to procure user consent prior to running these cookies on your website.",
    "this site uses cookies, including for analytics, personalization, and advertising purposes. for more information or to change your cookie settings, click here.",
    "if you continue to browse this site without changing your cookie settings, you agree to this use. acceptread more",
];

fn ratio(n: usize, d: usize, empty: f64) -> f64 {
    if d == 0 { empty } else { n as f64 / d as f64 }
}

/// Share of non-blank lines for which `pred` holds (given the stripped line); `1.0` without lines.
fn line_share(doc: &mut View<'_>, pred: impl Fn(&str) -> bool) -> f64 {
    let lines = doc.stripped_lines();
    ratio(lines.iter().filter(|l| pred(l)).count(), lines.len(), 1.0)
}

/// Whether a stripped line, lower-cased, ends with one of [`ELLIPSIS_MARKS`]. Only its last
/// characters can decide that (lower-casing maps each character on its own and never shortens
/// one), and only lines ending in `. ] ) e E … »` can: the others are answered without
/// lower-casing anything.
fn ends_with_ellipsis(line: &str) -> bool {
    const LONGEST: usize = 11; // "read more.." in characters
    if !line.ends_with(['.', ']', ')', 'e', 'E', '…', '»']) {
        return false;
    }
    let tail = line.char_indices().rev().nth(LONGEST - 1).map_or(line, |(i, _)| &line[i..]);
    let lower = tail.to_lowercase();
    ELLIPSIS_MARKS.iter().any(|m| lower.ends_with(m))
}

/// [`POLICY_SUBSTRINGS`], prepared for repeated searches.
pub fn policy_needles() -> &'static py::Needles {
    static N: std::sync::OnceLock<py::Needles> = std::sync::OnceLock::new();
    N.get_or_init(|| py::Needles::new(&POLICY_SUBSTRINGS))
}

heuristic!(
    /// Share of characters outside `[a-zA-Z0-9\n?!,.]`; keep ≤ 0.25.
    NonAlphaNumericFilter
);
impl Heuristic for NonAlphaNumericFilter {
    const NAME: &'static str = "NonAlphaNumericFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let c = doc.chars();
        ratio(c.non_alnum, c.chars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_non_alpha_numeric_to_text_ratio
    }
}

heuristic!(
    /// Share of words that are an ellipsis or mostly `#`; keep ≤ 0.1.
    SymbolsToWordsFilter
);
impl Heuristic for SymbolsToWordsFilter {
    const NAME: &'static str = "SymbolsToWordsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let hashes = memchr::memchr(b'#', doc.text().as_bytes()).is_some();
        let w = doc.words();
        let mut symbols = 0usize;
        for (word, &len) in w.words.iter().zip(&w.lens) {
            let b = word.as_bytes();
            let runs = if hashes { b.iter().enumerate().filter(|&(i, &c)| c == b'#' && (i == 0 || b[i - 1] != b'#')).count() } else { 0 };
            // every mark starts with one of `. [ ( - r` or `…` (0xe2) and has at most 11 bytes
            let maybe_mark = b.len() <= 11 && matches!(b[0], b'.' | b'[' | b'(' | b'-' | b'r' | 0xe2);
            if runs as f64 / len as f64 > 0.5 || (maybe_mark && ELLIPSIS_MARKS.contains(word)) {
                symbols += 1;
            }
        }
        ratio(symbols, w.words.len(), 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_symbol_to_word_ratio
    }
}

heuristic!(
    /// Share of characters that are digits; keep ≤ 0.15.
    NumbersFilter
);
impl Heuristic for NumbersFilter {
    const NAME: &'static str = "NumbersFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let c = doc.chars();
        ratio(c.digits, c.chars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_number_to_text_ratio
    }
}

heuristic!(
    /// Share of characters inside URLs; keep ≤ 0.2.
    UrlsFilter
);
impl Heuristic for UrlsFilter {
    const NAME: &'static str = "UrlsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let url_chars: usize = urls(doc.text()).iter().map(|u| u.len()).sum();
        ratio(url_chars, doc.chars().chars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_url_to_text_ratio
    }
}

heuristic!(
    /// Share of non-blank lines starting with a bullet; keep ≤ 0.9.
    BulletsFilter
);
impl Heuristic for BulletsFilter {
    const NAME: &'static str = "BulletsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        line_share(doc, |l| l.starts_with(BULLETS))
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_bullet_lines_ratio
    }
}

heuristic!(
    /// Share of characters in `\t \n \r \b` and space; keep ≤ 0.25.
    WhiteSpaceFilter
);
impl Heuristic for WhiteSpaceFilter {
    const NAME: &'static str = "WhiteSpaceFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let c = doc.chars();
        ratio(c.white, c.chars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_white_space_ratio
    }
}

heuristic!(
    /// Share of characters that are brackets `{}⟨⟩[]()`; keep ≤ 0.1.
    ParenthesesFilter
);
impl Heuristic for ParenthesesFilter {
    const NAME: &'static str = "ParenthesesFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let c = doc.chars();
        ratio(c.parens, c.chars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_parentheses_ratio
    }
}

heuristic!(
    /// Length of the longest word; keep ≤ 1000.
    LongWordFilter
);
impl Heuristic for LongWordFilter {
    const NAME: &'static str = "LongWordFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        doc.words().lens.iter().copied().max().unwrap_or(0) as f64
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_word_length
    }
}

heuristic!(
    /// Number of words (`len(text.split())`); keep within [50, 100000]. The one word-count
    /// rule: the `word_count_filter` stage and the chains both run it.
    WordCountFilter
);
impl Heuristic for WordCountFilter {
    const NAME: &'static str = "WordCountFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        doc.word_count() as f64
    }
    fn keep(&self, s: f64) -> bool {
        self.min_words as f64 <= s && s <= self.max_words as f64
    }
    fn check(&self) -> Result<(), String> {
        if self.min_words > self.max_words {
            return Err(format!("min_words ({}) is greater than max_words ({})", self.min_words, self.max_words));
        }
        Ok(())
    }
}

heuristic!(
    /// Share of paragraphs with boilerplate ("privacy policy", …; "lorem ipsum" anywhere
    /// scores 1); keep ≤ 0.4.
    BoilerPlateStringFilter
);
impl Heuristic for BoilerPlateStringFilter {
    const NAME: &'static str = "BoilerPlateStringFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        if !doc.may_hold_boilerplate() {
            return 0.0; // no paragraph can match (and there is at least one)
        }
        let (mut n, mut boiler) = (0usize, 0usize);
        for p in py::paragraphs(doc.text()) {
            n += 1;
            let p = py::strip(p).to_lowercase();
            if py::contains(&p, "lorem ipsum") {
                return 1.0;
            }
            boiler += usize::from(policy_needles().any_in(&p));
        }
        ratio(boiler, n, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_boilerplate_string_ratio
    }
}

heuristic!(
    /// Mean word length; keep within [3, 10].
    MeanWordLengthFilter
);
impl Heuristic for MeanWordLengthFilter {
    const NAME: &'static str = "MeanWordLengthFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let w = doc.words();
        ratio(w.lens.iter().map(|&l| l as usize).sum(), w.words.len(), 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        self.min_mean_word_length <= s && s <= self.max_mean_word_length
    }
}

heuristic!(
    /// Share of non-blank lines not ending in `. ? ! " '`; keep ≤ 0.85.
    PunctuationFilter
);
impl Heuristic for PunctuationFilter {
    const NAME: &'static str = "PunctuationFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        line_share(doc, |l| !END_MARKS.iter().any(|m| l.ends_with(m)))
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_num_sentences_without_endmark_ratio
    }
}

heuristic!(
    /// Share of non-blank lines ending in an ellipsis ("...", "…", "read more", …); keep ≤ 0.3.
    EllipsisFilter
);
impl Heuristic for EllipsisFilter {
    const NAME: &'static str = "EllipsisFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        line_share(doc, ends_with_ellipsis)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_num_lines_ending_with_ellipsis_ratio
    }
}

heuristic!(
    /// Count of common English words (lower case), stopping at the cutoff; keep ≥ 2.
    CommonEnglishWordsFilter
);
impl Heuristic for CommonEnglishWordsFilter {
    const NAME: &'static str = "CommonEnglishWordsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let mut n = 0usize;
        for w in &doc.words().words {
            n += usize::from(COMMON_ENGLISH_WORDS.contains(w));
            if self.stop_at_false && n as f64 >= self.min_num_common_words {
                break;
            }
        }
        n as f64
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.min_num_common_words
    }
}

heuristic!(
    /// Share of words with at least one alphabetic character; keep ≥ 0.8.
    WordsWithoutAlphabetsFilter
);
impl Heuristic for WordsWithoutAlphabetsFilter {
    const NAME: &'static str = "WordsWithoutAlphabetsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let w = doc.words();
        let alpha = w
            .words
            .iter()
            .filter(|w| w.bytes().any(|b| b.is_ascii_alphabetic()) || (!w.is_ascii() && w.chars().any(char::is_alphabetic)))
            .count();
        ratio(alpha, w.words.len(), 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.min_words_with_alphabets
    }
}

heuristic!(
    /// 1 when a URL contains "porn", else 0; keep 0.
    PornographicUrlsFilter
);
impl Heuristic for PornographicUrlsFilter {
    const NAME: &'static str = "PornographicUrlsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        f64::from(u8::from(urls(doc.text()).iter().any(|u| u.contains("porn"))))
    }
    fn keep(&self, s: f64) -> bool {
        s != 1.0
    }
}

/// Score and keep decision of every filter above at its defaults, by NeMo class name.
pub fn score_all(text: &str) -> Vec<(&'static str, f64, bool)> {
    fn one<H: Heuristic + Default>(text: &str) -> (&'static str, f64, bool) {
        let h = H::default();
        let s = h.score(text);
        (H::NAME, s, h.keep(s))
    }
    vec![
        one::<BoilerPlateStringFilter>(text),
        one::<BulletsFilter>(text),
        one::<CommonEnglishWordsFilter>(text),
        one::<EllipsisFilter>(text),
        one::<LongWordFilter>(text),
        one::<MeanWordLengthFilter>(text),
        one::<NonAlphaNumericFilter>(text),
        one::<NumbersFilter>(text),
        one::<ParenthesesFilter>(text),
        one::<PornographicUrlsFilter>(text),
        one::<PunctuationFilter>(text),
        one::<SymbolsToWordsFilter>(text),
        one::<UrlsFilter>(text),
        one::<WhiteSpaceFilter>(text),
        one::<WordCountFilter>(text),
        one::<WordsWithoutAlphabetsFilter>(text),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_scanner_follows_the_regex() {
        assert_eq!(urls("see https://a.b/c?d=e, and http://x.y/%20z%2 end"), ["https://a.b/c?d=e,", "http://x.y/%20z"]);
        assert!(urls("http:// nothing").is_empty());
        assert_eq!(urls("xhttp://a"), ["http://a"]);
    }

    #[test]
    fn word_count_params_are_checked_wherever_the_rule_runs() {
        let e = AnyHeuristic::from_params("word_count_filter", serde_json::json!({"min_words": 5, "max_words": 1})).unwrap_err();
        assert_eq!(e, "min_words (5) is greater than max_words (1)");
        assert!(AnyHeuristic::from_params("word_count_filter", serde_json::json!({"min_words": -1})).is_err());
        let h = AnyHeuristic::from_params("word_count_filter", serde_json::json!({"min_words": 2, "max_words": 3})).unwrap();
        let keeps = |t: &str| h.keep(h.score_view(&mut View::new(t)));
        assert_eq!([keeps("one"), keeps("one two"), keeps("one two three"), keeps("a b c d")], [false, true, true, false]);
    }
}

#[cfg(test)]
mod shared_piece_tests {
    use super::view::BOILERPLATE_KEYS;
    use super::*;

    /// Labels by brute force: the first window with the same words.
    fn naive(words: &[&str], n: usize) -> Vec<u32> {
        (0..=words.len() - n).map(|i| (0..=i).find(|&j| words[j..j + n] == words[i..i + n]).unwrap_or(i) as u32).collect()
    }

    #[test]
    fn ngram_classes_equal_brute_force() {
        let mut rng = crate::Lcg(7);
        for round in 0..300 {
            let vocab = 1 + round % 6;
            let len = 1 + (round * 7) % 60;
            let words: Vec<String> = (0..len).map(|_| format!("w{}", rng.below(vocab))).collect();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let mut g = NGrams::new(&words);
            for n in 1..=len.min(12) {
                let want = naive(&words, n);
                let level = g.level(n);
                assert_eq!(level.classes, want, "{words:?} n={n}");
                let count = |c: u32| want.iter().filter(|&&x| x == c).count() as u32;
                assert_eq!(level.counts, (0..want.len() as u32).map(count).collect::<Vec<_>>(), "{words:?} n={n}");
                let seen: Vec<u32> = (0..want.len() as u32).filter(|&i| want[i as usize] != i).collect();
                assert_eq!(level.seen_before, seen);
                // Counter.most_common(1): the first window of the highest count
                let best = (0..want.len()).max_by_key(|&i| (count(want[i]), std::cmp::Reverse(i)));
                assert_eq!(level.most_frequent(), best, "{words:?} n={n}");
            }
        }
    }

    #[test]
    fn char_counts_equal_per_character_predicates() {
        for text in ["", "abc 123 (x) [y] {z}\n\t\r\u{8}", "é⟨⟩ ü,.?! 日本語 🚀 ⟨", &"x(1) ".repeat(2000)] {
            let count = |p: fn(char) -> bool| text.chars().filter(|&c| p(c)).count();
            let want = CharCounts {
                chars: text.chars().count(),
                non_alnum: count(|c| !is_alphanum_mark(c)),
                digits: count(|c| c.is_ascii_digit()),
                white: count(|c| WHITE_SPACE.contains(&c)),
                parens: count(|c| matches!(c, '{' | '}' | '⟨' | '⟩' | '[' | ']' | '(' | ')')),
            };
            assert_eq!(char_counts(text), want, "{text:?}");
        }
    }

    #[test]
    fn boilerplate_prefilter_covers_every_needle() {
        for n in POLICY_SUBSTRINGS.iter().chain(&["lorem ipsum"]) {
            assert!(BOILERPLATE_KEYS.iter().any(|k| n.contains(k)), "{n}");
        }
        assert!(!View::new("plain words only").may_hold_boilerplate());
        assert!(View::new("Our PRIVACY notice").may_hold_boilerplate());
        assert!(View::new("coo\u{212a}ie").may_hold_boilerplate());
        assert!(View::new("T\u{130}RMS").may_hold_boilerplate());
        assert!(!View::new("café crème, no policy words").may_hold_boilerplate());
    }

    #[test]
    fn symbol_words_prefilter_admits_every_mark() {
        for m in ELLIPSIS_MARKS {
            assert!(m.len() <= 11 && matches!(m.as_bytes()[0], b'.' | b'[' | b'(' | b'-' | b'r' | 0xe2), "{m}");
        }
    }

    #[test]
    fn ellipsis_endings_equal_lower_casing_the_whole_line() {
        for line in ["Read More", "READ MORE..", "x [...]", "a…", "b -»", "plain.", "no", "İİİİİİİİİİİİ read more", "ends (...)", "e"]
        {
            let lower = line.to_lowercase();
            assert_eq!(ends_with_ellipsis(line), ELLIPSIS_MARKS.iter().any(|m| lower.ends_with(m)), "{line}");
        }
    }
}
