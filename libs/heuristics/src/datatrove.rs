//! datatrove's quality filters (`datatrove.pipeline.filters`, version 0.10.1) with the same
//! parameters, defaults, order of checks and drop reasons: GopherQualityFilter,
//! GopherRepetitionFilter, C4QualityFilter (which also rewrites the text: it keeps only the
//! lines that pass) and FineWebQualityFilter. English words and sentences come from
//! [`crate::en_words`] (datatrove uses spaCy's English tokenizer). Checked document by document
//! against decisions datatrove itself made (`tests/parity/datatrove_reference.jsonl`, made by
//! `scripts/parity/make_datatrove_reference.py`).
//!
//! A threshold of `None` (or 0, as in Python where 0 is false) turns its check off.

use crate::en_words;
use crate::punctuation::{ASCII_PUNCTUATION, is_punctuation, is_terminal_punctuation};
use crate::py::{self, is_py_space};

fn on(t: Option<f64>) -> Option<f64> {
    t.filter(|&v| v != 0.0)
}

/// Python's `str.splitlines()`.
pub fn splitlines(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        // the separator at `i` and its length in bytes (0: none)
        let sep = match b[i] {
            b'\r' if b.get(i + 1) == Some(&b'\n') => 2,
            b'\n' | b'\r' | 0x0b | 0x0c | 0x1c | 0x1d | 0x1e => 1,
            0xC2 if b.get(i + 1) == Some(&0x85) => 2,
            0xE2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xA8 | 0xA9)) => 3,
            _ => 0,
        };
        if sep > 0 {
            out.push(&text[start..i]);
            start = i + sep;
            i = start;
        } else {
            i += 1;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// datatrove's `find_duplicates`: (elements seen before, their total length in characters).
fn find_duplicates(items: &[&str]) -> (usize, usize) {
    let mut seen = crate::nemo::FirstSeen::default();
    seen.reset(items.len());
    let (mut n, mut chars) = (0, 0);
    for (i, x) in items.iter().enumerate() {
        if seen.first_or_insert(crate::nemo::word_hash(x.as_bytes()), i as u32, |p| items[p as usize] == *x) != i as u32 {
            n += 1;
            chars += py::len(x);
        }
    }
    (n, chars)
}

/// Python's `str.count` (non-overlapping).
fn count(text: &str, pat: &str) -> usize {
    py::count(text, pat)
}

/// The params of each datatrove rule set (name, type, default as a JSON literal, doc), written
/// once: handed to `$cb`, which makes the library struct (`__rules_struct!`, below each rule
/// set) or a stage's params (`__rules_stage!`, through `datatrove_stage!`).
#[doc(hidden)]
#[macro_export]
macro_rules! __datatrove_params {
    (GopherQuality, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Fewest words that are not only punctuation.
            min_doc_words: Option<f64> = 50,
            /// Most words that are not only punctuation.
            max_doc_words: Option<f64> = 100000,
            /// Shortest mean word length.
            min_avg_word_length: Option<f64> = 3,
            /// Longest mean word length.
            max_avg_word_length: Option<f64> = 10,
            /// Largest ratio of `#` or of ellipses to words.
            max_symbol_word_ratio: Option<f64> = 0.1,
            /// Largest share of lines starting with a bullet (`•` or `-`).
            max_bullet_lines_ratio: Option<f64> = 0.9,
            /// Largest share of lines ending with an ellipsis.
            max_ellipsis_lines_ratio: Option<f64> = 0.3,
            /// Smallest share of words with a letter (datatrove's name, kept for compatibility).
            max_non_alpha_words_ratio: Option<f64> = 0.8,
            /// Fewest distinct stop words present.
            min_stop_words: Option<f64> = 2,
            /// The stop words (default: Gopher's eight).
            stop_words: Vec<String> = ["the", "be", "to", "of", "and", "that", "have", "with"],
        } }
    };
    (GopherRepetition, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of lines that repeat an earlier line.
            dup_line_frac: Option<f64> = 0.3,
            /// Largest share of paragraphs that repeat an earlier paragraph.
            dup_para_frac: Option<f64> = 0.3,
            /// Largest share of characters in repeated lines.
            dup_line_char_frac: Option<f64> = 0.2,
            /// Largest share of characters in repeated paragraphs.
            dup_para_char_frac: Option<f64> = 0.2,
            /// `[n, fraction]` pairs: the most frequent n-gram's largest share of characters.
            top_n_grams: Vec<(usize, f64)> = [[2, 0.2], [3, 0.18], [4, 0.16]],
            /// `[n, fraction]` pairs: the largest share of characters in repeated n-grams.
            dup_n_grams: Vec<(usize, f64)> = [[5, 0.15], [6, 0.14], [7, 0.13], [8, 0.12], [9, 0.11], [10, 0.10]],
        } }
    };
    (C4Quality, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Remove Wikipedia-style citations (`[12]`, `[edit]`, `[citation needed]`).
            remove_citations: bool = true,
            /// Drop lines that do not end in `.` `?` `!` `"` `'` (or end in `...`).
            filter_no_terminal_punct: bool = true,
            /// Fewest sentences left in a kept document (-1: no minimum).
            min_num_sentences: i64 = 5,
            /// Fewest words in a kept line.
            min_words_per_line: i64 = 3,
            /// Drop lines with a longer word (-1: no limit).
            max_word_length: i64 = 1000,
            /// Drop documents containing "lorem ipsum".
            filter_lorem_ipsum: bool = true,
            /// Drop lines mentioning "javascript".
            filter_javascript: bool = true,
            /// Drop documents with a `{`.
            filter_curly_bracket: bool = true,
            /// Drop lines about cookies, privacy policies and terms of use.
            filter_policy: bool = true,
        } }
    };
    (FineWebQuality, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Smallest share of lines ending in a stop character.
            line_punct_thr: f64 = 0.12,
            /// Keep documents where no line ends in a stop character.
            line_punct_exclude_zero: bool = false,
            /// What ends a punctuated line (default: datatrove's terminal punctuation, many scripts).
            stop_chars: Option<Vec<String>>,
            /// Largest share of short lines.
            short_line_thr: f64 = 0.67,
            /// A line this long (in characters) or shorter is short.
            short_line_length: usize = 30,
            /// Largest share of characters in duplicated lines.
            char_duplicates_ratio: f64 = 0.01,
            /// Largest ratio of newlines to words.
            new_line_ratio: f64 = 0.3,
        } }
    };
}

