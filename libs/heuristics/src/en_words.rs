//! English words and sentences as datatrove sees them.
//!
//! datatrove (0.10) splits English text with `spacy.blank("en")`: whitespace first, then per
//! chunk spaCy's rule loop — special cases (contractions such as `don't` → `do` `n't`,
//! abbreviations such as `Mr.` kept whole), prefixes (opening punctuation, currency),
//! suffixes (closing punctuation, `'s`, units after numbers, a period after a lower-case
//! letter or two capitals), a URL check, then infixes (hyphens and `/` between letters,
//! `..`, a period between a lower- and an upper-case letter, a comma between letters).
//! This module implements that algorithm with our own rule tables; the parity test
//! (`tests/datatrove_parity.rs`) checks the word counts spaCy produced for every fixture
//! document, and `tests/parity/DISAGREEMENTS.md` lists what differs.
//!
//! Tokens are slices of the input (spaCy's special cases split a chunk, never rewrite it).
//! Whitespace-only tokens are dropped, as datatrove's `strip_strings` does.

use std::sync::OnceLock;

use crate::py::is_py_space;

/// Calls `f` with every word of `text`, in order.
pub fn for_each_word<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let mut buf = Vec::new();
    for chunk in crate::py::split(text) {
        // Letters only (most words): no affix or infix applies; only a special case splits it.
        if chunk.bytes().all(|b| b.is_ascii_alphabetic()) {
            match special(chunk) {
                Some(pieces) => push_special(chunk, pieces, &mut f),
                None => f(chunk),
            }
            continue;
        }
        match plain_and_mark(chunk) {
            Some((a, "")) => f(a),
            Some((a, b)) => {
                f(a);
                f(b);
            }
            None => chunk_tokens(chunk, &mut buf, &mut f),
        }
    }
}

/// Whether `w` is ASCII letters and digits that no rule splits: no unit after a number
/// (`10km` → `10` `km`) and not a special case (`1am`, `8D`).
fn plain(w: &str) -> bool {
    let b = w.as_bytes();
    let n = b.len();
    n > 0
        && b.iter().all(u8::is_ascii_alphanumeric)
        && (n.saturating_sub(4).max(1)..n).all(|k| !(b[k - 1].is_ascii_digit() && UNITS.contains(&&w[k..])))
        && special(w).is_none()
}

/// The commonest chunks after bare words, `2019` `word,` `word.` `(word` and the like (ASCII
/// letters and digits, alone or with one opening or closing mark), split as the rule loop
/// splits them, without running it (the tests check the two agree): the token and the mark
/// (`""` when none), or `None` for any other chunk.
fn plain_and_mark(chunk: &str) -> Option<(&str, &str)> {
    let b = chunk.as_bytes();
    let n = b.len();
    if n < 2 {
        return plain(chunk).then_some((chunk, ""));
    }
    let (word, at) = match (b[0], b[n - 1]) {
        (b'(' | b'"', _) => (&chunk[1..], 1),
        (_, b',' | b';' | b':' | b'!' | b'?' | b')' | b'"') => (&chunk[..n - 1], n - 1),
        // a period splits off after a digit or a lower-case letter (after an upper-case one,
        // it depends)
        (_, b'.') if b[n - 2].is_ascii_lowercase() || b[n - 2].is_ascii_digit() => (&chunk[..n - 1], n - 1),
        _ => return plain(chunk).then_some((chunk, "")),
    };
    if !plain(word) || special(chunk).is_some() {
        return None;
    }
    Some((&chunk[..at], &chunk[at..]))
}

/// The words of `text` (datatrove's `split_into_words(text, "en")`).
pub fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / 5 + 1);
    for_each_word(text, |w| out.push(w));
    out
}

/// How many sentences spaCy's sentencizer finds in `text` (datatrove's
/// `len(split_into_sentences(text, "en"))`): a sentence ends after a sentence-final mark once
/// a token that is neither punctuation nor such a mark follows.
pub fn sentence_count(text: &str) -> usize {
    let mut count = 0;
    let mut seen_final = false;
    let mut any = false;
    for_each_word(text, |w| {
        if !any {
            any = true;
            count = 1;
        }
        let is_final = is_single_terminal(w);
        if seen_final && !is_final && !is_punct(w) {
            count += 1;
            seen_final = false;
        } else if is_final {
            seen_final = true;
        }
    });
    count
}

fn is_single_terminal(w: &str) -> bool {
    let mut cs = w.chars();
    matches!((cs.next(), cs.next()), (Some(c), None) if crate::punctuation::is_terminal_punctuation(c))
}

