//! NeMo Curator's heuristic string filters (`heuristic/string.py`, 1.4.0), one struct each,
//! with its parameter names and defaults.

use crate::py;

/// A document filter: a score, and whether a score keeps the document (NeMo's
/// `score_document` / `keep_document`).
pub trait Heuristic {
    /// NeMo Curator's class name.
    const NAME: &'static str;
    fn score(&self, text: &str) -> f64;
    fn keep(&self, score: f64) -> bool;
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

/// Share of a text's characters (code points) for which `pred` holds; `1.0` for an empty text.
fn char_share(text: &str, pred: impl Fn(char) -> bool) -> f64 {
    let (mut n, mut hits) = (0usize, 0usize);
    for c in text.chars() {
        n += 1;
        hits += usize::from(pred(c));
    }
    ratio(hits, n, 1.0)
}

/// Share of non-blank lines for which `pred` holds (given the stripped line); `1.0` without lines.
fn line_share(text: &str, pred: impl Fn(&str) -> bool) -> f64 {
    let (mut n, mut hits) = (0usize, 0usize);
    for s in py::sentences(text) {
        n += 1;
        hits += usize::from(pred(py::strip(s)));
    }
    ratio(hits, n, 1.0)
}

/// [`POLICY_SUBSTRINGS`], prepared for repeated searches.
pub fn policy_needles() -> &'static py::Needles {
    static N: std::sync::OnceLock<py::Needles> = std::sync::OnceLock::new();
    N.get_or_init(|| py::Needles::new(&POLICY_SUBSTRINGS))
}

/// Characters of NeMo's `regex_alphanum`: `[a-zA-Z0-9\n?!,.]`.
fn is_alphanum_mark(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '\n' | '?' | '!' | ',' | '.')
}

