//! NeMo Curator's heuristic string filters (`heuristic/string.py`, 1.4.0), one struct each,
//! with its parameter names and defaults.

use crate::py;

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

/// Characters of NeMo's `regex_alphanum`: `[a-zA-Z0-9\n?!,.]` (the test oracle of
/// [`CHAR_CLASS`]).
#[cfg(test)]
fn is_alphanum_mark(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '\n' | '?' | '!' | ',' | '.')
}

/// Matches of NeMo's `regex_url`
/// (`https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~]|[!*\(\),]|(?:%[0-9A-Fa-f]{2}))+`), left to right,
/// as byte ranges.
pub fn urls(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let allowed = |c: u8| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'$' | b'-' | b'_' | b'@' | b'.' | b'&' | b'+' | b'/' | b':' | b'=' | b'?' | b'#' | b'~' | b'!' | b'*' | b'(' | b')' | b','
            )
    };
    let mut out = Vec::new();
    let mut i = 0;
    static HTTP: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let finder = HTTP.get_or_init(|| memchr::memmem::Finder::new(b"http"));
    while i < b.len() {
        match finder.find(&b[i..]) {
            Some(k) => i += k,
            None => break,
        }
        let rest = &b[i..];
        let scheme = if rest.starts_with(b"https://") {
            8
        } else if rest.starts_with(b"http://") {
            7
        } else {
            i += 1;
            continue;
        };
        let mut j = i + scheme;
        loop {
            if j < b.len() && allowed(b[j]) {
                j += 1;
            } else if j + 2 < b.len() && b[j] == b'%' && b[j + 1].is_ascii_hexdigit() && b[j + 2].is_ascii_hexdigit() {
                j += 3;
            } else {
                break;
            }
        }
        if j > i + scheme {
            out.push(&text[i..j]);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

macro_rules! heuristic {
    ($(#[$doc:meta])* $name:ident { $($field:ident : $ty:ty = $default:expr),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name { $(pub $field: $ty),* }
        impl Default for $name {
            fn default() -> Self { $name { $($field: $default),* } }
        }
    };
}

heuristic!(
    /// Share of characters outside `[a-zA-Z0-9\n?!,.]`; keep ≤ 0.25.
    NonAlphaNumericFilter { max_non_alpha_numeric_to_text_ratio: f64 = 0.25 }
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
    SymbolsToWordsFilter { max_symbol_to_word_ratio: f64 = 0.1 }
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
    NumbersFilter { max_number_to_text_ratio: f64 = 0.15 }
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
    UrlsFilter { max_url_to_text_ratio: f64 = 0.2 }
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
    BulletsFilter { max_bullet_lines_ratio: f64 = 0.9 }
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
    WhiteSpaceFilter { max_white_space_ratio: f64 = 0.25 }
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
    ParenthesesFilter { max_parentheses_ratio: f64 = 0.1 }
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
    LongWordFilter { max_word_length: f64 = 1000.0 }
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
    WordCountFilter { min_words: usize = 50, max_words: usize = 100000 }
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
    BoilerPlateStringFilter { max_boilerplate_string_ratio: f64 = 0.4, remove_if_at_top_or_bottom: bool = true }
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
    MeanWordLengthFilter { min_mean_word_length: f64 = 3.0, max_mean_word_length: f64 = 10.0 }
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
    PunctuationFilter { max_num_sentences_without_endmark_ratio: f64 = 0.85 }
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
    EllipsisFilter { max_num_lines_ending_with_ellipsis_ratio: f64 = 0.3 }
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
    CommonEnglishWordsFilter { min_num_common_words: f64 = 2.0, stop_at_false: bool = true }
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
    WordsWithoutAlphabetsFilter { min_words_with_alphabets: f64 = 0.8 }
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
    PornographicUrlsFilter {}
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

// ---------------------------------------------------------------------------------------
// Repetition filters (`heuristic/repetition/repetition.py`).

heuristic!(
    /// Share of non-blank lines that are distinct; keep ≥ 0.7.
    RepeatedLinesFilter { max_repeated_line_fraction: f64 = 0.7 }
);
impl Heuristic for RepeatedLinesFilter {
    const NAME: &'static str = "RepeatedLinesFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.line_uniques();
        ratio(u.unique, u.total, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_line_fraction
    }
}

heuristic!(
    /// Share of paragraphs that are distinct; keep ≥ 0.7.
    RepeatedParagraphsFilter { max_repeated_paragraphs_ratio: f64 = 0.7 }
);
impl Heuristic for RepeatedParagraphsFilter {
    const NAME: &'static str = "RepeatedParagraphsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.paragraph_uniques();
        ratio(u.unique, u.total, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_paragraphs_ratio
    }
}

heuristic!(
    /// Share of line characters in distinct lines; keep ≥ 0.8.
    RepeatedLinesByCharFilter { max_repeated_lines_char_ratio: f64 = 0.8 }
);
impl Heuristic for RepeatedLinesByCharFilter {
    const NAME: &'static str = "RepeatedLinesByCharFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.line_uniques();
        ratio(u.unique_chars, u.total_chars, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_lines_char_ratio
    }
}

heuristic!(
    /// Share of paragraph characters in distinct paragraphs; keep ≥ 0.8.
    RepeatedParagraphsByCharFilter { max_repeated_paragraphs_char_ratio: f64 = 0.8 }
);
impl Heuristic for RepeatedParagraphsByCharFilter {
    const NAME: &'static str = "RepeatedParagraphsByCharFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.paragraph_uniques();
        ratio(u.unique_chars, u.total_chars, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_paragraphs_char_ratio
    }
}

/// A fast, non-cryptographic hasher for in-memory maps keyed by word ids (FxHash's mix).
#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        for &b in chunks.remainder() {
            self.add(b as u64);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Fx {
    #[inline]
    pub(crate) fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type FxMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;

heuristic!(
    /// Share of characters taken by the most frequent word n-gram (as `text.replace` would
    /// remove it); keep ≤ 0.2. Among equally frequent n-grams the first to occur is taken
    /// (NeMo Curator takes whichever its hash set yields first; see DISAGREEMENTS.md).
    RepeatingTopNGramsFilter { n: usize = 2, max_repeating_ngram_ratio: f64 = 0.2 }
);
impl Heuristic for RepeatingTopNGramsFilter {
    const NAME: &'static str = "RepeatingTopNGramsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let n = self.n.max(1);
        if doc.words().words.len() < n {
            return 1.0;
        }
        let Some(i) = doc.ngrams().level(n).most_frequent() else { return 1.0 };
        let joined = doc.words().words[i..i + n].join(" ");
        ratio(py::count(doc.text(), &joined) * py::len(&joined), doc.chars().chars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_repeating_ngram_ratio
    }
}

heuristic!(
    /// Share of characters in word n-grams seen before (overlaps counted once); keep ≤ 0.2.
    RepeatingDuplicateNGramsFilter { n: usize = 2, max_repeating_duplicate_ngram_ratio: f64 = 0.2 }
);
impl Heuristic for RepeatingDuplicateNGramsFilter {
    const NAME: &'static str = "RepeatingDuplicateNGramsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let n = self.n.max(1);
        if doc.words().words.len() < n {
            return 1.0;
        }
        let nchars = doc.chars().chars;
        let (ngrams, lens) = doc.ngrams_and_lens();
        // NeMo walks every window, counting down an overlap after each repeated one; only the
        // repeated windows add characters, so walk those and derive the overlap.
        let (mut duplicated, mut last) = (0usize, None::<usize>);
        for &i in &ngrams.level(n).seen_before {
            let i = i as usize;
            let overlapping = last.map_or(0, |l| n.saturating_sub(i - l));
            duplicated += lens[i + overlapping.min(n)..i + n].iter().map(|&l| l as usize).sum::<usize>();
            duplicated += (n - overlapping).min(n - 1);
            last = Some(i);
        }
        ratio(duplicated, nchars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_repeating_duplicate_ngram_ratio
    }
}

/// `(n, max_repeating_ngram_ratio)` of the RepeatingTopNGramsFilters in NeMo Curator's
/// English pipeline, in order.
pub const ENGLISH_TOP_NGRAMS: [(usize, f64); 3] = [(2, 0.2), (3, 0.18), (4, 0.16)];
/// `(n, max_repeating_duplicate_ngram_ratio)` of its RepeatingDuplicateNGramsFilters.
pub const ENGLISH_DUPLICATE_NGRAMS: [(usize, f64); 6] = [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)];

/// The repetition filters as NeMo Curator's English pipeline configures them, with the
/// names the parity reference uses (`RepeatingTopNGramsFilter(n=2)`, …).
pub fn repetition_all(text: &str) -> Vec<(String, f64, bool)> {
    fn one<H: Heuristic>(name: String, h: H, text: &str) -> (String, f64, bool) {
        let s = h.score(text);
        (name, s, h.keep(s))
    }
    let mut out = vec![
        one(RepeatedLinesFilter::NAME.into(), RepeatedLinesFilter::default(), text),
        one(RepeatedParagraphsFilter::NAME.into(), RepeatedParagraphsFilter::default(), text),
        one(RepeatedLinesByCharFilter::NAME.into(), RepeatedLinesByCharFilter::default(), text),
        one(RepeatedParagraphsByCharFilter::NAME.into(), RepeatedParagraphsByCharFilter::default(), text),
    ];
    for (n, r) in ENGLISH_TOP_NGRAMS {
        let h = RepeatingTopNGramsFilter { n, max_repeating_ngram_ratio: r };
        out.push(one(format!("RepeatingTopNGramsFilter(n={n})"), h, text));
    }
    for (n, r) in ENGLISH_DUPLICATE_NGRAMS {
        let h = RepeatingDuplicateNGramsFilter { n, max_repeating_duplicate_ngram_ratio: r };
        out.push(one(format!("RepeatingDuplicateNGramsFilter(n={n})"), h, text));
    }
    out
}

// ---------------------------------------------------------------------------------------
// One document, examined once.

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
const BOILERPLATE_KEYS: [&str; 4] = ["cookie", "privacy", "terms of use", "lorem ipsum"];

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

/// Per byte, counts packed in 12-bit fields (character start, non-alphanumeric, digit, white
/// space, bracket): one table load and one add per byte, the fields flushed before they can
/// overflow.
static CHAR_CLASS: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        t[b] = if c < 0x80 {
            let alnum = c.is_ascii_alphanumeric() || matches!(c, b'\n' | b'?' | b'!' | b',' | b'.');
            let white = matches!(c, b'\t' | b'\n' | b'\r' | 0x08 | b' ');
            let paren = matches!(c, b'{' | b'}' | b'[' | b']' | b'(' | b')');
            1 | ((!alnum as u64) << 12) | ((c.is_ascii_digit() as u64) << 24) | ((white as u64) << 36) | ((paren as u64) << 48)
        } else if c >= 0xc0 {
            1 | (1 << 12) // the first byte of a non-ASCII character
        } else {
            0 // a continuation byte
        };
        b += 1;
    }
    t
};

fn char_counts(text: &str) -> CharCounts {
    let mut f = [0usize; 5];
    for chunk in text.as_bytes().chunks(4095) {
        // eight bytes per step (one loop check per eight table loads)
        let mut eights = chunk.chunks_exact(8);
        let mut acc: u64 = 0;
        for e in &mut eights {
            let w = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
            acc += CHAR_CLASS[(w & 0xff) as usize]
                + CHAR_CLASS[((w >> 8) & 0xff) as usize]
                + CHAR_CLASS[((w >> 16) & 0xff) as usize]
                + CHAR_CLASS[((w >> 24) & 0xff) as usize]
                + CHAR_CLASS[((w >> 32) & 0xff) as usize]
                + CHAR_CLASS[((w >> 40) & 0xff) as usize]
                + CHAR_CLASS[((w >> 48) & 0xff) as usize]
                + CHAR_CLASS[(w >> 56) as usize];
        }
        acc += eights.remainder().iter().map(|&b| CHAR_CLASS[b as usize]).sum::<u64>();
        for (k, v) in f.iter_mut().enumerate() {
            *v += ((acc >> (12 * k)) & 0xfff) as usize;
        }
    }
    if f[0] != text.len() {
        // non-ASCII text: the two non-ASCII brackets ⟨ ⟩
        f[4] += py::count(text, "\u{27e8}") + py::count(text, "\u{27e9}");
    }
    CharCounts { chars: f[0], non_alnum: f[1], digits: f[2], white: f[3], parens: f[4] }
}

/// Word n-grams as classes: for each n, each window of n words is labelled with the position
/// of the first window equal to it, so equal n-grams share a label and "seen before" is
/// `label != position`. Exact: words are interned (compared as strings), and the label of an
/// (n+1)-gram is looked up by the pair (label of its first n words, id of its last word).
/// A window whose n-gram occurs once keeps a unique label at every larger n, so only the
/// windows of repeated n-grams are looked up again: on prose, few beyond n = 3.
pub struct NGrams {
    /// `levels[k]`: the classes of (k+1)-grams.
    levels: Vec<Level>,
    table: FirstSeen,
}

/// The classes of one n.
pub struct Level {
    /// Per window, the position of the first equal window.
    pub classes: Vec<u32>,
    /// Per position, how many windows have it as their class.
    pub counts: Vec<u32>,
    /// The windows equal to an earlier one (`classes[i] != i`), in order: few on prose, so
    /// the scores walk them instead of every window.
    pub seen_before: Vec<u32>,
}

impl Level {
    /// The position of the first window among the most frequent n-grams (`Counter.most_common`
    /// order), `None` without windows.
    pub fn most_frequent(&self) -> Option<usize> {
        if self.classes.is_empty() {
            return None;
        }
        // A repeated n-gram's first window comes before its other windows: the answer is the
        // smallest first window among the most counted, or window 0 when nothing repeats.
        let mut best = (0usize, 1u32);
        for &d in &self.seen_before {
            let c = self.classes[d as usize] as usize;
            let k = self.counts[c];
            if k > best.1 || (k == best.1 && c < best.0) {
                best = (c, k);
            }
        }
        Some(best.0)
    }

    /// From the classes, given the only windows that may be equal to an earlier one.
    fn from_classes(classes: Vec<u32>, candidates: impl Iterator<Item = u32>) -> Level {
        let mut counts = vec![1u32; classes.len()];
        let mut seen_before = Vec::new();
        for i in candidates {
            let c = classes[i as usize];
            if c != i {
                counts[c as usize] += 1;
                counts[i as usize] = 0;
                seen_before.push(i);
            }
        }
        Level { classes, counts, seen_before }
    }
}

/// An open-addressing map from 64-bit keys to the first position inserted under each (the
/// interning and "seen before" tables of the filters: no per-entry allocation, a reusable
/// buffer, one multiply per probe).
#[derive(Default)]
pub(crate) struct FirstSeen {
    /// (key, position, generation): a slot of an older generation is empty, so emptying the
    /// table is one increment, not a pass over it.
    slots: Vec<(u64, u32, u32)>,
    bits: u32,
    generation: u32,
}

impl FirstSeen {
    /// Empty, sized for `n` keys.
    pub(crate) fn reset(&mut self, n: usize) {
        let bits = (2 * n).max(16).next_power_of_two().trailing_zeros();
        self.generation = self.generation.wrapping_add(1);
        if bits > self.bits || self.generation == 0 {
            self.bits = self.bits.max(bits);
            self.slots.clear();
            self.slots.resize(1 << self.bits, (0, 0, 0));
            self.generation = 1;
        }
    }

    /// The position first inserted under `key` for which `same` holds (equal keys may hide
    /// different items: `same` compares them), or `pos`, inserted.
    #[inline]
    pub(crate) fn first_or_insert(&mut self, key: u64, pos: u32, same: impl Fn(u32) -> bool) -> u32 {
        let mask = self.slots.len() - 1;
        let mut h = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize;
        loop {
            let slot = &mut self.slots[h & mask];
            if slot.2 != self.generation {
                *slot = (key, pos, self.generation);
                return pos;
            }
            if slot.0 == key && same(slot.1) {
                return slot.1;
            }
            h += 1;
        }
    }
}

/// A word's 64-bit hash: words of up to 8 bytes in one multiply.
pub(crate) fn word_hash(w: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (w.len() as u64).wrapping_mul(K);
    let mut eights = w.chunks_exact(8);
    for c in &mut eights {
        let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(23) ^ v).wrapping_mul(K);
    }
    let rest = eights.remainder();
    if !rest.is_empty() {
        // byte by byte: a copy into a buffer would be a `memory.copy` call inside WASM
        let v = rest.iter().rev().fold(0u64, |v, &b| (v << 8) | u64::from(b));
        h = (h.rotate_left(23) ^ v).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

impl NGrams {
    pub fn new(words: &[&str]) -> NGrams {
        // words interned by position; a word of up to 7 bytes is its own key (bytes and
        // length packed: equal keys, equal words), a longer one is hashed and compared
        let mut table = FirstSeen::default();
        table.reset(words.len());
        let mut classes = Vec::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            let b = w.as_bytes();
            let class = if b.len() <= 7 {
                let packed = b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)) | ((b.len() as u64) << 56);
                table.first_or_insert(packed, i as u32, |_| true)
            } else {
                let key = word_hash(b) | (1 << 63); // top bit set: never a packed key
                table.first_or_insert(key, i as u32, |p| words[p as usize] == *w)
            };
            classes.push(class);
        }
        let n = words.len() as u32;
        NGrams { levels: vec![Level::from_classes(classes, 0..n)], table }
    }

    /// The classes of n-grams (`1 ≤ n ≤` the number of words).
    pub fn level(&mut self, n: usize) -> &Level {
        assert!(n >= 1 && n <= self.levels[0].classes.len(), "n-gram size {n} out of range");
        while self.levels.len() < n {
            let next = self.extend();
            self.levels.push(next);
        }
        &self.levels[n - 1]
    }

    /// The classes of (n+1)-grams from those of n-grams, n = `levels.len()`.
    ///
    /// Only windows whose n-gram repeats can share an (n+1)-gram: the repeated n-grams' first
    /// windows and the windows seen before. Windows sharing an (n+1)-gram share their n-gram
    /// class, whose first window is the smallest of them; so the first windows go into the
    /// table first (in any order), then the windows seen before in order, and each key keeps
    /// its smallest window without walking every window.
    fn extend(&mut self) -> Level {
        let n = self.levels.len();
        let (words, prev) = (&self.levels[0].classes, &self.levels[n - 1]);
        let windows = prev.classes.len() - 1;
        let mut classes: Vec<u32> = (0..windows as u32).collect();
        let repeated: Vec<u32> = prev.seen_before.iter().copied().filter(|&d| (d as usize) < windows).collect();
        if !repeated.is_empty() {
            let mut firsts = Vec::with_capacity(repeated.len());
            let mut listed = vec![false; windows + 1];
            for &d in &repeated {
                let c = prev.classes[d as usize];
                if !std::mem::replace(&mut listed[c as usize], true) && (c as usize) < windows {
                    firsts.push(c);
                }
            }
            self.table.reset(firsts.len() + repeated.len());
            for &i in firsts.iter().chain(&repeated) {
                // (class of the first n words, id of the last): exact, no comparison needed
                let key = (u64::from(prev.classes[i as usize]) << 32) | u64::from(words[i as usize + n]);
                classes[i as usize] = self.table.first_or_insert(key, i, |_| true);
            }
        }
        Level::from_classes(classes, repeated.into_iter())
    }
}