/// spaCy's `is_punct`: every character is Unicode punctuation (general category P*).
fn is_punct(w: &str) -> bool {
    w.chars().all(is_unicode_punctuation)
}

pub(crate) fn is_unicode_punctuation(c: char) -> bool {
    match c {
        '!'..='#' | '%'..='*' | ','..='/' | ':' | ';' | '?' | '@' | '['..=']' | '_' | '{' | '}' => true,
        '\0'..='\u{7f}' => false,
        '¡' | '§' | '«' | '¶' | '·' | '»' | '¿' | '\u{37e}' | '\u{387}' => true,
        '\u{55a}'..='\u{55f}' | '\u{589}' | '\u{58a}' | '\u{5be}' | '\u{5c0}' | '\u{5c3}' | '\u{5c6}' | '\u{5f3}' | '\u{5f4}' => true,
        '\u{609}' | '\u{60a}' | '\u{60c}' | '\u{60d}' | '\u{61b}' | '\u{61d}'..='\u{61f}' | '\u{66a}'..='\u{66d}' | '\u{6d4}' => true,
        '\u{964}' | '\u{965}' | '\u{970}' | '\u{e4f}' | '\u{e5a}' | '\u{e5b}' | '\u{104a}'..='\u{104f}' | '\u{10fb}' => true,
        '\u{1360}'..='\u{1368}' | '\u{166e}' | '\u{169b}' | '\u{169c}' | '\u{16eb}'..='\u{16ed}' | '\u{17d4}'..='\u{17d6}' => true,
        '\u{17d8}'..='\u{17da}' | '\u{1800}'..='\u{180a}' => true,
        '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{2043}' | '\u{2045}'..='\u{2051}' | '\u{2053}'..='\u{205e}' => true,
        '\u{207d}' | '\u{207e}' | '\u{208d}' | '\u{208e}' | '\u{2308}'..='\u{230b}' | '\u{2329}' | '\u{232a}' => true,
        '\u{2768}'..='\u{2775}' | '\u{27c5}' | '\u{27c6}' | '\u{27e6}'..='\u{27ef}' | '\u{2983}'..='\u{2998}' => true,
        '\u{29d8}'..='\u{29db}' | '\u{29fc}' | '\u{29fd}' | '\u{2cf9}'..='\u{2cfc}' | '\u{2cfe}' | '\u{2cff}' => true,
        '\u{2e00}'..='\u{2e2e}' | '\u{2e30}'..='\u{2e4f}' | '\u{2e52}'..='\u{2e5d}' => true,
        '\u{3001}'..='\u{3003}' | '\u{3008}'..='\u{3011}' | '\u{3014}'..='\u{301f}' | '\u{3030}' | '\u{303d}' | '\u{30a0}' | '\u{30fb}' => {
            true
        }
        '\u{fe10}'..='\u{fe19}' | '\u{fe30}'..='\u{fe52}' | '\u{fe54}'..='\u{fe61}' | '\u{fe63}' | '\u{fe68}' | '\u{fe6a}' | '\u{fe6b}' => {
            true
        }
        '\u{ff01}'..='\u{ff03}' | '\u{ff05}'..='\u{ff0a}' | '\u{ff0c}'..='\u{ff0f}' | '\u{ff1a}' | '\u{ff1b}' | '\u{ff1f}' | '\u{ff20}' => {
            true
        }
        '\u{ff3b}'..='\u{ff3d}' | '\u{ff3f}' | '\u{ff5b}' | '\u{ff5d}' | '\u{ff5f}'..='\u{ff65}' => true,
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Character classes

/// Quotes and brackets (spaCy's `CONCAT_QUOTES` plus brackets): prefixes and suffixes.
fn is_quote(c: char) -> bool {
    matches!(
        c,
        '\'' | '"'
            | '”'
            | '“'
            | '`'
            | '‘'
            | '´'
            | '’'
            | '‚'
            | ','
            | '„'
            | '»'
            | '«'
            | '「'
            | '」'
            | '『'
            | '』'
            | '（'
            | '）'
            | '〔'
            | '〕'
            | '【'
            | '】'
            | '《'
            | '》'
            | '〈'
            | '〉'
            | '\u{2329}'
            | '\u{232a}'
            | '⟦'
            | '⟧'
    )
}
/// Punctuation split off either end of a chunk.
fn is_punct_affix(c: char) -> bool {
    matches!(
        c,
        '…' | ','
            | ':'
            | ';'
            | '!'
            | '?'
            | '¿'
            | '؟'
            | '¡'
            | '('
            | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | '<'
            | '>'
            | '_'
            | '#'
            | '*'
            | '&'
            | '。'
            | '？'
            | '！'
            | '，'
            | '、'
            | '；'
            | '：'
            | '～'
            | '·'
            | '।'
            | '،'
            | '۔'
            | '؛'
            | '٪'
    )
}
/// Currency signs: prefixes, and suffixes after a digit.
fn is_currency(c: char) -> bool {
    matches!(c, '$' | '£' | '€' | '¥' | '฿' | '₽' | '﷼' | '₴' | '₠'..='₳' | '₵'..='₼' | '₾' | '₿')
}
/// Units split off after a number (`10km` → `10` `km`), longest first where one is a prefix
/// of another.
const UNITS: &[&str] = &[
    "km²", "km³", "km/h", "kmh", "km", "m²", "m³", "m/s", "mbar", "mph", "mb", "mg", "mm²", "mm³", "mm", "m", "dm²", "dm³", "dm", "cm²",
    "cm³", "cm", "ha", "hPa", "µm", "µg", "nm", "yd", "in", "ft", "kg", "kb", "KB", "g", "gb", "GB", "t", "tb", "TB", "lb", "oz", "Pa",
    "MB", "T", "G", "M", "K", "%", "км", "м", "см", "мм", "кг", "г",
];

fn is_icon(c: char) -> bool {
    matches!(c, '¦' | '©' | '®' | '°' | '\u{2100}'..='\u{214f}' | '\u{2190}'..='\u{21ff}' | '\u{2300}'..='\u{23ff}' | '\u{2500}'..='\u{27bf}' | '\u{2b00}'..='\u{2bff}' | '\u{1f000}'..='\u{1faff}')
        && c != '\u{2122}'
}

fn is_alpha(c: char) -> bool {
    c.is_alphabetic()
}
/// spaCy's ALPHA_LOWER: lower-case letters and letters of scripts without case.
fn is_alpha_lower(c: char) -> bool {
    c.is_lowercase() || (c.is_alphabetic() && !c.is_uppercase())
}
/// spaCy's ALPHA_UPPER: upper-case letters and letters of scripts without case.
fn is_alpha_upper(c: char) -> bool {
    c.is_uppercase() || (c.is_alphabetic() && !c.is_lowercase())
}

fn first(s: &str) -> Option<char> {
    s.chars().next()
}
fn last(s: &str) -> Option<char> {
    s.chars().next_back()
}

// ---------------------------------------------------------------------------------------------
// Affixes

/// Length in bytes of the prefix to split off `s`, 0 if none.
fn prefix_len(s: &str) -> usize {
    for cur in ["US$", "C$", "A$"] {
        if s.starts_with(cur) {
            return cur.len();
        }
    }
    let dots = s.bytes().take_while(|&b| b == b'.').count();
    if dots >= 2 {
        return dots;
    }
    let Some(c) = first(s) else { return 0 };
    let single = match c {
        '+' => !s[1..].starts_with(|d: char| d.is_ascii_digit()),
        '§' | '%' | '=' | '—' | '–' => true,
        _ => is_punct_affix(c) || is_quote(c) || is_currency(c) || is_icon(c),
    };
    if single { c.len_utf8() } else { 0 }
}

/// Whether `suffix` (a whole-string candidate) matches one of spaCy's suffix patterns, given
/// the text before it.
fn is_suffix(before: &str, suffix: &str) -> bool {
    let prev = last(before);
    let prev_digit = prev.is_some_and(|p| p.is_ascii_digit());
    if suffix.len() >= 2 && suffix.bytes().all(|b| b == b'.') {
        return true;
    }
    if matches!(suffix, "'s" | "'S" | "’s" | "’S") {
        return true;
    }
    if prev_digit && (UNITS.contains(&suffix) || matches!(suffix, "US$" | "C$" | "A$")) {
        return true;
    }
    let mut cs = suffix.chars();
    let (Some(c), None) = (cs.next(), cs.next()) else { return false };
    match c {
        '.' => {
            let Some(p) = prev else { return false };
            if p.is_ascii_digit() || is_alpha_lower(p) || matches!(p, '%' | '²' | '-' | '+' | '|') || is_punct_affix(p) || is_quote(p) {
                return true;
            }
            let mut back = before.chars().rev();
            let (p1, p2) = (back.next(), back.next());
            if matches!((p2, p1), (Some('°'), Some('F' | 'f' | 'C' | 'c' | 'K' | 'k'))) {
                return true;
            }
            matches!((p2, p1), (Some(a), Some(b)) if is_alpha_upper(a) && is_alpha_upper(b))
        }
        '+' => prev_digit,
        '—' | '–' => true,
        _ if is_currency(c) => prev_digit,
        _ => is_punct_affix(c) || is_quote(c) || is_icon(c),
    }
}

/// Length in bytes of the suffix to split off `s`: the match that starts leftmost.
fn suffix_len(s: &str) -> usize {
    // Every suffix pattern is at most 4 characters long except a run of dots.
    let dots = s.bytes().rev().take_while(|&b| b == b'.').count();
    if dots >= 2 && dots < s.len() {
        return dots;
    }
    let mut starts = [0usize; 4];
    let mut n = 0;
    for (i, _) in s.char_indices().rev().take(4) {
        starts[n] = i;
        n += 1;
    }
    for &i in starts[..n].iter().rev() {
        if is_suffix(&s[..i], &s[i..]) {
            return s.len() - i;
        }
    }
    0
}

/// spaCy's infix matches in `s`, as byte ranges, leftmost first and not overlapping.
fn infixes(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    // (a `match`, not `b"...".contains`: that is a `memchr` call per byte on wasm32)
    if s.is_ascii() && !s.bytes().any(|b| matches!(b, b'.' | b',' | b'-' | b'~' | b':' | b'<' | b'>' | b'=' | b'/' | b'+' | b'*' | b'^')) {
        return out;
    }
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let end_of = |k: usize| chars.get(k).map_or(s.len(), |&(i, _)| i);
    let mut k = 0;
    while k < chars.len() {
        let (i, c) = chars[k];
        let prev = k.checked_sub(1).map(|j| chars[j].1);
        let next = chars.get(k + 1).map(|&(_, n)| n);
        let mut width = 0; // in chars
        if c == '.' && next == Some('.') {
            width = chars[k..].iter().take_while(|&&(_, d)| d == '.').count();
        } else if c == '…'
            || is_icon(c)
            || (prev.is_some_and(|p| p.is_ascii_digit())
                && matches!(c, '+' | '-' | '*' | '^')
                && next.is_some_and(|n| n.is_ascii_digit() || n == '-'))
            || (c == '.'
                && prev.is_some_and(|p| is_alpha_lower(p) || is_quote(p))
                && next.is_some_and(|n| is_alpha_upper(n) || is_quote(n)))
            || (c == ',' && prev.is_some_and(is_alpha) && next.is_some_and(is_alpha))
        {
            width = 1;
        } else if prev.is_some_and(|p| is_alpha(p) || p.is_ascii_digit()) {
            // Hyphens (`-|–|—|--|---|——|~`, first alternative that fits) and `:<>=/`, each
            // followed by a letter.
            let after = |w: usize| chars.get(k + w).is_some_and(|&(_, n)| is_alpha(n));
            let run = |d: char, n: usize| chars[k..].iter().take(n).filter(|&&(_, x)| x == d).count() == n;
            for (d, n) in [('-', 1), ('–', 1), ('—', 1), ('-', 2), ('-', 3), ('—', 2), ('~', 1)] {
                if run(d, n) && after(n) {
                    width = n;
                    break;
                }
            }
            if width == 0 && matches!(c, ':' | '<' | '>' | '=' | '/') && after(1) {
                width = 1;
            }
        }
        if width > 0 {
            out.push((i, end_of(k + width)));
            k += width;
        } else {
            k += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// URLs

/// spaCy's `url_match` (host names with a lower-case top-level domain, optional scheme, user,
/// port and path; bare IP addresses are not URLs to it, nor to us).
fn is_url(s: &str) -> bool {
    if !s.contains('.') {
        return false; // every host name has a dot
    }
    let mut rest = s;
    if let Some(i) = rest.find("://") {
        let scheme = &rest[..i];
        if scheme.chars().count() >= 2 && scheme.chars().all(|c| c.is_alphanumeric() || "_+-.".contains(c)) {
            rest = &rest[i + 3..];
        }
    }
    if host_port_path(rest) {
        return true;
    }
    // `user@` or `user:password@` before the host: any '@' that leaves a valid rest.
    rest.match_indices('@').any(|(i, _)| i > 0 && !rest[..i].contains(is_py_space) && host_port_path(&rest[i + 1..]))
}

fn is_host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || ('\u{a1}'..='\u{ffff}').contains(&c)
}

fn host_port_path(s: &str) -> bool {
    let host_end = s.find(|c: char| !(is_host_char(c) || c == '_' || c == '-' || c == '.')).unwrap_or(s.len());
    let (host, mut rest) = s.split_at(host_end);
    let Some((labels, tld)) = host.rsplit_once('.') else { return false };
    let tld_len = tld.chars().count();
    if !(2..=63).contains(&tld_len) || !tld.chars().all(|c| c.is_lowercase()) {
        return false;
    }
    let label_ok = |l: &str| {
        let n = l.chars().count();
        (1..=64).contains(&n) && first(l).is_some_and(is_host_char) && last(l).is_some_and(is_host_char)
    };
    if !labels.split('.').all(label_ok) {
        return false;
    }
    if let Some(port) = rest.strip_prefix(':') {
        let digits = port.bytes().take_while(u8::is_ascii_digit).count();
        if !(2..=5).contains(&digits) {
            return false;
        }
        rest = &port[digits..];
    }
    rest.is_empty() || (rest.starts_with(['/', '?', '#']) && !rest.contains(is_py_space))
}

// ---------------------------------------------------------------------------------------------
// Special cases

/// Special cases: a chunk → the byte lengths of its pieces (one piece: kept whole).
/// Special cases by [`pack`]ed text: their pieces' byte lengths; and a quick filter: bit
/// `last byte % 64` of `quick[first byte][length]` is set for every special case.
struct Specials {
    table: crate::nemo::FxMap<(u128, u8), Vec<usize>>,
    quick: Vec<[u64; LONGEST_SPECIAL + 1]>,
}

fn specials() -> &'static Specials {
    static TABLE: OnceLock<Specials> = OnceLock::new();
    TABLE.get_or_init(|| {
        let table = build_specials();
        let mut quick = vec![[0u64; LONGEST_SPECIAL + 1]; 256];
        for (k, pieces) in &table {
            let len = pieces.iter().sum::<usize>();
            let b = k.0.to_le_bytes();
            quick[b[0] as usize][len] |= 1 << (b[len - 1] % 64);
        }
        Specials { table, quick }
    })
}

/// The longest special case, in bytes: longer chunks need no lookup.
const LONGEST_SPECIAL: usize = 16;

/// A text of at most [`LONGEST_SPECIAL`] bytes as a map key: its bytes and length.
fn pack(s: &str) -> (u128, u8) {
    let mut b = [0u8; 16];
    b[..s.len()].copy_from_slice(s.as_bytes());
    (u128::from_le_bytes(b), s.len() as u8)
}

fn build_specials() -> crate::nemo::FxMap<(u128, u8), Vec<usize>> {
    let mut entries: Vec<Vec<String>> = Vec::new();
    let mut add = |pieces: &[&str]| entries.push(pieces.iter().map(|p| p.to_string()).collect());

    // Pronoun (and wh-word) contractions: which clitics each takes.
    let subjects: &[(&str, &[&str])] = &[
        ("i", &["'d", "'ll", "'m", "'ve", "'d've", "'ll've", "'ma"]),
        ("you", &["'d", "'ll", "'re", "'ve", "'d've", "'ll've"]),
        ("we", &["'d", "'ll", "'re", "'ve", "'d've", "'ll've"]),
        ("they", &["'d", "'ll", "'re", "'ve", "'d've", "'ll've"]),
        ("these", &["'d", "'ll", "'re", "'ve", "'d've", "'ll've"]),
        ("those", &["'d", "'ll", "'re", "'ve", "'d've", "'ll've"]),
        ("he", &["'d", "'ll", "'s", "'d've", "'ll've"]),
        ("she", &["'d", "'ll", "'s", "'d've", "'ll've"]),
        ("it", &["'d", "'ll", "'s", "'d've", "'ll've"]),
        ("that", &["'d", "'ll", "'s", "'d've", "'ll've"]),
        ("this", &["'d", "'ll", "'s", "'d've", "'ll've"]),
        ("there", &["'d", "'ll", "'re", "'s", "'ve", "'d've", "'ll've"]),
        ("what", &["'d", "'ll", "'re", "'s", "'ve", "'d've", "'ll've"]),
        ("when", &["'d", "'ll", "'re", "'s", "'ve", "'d've", "'ll've"]),
        ("where", &["'d", "'ll", "'re", "'s", "'ve", "'d've", "'ll've"]),
        ("who", &["'d", "'ll", "'re", "'s", "'ve", "'d've", "'ll've"]),
        ("why", &["'d", "'ll", "'re", "'s", "'ve", "'d've", "'ll've"]),
        ("how", &["'d", "'ll", "'re", "'s", "'ve", "'d've", "'ll've", "'d'y"]),
        ("let", &["'s"]),
        ("could", &["'ve"]),
        ("might", &["'ve"]),
        ("must", &["'ve"]),
        ("should", &["'ve"]),
        ("would", &["'ve"]),
        ("not", &["'ve"]),
    ];
    // Spelt without the apostrophe these are ordinary words: not split.
    const REAL_WORDS: &[&str] = &["hell", "shell", "well", "ill", "shed", "its", "lets", "were", "whore"];
    for (subject, clitics) in subjects {
        for clitic in *clitics {
            // "'d've" → "'d" "'ve"
            let pieces: Vec<String> = clitic.split('\'').filter(|p| !p.is_empty()).map(|p| format!("'{p}")).collect();
            let plain: Vec<&str> = pieces.iter().map(|p| &p[1..]).collect();
            let mut with: Vec<&str> = vec![subject];
            with.extend(pieces.iter().map(String::as_str));
            add(&with);
            if !REAL_WORDS.contains(&format!("{subject}{}", plain.concat()).as_str()) {
                let mut without: Vec<&str> = vec![subject];
                without.extend(plain);
                add(&without);
            }
        }
    }
    // Negations: the stem before "n't" as spaCy splits it.
    for stem in [
        "ai", "are", "ca", "could", "dare", "did", "does", "do", "had", "has", "have", "is", "may", "might", "must", "need", "ought",
        "sha", "should", "was", "were", "wo", "would",
    ] {
        add(&[stem, "n't"]);
        add(&[stem, "nt"]);
        add(&[stem, "n't", "'ve"]);
        add(&[stem, "nt", "ve"]);
    }
    for pieces in [&["can", "not"][..], &["gon", "na"], &["got", "ta"], &["c'm", "on"], &["y'", "all"], &["y", "all"]] {
        add(pieces);
    }
    for hour in 1..=12 {
        let h = hour.to_string();
        for m in ["am", "pm", "a.m.", "p.m."] {
            add(&[&h, m]);
        }
    }
    let singles = "'s 'S 'cause 'cos 'coz 'cuz 'Cause 'Cos 'Coz 'Cuz 'bout 'em 'nuff 'd 'll 're '' ' and/or \
        a.m. p.m. e.g. i.e. vs. v.s. co. Co. Corp. Inc. Ltd. Bros. Messrs. Mr. Mrs. Ms. Dr. St. Jr. Prof. Rev. Gen. Gov. Sen. Rep. Adm. Mt. \
        Ph.D. D.C. E.g. E.G. I.e. I.E. Jan. Feb. Mar. Apr. Jun. Jul. Aug. Sep. Sept. Oct. Nov. Dec. \
        Ak. Ala. Ariz. Ark. Calif. Colo. Conn. Del. Fla. Ga. Ia. Id. Ill. Ind. Kan. Kans. Ky. La. Md. Mass. Mich. Minn. Miss. Mo. Mont. \
        Neb. Nebr. Nev. N.C. N.D. N.H. N.J. N.M. N.Y. Okla. Ore. Pa. S.C. Tenn. Va. Wash. Wis. ä. ö. ü. °C. °F. °K. °c. °f. °k. \
        :) :( :-) :-( ;) ;-) :D :-D :P :p :-P <3 </3 =) =( (: ): :/ :'( :') xD XD C++ -_- ^_^ o.O O.o o.o 0.0 \
        8) 8-) 8D 8-D :3 :> :-> :o :O :-O :x :X :-X ;D ;-D =D =3 :] :-] [: [-: :| :-| =| :)) :(( ^__^ (^_^) o_o O_O o_O O_o v_v V_V ._. -__- <33";
    for s in singles.split(' ').filter(|s| !s.is_empty()) {
        add(&[s]);
    }
    for c in 'a'..='z' {
        add(&[&format!("{c}.")]);
    }

    let mut table = crate::nemo::FxMap::default();
    for pieces in entries {
        let mut variants = vec![pieces.clone()];
        // Title case ("Don't", "I'm"), for entries that start with a lower-case letter.
        if pieces.len() > 1 && first(&pieces[0]).is_some_and(|c| c.is_ascii_lowercase()) {
            let mut t = pieces.clone();
            let mut cs = t[0].chars();
            let head = cs.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(cs).collect();
            t[0] = head;
            variants.push(t);
        }
        let curly: Vec<Vec<String>> = variants
            .iter()
            .filter(|v| v.iter().any(|p| p.contains('\'')))
            .map(|v| v.iter().map(|p| p.replace('\'', "’")).collect())
            .collect();
        variants.extend(curly);
        for v in variants {
            let key = v.concat();
            assert!(key.len() <= LONGEST_SPECIAL, "special case {key:?} is longer than {LONGEST_SPECIAL} bytes");
            table.entry(pack(&key)).or_insert_with(|| v.iter().map(String::len).collect());
        }
    }
    table
}

fn special(s: &str) -> Option<&'static [usize]> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > LONGEST_SPECIAL {
        return None;
    }
    let sp = specials();
    if sp.quick[b[0] as usize][b.len()] & (1 << (b[b.len() - 1] % 64)) == 0 {
        return None;
    }
    sp.table.get(&pack(s)).map(Vec::as_slice)
}

fn push_special<'a>(s: &'a str, pieces: &[usize], f: &mut impl FnMut(&'a str)) {
    let mut at = 0;
    for &len in pieces {
        f(&s[at..at + len]);
        at += len;
    }
}

// ---------------------------------------------------------------------------------------------
// The rule loop

/// A few affixes without a heap allocation (more spill to a `Vec`).
#[derive(Default)]
struct Stack<'a> {
    inline: [&'a str; 4],
    n: usize,
    spill: Vec<&'a str>,
}

impl<'a> Stack<'a> {
    fn push(&mut self, s: &'a str) {
        if self.n < self.inline.len() {
            self.inline[self.n] = s;
            self.n += 1;
        } else {
            self.spill.push(s);
        }
    }
    fn iter(&self) -> impl DoubleEndedIterator<Item = &'a str> + '_ {
        self.inline[..self.n].iter().copied().chain(self.spill.iter().copied())
    }
}

/// One whitespace-free chunk: the rule loop, then spaCy's special-case pass, which merges
/// tokens that together spell a special case containing punctuation (`(see):` gives `):`).
fn chunk_tokens<'a>(chunk: &'a str, tokens: &mut Vec<&'a str>, f: &mut impl FnMut(&'a str)) {
    tokens.clear();
    split_chunk(chunk, &mut |t| tokens.push(t));
    if tokens.len() < 2 {
        tokens.iter().for_each(|t| f(t));
        return;
    }
    let base = chunk.as_ptr() as usize;
    let start = |t: &str| t.as_ptr() as usize - base;
    let mut i = 0;
    'next: while i < tokens.len() {
        for j in (i + 2..=tokens.len().min(i + 5)).rev() {
            let span = &chunk[start(tokens[i])..start(tokens[j - 1]) + tokens[j - 1].len()];
            if let Some(pieces) = special(span) {
                push_special(span, pieces, f);
                i = j;
                continue 'next;
            }
        }
        f(tokens[i]);
        i += 1;
    }
}