crate::__datatrove_params!(
    GopherQuality,
    __rules_struct(
        /// datatrove's GopherQualityFilter.
        GopherQuality
    )
);

impl GopherQuality {
    /// `Ok(())` keeps the document; `Err(reason)` drops it with datatrove's reason.
    pub fn check(&self, text: &str) -> Result<(), &'static str> {
        self.check_with(text, &mut None)
    }

    /// [`GopherQuality::check`] with the text's words cached in `words` (filled if empty).
    pub fn check_with<'a>(&self, text: &'a str, words: &mut Option<Vec<&'a str>>) -> Result<(), &'static str> {
        let words: &[&str] = words.get_or_insert_with(|| en_words::words(text));
        let n_words = words.len() as f64;
        // one pass: the words that are not all punctuation, their length in characters, and
        // the words with a letter
        let (mut non_symbol, mut non_symbol_chars, mut alpha) = (0usize, 0usize, 0usize);
        for w in words {
            if w.is_ascii() {
                let b = w.as_bytes();
                if b.iter().any(|&c| !ASCII_PUNCTUATION[c as usize]) {
                    non_symbol += 1;
                    non_symbol_chars += b.len();
                }
                alpha += usize::from(b.iter().any(u8::is_ascii_alphabetic));
            } else {
                if w.chars().any(|c| !is_punctuation(c)) {
                    non_symbol += 1;
                    non_symbol_chars += py::len(w);
                }
                alpha += usize::from(w.chars().any(char::is_alphabetic));
            }
        }
        let n = non_symbol as f64;
        if on(self.min_doc_words).is_some_and(|t| n < t) {
            return Err("gopher_short_doc");
        }
        if on(self.max_doc_words).is_some_and(|t| n > t) {
            return Err("gopher_long_doc");
        }
        // numpy's mean of nothing is NaN, which compares false
        let avg = non_symbol_chars as f64 / n;
        if on(self.min_avg_word_length).is_some_and(|t| avg < t) {
            return Err("gopher_below_avg_threshold");
        }
        if on(self.max_avg_word_length).is_some_and(|t| avg > t) {
            return Err("gopher_above_avg_threshold");
        }
        if let Some(t) = on(self.max_symbol_word_ratio) {
            if count(text, "#") as f64 / n_words > t {
                return Err("gopher_too_many_hashes");
            }
            if (count(text, "...") + count(text, "…")) as f64 / n_words > t {
                return Err("gopher_too_many_ellipsis");
            }
        }
        let lines = splitlines(text);
        let n_lines = lines.len() as f64;
        if let Some(t) = on(self.max_bullet_lines_ratio) {
            let bullets = lines.iter().filter(|l| l.trim_start_matches(is_py_space).starts_with(['•', '-'])).count();
            if bullets as f64 / n_lines > t {
                return Err("gopher_too_many_bullets");
            }
        }
        if let Some(t) = on(self.max_ellipsis_lines_ratio) {
            let ends = lines
                .iter()
                .filter(|l| {
                    let l = l.trim_end_matches(is_py_space);
                    l.ends_with("...") || l.ends_with('…')
                })
                .count();
            if ends as f64 / n_lines > t {
                return Err("gopher_too_many_end_ellipsis");
            }
        }
        if let Some(t) = on(self.max_non_alpha_words_ratio)
            && (alpha as f64 / n_words) < t
        {
            return Err("gopher_below_alpha_threshold");
        }
        if let Some(t) = on(self.min_stop_words)
            && (distinct_stop_words(words, &self.stop_words, t) as f64) < t
        {
            return Err("gopher_enough_stop_words");
        }
        Ok(())
    }
}

