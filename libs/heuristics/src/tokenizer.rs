//! Token counts from a Hugging Face `tokenizer.json`, for NeMo Curator's TokenCountFilter
//! (which counts `AutoTokenizer.encode(text)`, special tokens included). Two families are
//! supported, our own implementation of each: BERT-style WordPiece ([`crate::wordpiece`], the
//! one the GPU encoder tokenizes with) and GPT-2-style byte-level BPE (GPT-2's
//! split pattern, bytes mapped to printable characters, merges by rank). Special tokens are
//! counted from the post-processor (TemplateProcessing, BertProcessing, RobertaProcessing).
//! Checked against the `tokenizers` library in `tests/tokenizer_parity.rs`.

use std::collections::HashMap;

use curator_sdk::serde_json::Value;
use unicode_categories::UnicodeCategories;

use crate::wordpiece::{Scratch, Unsupported, WordPiece};

/// Why a tokenizer file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TokenizerError {
    #[error("tokenizer.json is not valid JSON: {0}")]
    Json(String),
    #[error("unsupported tokenizer: {0} (WordPiece and byte-level BPE are supported)")]
    Unsupported(String),
}

enum Kind {
    WordPiece(Box<WordPiece>),
    Bpe {
        ranks: HashMap<(String, String), usize>,
        add_prefix_space: bool,
        /// Special tokens the post-processor adds.
        special: usize,
    },
}

/// A tokenizer that counts tokens.
pub struct Tokenizer {
    kind: Kind,
}

fn unsupported(what: impl Into<String>) -> TokenizerError {
    TokenizerError::Unsupported(what.into())
}

impl Tokenizer {
    /// Parse a `tokenizer.json`.
    pub fn from_json(json: &str) -> Result<Tokenizer, TokenizerError> {
        let v: Value = curator_sdk::serde_json::from_str(json).map_err(|e| TokenizerError::Json(e.to_string()))?;
        let model = &v["model"];
        let kind = match model["type"].as_str() {
            Some("WordPiece") => Kind::WordPiece(Box::new(WordPiece::from_json(json).map_err(|e| match e {
                Unsupported::Json(e) => TokenizerError::Json(e),
                Unsupported::Shape(e) => unsupported(e),
            })?)),
            Some("BPE") => {
                let special = match v["post_processor"]["type"].as_str() {
                    None => 0,
                    Some("TemplateProcessing") => {
                        v["post_processor"]["single"].as_array().map_or(0, |s| s.iter().filter(|p| p.get("SpecialToken").is_some()).count())
                    }
                    Some("BertProcessing" | "RobertaProcessing") => 2,
                    Some("ByteLevel") => 0,
                    Some(other) => return Err(unsupported(format!("post-processor {other}"))),
                };
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
                Kind::Bpe { ranks, add_prefix_space: pre["add_prefix_space"].as_bool().unwrap_or(false), special }
            }
            other => return Err(unsupported(format!("model {other:?}"))),
        };
        Ok(Tokenizer { kind })
    }

    /// Tokens in `text`, special tokens included.
    pub fn count(&self, text: &str) -> usize {
        match &self.kind {
            Kind::WordPiece(wp) => wp.count(text, &mut Scratch::default()),
            Kind::Bpe { ranks, add_prefix_space, special } => {
                let spaced;
                let text = if *add_prefix_space && !text.starts_with(' ') {
                    spaced = format!(" {text}");
                    &spaced
                } else {
                    text
                };
                let mut cache: HashMap<&str, usize> = HashMap::new();
                special + gpt2_pieces(text).map(|p| *cache.entry(p).or_insert_with(|| bpe_count(p, ranks))).sum::<usize>()
            }
        }
    }
}

fn is_mark(c: char) -> bool {
    c.is_mark()
}

/// Unicode letters (category L): alphabetic characters that are not marks or letter numbers.
fn is_letter(c: char) -> bool {
    c.is_alphabetic() && !is_mark(c) && !matches!(c as u32, 0x16EE..=0x16F0 | 0x2160..=0x2188 | 0x3007 | 0x3021..=0x3029 | 0x3038..=0x303A)
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
    curator_sdk::text::gpt2_byte_chars()[b as usize]
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
}
