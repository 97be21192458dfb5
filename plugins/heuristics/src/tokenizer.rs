//! Token counts from a Hugging Face `tokenizer.json`, for NeMo Curator's TokenCountFilter
//! (which counts `AutoTokenizer.encode(text)`, special tokens included). Two families are
//! supported, our own implementation of each: BERT-style WordPiece (BertNormalizer,
//! BertPreTokenizer, greedy longest-match WordPiece) and GPT-2-style byte-level BPE (GPT-2's
//! split pattern, bytes mapped to printable characters, merges by rank). Special tokens are
//! counted from the post-processor (TemplateProcessing, BertProcessing, RobertaProcessing).
//! Checked against the `tokenizers` library in `tests/tokenizer_parity.rs`.

use std::collections::HashMap;

use curator_sdk::serde_json::Value;
use unicode_normalization::UnicodeNormalization;

/// Why a tokenizer file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TokenizerError {
    #[error("tokenizer.json is not valid JSON: {0}")]
    Json(String),
    #[error("unsupported tokenizer: {0} (WordPiece and byte-level BPE are supported)")]
    Unsupported(String),
}

enum Kind {
    WordPiece {
        vocab: HashMap<String, u32>,
        prefix: String,
        max_chars: usize,
        lowercase: bool,
        strip_accents: bool,
        chinese: bool,
        clean: bool,
    },
    Bpe {
        ranks: HashMap<(String, String), usize>,
        add_prefix_space: bool,
    },
}

/// A tokenizer that counts tokens.
pub struct Tokenizer {
    kind: Kind,
    special: usize,
}

fn unsupported(what: impl Into<String>) -> TokenizerError {
    TokenizerError::Unsupported(what.into())
}