/// How many distinct `stop_words` occur in `words`, counting stops once `enough` are found.
fn distinct_stop_words(words: &[&str], stop_words: &[String], enough: f64) -> usize {
    let longest = stop_words.iter().map(String::len).max().unwrap_or(0);
    let (mut found, mut distinct) = (vec![false; stop_words.len()], 0);
    for w in words.iter().filter(|w| w.len() <= longest) {
        // the first equal entry stands for its duplicates in the list
        if let Some(k) = stop_words.iter().position(|s| s == w)
            && !std::mem::replace(&mut found[k], true)
        {
            distinct += 1;
            if distinct as f64 >= enough {
                break;
            }
        }
    }
    distinct
}

crate::__datatrove_params!(
    GopherRepetition,
    __rules_struct(
        /// datatrove's GopherRepetitionFilter.
        GopherRepetition
    )
);

/// Splits on runs of at least `min` newlines (`re.split(r"\n{min,}")`).
fn split_newline_runs(text: &str, min: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let (bytes, mut start, mut i) = (text.as_bytes(), 0, 0);
    while let Some(k) = memchr::memchr(b'\n', &bytes[i..]) {
        let at = i + k;
        let run = bytes[at..].iter().take_while(|&&b| b == b'\n').count();
        if run >= min {
            out.push(&text[start..at]);
            start = at + run;
        }
        i = at + run;
    }
    out.push(&text[start..]);
    out
}

impl GopherRepetition {
    /// `Ok(())` keeps the document; `Err(reason)` drops it with datatrove's reason.
    pub fn check(&self, text: &str) -> Result<(), String> {
        self.check_with(text, &mut None)
    }

