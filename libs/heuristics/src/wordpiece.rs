//! BERT-family WordPiece, id-exact with Hugging Face `tokenizers` and about an order of
//! magnitude faster on one core.
//!
//! What `tokenizers` does for a `tokenizer.json` with a `BertNormalizer`, the
//! `BertPreTokenizer`, a `WordPiece` model and a BERT-style post-processor, step by step:
//! added tokens (`[CLS]`, `[SEP]`, … written in the text) are matched in the raw text first
//! (leftmost-longest); the rest is normalized (control characters deleted, whitespace made a
//! space, CJK ideographs spaced, NFD and non-spacing marks removed when accents are stripped,
//! lowercased character by character), split on whitespace and around every punctuation
//! character, and each word becomes its greedy longest-match pieces (a word over
//! `max_input_chars_per_word` characters, or one with an unmatched rest, is one `[UNK]`).
//! The Unicode tables are the ones `tokenizers` uses (`unicode_categories`,
//! `unicode-normalization-alignments`), so the two agree on every character.
//!
//! Where the speed comes from:
//! - text is cut into chunks at ASCII whitespace; every ASCII byte is a Unicode starter and
//!   every normalization step is per character, so a chunk normalizes on its own. An all-ASCII
//!   chunk goes through a 128-entry table **derived from the exact path at load**; only chunks
//!   holding non-ASCII characters take the exact Unicode path;
//! - ids go into the caller's buffer; words are built in a reused buffer; nothing is allocated
//!   per token;
//! - a word found whole in the vocabulary costs one lookup; other words are cached per
//!   [`Scratch`] (keyed by the word's bytes);
//! - the vocabulary is two maps, word-initial pieces and continuing pieces stored without
//!   their `##`, so no lookup builds a string;
//! - tokenizing stops once a truncated sequence is full.
//!
//! A `tokenizer.json` outside this family is refused with [`Unsupported`]: callers then use
//! `tokenizers` itself.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use curator_sdk::serde_json::Value;
use rustc_hash::FxHashMap;
use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

/// Why a `tokenizer.json` is not one this module reproduces exactly.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Unsupported {
    #[error("tokenizer.json is not valid JSON: {0}")]
    Json(String),
    #[error("{0}")]
    Shape(String),
}

fn shape(what: impl Into<String>) -> Unsupported {
    Unsupported::Shape(what.into())
}

/// `BertNormalizer`'s settings (`strip_accents` resolved: `null` follows `lowercase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Normalizer {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    pub strip_accents: bool,
    pub lowercase: bool,
}

/// What one ASCII byte becomes after normalization and pre-tokenization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ascii {
    /// Deleted (a control character under `clean_text`).
    Drop,
    /// A word boundary.
    Space,
    /// A word of its own (the byte after normalization).
    Punct(u8),
    /// Part of a word (the byte after normalization).
    Word(u8),
    /// Anything else: the chunk takes the exact path.
    Slow,
}

/// A loaded WordPiece tokenizer.
pub struct WordPiece {
    /// Word-initial pieces.
    start: FxHashMap<Box<[u8]>, u32>,
    /// Continuing pieces, keyed without their prefix (`##`).
    cont: FxHashMap<Box<[u8]>, u32>,
    longest_start: usize,
    longest_cont: usize,
    unk: u32,
    max_chars: usize,
    norm: Normalizer,
    ascii: [Ascii; 128],
    /// Added tokens matched in the raw text, and their ids.
    added: Option<(AhoCorasick, Vec<u32>)>,
    /// Special tokens the post-processor puts before and after the sequence.
    before: Vec<u32>,
    after: Vec<u32>,
}

/// Per-thread buffers and the word cache; reuse one across calls.
#[derive(Default)]
pub struct Scratch {
    word: Vec<u8>,
    cleaned: String,
    normalized: String,
    /// Word bytes → a range of `pieces`.
    cache: FxHashMap<Box<[u8]>, (u32, u32)>,
    pieces: Vec<u32>,
}

