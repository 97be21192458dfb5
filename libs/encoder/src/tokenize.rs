//! Text to token ids with the model's own `tokenizer.json`, on all the worker's CPU threads:
//! no padding (batches pad to their own longest), truncation at the model's limit, special
//! tokens added as the model was trained.
//!
//! BERT-family WordPiece tokenizers run on our own implementation
//! ([`curator_heuristics::wordpiece`]: id-exact with `tokenizers`, a differential test proves
//! it, and 10-20× faster on one core); any other `tokenizer.json` runs on the `tokenizers`
//! crate, and [`Tokenizer::describe`] says which and why (the stage logs it at set-up, so
//! planning shows it).

use std::path::Path;

use curator_heuristics::wordpiece::{Scratch, WordPiece};
use rayon::prelude::*;
use tokenizers::{Tokenizer as HfTokenizer, TruncationParams};

use crate::EncoderError;

enum Engine {
    WordPiece(Box<WordPiece>),
    Hf { inner: Box<HfTokenizer>, why: String },
}

/// A loaded tokenizer with padding off and truncation at `max_tokens`.
pub struct Tokenizer {
    engine: Engine,
    max_tokens: usize,
}

impl Tokenizer {
    /// Load `tokenizer.json`; sequences are cut to `max_tokens` tokens (special tokens included).
    pub fn load(path: &Path, max_tokens: usize) -> Result<Tokenizer, EncoderError> {
        let json = std::fs::read_to_string(path).map_err(|e| EncoderError::io(path, e))?;
        Tokenizer::from_json(&json, max_tokens).map_err(|reason| EncoderError::Model { path: path.to_path_buf(), reason })
    }

    /// [`Tokenizer::load`] from the file's text.
    pub fn from_json(json: &str, max_tokens: usize) -> Result<Tokenizer, String> {
        let engine = match WordPiece::from_json(json) {
            Ok(wp) => Engine::WordPiece(Box::new(wp)),
            Err(why) => {
                let mut inner: HfTokenizer = json.parse().map_err(|e: tokenizers::Error| e.to_string())?;
                inner.with_padding(None);
                inner
                    .with_truncation(Some(TruncationParams { max_length: max_tokens, ..Default::default() }))
                    .map_err(|e| e.to_string())?;
                Engine::Hf { inner: Box::new(inner), why: why.to_string() }
            }
        };
        Ok(Tokenizer { engine, max_tokens })
    }

    /// Which implementation runs, for logs and plans.
    pub fn describe(&self) -> String {
        match &self.engine {
            Engine::WordPiece(_) => "curator WordPiece (id-exact with tokenizers)".to_string(),
            Engine::Hf { why, .. } => format!("the tokenizers crate ({why})"),
        }
    }

    /// Whether our own WordPiece runs (not the `tokenizers` crate).
    pub fn is_own(&self) -> bool {
        matches!(self.engine, Engine::WordPiece(_))
    }

    /// The longest sequence produced, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Token ids of each text (texts first cut to `max_chars` characters when given), in
    /// parallel.
    pub fn encode(&self, texts: &[&str], max_chars: Option<usize>) -> Result<Vec<Vec<u32>>, EncoderError> {
        match &self.engine {
            Engine::WordPiece(wp) => Ok(texts
                .par_iter()
                .with_min_len(16)
                .map_init(Scratch::default, |scratch, t| {
                    let mut ids = Vec::new();
                    wp.encode(cut_chars(t, max_chars), Some(self.max_tokens), scratch, &mut ids);
                    ids
                })
                .collect()),
            Engine::Hf { inner, .. } => {
                let inputs: Vec<&str> = texts.iter().map(|t| cut_chars(t, max_chars)).collect();
                let encodings = inner.encode_batch_fast(inputs, true).map_err(|e| EncoderError::Tokenize(e.to_string()))?;
                Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
            }
        }
    }
}

/// The first `max_chars` characters of `text` (NeMo's `text[:max_chars]`).
pub fn cut_chars(text: &str, max_chars: Option<usize>) -> &str {
    match max_chars {
        Some(n) => text.char_indices().nth(n).map_or(text, |(at, _)| &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_character_boundaries() {
        assert_eq!(cut_chars("héllo", Some(2)), "hé");
        assert_eq!(cut_chars("héllo", Some(10)), "héllo");
        assert_eq!(cut_chars("héllo", None), "héllo");
        assert_eq!(cut_chars("", Some(0)), "");
    }

    fn repo_file(p: &str) -> String {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)).unwrap()
    }

    #[test]
    fn bert_wordpiece_runs_on_our_own_and_the_rest_on_tokenizers() {
        let bert = Tokenizer::from_json(&repo_file("tests/parity/tokenizers/bert-uncased.json"), 8).unwrap();
        assert!(bert.is_own(), "{}", bert.describe());
        let ids = bert.encode(&["Hello, world! This sentence is longer than eight tokens."], None).unwrap();
        assert_eq!(ids[0].len(), 8, "truncated with the specials kept");
        assert_eq!((ids[0][0], ids[0][7]), (101, 102));
        let bpe = Tokenizer::from_json(&repo_file("tests/parity/tokenizers/bpe.json"), 8).unwrap();
        assert!(!bpe.is_own());
        assert!(bpe.describe().contains("tokenizers crate (model"), "{}", bpe.describe());
        assert!(bpe.encode(&["Hello, world!"], None).unwrap()[0].len() <= 8);
    }
}
