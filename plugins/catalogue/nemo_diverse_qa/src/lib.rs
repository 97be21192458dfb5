//! Nemotron-CC's Diverse-QA post-processing (NeMo Curator's `DiverseQAPostProcessingStage`):
//! the model's question–answer list in `qa_field` parsed into pairs, shuffled, between one
//! and a cap of them kept, and `qa_field` set to the document's text followed by those pairs
//! (empty when the answer has none: a `token_count_filter` after it drops those). The cap is
//! `max_num_pairs`, or, with `token_count_field` (the text's token count, which NeMo's
//! pre-processing computes), `max(1, int(max_num_pairs × tokens / 150))`. The logic lives in
//! `curator-heuristics` (`nemotron_cc`).
//!
//! NeMo draws with Python's unseeded `random`; here the draws come from `seed` and the
//! document, so reruns and resumed runs write the same pairs.

use curator_heuristics::nemotron_cc;
use curator_sdk::prelude::*;

/// Turns a Diverse-QA answer into the document followed by some of its question–answer pairs.
#[stage(
    name = "diverse_qa_postprocess",
    cpus = 1.0,
    memory_mb = 256,
    inputs = ["id", "text"],
    input_params = ["qa_field", "token_count_field"],
    outputs = ["diverse_qa"]
)]
pub struct DiverseQaPostprocess {
    /// The column holding the model's answer; the result replaces it.
    #[param(default = "diverse_qa")]
    pub qa_field: String,
    /// The answer's first line that is skipped (the prompt asks the model to begin with it).
    #[param(default = "Here are the questions and answers based on the provided text:")]
    pub prefix: String,
    /// Most pairs kept (scaled by the text's length with `token_count_field`).
    #[param(default = 10, min = 1)]
    pub max_num_pairs: u64,
    /// A column with the text's token count (empty: none, the cap is `max_num_pairs`).
    #[param(default = "")]
    pub token_count_field: String,
    /// Seed of the shuffle and of the number kept.
    #[param(default = 0)]
    pub seed: u64,
}

impl Stage for DiverseQaPostprocess {
    fn init(&mut self) -> Result<(), StageError> {
        if matches!(self.qa_field.as_str(), "" | "text" | "id") || self.qa_field.starts_with('_') {
            return Err(StageError::InvalidParams(format!("qa_field: {:?} is not a column a stage may write", self.qa_field)));
        }
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let text = batch.column("text")?.strings()?;
        let qa_column = batch.column(&self.qa_field)?;
        let qa = qa_column.strings()?;
        let tokens: Option<Vec<Option<u64>>> = match self.token_count_field.as_str() {
            "" => None,
            f => {
                let c = batch.column(f)?;
                let values: Vec<f64> = match c.ty {
                    ColumnType::Int64 => c.i64_values()?.into_iter().map(|v| v as f64).collect(),
                    ColumnType::Float64 => c.f64_values()?,
                    other => return Err(StageError::Failed(format!("token_count_field {f:?} is {other:?}, not a number"))),
                };
                Some(values.iter().enumerate().map(|(i, v)| c.is_valid(i).then_some(v.max(0.0) as u64)).collect())
            }
        };
        let out: Vec<String> = (0..batch.len())
            .map(|i| {
                let generated = if qa_column.is_valid(i) { qa.get(i).unwrap_or_default() } else { "" };
                let cap = nemotron_cc::diverse_qa_cap(self.max_num_pairs as usize, tokens.as_ref().and_then(|t| t[i]));
                nemotron_cc::diverse_qa(text.get(i).unwrap_or_default(), generated, &self.prefix, cap, self.seed)
            })
            .collect();
        Ok(Output::Columns(vec![Column::utf8(&self.qa_field, out.iter().map(String::as_str))]))
    }
}