fn split_chunk<'a>(chunk: &'a str, f: &mut impl FnMut(&'a str)) {
    if let Some(pieces) = special(chunk) {
        push_special(chunk, pieces, f);
        return;
    }
    let mut prefixes = Stack::default();
    let mut suffixes = Stack::default();
    let mut s = chunk;
    let mut last_size = usize::MAX;
    while !s.is_empty() && s.len() != last_size {
        if special(s).is_some() {
            break;
        }
        last_size = s.len();
        let pre = prefix_len(s);
        if pre > 0 {
            let minus_pre = &s[pre..];
            if !minus_pre.is_empty() && special(minus_pre).is_some() {
                prefixes.push(&s[..pre]);
                s = minus_pre;
                break;
            }
        }
        let suf = suffix_len(&s[pre..]);
        if suf > 0 {
            let minus_suf = &s[..s.len() - suf];
            if !minus_suf.is_empty() && special(minus_suf).is_some() {
                suffixes.push(&s[s.len() - suf..]);
                s = minus_suf;
                break;
            }
        }
        if pre > 0 && suf > 0 && pre + suf <= s.len() {
            prefixes.push(&s[..pre]);
            suffixes.push(&s[s.len() - suf..]);
            s = &s[pre..s.len() - suf];
        } else if pre > 0 {
            prefixes.push(&s[..pre]);
            s = &s[pre..];
        } else if suf > 0 {
            suffixes.push(&s[s.len() - suf..]);
            s = &s[..s.len() - suf];
        }
        if special(s).is_some() {
            break;
        }
    }
    for p in prefixes.iter() {
        f(p);
    }
    if !s.is_empty() {
        if let Some(pieces) = special(s) {
            push_special(s, pieces, f);
        } else if is_url(s) {
            f(s);
        } else {
            let mut start = 0;
            for (a, b) in infixes(s) {
                if a == 0 {
                    continue;
                }
                if a != start {
                    f(&s[start..a]);
                }
                f(&s[a..b]);
                start = b;
            }
            if start < s.len() {
                f(&s[start..]);
            }
        }
    }
    for x in suffixes.iter().rev() {
        f(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, want: &[&str]) {
        assert_eq!(words(text), want, "{text:?}");
    }

    #[test]
    fn splits_like_spacy_english() {
        check(
            "Hello, world! I don't know (really) e.g. U.S. http://x.com/a?b=1 well-known 3.5% $10 it's 10km ...and so-on—yes 1,000 a/b \"quoted.\" end...",
            &[
                "Hello",
                ",",
                "world",
                "!",
                "I",
                "do",
                "n't",
                "know",
                "(",
                "really",
                ")",
                "e.g.",
                "U.S.",
                "http://x.com/a?b=1",
                "well",
                "-",
                "known",
                "3.5",
                "%",
                "$",
                "10",
                "it",
                "'s",
                "10",
                "km",
                "...",
                "and",
                "so",
                "-",
                "on",
                "—",
                "yes",
                "1,000",
                "a",
                "/",
                "b",
                "\"",
                "quoted",
                ".",
                "\"",
                "end",
                "...",
            ],
        );
        check("Mr. Smith's car, can't.", &["Mr.", "Smith", "'s", "car", ",", "ca", "n't", "."]);
        check("We’re here.Then A. B.", &["We", "’re", "here", ".", "Then", "A.", "B."]);
        check("a\n\n  b\tc", &["a", "b", "c"]);
        check("example.com. user@mail.org!", &["example.com", ".", "user@mail.org", "!"]);
    }

    #[test]
    fn plain_chunks_split_as_the_rule_loop_does() {
        let stems = [
            "2019", "10km", "10kmh", "3G", "5MB", "1am", "12pm", "8D", "mp3", "h264", "x86", "42nd", "10in", "7t", "0", "99g", "word", "a",
            "I", "U", "US", "id", "im", "Im", "dont", "cannot", "gonna", "Mr", "Mrs", "vs", "co", "Co", "Inc", "e", "xD", "D", "hell",
            "ill", "its", "lets", "am", "pm", "B", "x", "ABC", "aB", "em", "s", "cause", "nt", "ve", "ll",
        ];
        let marks = ['(', '"', ',', ';', ':', '!', '?', ')', '.', '\'', '[', '-', '/', '$', '%'];
        let mut chunks = Vec::new();
        for w in stems {
            for m in marks {
                chunks.push(format!("{m}{w}"));
                chunks.push(format!("{w}{m}"));
            }
        }
        for m in marks {
            for n in marks {
                chunks.push(format!("{m}{n}"));
            }
        }
        chunks.extend(stems.iter().map(|w| w.to_string()));
        let mut hits = 0;
        for c in &chunks {
            let Some((a, b)) = plain_and_mark(c) else { continue };
            hits += 1;
            let mut want = Vec::new();
            chunk_tokens(c, &mut Vec::new(), &mut |t| want.push(t));
            let got: Vec<&str> = [a, b].into_iter().filter(|t| !t.is_empty()).collect();
            assert_eq!(got, want, "{c:?}");
        }
        assert!(hits > 350, "{hits}");
        assert_eq!(plain_and_mark("Mr."), None);
        assert_eq!(plain_and_mark("dont,"), None);
        assert_eq!(plain_and_mark("10km"), None);
        assert_eq!(plain_and_mark("1am"), None);
        assert_eq!(plain_and_mark("2019"), Some(("2019", "")));
        assert_eq!(plain_and_mark("end."), Some(("end", ".")));
    }

    #[test]
    fn shortcuts_agree_with_the_rule_loop_on_real_text() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
        let mut checked = 0;
        for file in ["tests/parity/fixture.jsonl", "examples/quickstart/data/docs-000.jsonl"] {
            let data = std::fs::read_to_string(format!("{root}{file}")).unwrap();
            for line in data.lines() {
                let doc: serde_json::Value = serde_json::from_str(line).unwrap();
                for chunk in crate::py::split(doc["text"].as_str().unwrap()) {
                    let Some((a, b)) = plain_and_mark(chunk) else { continue };
                    let mut want = Vec::new();
                    chunk_tokens(chunk, &mut Vec::new(), &mut |t| want.push(t));
                    let got: Vec<&str> = [a, b].into_iter().filter(|t| !t.is_empty()).collect();
                    assert_eq!(got, want, "{chunk:?} in {file}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn special_cases_are_found_by_their_text() {
        assert!(specials().table.len() > 900);
        // every special case gets through the quick filter
        for (key, pieces) in &specials().table {
            let bytes = key.0.to_le_bytes();
            let text = std::str::from_utf8(&bytes[..key.1 as usize]).unwrap();
            assert_eq!(special(text), Some(pieces.as_slice()), "{text:?}");
        }
        assert_eq!(special("don't"), Some(&[2, 3][..]));
        assert_eq!(special("Mr."), Some(&[3][..]));
        assert_eq!(special("Mr"), None);
    }

    #[test]
    fn sentences_end_at_final_marks() {
        assert_eq!(sentence_count("One here. Two there! Three?"), 3);
        assert_eq!(sentence_count("Ends with dots... and goes on."), 1);
        assert_eq!(sentence_count("Quote.\" Next one."), 2);
        assert_eq!(sentence_count(""), 0);
    }
}