#[cfg(test)]
mod view_tests {
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

// ---------------------------------------------------------------------------------------
// Filters chosen by name, for a chain run as one stage.

macro_rules! by_name {
    ($($stage:literal => $ty:ident),* $(,)?) => {
        /// One of the heuristics above, chosen by the name of the stage that runs it alone
        /// (`repeating_top_n_grams_filter`), with that stage's params.
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyHeuristic { $($ty($ty)),* }

        impl AnyHeuristic {
            /// The stage names, in the order above.
            pub const NAMES: &'static [&'static str] = &[$($stage),*];

            /// The heuristic a stage name stands for, from that stage's params (a JSON object;
            /// missing params take their defaults, unknown ones are an error).
            pub fn from_params(stage: &str, params: serde_json::Value) -> Result<AnyHeuristic, String> {
                match stage {
                    $($stage => {
                        let h: $ty = serde_json::from_value(params).map_err(|e| e.to_string())?;
                        Heuristic::check(&h)?;
                        Ok(AnyHeuristic::$ty(h))
                    })*
                    other => Err(format!("unknown filter `{other}` (one of: {})", Self::NAMES.join(", "))),
                }
            }

            /// The stage name.
            pub fn name(&self) -> &'static str {
                match self { $(AnyHeuristic::$ty(_) => $stage),* }
            }

            pub fn score_view(&self, doc: &mut View<'_>) -> f64 {
                match self { $(AnyHeuristic::$ty(h) => h.score_view(doc)),* }
            }

            pub fn keep(&self, score: f64) -> bool {
                match self { $(AnyHeuristic::$ty(h) => h.keep(score)),* }
            }
        }
    };
}