impl Tokenizer {
    /// Parse a `tokenizer.json`.
    pub fn from_json(json: &str) -> Result<Tokenizer, TokenizerError> {
        let v: Value = curator_sdk::serde_json::from_str(json).map_err(|e| TokenizerError::Json(e.to_string()))?;
        let model = &v["model"];
        let special = match v["post_processor"]["type"].as_str() {
            None => 0,
            Some("TemplateProcessing") => {
                v["post_processor"]["single"].as_array().map_or(0, |s| s.iter().filter(|p| p.get("SpecialToken").is_some()).count())
            }
            Some("BertProcessing" | "RobertaProcessing") => 2,
            Some("ByteLevel") => 0,
            Some(other) => return Err(unsupported(format!("post-processor {other}"))),
        };
        let kind = match model["type"].as_str() {
            Some("WordPiece") => {
                let vocab = model["vocab"]
                    .as_object()
                    .ok_or_else(|| unsupported("WordPiece without a vocab"))?
                    .iter()
                    .map(|(k, id)| (k.clone(), id.as_u64().unwrap_or(0) as u32))
                    .collect();
                let n = &v["normalizer"];
                match n["type"].as_str() {
                    Some("BertNormalizer") | None => {}
                    Some(other) => return Err(unsupported(format!("normalizer {other}"))),
                }
                match v["pre_tokenizer"]["type"].as_str() {
                    Some("BertPreTokenizer") => {}
                    other => return Err(unsupported(format!("pre-tokenizer {other:?} for WordPiece"))),
                }
                let lowercase = n["lowercase"].as_bool().unwrap_or(false);
                Kind::WordPiece {
                    vocab,
                    prefix: model["continuing_subword_prefix"].as_str().unwrap_or("##").to_string(),
                    max_chars: model["max_input_chars_per_word"].as_u64().unwrap_or(100) as usize,
                    lowercase,
                    strip_accents: n["strip_accents"].as_bool().unwrap_or(lowercase),
                    chinese: n["handle_chinese_chars"].as_bool().unwrap_or(false),
                    clean: n["clean_text"].as_bool().unwrap_or(false),
                }
            }
            Some("BPE") => {
                if !v["normalizer"].is_null() {
                    return Err(unsupported("a normalizer on a BPE tokenizer"));
                }
                let pre = &v["pre_tokenizer"];
                if pre["type"].as_str() != Some("ByteLevel") || pre["use_regex"].as_bool() == Some(false) {
                    return Err(unsupported(format!("pre-tokenizer {} for BPE", pre["type"])));
                }
                let mut ranks = HashMap::new();
                for (rank, m) in model["merges"].as_array().ok_or_else(|| unsupported("BPE without merges"))?.iter().enumerate() {
                    let pair = match m {
                        Value::String(s) => s.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())),
                        Value::Array(a) => match (a.first().and_then(Value::as_str), a.get(1).and_then(Value::as_str)) {
                            (Some(x), Some(y)) => Some((x.to_string(), y.to_string())),
                            _ => None,
                        },
                        _ => None,
                    };
                    let pair = pair.ok_or_else(|| unsupported(format!("merge {m}")))?;
                    ranks.entry(pair).or_insert(rank);
                }
                Kind::Bpe { ranks, add_prefix_space: pre["add_prefix_space"].as_bool().unwrap_or(false) }
            }
            other => return Err(unsupported(format!("model {other:?}"))),
        };
        Ok(Tokenizer { kind, special })
    }

    /// Tokens in `text`, special tokens included.
    pub fn count(&self, text: &str) -> usize {
        self.special
            + match &self.kind {
                Kind::WordPiece { vocab, prefix, max_chars, lowercase, strip_accents, chinese, clean } => {
                    let normalized = bert_normalize(text, *clean, *chinese, *strip_accents, *lowercase);
                    bert_pre_tokens(&normalized).map(|w| wordpiece_count(w, vocab, prefix, *max_chars)).sum::<usize>()
                }
                Kind::Bpe { ranks, add_prefix_space } => {
                    let spaced;
                    let text = if *add_prefix_space && !text.starts_with(' ') {
                        spaced = format!(" {text}");
                        &spaced
                    } else {
                        text
                    };
                    let mut cache: HashMap<&str, usize> = HashMap::new();
                    gpt2_pieces(text).map(|p| *cache.entry(p).or_insert_with(|| bpe_count(p, ranks))).sum()
                }
            }
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// Combining marks of the common scripts (Unicode category Mn/Mc/Me).
fn is_mark(c: char) -> bool {
    matches!(c as u32,
        0x0300..=0x036F | 0x0483..=0x0489 | 0x0591..=0x05BD | 0x05BF | 0x05C1..=0x05C2 | 0x05C4..=0x05C5 | 0x05C7
        | 0x0610..=0x061A | 0x064B..=0x065F | 0x0670 | 0x06D6..=0x06DC | 0x06DF..=0x06E4 | 0x06E7..=0x06E8 | 0x06EA..=0x06ED
        | 0x0900..=0x0903 | 0x093A..=0x093C | 0x093E..=0x094F | 0x0951..=0x0957 | 0x0962..=0x0963
        | 0x0981..=0x0983 | 0x09BC | 0x09BE..=0x09CD | 0x0E31 | 0x0E34..=0x0E3A | 0x0E47..=0x0E4E
        | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0x302A..=0x302F | 0x3099..=0x309A | 0xFE20..=0xFE2F)
}

/// Unicode letters (category L): alphabetic characters that are not marks or letter numbers.
fn is_letter(c: char) -> bool {
    c.is_alphabetic() && !is_mark(c) && !matches!(c as u32, 0x16EE..=0x16F0 | 0x2160..=0x2188 | 0x3007 | 0x3021..=0x3029 | 0x3038..=0x303A)
}

fn bert_normalize(text: &str, clean: bool, chinese: bool, strip_accents: bool, lowercase: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if clean {
            if c == '\0' || c == '\u{fffd}' || (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) {
                continue;
            }
            if c.is_whitespace() {
                out.push(' ');
                continue;
            }
        }
        if chinese && is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    if strip_accents {
        out = out.nfd().filter(|&c| !matches!(c as u32, 0x0300..=0x036F) && !is_nonspacing_mark(c)).collect();
    }
    if lowercase { out.to_lowercase() } else { out }
}

fn is_nonspacing_mark(c: char) -> bool {
    is_mark(c)
        && !matches!(c as u32, 0x0903 | 0x093B | 0x093E..=0x0940 | 0x0949..=0x094C | 0x094E..=0x094F | 0x0982..=0x0983 | 0x09BE..=0x09C0 | 0x09C7..=0x09CC)
}

fn is_bert_punct(c: char) -> bool {
    matches!(c as u32, 33..=47 | 58..=64 | 91..=96 | 123..=126) || crate::en_words::is_unicode_punctuation(c)
}

/// BertPreTokenizer: split on whitespace; each punctuation character is its own token.
fn bert_pre_tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(char::is_whitespace).filter(|w| !w.is_empty()).flat_map(|w| {
        let mut parts = Vec::new();
        let mut start = 0;
        for (i, c) in w.char_indices() {
            if is_bert_punct(c) {
                if start < i {
                    parts.push(&w[start..i]);
                }
                parts.push(&w[i..i + c.len_utf8()]);
                start = i + c.len_utf8();
            }
        }
        if start < w.len() {
            parts.push(&w[start..]);
        }
        parts
    })
}