    /// [`GopherRepetition::check`] with the text's words cached in `words` (filled if empty
    /// and needed).
    pub fn check_with<'a>(&self, text: &'a str, words: &mut Option<Vec<&'a str>>) -> Result<(), String> {
        if text.is_empty() {
            return Err("empty".into());
        }
        let n_chars = py::len(text) as f64;
        let paragraphs = split_newline_runs(py::strip(text), 2);
        let (dups, chars) = find_duplicates(&paragraphs);
        if on(self.dup_para_frac).is_some_and(|t| dups as f64 / paragraphs.len() as f64 > t) {
            return Err("dup_para_frac".into());
        }
        if on(self.dup_para_char_frac).is_some_and(|t| chars as f64 / n_chars > t) {
            return Err("dup_para_char_frac".into());
        }
        let lines = split_newline_runs(text, 1);
        let (dups, chars) = find_duplicates(&lines);
        if on(self.dup_line_frac).is_some_and(|t| dups as f64 / lines.len() as f64 > t) {
            return Err("dup_line_frac".into());
        }
        if on(self.dup_line_char_frac).is_some_and(|t| chars as f64 / n_chars > t) {
            return Err("dup_line_char_frac".into());
        }
        let words: &[&str] = words.get_or_insert_with(|| en_words::words(text));
        if words.is_empty() {
            return Ok(());
        }
        let lens: Vec<usize> = words.iter().map(|w| py::len_fast(w)).collect();
        let mut ngrams = crate::nemo::NGrams::new(words);
        for &(n, frac) in &self.top_n_grams {
            if n == 0 || words.len() < n {
                continue;
            }
            // Counter.most_common(1): the most frequent n-gram, the first seen among ties.
            let level = ngrams.level(n);
            let Some(i) = level.most_frequent() else { continue };
            let best = (i, level.counts[level.classes[i] as usize]);
            let gram_len: usize = lens[best.0..best.0 + n].iter().sum::<usize>() + n - 1;
            if (gram_len * best.1 as usize) as f64 / n_chars > frac {
                return Err(format!("top_{n}_gram"));
            }
        }
        if self.dup_n_grams.is_empty() {
            return Ok(());
        }
        let longest = self.dup_n_grams.iter().map(|&(n, _)| n).max().unwrap_or(0);
        let concat = Concat::new(words, longest);
        let mut seen = crate::nemo::FirstSeen::default();
        for &(n, frac) in &self.dup_n_grams {
            if n == 0 || words.len() < n {
                continue;
            }
            if concat.duplicated_chars(&mut seen, &lens, n) as f64 / n_chars > frac {
                return Err(format!("duplicated_{n}_n_grams"));
            }
        }
        Ok(())
    }
}

/// The words as if back to back (datatrove joins an n-gram's words without separators), with
/// a polynomial hash of the bytes before each word: the n-gram of words `i..i+n` hashes in
/// O(1) from the hashes at `i` and `i+n` and its length in bytes, and is compared exactly,
/// byte stream against byte stream, on a hash match.
struct Concat<'a> {
    words: &'a [&'a str],
    /// bytes before each word (and the total, last)
    off: Vec<usize>,
    /// hash of the bytes before each word (and of all, last)
    prefix: Vec<u64>,
    /// powers of the base, up to the longest n-gram in bytes
    pow: Vec<u64>,
}

const HASH_BASE: u64 = 0x100_0000_01b3;

impl<'a> Concat<'a> {
    /// For n-grams of up to `longest` words.
    fn new(words: &'a [&'a str], longest: usize) -> Concat<'a> {
        let (mut off, mut prefix) = (Vec::with_capacity(words.len() + 1), Vec::with_capacity(words.len() + 1));
        let (mut at, mut h) = (0usize, 0u64);
        for w in words {
            off.push(at);
            prefix.push(h);
            for &b in w.as_bytes() {
                h = h.wrapping_mul(HASH_BASE).wrapping_add(u64::from(b) + 1);
            }
            at += w.len();
        }
        off.push(at);
        prefix.push(h);
        let k = longest.min(words.len());
        let widest = (0..=words.len() - k).map(|i| off[i + k] - off[i]).max().unwrap_or(0);
        let mut pow = Vec::with_capacity(widest + 1);
        pow.push(1u64);
        for _ in 0..widest {
            pow.push(pow[pow.len() - 1].wrapping_mul(HASH_BASE));
        }
        Concat { words, off, prefix, pow }
    }

    /// Whether the n-grams at `i` and `j` are the same bytes when joined.
    fn same(&self, i: usize, j: usize, n: usize) -> bool {
        let (x, y) = (&self.words[i..i + n], &self.words[j..j + n]);
        if x == y {
            return true;
        }
        self.off[i + n] - self.off[i] == self.off[j + n] - self.off[j]
            && x.iter().flat_map(|w| w.bytes()).eq(y.iter().flat_map(|w| w.bytes()))
    }

    /// datatrove's `find_all_duplicate`: characters in n-grams (joined without spaces) seen
    /// before, left to right, skipping past each repeat. `lens`: the words' lengths in
    /// characters.
    fn duplicated_chars(&self, seen: &mut crate::nemo::FirstSeen, lens: &[usize], n: usize) -> usize {
        seen.reset(self.words.len());
        let (mut repeated, mut i) = (0usize, 0usize);
        while i + n <= self.words.len() {
            if self.visit(seen, i, n) {
                repeated += lens[i..i + n].iter().sum::<usize>();
                i += n;
            } else {
                i += 1;
            }
        }
        repeated
    }

    /// Whether the n-gram at `i` was seen before (as bytes); records it if not.
    fn visit(&self, seen: &mut crate::nemo::FirstSeen, i: usize, n: usize) -> bool {
        let len = self.off[i + n] - self.off[i];
        let key = self.prefix[i + n].wrapping_sub(self.prefix[i].wrapping_mul(self.pow[len])) ^ (len as u64).rotate_left(48);
        seen.first_or_insert(key, i as u32, |j| self.same(i, j as usize, n)) != i as u32
    }
}