/// Entries after which a [`Scratch`]'s word cache starts over.
const CACHE_WORDS: usize = 1 << 16;

/// Where ids go: the caller's vector, up to a length.
struct Sink<'a> {
    out: &'a mut Vec<u32>,
    cap: usize,
}

impl Sink<'_> {
    #[inline]
    fn full(&self) -> bool {
        self.out.len() >= self.cap
    }
    #[inline]
    fn push(&mut self, id: u32) {
        if self.out.len() < self.cap {
            self.out.push(id);
        }
    }
    fn extend(&mut self, ids: &[u32]) {
        let room = self.cap.saturating_sub(self.out.len());
        self.out.extend_from_slice(&ids[..ids.len().min(room)]);
    }
}

/// `tokenizers`' BERT whitespace: `\t`, `\n`, `\r` and Unicode White_Space.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// `tokenizers`' BERT control characters: categories Cc, Cf and Co, except `\t\n\r`.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// The CJK ideograph ranges `tokenizers` spaces out (its own list, not Google BERT's).
fn is_chinese(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// BertPreTokenizer's punctuation: ASCII punctuation (symbols included) or Unicode P*.
fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// The first byte of a UTF-8 character (not a continuation byte).
#[inline]
fn is_char_start(b: u8) -> bool {
    (b as i8) >= -0x40
}

impl Normalizer {
    /// The exact `BertNormalizer` on `text` into `out` (`tmp` is scratch).
    pub fn normalize(&self, text: &str, tmp: &mut String, out: &mut String) {
        tmp.clear();
        for c in text.chars() {
            if self.clean_text {
                if c == '\0' || c == '\u{fffd}' || is_control(c) {
                    continue;
                }
                if is_whitespace(c) {
                    tmp.push(' ');
                    continue;
                }
            }
            if self.handle_chinese_chars && is_chinese(c) {
                tmp.push(' ');
                tmp.push(c);
                tmp.push(' ');
            } else {
                tmp.push(c);
            }
        }
        out.clear();
        let mut push = |c: char| {
            if self.lowercase {
                out.extend(c.to_lowercase());
            } else {
                out.push(c);
            }
        };
        if self.strip_accents {
            tmp.as_str().nfd().map(|(c, _)| c).filter(|c| !c.is_mark_nonspacing()).for_each(&mut push);
        } else {
            tmp.chars().for_each(push);
        }
    }

    /// What each ASCII byte becomes, from [`Normalizer::normalize`] itself.
    fn ascii_table(&self) -> [Ascii; 128] {
        let mut table = [Ascii::Slow; 128];
        let (mut tmp, mut out) = (String::new(), String::new());
        for (b, slot) in table.iter_mut().enumerate() {
            self.normalize(&(b as u8 as char).to_string(), &mut tmp, &mut out);
            let mut chars = out.chars();
            *slot = match (chars.next(), chars.next()) {
                (None, _) => Ascii::Drop,
                (Some(c), None) if c.is_ascii() => {
                    if c.is_whitespace() {
                        Ascii::Space
                    } else if is_punct(c) {
                        Ascii::Punct(c as u8)
                    } else {
                        Ascii::Word(c as u8)
                    }
                }
                _ => Ascii::Slow,
            };
        }
        table
    }
}

impl WordPiece {
    /// Parse a `tokenizer.json`; [`Unsupported`] when it is not BERT-family WordPiece with
    /// settings this module reproduces exactly.
    pub fn from_json(json: &str) -> Result<WordPiece, Unsupported> {
        let v: Value = curator_sdk::serde_json::from_str(json).map_err(|e| Unsupported::Json(e.to_string()))?;
        let model = &v["model"];
        if model["type"].as_str() != Some("WordPiece") {
            return Err(shape(format!("model {} is not WordPiece", model["type"])));
        }
        let norm = match v["normalizer"]["type"].as_str() {
            None if v["normalizer"].is_null() => {
                Normalizer { clean_text: false, handle_chinese_chars: false, strip_accents: false, lowercase: false }
            }
            Some("BertNormalizer") => {
                let n = &v["normalizer"];
                let flag = |k: &str, default: bool| n[k].as_bool().unwrap_or(default);
                let lowercase = flag("lowercase", true);
                Normalizer {
                    clean_text: flag("clean_text", true),
                    handle_chinese_chars: flag("handle_chinese_chars", true),
                    strip_accents: n["strip_accents"].as_bool().unwrap_or(lowercase),
                    lowercase,
                }
            }
            _ => return Err(shape(format!("normalizer {} (only BertNormalizer)", v["normalizer"]["type"]))),
        };
        if v["pre_tokenizer"]["type"].as_str() != Some("BertPreTokenizer") {
            return Err(shape(format!("pre-tokenizer {} (only BertPreTokenizer)", v["pre_tokenizer"]["type"])));
        }
        let prefix = model["continuing_subword_prefix"].as_str().unwrap_or("##");
        let vocab = model["vocab"].as_object().ok_or_else(|| shape("WordPiece without a vocab"))?;
        let (mut start, mut cont) = (FxHashMap::default(), FxHashMap::default());
        let (mut longest_start, mut longest_cont) = (0, 0);
        for (piece, id) in vocab {
            let id = id.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| shape(format!("vocab id of {piece:?}")))?;
            start.insert(piece.as_bytes().into(), id);
            longest_start = longest_start.max(piece.len());
            if let Some(rest) = piece.strip_prefix(prefix)
                && !prefix.is_empty()
            {
                cont.insert(rest.as_bytes().into(), id);
                longest_cont = longest_cont.max(rest.len());
            }
        }
        if prefix.is_empty() {
            cont = start.clone();
            longest_cont = longest_start;
        }
        let unk_token = model["unk_token"].as_str().unwrap_or("[UNK]");
        let unk = *start.get(unk_token.as_bytes()).ok_or_else(|| shape(format!("the unknown token {unk_token:?} is not in the vocab")))?;
        let max_chars = model["max_input_chars_per_word"].as_u64().unwrap_or(100) as usize;

        let mut tokens = Vec::new();
        let mut ids = Vec::new();
        for t in v["added_tokens"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let flag = |k: &str| t[k].as_bool().unwrap_or(false);
            if flag("normalized") || flag("single_word") || flag("lstrip") || flag("rstrip") {
                return Err(shape(format!("added token {} is normalized, single-word or strips spaces", t["content"])));
            }
            let content = t["content"].as_str().ok_or_else(|| shape("an added token without content"))?;
            let id = t["id"].as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| shape("an added token without an id"))?;
            if !content.is_empty() {
                tokens.push(content.to_string());
                ids.push(id);
            }
        }
        let added = if tokens.is_empty() {
            None
        } else {
            let ac = AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&tokens)
                .map_err(|e| shape(format!("added tokens: {e}")))?;
            Some((ac, ids))
        };

        let (before, after) = post_processor(&v["post_processor"])?;
        Ok(WordPiece { start, cont, longest_start, longest_cont, unk, max_chars, ascii: norm.ascii_table(), norm, added, before, after })
    }

    /// The normalizer's settings.
    pub fn normalizer(&self) -> Normalizer {
        self.norm
    }

    /// Special tokens the post-processor adds to one sequence.
    pub fn special_tokens(&self) -> usize {
        self.before.len() + self.after.len()
    }

    /// Token ids of `text` into `out` (cleared first), special tokens included, cut to
    /// `max_tokens` ids in all (special tokens kept, as `tokenizers`' truncation does).
    pub fn encode(&self, text: &str, max_tokens: Option<usize>, scratch: &mut Scratch, out: &mut Vec<u32>) {
        out.clear();
        out.extend_from_slice(&self.before);
        let room = max_tokens.map_or(usize::MAX, |m| m.saturating_sub(self.special_tokens()));
        let mut sink = Sink { cap: out.len().saturating_add(room), out };
        match &self.added {
            Some((ac, ids)) => {
                let mut at = 0;
                for m in ac.find_iter(text) {
                    if sink.full() {
                        break;
                    }
                    self.segment(&text[at..m.start()], scratch, &mut sink);
                    sink.push(ids[m.pattern().as_usize()]);
                    at = m.end();
                }
                self.segment(&text[at..], scratch, &mut sink);
            }
            None => self.segment(text, scratch, &mut sink),
        }
        out.extend_from_slice(&self.after);
    }

    /// Tokens in `text`, special tokens included, no truncation.
    pub fn count(&self, text: &str, scratch: &mut Scratch) -> usize {
        let mut ids = Vec::new();
        self.encode(text, None, scratch, &mut ids);
        ids.len()
    }

    /// Text without added tokens: ASCII bytes through the table, chunks holding anything
    /// else through the exact path.
    fn segment(&self, text: &str, s: &mut Scratch, sink: &mut Sink) {
        let bytes = text.as_bytes();
        let mut word = std::mem::take(&mut s.word);
        word.clear();
        // Where the current chunk (text since the last boundary) began, and the ids then.
        let (mut chunk, mut mark) = (0, sink.out.len());
        let mut k = 0;
        while k < bytes.len() {
            let b = bytes[k];
            let class = if b < 0x80 { self.ascii[b as usize] } else { Ascii::Slow };
            match class {
                Ascii::Word(w) => word.push(w),
                Ascii::Space => {
                    self.word(&word, s, sink);
                    word.clear();
                    if sink.full() {
                        break;
                    }
                    chunk = k + 1;
                    mark = sink.out.len();
                }
                Ascii::Punct(p) => {
                    self.word(&word, s, sink);
                    word.clear();
                    self.word(&[p], s, sink);
                }
                Ascii::Drop => {}
                Ascii::Slow => {
                    // Redo the whole chunk, up to the next ASCII boundary, the exact way.
                    word.clear();
                    sink.out.truncate(mark);
                    let end =
                        bytes[k..].iter().position(|&c| c < 0x80 && self.ascii[c as usize] == Ascii::Space).map_or(bytes.len(), |p| k + p);
                    self.exact_chunk(&text[chunk..end], s, sink);
                    if sink.full() {
                        break;
                    }
                    k = end;
                    chunk = end;
                    mark = sink.out.len();
                    continue;
                }
            }
            k += 1;
        }
        self.word(&word, s, sink);
        word.clear();
        s.word = word;
    }

    /// Normalize `chunk` exactly, split it into words, and tokenize them.
    fn exact_chunk(&self, chunk: &str, s: &mut Scratch, sink: &mut Sink) {
        let (mut tmp, mut norm) = (std::mem::take(&mut s.cleaned), std::mem::take(&mut s.normalized));
        self.norm.normalize(chunk, &mut tmp, &mut norm);
        let mut from = 0;
        for (i, c) in norm.char_indices() {
            if c.is_whitespace() {
                self.word(&norm.as_bytes()[from..i], s, sink);
                from = i + c.len_utf8();
            } else if is_punct(c) {
                self.word(&norm.as_bytes()[from..i], s, sink);
                from = i + c.len_utf8();
                self.word(&norm.as_bytes()[i..from], s, sink);
            }
        }
        self.word(&norm.as_bytes()[from..], s, sink);
        s.cleaned = tmp;
        s.normalized = norm;
    }

    /// One word's pieces (a whole-word hit, the cache, or greedy longest match).
    fn word(&self, word: &[u8], s: &mut Scratch, sink: &mut Sink) {
        if word.is_empty() || sink.full() {
            return;
        }
        if let Some(&id) = self.start.get(word) {
            // A vocabulary word is one piece, unless it is too long to be looked at.
            if word.len() <= self.max_chars || word.iter().filter(|&&b| is_char_start(b)).count() <= self.max_chars {
                sink.push(id);
                return;
            }
        }
        if let Some(&(a, b)) = s.cache.get(word) {
            sink.extend(&s.pieces[a as usize..b as usize]);
            return;
        }
        if s.cache.len() >= CACHE_WORDS || s.pieces.len() > u32::MAX as usize / 2 {
            s.cache.clear();
            s.pieces.clear();
        }
        let a = s.pieces.len();
        self.pieces(word, &mut s.pieces);
        let b = s.pieces.len();
        s.cache.insert(word.into(), (a as u32, b as u32));
        sink.extend(&s.pieces[a..b]);
    }

    /// Greedy longest-match pieces of `word` appended to `out` (`[UNK]` for the whole word
    /// when it is too long or a rest matches nothing).
    fn pieces(&self, word: &[u8], out: &mut Vec<u32>) {
        let from = out.len();
        if word.iter().filter(|&&b| is_char_start(b)).count() > self.max_chars {
            out.push(self.unk);
            return;
        }
        let mut at = 0;
        while at < word.len() {
            let (map, longest) = if at == 0 { (&self.start, self.longest_start) } else { (&self.cont, self.longest_cont) };
            let mut end = word.len().min(at + longest);
            while end < word.len() && !is_char_start(word[end]) {
                end -= 1;
            }
            let found = loop {
                if end <= at {
                    break None;
                }
                if let Some(&id) = map.get(&word[at..end]) {
                    break Some(id);
                }
                end -= 1;
                while end > at && !is_char_start(word[end]) {
                    end -= 1;
                }
            };
            match found {
                Some(id) => {
                    out.push(id);
                    at = end;
                }
                None => {
                    out.truncate(from);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

/// The special tokens a post-processor puts before and after a single sequence.
fn post_processor(p: &Value) -> Result<(Vec<u32>, Vec<u32>), Unsupported> {
    let id_of = |v: &Value| v.as_u64().and_then(|i| u32::try_from(i).ok());
    match p["type"].as_str() {
        None if p.is_null() => Ok((Vec::new(), Vec::new())),
        Some("BertProcessing") => {
            let cls = id_of(&p["cls"][1]).ok_or_else(|| shape("BertProcessing without a cls id"))?;
            let sep = id_of(&p["sep"][1]).ok_or_else(|| shape("BertProcessing without a sep id"))?;
            Ok((vec![cls], vec![sep]))
        }
        Some("TemplateProcessing") => {
            let (mut before, mut after, mut seen) = (Vec::new(), Vec::new(), false);
            for piece in p["single"].as_array().map(Vec::as_slice).unwrap_or_default() {
                if let Some(name) = piece["SpecialToken"]["id"].as_str() {
                    let ids = p["special_tokens"][name]["ids"]
                        .as_array()
                        .ok_or_else(|| shape(format!("template token {name:?} has no ids")))?
                        .iter()
                        .map(|i| id_of(i).ok_or_else(|| shape(format!("template token {name:?}: bad id"))))
                        .collect::<Result<Vec<u32>, _>>()?;
                    if seen { after.extend(ids) } else { before.extend(ids) }
                } else if piece["Sequence"]["id"].as_str() == Some("A") && !seen {
                    seen = true;
                } else {
                    return Err(shape(format!("template piece {piece}")));
                }
            }
            if !seen {
                return Err(shape("a template without the sequence"));
            }
            Ok((before, after))
        }
        _ => Err(shape(format!("post-processor {}", p["type"]))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(normalizer: &str) -> WordPiece {
        let vocab: Vec<String> =
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", "world", ",", "!", "e", "##e", "中", "cafe", "café"]
                .iter()
                .enumerate()
                .map(|(i, t)| format!("{t:?}: {i}"))
                .collect();
        let json = format!(
            r#"{{"added_tokens": [{{"id": 2, "content": "[CLS]"}}, {{"id": 3, "content": "[SEP]"}}],
               "normalizer": {normalizer}, "pre_tokenizer": {{"type": "BertPreTokenizer"}},
               "post_processor": {{"type": "BertProcessing", "cls": ["[CLS]", 2], "sep": ["[SEP]", 3]}},
               "model": {{"type": "WordPiece", "unk_token": "[UNK]", "max_input_chars_per_word": 9, "vocab": {{{}}}}}}}"#,
            vocab.join(",")
        );
        WordPiece::from_json(&json).unwrap()
    }

    fn ids(t: &WordPiece, text: &str, max: Option<usize>) -> Vec<u32> {
        let mut out = Vec::new();
        t.encode(text, max, &mut Scratch::default(), &mut out);
        out
    }

    #[test]
    fn greedy_pieces_specials_and_truncation() {
        let t = tiny(r#"{"type": "BertNormalizer", "lowercase": true}"#);
        assert_eq!(ids(&t, "Unaffable, HELLO world!", None), [2, 4, 5, 6, 9, 7, 8, 10, 3]);
        // An unmatched rest makes the whole word [UNK]; a word over 9 characters too.
        assert_eq!(ids(&t, "unx helloooooo", None), [2, 1, 1, 3]);
        // Added tokens in the text are matched before normalization.
        assert_eq!(ids(&t, "hello[SEP]world", None), [2, 7, 3, 8, 3]);
        // Truncation keeps the specials; tokenizing stops early.
        assert_eq!(ids(&t, "hello world hello world", Some(4)), [2, 7, 8, 3]);
        assert_eq!(ids(&t, "", None), [2, 3]);
    }

    #[test]
    fn the_ascii_table_is_the_exact_path() {
        let t = tiny(r#"{"type": "BertNormalizer", "lowercase": true}"#);
        assert_eq!(t.ascii[b'A' as usize], Ascii::Word(b'a'));
        assert_eq!(t.ascii[b'$' as usize], Ascii::Punct(b'$'));
        assert_eq!(t.ascii[0x0b], Ascii::Drop, "\\x0b is a control character, deleted, not whitespace");
        assert_eq!(t.ascii[b'\t' as usize], Ascii::Space);
        let raw = tiny(r#"{"type": "BertNormalizer", "lowercase": false, "clean_text": false}"#);
        assert_eq!(raw.ascii[0x0b], Ascii::Space);
        assert_eq!(raw.ascii[b'A' as usize], Ascii::Word(b'A'));
        // A deleted control character joins its neighbours into one word.
        assert_eq!(ids(&t, "hel\x0blo", None), [2, 7, 3]);
    }

    #[test]
    fn accents_chinese_and_mixed_chunks() {
        let strip = tiny(r#"{"type": "BertNormalizer", "lowercase": true}"#);
        assert_eq!(ids(&strip, "Café", None), [2, 14, 3]);
        assert_eq!(ids(&strip, "e\u{301}e", None), [2, 11, 12, 3], "a combining mark after an ASCII letter is removed");
        assert_eq!(ids(&strip, "hello中world", None), [2, 7, 13, 8, 3]);
        let keep = tiny(r#"{"type": "BertNormalizer", "lowercase": true, "strip_accents": false}"#);
        assert_eq!(ids(&keep, "CAFÉ", None), [2, 15, 3]);
        // Zero-width space is format (Cf): deleted, so it glues its neighbours.
        assert_eq!(ids(&strip, "hel\u{200b}lo", None), [2, 7, 3]);
    }

    #[test]
    fn other_shapes_are_refused() {
        let bpe = r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}}"#;
        assert!(matches!(WordPiece::from_json(bpe), Err(Unsupported::Shape(_))));
        let t = r#"{"normalizer": {"type": "Sequence", "normalizers": []}, "pre_tokenizer": {"type": "BertPreTokenizer"},
                    "model": {"type": "WordPiece", "vocab": {"[UNK]": 0}}}"#;
        let Err(e) = WordPiece::from_json(t) else { panic!("a Sequence normalizer was accepted") };
        assert!(e.to_string().contains("normalizer"), "{e}");
    }
}
