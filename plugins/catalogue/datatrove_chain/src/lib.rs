//! datatrove's quality filters (FineWeb's chain) run as one stage. Each filter keeps the name
//! and params of the stage that runs it alone; the chain runs them in order on each document
//! and stops at the first that drops it, exactly as the same stages one after another would.
//! English words (spaCy's tokenization, the costliest part) are split once and shared by the
//! Gopher filters; C4QualityFilter's rewritten text goes on to the filters after it.
//!
//! ```yaml
//! - plugin: datatrove_chain
//!   params:
//!     filters:
//!       - {filter: gopher_repetition_filter}
//!       - {filter: gopher_quality_filter, min_doc_words: 50}
//!       - {filter: c4_quality_filter, filter_no_terminal_punct: false}
//!       - {filter: fineweb_quality_filter}
//! ```

use curator_heuristics::datatrove::{AnyFilter, run_chain};
use curator_sdk::prelude::*;
use curator_sdk::serde_json::Value;

/// datatrove's quality filters, in order, as one stage (words split once per document).
#[stage(name = "datatrove_chain", cpus = 1.0, memory_mb = 256)]
pub struct DatatroveChain {
    /// The filters in order: `{filter: <stage name>, <that stage's params>}`.
    pub filters: Vec<Value>,
    #[state]
    steps: Vec<AnyFilter>,
}

/// A chain step from its params object (`filters[index]`); errors name the step.
pub fn parse_step(index: usize, value: &Value) -> Result<AnyFilter, StageError> {
    let err = |m: String| StageError::InvalidParams(format!("filters[{index}]: {m}"));
    let (name, params) = curator_heuristics::chain_step(value, "gopher_quality_filter").map_err(err)?;
    AnyFilter::from_params(&name, Value::Object(params)).map_err(|e| err(format!("{name}: {e}")))
}

impl Rewrite for DatatroveChain {
    fn init(&mut self) -> Result<(), StageError> {
        self.steps = curator_heuristics::parse_steps(&self.filters, parse_step)?;
        Ok(())
    }

    fn rewrite<'a>(&self, doc: &Doc<'a>) -> Option<Cow<'a, str>> {
        run_chain(&self.steps, doc.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::serde_json::json;

    #[test]
    fn steps_parse_and_errors_name_the_step() {
        assert!(matches!(parse_step(0, &json!({"filter": "gopher_repetition_filter"})).unwrap(), AnyFilter::GopherRepetition(_)));
        let e = parse_step(3, &json!({"filter": "c4_quality_filter", "min_num_sentence": 2})).unwrap_err().to_string();
        assert!(e.contains("filters[3]") && e.contains("min_num_sentence"), "{e}");
        assert!(parse_step(1, &json!({"filter": "nope"})).unwrap_err().to_string().contains("unknown filter `nope`"));
    }
}