crate::__datatrove_params!(
    C4Quality,
    __rules_struct(
        /// datatrove's C4QualityFilter (with `split_paragraph=True`, its default: lines are split on
        /// newlines and sentences counted per line).
        C4Quality
    )
);

const POLICY_SUBSTRINGS: [&str; 6] = ["terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"];

fn c4_policy_needles() -> &'static py::Needles {
    static N: std::sync::OnceLock<py::Needles> = std::sync::OnceLock::new();
    N.get_or_init(|| py::Needles::new(&POLICY_SUBSTRINGS))
}

/// Removes Wikipedia-style citations: `[12]`, `[]`, `[edit]`, `[citation needed]`.
fn remove_citations(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('[') {
        return line.into();
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let digits = tail[1..].bytes().take_while(u8::is_ascii_digit).count();
        let skip = if tail[1 + digits..].starts_with(']') {
            digits + 2
        } else if tail.starts_with("[edit]") {
            6
        } else if tail.starts_with("[citation needed]") {
            17
        } else {
            out.push('[');
            1
        };
        rest = &tail[skip..];
    }
    out.push_str(rest);
    out.into()
}

impl C4Quality {
    /// The kept lines joined by newlines, or the reason the whole document is dropped.
    pub fn apply(&self, text: &str) -> Result<String, &'static str> {
        let mut sentences = 0i64;
        let mut kept: Vec<std::borrow::Cow<'_, str>> = Vec::new();
        for line in splitlines(text) {
            let line = py::strip(line);
            let n_words = py::split(line).count() as i64;
            if self.max_word_length != -1 && py::split(line).any(|w| py::len(w) as i64 > self.max_word_length) {
                continue;
            }
            let line = if self.remove_citations { remove_citations(line) } else { line.into() };
            if self.filter_no_terminal_punct && (!line.ends_with(['.', '?', '!', '"', '\'']) || line.ends_with("...")) {
                continue;
            }
            if n_words < self.min_words_per_line {
                continue;
            }
            let lower = line.to_lowercase();
            if self.filter_lorem_ipsum && py::contains(&lower, "lorem ipsum") {
                return Err("lorem_ipsum");
            }
            if self.filter_javascript && py::contains(&lower, "javascript") {
                continue;
            }
            if self.filter_curly_bracket && line.contains('{') {
                return Err("curly_bracket");
            }
            if self.filter_policy && c4_policy_needles().any_in(&lower) {
                continue;
            }
            if self.min_num_sentences != -1 {
                sentences += en_words::sentence_count(&line) as i64;
            }
            kept.push(line);
        }
        if sentences < self.min_num_sentences {
            return Err("too_few_sentences");
        }
        Ok(py::strip(&kept.join("\n")).to_string())
    }
}

crate::__datatrove_params!(
    FineWebQuality,
    __rules_struct(
        /// datatrove's FineWebQualityFilter.
        FineWebQuality
    )
);

