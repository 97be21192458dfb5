//! Text to token ids with the model's own `tokenizer.json` (the `tokenizers` crate), on all
//! the worker's CPU threads: no padding (batches pad to their own longest), truncation at the
//! model's limit, special tokens added as the model was trained.

use std::path::Path;

use tokenizers::{Tokenizer as HfTokenizer, TruncationParams};

use crate::EncoderError;

/// A loaded tokenizer with padding off and truncation at `max_tokens`.
pub struct Tokenizer {
    inner: HfTokenizer,
    max_tokens: usize,
}

impl Tokenizer {
    /// Load `tokenizer.json`; sequences are cut to `max_tokens` tokens (special tokens included).
    pub fn load(path: &Path, max_tokens: usize) -> Result<Tokenizer, EncoderError> {
        let mut inner =
            HfTokenizer::from_file(path).map_err(|e| EncoderError::Model { path: path.to_path_buf(), reason: e.to_string() })?;
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams { max_length: max_tokens, ..Default::default() }))
            .map_err(|e| EncoderError::Model { path: path.to_path_buf(), reason: e.to_string() })?;
        Ok(Tokenizer { inner, max_tokens })
    }

    /// The longest sequence produced, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Token ids of each text (texts first cut to `max_chars` characters when given), in
    /// parallel.
    pub fn encode(&self, texts: &[&str], max_chars: Option<usize>) -> Result<Vec<Vec<u32>>, EncoderError> {
        let inputs: Vec<&str> = texts.iter().map(|t| cut_chars(t, max_chars)).collect();
        let encodings = self.inner.encode_batch_fast(inputs, true).map_err(|e| EncoderError::Tokenize(e.to_string()))?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
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
}