by_name! {
    "non_alpha_numeric_filter" => NonAlphaNumericFilter,
    "symbols_to_words_filter" => SymbolsToWordsFilter,
    "numbers_filter" => NumbersFilter,
    "urls_filter" => UrlsFilter,
    "bullets_filter" => BulletsFilter,
    "white_space_filter" => WhiteSpaceFilter,
    "parentheses_filter" => ParenthesesFilter,
    "long_word_filter" => LongWordFilter,
    "word_count_filter" => WordCountFilter,
    "boiler_plate_string_filter" => BoilerPlateStringFilter,
    "mean_word_length_filter" => MeanWordLengthFilter,
    "punctuation_filter" => PunctuationFilter,
    "ellipsis_filter" => EllipsisFilter,
    "common_english_words_filter" => CommonEnglishWordsFilter,
    "words_without_alphabets_filter" => WordsWithoutAlphabetsFilter,
    "pornographic_urls_filter" => PornographicUrlsFilter,
    "repeated_lines_filter" => RepeatedLinesFilter,
    "repeated_paragraphs_filter" => RepeatedParagraphsFilter,
    "repeated_lines_by_char_filter" => RepeatedLinesByCharFilter,
    "repeated_paragraphs_by_char_filter" => RepeatedParagraphsByCharFilter,
    "repeating_top_n_grams_filter" => RepeatingTopNGramsFilter,
    "repeating_duplicate_n_grams_filter" => RepeatingDuplicateNGramsFilter,
}