impl FineWebQuality {
    /// `Ok(())` keeps the document; `Err(reason)` drops it with datatrove's reason.
    pub fn check(&self, text: &str) -> Result<(), &'static str> {
        self.check_with(text, &mut None)
    }

    /// [`FineWebQuality::check`] with the text's words cached in `words` (filled if empty).
    pub fn check_with<'a>(&self, text: &'a str, words: &mut Option<Vec<&'a str>>) -> Result<(), &'static str> {
        // `text.split('\n')` less blank lines: the empty lines between newlines are blank
        let mut lines = split_newline_runs(text, 1);
        lines.retain(|l| !py::strip(l).is_empty());
        if lines.is_empty() {
            return Err("empty");
        }
        let n = lines.len() as f64;
        let ends_with_stop = |l: &str| match &self.stop_chars {
            None => l.chars().next_back().is_some_and(is_terminal_punctuation),
            Some(stops) => stops.iter().any(|s| l.ends_with(s.as_str())),
        };
        let ratio = lines.iter().filter(|l| ends_with_stop(l)).count() as f64 / n;
        if ratio < self.line_punct_thr && !(ratio == 0.0 && self.line_punct_exclude_zero) {
            return Err("line_punct_ratio");
        }
        let ratio = lines.iter().filter(|l| py::len(l) <= self.short_line_length).count() as f64 / n;
        if ratio > self.short_line_thr {
            return Err("short_line_ratio");
        }
        let non_newline = py::len(text) - count(text, "\n");
        let ratio = find_duplicates(&lines).1 as f64 / non_newline as f64;
        if ratio > self.char_duplicates_ratio {
            return Err("char_dup_ratio");
        }
        let words = words.get_or_insert_with(|| en_words::words(text)).len();
        if count(text, "\n") as f64 / words as f64 > self.new_line_ratio {
            return Err("list_ratio");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn python_splitlines() {
        assert_eq!(splitlines("a\r\nb\rc\n\nd\u{2028}e\n"), ["a", "b", "c", "", "d", "e"]);
        assert!(splitlines("").is_empty());
        // against the definition, char by char, on random strings of separators and look-alikes
        fn reference(text: &str) -> Vec<&str> {
            let (mut out, mut start, mut it) = (Vec::new(), 0, text.char_indices().peekable());
            while let Some((i, c)) = it.next() {
                if matches!(c, '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}') {
                    out.push(&text[start..i]);
                    start = i + c.len_utf8();
                    if c == '\r' && it.peek().is_some_and(|&(_, n)| n == '\n') {
                        it.next();
                        start += 1;
                    }
                }
            }
            if start < text.len() {
                out.push(&text[start..]);
            }
            out
        }
        let alphabet =
            ['a', '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1f', '\u{85}', '\u{84}', '\u{2028}', '\u{2029}', '\u{2027}', '\u{20ac}', 'é'];
        let mut rng = crate::Lcg(7);
        for _ in 0..3000 {
            let t = rng.string(&alphabet, 24);
            assert_eq!(splitlines(&t), reference(&t), "{t:?}");
        }
    }

    #[test]
    fn duplicate_n_grams_compare_joined_bytes() {
        // datatrove's find_all_duplicate, with strings
        fn reference(words: &[&str], n: usize) -> usize {
            let (mut unique, mut repeated, mut i) = (HashSet::new(), 0, 0);
            while i + n <= words.len() {
                let gram = words[i..i + n].concat();
                if unique.contains(&gram) {
                    repeated += gram.chars().count();
                    i += n;
                } else {
                    unique.insert(gram);
                    i += 1;
                }
            }
            repeated
        }
        // few short words: many repeats, and many joins equal across different word boundaries
        let vocab = ["a", "b", "ab", "ba", "aba", "é", "bé"];
        let (mut rng, mut seen) = (crate::Lcg(99), crate::nemo::FirstSeen::default());
        for _ in 0..400 {
            let len = rng.below(40);
            let words: Vec<&str> = (0..len).map(|_| vocab[rng.below(vocab.len())]).collect();
            let lens: Vec<usize> = words.iter().map(|w| w.chars().count()).collect();
            let concat = Concat::new(&words, 6);
            for n in 1..=6.min(words.len()) {
                assert_eq!(concat.duplicated_chars(&mut seen, &lens, n), reference(&words, n), "{words:?} {n}");
            }
        }
        let words = ["ab", "c", "a", "bc"];
        assert_eq!(Concat::new(&words, 2).duplicated_chars(&mut seen, &[2, 1, 1, 2], 2), 3);
    }

    #[test]
    fn defaults_parse_into_their_types() {
        assert_eq!(GopherQuality::default().min_doc_words, Some(50.0));
        assert_eq!(GopherQuality::default().stop_words, ["the", "be", "to", "of", "and", "that", "have", "with"]);
        assert_eq!(GopherRepetition::default().top_n_grams, [(2, 0.2), (3, 0.18), (4, 0.16)]);
        assert_eq!(C4Quality::default().max_word_length, 1000);
        assert_eq!(FineWebQuality::default().stop_chars, None);
        assert_eq!(FineWebQuality::default().short_line_length, 30);
    }

    #[test]
    fn stop_words_are_counted_once() {
        let stop = GopherQuality::default().stop_words;
        let words = ["the", "cat", "the", "of", "dog", "with", "The"];
        assert_eq!(distinct_stop_words(&words, &stop, 10.0), 3);
        assert_eq!(distinct_stop_words(&words, &stop, 2.0), 2); // stops once enough are found
        let dup: Vec<String> = ["a", "a", "b"].iter().map(|s| s.to_string()).collect();
        assert_eq!(distinct_stop_words(&["b", "a", "a"], &dup, 10.0), 2);
        let many: Vec<String> = (0..70).map(|i| format!("w{i}")).collect();
        assert_eq!(distinct_stop_words(&["w1", "w69", "w1", "x"], &many, 10.0), 2);
    }

    #[test]
    fn citations_are_removed() {
        assert_eq!(remove_citations("Fact.[12] More[edit] [citation needed]x [a] []."), "Fact. More x [a] .");
    }

    #[test]
    fn newline_runs() {
        assert_eq!(split_newline_runs("a\n\nb\n\n\nc\nd", 2), ["a", "b", "c\nd"]);
        assert_eq!(split_newline_runs("\na\n", 1), ["", "a", ""]);
    }
}

// ---------------------------------------------------------------------------------------
// A chain of these filters over one document.

/// One of datatrove's filters above, chosen by the name of the stage that runs it alone,
/// with that stage's params.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyFilter {
    GopherRepetition(GopherRepetition),
    GopherQuality(GopherQuality),
    C4Quality(C4Quality),
    FineWebQuality(FineWebQuality),
}