fn wordpiece_count(word: &str, vocab: &HashMap<String, u32>, prefix: &str, max_chars: usize) -> usize {
    if word.chars().count() > max_chars {
        return 1;
    }
    let (mut start, mut n) = (0, 0);
    let mut key = String::new();
    while start < word.len() {
        let mut end = word.len();
        let mut found = false;
        while end > start {
            key.clear();
            if start > 0 {
                key.push_str(prefix);
            }
            key.push_str(&word[start..end]);
            if vocab.contains_key(&key) {
                found = true;
                break;
            }
            end = word[..end].char_indices().next_back().map_or(start, |(i, _)| i);
        }
        if !found {
            return 1; // the whole word becomes [UNK]
        }
        n += 1;
        start = end;
    }
    n
}

/// GPT-2's split: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
fn gpt2_pieces(text: &str) -> impl Iterator<Item = &str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = move |k: usize| chars.get(k).map(|&(_, c)| c);
    let offset = {
        let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        move |k: usize| chars.get(k).copied().unwrap_or(text.len())
    };
    let n = text.chars().count();
    let mut k = 0;
    std::iter::from_fn(move || {
        if k >= n {
            return None;
        }
        let start = k;
        let c = at(k)?;
        if c == '\'' {
            for suffix in ["s", "t", "re", "ve", "m", "ll", "d"] {
                if suffix.chars().enumerate().all(|(j, s)| at(k + 1 + j) == Some(s)) {
                    k += 1 + suffix.len();
                    return Some(&text[offset(start)..offset(k)]);
                }
            }
        }
        let body = if c == ' ' { at(k + 1) } else { Some(c) };
        let skip = usize::from(c == ' ');
        if let Some(b) = body.filter(|b| !b.is_whitespace()) {
            let class: fn(char) -> bool = if is_letter(b) {
                is_letter
            } else if b.is_numeric() {
                char::is_numeric
            } else {
                |c: char| !c.is_whitespace() && !is_letter(c) && !c.is_numeric()
            };
            k += skip;
            while at(k).is_some_and(class) {
                k += 1;
            }
            return Some(&text[offset(start)..offset(k)]);
        }
        // whitespace run: all of it at the end, else all but its last character
        let mut e = k;
        while at(e).is_some_and(char::is_whitespace) {
            e += 1;
        }
        k = if e < n && e - start > 1 { e - 1 } else { e };
        Some(&text[offset(start)..offset(k)])
    })
}

/// GPT-2's printable stand-in for each byte.
fn byte_char(b: u8) -> char {
    static TABLE: std::sync::OnceLock<[char; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = ['\0'; 256];
        let mut extra = 0u32;
        for (i, slot) in t.iter_mut().enumerate() {
            let i = i as u32;
            *slot = if (33..=126).contains(&i) || (161..=172).contains(&i) || (174..=255).contains(&i) {
                char::from_u32(i).unwrap_or('\0')
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap_or('\0')
            };
        }
        t
    })[b as usize]
}

fn bpe_count(piece: &str, ranks: &HashMap<(String, String), usize>) -> usize {
    let mut symbols: Vec<String> = piece.bytes().map(|b| byte_char(b).to_string()).collect();
    loop {
        let best = symbols.windows(2).enumerate().filter_map(|(i, w)| ranks.get(&(w[0].clone(), w[1].clone())).map(|&r| (r, i))).min();
        let Some((_, i)) = best else { break };
        let merged = format!("{}{}", symbols[i], symbols[i + 1]);
        symbols[i] = merged;
        symbols.remove(i + 1);
    }
    symbols.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_split() {
        let p: Vec<&str> = gpt2_pieces("Hello world's  fine,123 ok  ").collect();
        assert_eq!(p, ["Hello", " world", "'s", " ", " fine", ",", "123", " ok", "  "]);
    }

    #[test]
    fn wordpiece_greedy() {
        let vocab: HashMap<String, u32> =
            ["un", "##aff", "##able", "[UNK]"].iter().enumerate().map(|(i, s)| (s.to_string(), i as u32)).collect();
        assert_eq!(wordpiece_count("unaffable", &vocab, "##", 100), 3);
        assert_eq!(wordpiece_count("xyz", &vocab, "##", 100), 1);
        assert_eq!(bert_pre_tokens("Hi, there!").collect::<Vec<_>>(), ["Hi", ",", "there", "!"]);
        assert_eq!(bert_normalize("Héllo 中文", true, true, true, true), "hello  中  文 ");
    }
}
