//! NeMo Curator's `TokenCountFilter` as a stage: counts tokens with a Hugging Face
//! `tokenizer.json` (WordPiece or byte-level BPE; special tokens included, as
//! `AutoTokenizer.encode` counts them) read from the directory the pipeline grants as
//! `tokenizer`, and keeps documents with `min_tokens ≤ count ≤ max_tokens`.

use curator_heuristics::tokenizer::Tokenizer;
use curator_sdk::prelude::*;

/// Keeps documents within a token-count range.
#[stage(name = "token_count_filter", score_filter, cpus = 1.0, memory_mb = 256, dir = "tokenizer")]
pub struct TokenCountFilter {
    /// The tokenizer file as the stage sees it (inside the granted `tokenizer` directory).
    #[param(default = "/tokenizer/tokenizer.json")]
    pub tokenizer_file: String,
    /// Fewest tokens kept (0: no minimum).
    #[param(default = 0)]
    pub min_tokens: u64,
    /// Most tokens kept (none: no maximum).
    pub max_tokens: Option<u64>,
    #[state]
    tokenizer: Option<Tokenizer>,
}

impl Stage for TokenCountFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.tokenizer = Some(load_granted("tokenizer_file", &self.tokenizer_file, "tokenizer", |bytes| {
            std::str::from_utf8(bytes).map_err(|e| e.to_string()).and_then(|json| Tokenizer::from_json(json).map_err(|e| e.to_string()))
        })?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let t = self.tokenizer.as_ref().ok_or_else(|| StageError::Failed("the tokenizer is not loaded".into()))?;
        score_filter(&batch, self.score_field.as_deref(), self.filter, self.invert, |doc| {
            let n = t.count(doc.text()) as u64;
            Ok((n as f64, n >= self.min_tokens && self.max_tokens.is_none_or(|m| n <= m)))
        })
    }
}