/// Matches of NeMo's `regex_url`
/// (`https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~]|[!*\(\),]|(?:%[0-9A-Fa-f]{2}))+`), left to right,
/// as byte ranges.
pub fn urls(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let allowed = |c: u8| c.is_ascii_alphanumeric() || b"$-_@.&+/:=?#~!*(),".contains(&c);
    let mut out = Vec::new();
    let mut i = 0;
    let finder = memchr::memmem::Finder::new(b"http");
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
        #[derive(Debug, Clone, PartialEq)]
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
    fn score(&self, text: &str) -> f64 {
        char_share(text, |c| !is_alphanum_mark(c))
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
    fn score(&self, text: &str) -> f64 {
        let (mut words, mut symbols) = (0usize, 0usize);
        for w in py::split(py::strip(text)) {
            words += 1;
            let runs = w.as_bytes().iter().enumerate().filter(|(i, c)| **c == b'#' && (*i == 0 || w.as_bytes()[i - 1] != b'#')).count();
            if ELLIPSIS_MARKS.contains(&w) || runs as f64 / py::len(w) as f64 > 0.5 {
                symbols += 1;
            }
        }
        ratio(symbols, words, 1.0)
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
    fn score(&self, text: &str) -> f64 {
        char_share(text, |c| c.is_ascii_digit())
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
    fn score(&self, text: &str) -> f64 {
        let url_chars: usize = urls(text).iter().map(|u| u.len()).sum();
        ratio(url_chars, py::len(text), 1.0)
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
    fn score(&self, text: &str) -> f64 {
        line_share(text, |l| l.starts_with(BULLETS))
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
    fn score(&self, text: &str) -> f64 {
        char_share(text, |c| WHITE_SPACE.contains(&c))
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
    fn score(&self, text: &str) -> f64 {
        char_share(text, |c| matches!(c, '{' | '}' | '⟨' | '⟩' | '[' | ']' | '(' | ')'))
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
    fn score(&self, text: &str) -> f64 {
        py::split(py::strip(text)).map(py::len).max().unwrap_or(0) as f64
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_word_length
    }
}

heuristic!(
    /// Number of words; keep within [50, 100000].
    WordCountFilter { min_words: f64 = 50.0, max_words: f64 = 100000.0 }
);
impl Heuristic for WordCountFilter {
    const NAME: &'static str = "WordCountFilter";
    fn score(&self, text: &str) -> f64 {
        curator_sdk::text::count_words(text) as f64
    }
    fn keep(&self, s: f64) -> bool {
        self.min_words <= s && s <= self.max_words
    }
}

heuristic!(
    /// Share of paragraphs with boilerplate ("privacy policy", …; "lorem ipsum" anywhere
    /// scores 1); keep ≤ 0.4.
    BoilerPlateStringFilter { max_boilerplate_string_ratio: f64 = 0.4, remove_if_at_top_or_bottom: bool = true }
);
impl Heuristic for BoilerPlateStringFilter {
    const NAME: &'static str = "BoilerPlateStringFilter";
    fn score(&self, text: &str) -> f64 {
        let (mut n, mut boiler) = (0usize, 0usize);
        for p in py::paragraphs(text) {
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
    fn score(&self, text: &str) -> f64 {
        let (mut words, mut chars) = (0usize, 0usize);
        for w in py::split(py::strip(text)) {
            words += 1;
            chars += py::len(w);
        }
        ratio(chars, words, 0.0)
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
    fn score(&self, text: &str) -> f64 {
        line_share(text, |l| !END_MARKS.iter().any(|m| l.ends_with(m)))
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
    fn score(&self, text: &str) -> f64 {
        line_share(text, |l| {
            let l = l.to_lowercase();
            ELLIPSIS_MARKS.iter().any(|m| l.ends_with(m))
        })
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
    fn score(&self, text: &str) -> f64 {
        let mut n = 0usize;
        for w in py::split(py::strip(text)) {
            n += usize::from(COMMON_ENGLISH_WORDS.contains(&w));
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
    fn score(&self, text: &str) -> f64 {
        let (mut words, mut alpha) = (0usize, 0usize);
        for w in py::split(py::strip(text)) {
            words += 1;
            alpha += usize::from(w.chars().any(char::is_alphabetic));
        }
        ratio(alpha, words, 0.0)
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
    fn score(&self, text: &str) -> f64 {
        f64::from(u8::from(urls(text).iter().any(|u| u.contains("porn"))))
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
}

// ---------------------------------------------------------------------------------------
// Repetition filters (`heuristic/repetition/repetition.py`).

fn unique_share(items: &[&str], by_chars: bool) -> f64 {
    let mut seen: std::collections::HashSet<&str, std::hash::BuildHasherDefault<Fx>> =
        std::collections::HashSet::with_capacity_and_hasher(items.len(), Default::default());
    let (mut total, mut unique) = (0usize, 0usize);
    for s in items {
        let w = if by_chars { py::len(s) } else { 1 };
        total += w;
        if seen.insert(*s) {
            unique += w;
        }
    }
    ratio(unique, total, 0.0)
}

heuristic!(
    /// Share of non-blank lines that are distinct; keep ≥ 0.7.
    RepeatedLinesFilter { max_repeated_line_fraction: f64 = 0.7 }
);
impl Heuristic for RepeatedLinesFilter {
    const NAME: &'static str = "RepeatedLinesFilter";
    fn score(&self, text: &str) -> f64 {
        unique_share(&py::sentences(text).collect::<Vec<_>>(), false)
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
    fn score(&self, text: &str) -> f64 {
        unique_share(&py::paragraphs(text).collect::<Vec<_>>(), false)
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
    fn score(&self, text: &str) -> f64 {
        unique_share(&py::sentences(text).collect::<Vec<_>>(), true)
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
    fn score(&self, text: &str) -> f64 {
        unique_share(&py::paragraphs(text).collect::<Vec<_>>(), true)
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

/// Each word as a small integer (equal words, equal ids), so n-grams compare and hash as
/// `[u32]` instead of n strings.
pub(crate) fn word_ids(words: &[&str]) -> Vec<u32> {
    let mut ids: FxMap<&str, u32> = FxMap::with_capacity_and_hasher(words.len() / 2 + 8, Default::default());
    words
        .iter()
        .map(|w| {
            let next = ids.len() as u32;
            *ids.entry(w).or_insert(next)
        })
        .collect()
}

/// For each n-gram window of `ids`, the index of the first window equal to it (exactly:
/// windows are looked up by a 64-bit hash and compared on a hit).
pub(crate) fn ngram_classes(ids: &[u32], n: usize) -> Vec<u32> {
    let windows = ids.len() + 1 - n;
    let mut first: FxMap<u64, u32> = FxMap::with_capacity_and_hasher(windows, Default::default());
    let mut classes = Vec::with_capacity(windows);
    for i in 0..windows {
        let g = &ids[i..i + n];
        let mut h = Fx::default();
        for &x in g {
            h.add(x as u64);
        }
        let mut key = h.0;
        let class = loop {
            match first.get(&key) {
                None => {
                    first.insert(key, i as u32);
                    break i as u32;
                }
                Some(&j) if &ids[j as usize..j as usize + n] == g => break j,
                Some(_) => key = key.wrapping_add(1), // a hash collision: probe on
            }
        };
        classes.push(class);
    }
    classes
}

/// Non-overlapping occurrences of `needle` in `hay` (Python's `str.replace` count).
fn occurrences(hay: &str, needle: &str) -> usize {
    py::count(hay, needle)
}

heuristic!(
    /// Share of characters taken by the most frequent word n-gram (as `text.replace` would
    /// remove it); keep ≤ 0.2. Among equally frequent n-grams the first to occur is taken
    /// (NeMo Curator takes whichever its hash set yields first; see DISAGREEMENTS.md).
    RepeatingTopNGramsFilter { n: usize = 2, max_repeating_ngram_ratio: f64 = 0.2 }
);
impl Heuristic for RepeatingTopNGramsFilter {
    const NAME: &'static str = "RepeatingTopNGramsFilter";
    fn score(&self, text: &str) -> f64 {
        let words: Vec<&str> = py::split(py::strip(text)).collect();
        let n = self.n.max(1);
        if words.len() < n {
            return 1.0;
        }
        let classes = ngram_classes(&word_ids(&words), n);
        let mut counts = vec![0u32; classes.len()];
        for &c in &classes {
            counts[c as usize] += 1;
        }
        let mut best: Option<(usize, u32)> = None; // (position, count)
        for (i, &c) in classes.iter().enumerate() {
            let k = counts[c as usize];
            if best.is_none_or(|(_, b)| k > b) {
                best = Some((i, k));
            }
        }
        let Some((i, _)) = best else { return 1.0 };
        let joined = words[i..i + n].join(" ");
        let nchar = py::len(text);
        ratio(occurrences(text, &joined) * py::len(&joined), nchar, 1.0)
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
    fn score(&self, text: &str) -> f64 {
        let words: Vec<&str> = py::split(py::strip(text)).collect();
        let n = self.n.max(1);
        if words.len() < n {
            return 1.0;
        }
        let classes = ngram_classes(&word_ids(&words), n);
        let mut counts = vec![0u32; classes.len()];
        let (mut duplicated, mut overlapping) = (0usize, 0usize);
        for (i, &class) in classes.iter().enumerate() {
            let c = &mut counts[class as usize];
            *c += 1;
            if *c > 1 {
                duplicated += words[i + overlapping.min(n)..i + n].iter().map(|w| py::len(w)).sum::<usize>();
                duplicated += (n - overlapping).min(n - 1);
                overlapping = n;
            }
            overlapping = overlapping.saturating_sub(1);
        }
        ratio(duplicated, py::len(text), 1.0)
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
