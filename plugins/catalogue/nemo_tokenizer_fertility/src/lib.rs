//! NeMo Curator's `TokenizerFertilityFilter` as a stage: characters per SentencePiece piece
//! (`len(text) / len(encode_as_pieces(text))`, -1 for no pieces), with the model read from
//! the directory the pipeline grants as `tokenizer`; keeps documents at or above
//! `min_char_to_token_ratio` (code that tokenizes into many short pieces is often data).

use curator_heuristics::sentencepiece::SentencePiece;
use curator_sdk::prelude::*;

/// Keeps documents whose text compresses to few SentencePiece pieces per character.
#[stage(name = "tokenizer_fertility_filter", score_filter, cpus = 1.0, memory_mb = 256, dir = "tokenizer")]
pub struct TokenizerFertilityFilter {
    /// The SentencePiece `.model` file as the stage sees it (inside the granted `tokenizer` directory).
    pub path_to_tokenizer: String,
    /// Fewest characters per piece kept.
    #[param(default = 2.5)]
    pub min_char_to_token_ratio: f64,
    #[state]
    model: Option<SentencePiece>,
}

impl TokenizerFertilityFilter {
    fn model(&self) -> Result<&SentencePiece, StageError> {
        self.model.as_ref().ok_or_else(|| StageError::Failed("the tokenizer is not loaded".into()))
    }
}

impl Stage for TokenizerFertilityFilter {
    fn init(&mut self) -> Result<(), StageError> {
        self.model = Some(load_granted("path_to_tokenizer", &self.path_to_tokenizer, "tokenizer", SentencePiece::load)?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let model = self.model()?;
        score_filter(&batch, self.score_field.as_deref(), self.filter, self.invert, |doc| {
            let pieces = model.count_pieces(doc.text());
            let s = if pieces == 0 { -1.0 } else { doc.text().chars().count() as f64 / pieces as f64 };
            Ok((s, s >= self.min_char_to_token_ratio))
        })
    }
}