impl AnyFilter {
    pub const NAMES: [&'static str; 4] =
        ["gopher_repetition_filter", "gopher_quality_filter", "c4_quality_filter", "fineweb_quality_filter"];

    /// The filter a stage name stands for, from that stage's params (missing ones take their
    /// defaults; unknown ones are an error).
    pub fn from_params(stage: &str, params: serde_json::Value) -> Result<AnyFilter, String> {
        let e = |e: serde_json::Error| e.to_string();
        match stage {
            "gopher_repetition_filter" => serde_json::from_value(params).map(AnyFilter::GopherRepetition).map_err(e),
            "gopher_quality_filter" => serde_json::from_value(params).map(AnyFilter::GopherQuality).map_err(e),
            "c4_quality_filter" => serde_json::from_value(params).map(AnyFilter::C4Quality).map_err(e),
            "fineweb_quality_filter" => serde_json::from_value(params).map(AnyFilter::FineWebQuality).map_err(e),
            other => Err(format!("unknown filter `{other}` (one of: {})", Self::NAMES.join(", "))),
        }
    }
}

/// Run `filters` in order on one document, as the same stages one after another would: `None`
/// when one drops it, else its text (rewritten by C4QualityFilter). The words are split once
/// and shared by every filter that reads the same text.
pub fn run_chain<'a>(filters: &[AnyFilter], text: &'a str) -> Option<std::borrow::Cow<'a, str>> {
    let mut words: Option<Vec<&'a str>> = None;
    let mut i = 0;
    while i < filters.len() {
        let ok = match &filters[i] {
            AnyFilter::GopherRepetition(f) => f.check_with(text, &mut words).is_ok(),
            AnyFilter::GopherQuality(f) => f.check_with(text, &mut words).is_ok(),
            AnyFilter::FineWebQuality(f) => f.check_with(text, &mut words).is_ok(),
            AnyFilter::C4Quality(f) => match f.apply(text) {
                Err(_) => false,
                Ok(new) if new == text => true,
                // a new text: the rest of the chain runs on it (with its own words)
                Ok(new) => {
                    return run_chain(&filters[i + 1..], &new).map(|t| std::borrow::Cow::Owned(t.into_owned()));
                }
            },
        };
        if !ok {
            return None;
        }
        i += 1;
    }
    Some(std::borrow::Cow::Borrowed(text))
}
