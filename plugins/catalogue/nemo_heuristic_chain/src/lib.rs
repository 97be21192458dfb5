//! NeMo Curator's heuristic filters run as one stage. Each filter keeps the name and params of
//! the stage that runs it alone; the chain scores a document with each filter in order and
//! stops at the first that drops it, exactly as the same stages one after another would (a
//! dropped document never reaches the next stage). What the filters share (character counts,
//! words, lines, paragraphs, n-gram classes) is computed once per document instead of once per
//! filter: on NeMo's English chain that is most of the work.
//!
//! ```yaml
//! - plugin: heuristic_chain
//!   params:
//!     filters:
//!       - {filter: word_count_filter, min_words: 50, max_words: 100000}
//!       - {filter: repeating_top_n_grams_filter, n: 2, max_repeating_ngram_ratio: 0.2, score_field: top_2gram}
//! ```
//!
//! Each filter also takes ScoreFilter's `score_field` (write its score to that column; `NaN`
//! for documents an earlier filter dropped) and `invert` (keep what it would drop).

use curator_heuristics::nemo::{AnyHeuristic, View};
use curator_sdk::prelude::*;
use curator_sdk::serde_json::Value;

/// NeMo Curator's heuristic filters, in order, as one stage (each document examined once).
#[stage(name = "heuristic_chain", cpus = 1.0, memory_mb = 256)]
pub struct HeuristicChain {
    /// The filters in order: `{filter: <stage name>, <that stage's params>, score_field?, invert?}`.
    pub filters: Vec<Value>,
    #[state]
    steps: Vec<Step>,
}

/// One filter of the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub heuristic: AnyHeuristic,
    pub score_field: Option<String>,
    pub invert: bool,
}

/// A chain step from its params object (`filters[index]`); errors name the step.
pub fn parse_step(index: usize, value: &Value) -> Result<Step, StageError> {
    let err = |m: String| StageError::InvalidParams(format!("filters[{index}]: {m}"));
    let (name, mut params) = curator_heuristics::chain_step(value, "word_count_filter").map_err(err)?;
    let score_field = match params.remove("score_field") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(other) => return Err(err(format!("`score_field` must be a column name, got {other}"))),
    };
    let invert = match params.remove("invert") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(other) => return Err(err(format!("`invert` must be true or false, got {other}"))),
    };
    let heuristic = AnyHeuristic::from_params(&name, Value::Object(params)).map_err(|e| err(format!("{name}: {e}")))?;
    Ok(Step { heuristic, score_field, invert })
}

impl Stage for HeuristicChain {
    fn init(&mut self) -> Result<(), StageError> {
        self.steps = curator_heuristics::parse_steps(&self.filters, parse_step)?;
        let mut fields: Vec<&str> = self.steps.iter().filter_map(|s| s.score_field.as_deref()).collect();
        fields.sort_unstable();
        if let Some(w) = fields.windows(2).find(|w| w[0] == w[1]) {
            return Err(StageError::InvalidParams(format!("score_field `{}` is used by two filters", w[0])));
        }
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let steps = &self.steps;
        let mut keep = Vec::with_capacity(batch.len());
        let mut scores: Vec<Vec<f64>> =
            steps.iter().map(|s| Vec::with_capacity(if s.score_field.is_some() { batch.len() } else { 0 })).collect();
        batch.for_each_doc(|doc| {
            let mut view = View::new(doc.text());
            let mut kept = true;
            for (step, column) in steps.iter().zip(&mut scores) {
                if !kept {
                    if step.score_field.is_some() {
                        column.push(f64::NAN);
                    }
                    continue;
                }
                let s = step.heuristic.score_view(&mut view);
                if step.score_field.is_some() {
                    column.push(s);
                }
                kept = step.heuristic.keep(s) != step.invert;
            }
            if kept {
                keep.push(doc.index() as u32);
            }
            Ok::<_, StageError>(())
        })?;
        let columns: Vec<Column> =
            steps.iter().zip(&scores).filter_map(|(s, v)| s.score_field.as_deref().map(|name| Column::float64(name, v))).collect();
        Ok(if columns.is_empty() { Output::Selection(keep) } else { Output::Scored { columns, keep } })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::serde_json::json;

    #[test]
    fn steps_parse_with_defaults_and_errors_name_the_step() {
        let s = parse_step(0, &json!({"filter": "repeating_top_n_grams_filter", "n": 3, "score_field": "top3"})).unwrap();
        assert_eq!(s.heuristic.name(), "repeating_top_n_grams_filter");
        assert_eq!(s.score_field.as_deref(), Some("top3"));
        let e = parse_step(4, &json!({"filter": "word_count_filter", "min_wrds": 3})).unwrap_err().to_string();
        assert!(e.contains("filters[4]") && e.contains("min_wrds"), "{e}");
        let e = parse_step(1, &json!({"filter": "no_such_filter"})).unwrap_err().to_string();
        assert!(e.contains("unknown filter `no_such_filter`"), "{e}");
        assert!(parse_step(2, &json!({"n": 3})).unwrap_err().to_string().contains("missing `filter`"));
    }
}
