//! NeMo Curator's `PerExtensionFilter` as a stage: line-length and character-mix limits per
//! (language, file extension), read from a metadata CSV (NeMo's `code_meta.csv` format) in the
//! directory the pipeline grants as `meta`. The extension comes from each document's
//! `extension` column (without the dot), as it does per file in a code dataset.

use std::collections::HashMap;

use curator_heuristics::code::{self, ExtensionRule};
use curator_sdk::prelude::*;

/// Keeps code files that pass their extension's limits (unknown extensions are dropped).
#[stage(name = "per_extension_filter", score_filter, cpus = 1.0, memory_mb = 128, dir = "meta", inputs = ["text", "extension"])]
pub struct PerExtensionFilter {
    /// The language, as in the CSV's `language` column (`python`, `c`, `c-sharp`, …).
    pub lang: String,
    /// The metadata CSV as the stage sees it (inside the granted `meta` directory).
    #[param(default = "/meta/code_meta.csv")]
    pub metadata_file: String,
    /// The rules for `lang`, loaded in `init`.
    #[state]
    rules: HashMap<(String, String), ExtensionRule>,
}

impl Stage for PerExtensionFilter {
    fn init(&mut self) -> Result<(), StageError> {
        let csv = std::fs::read_to_string(&self.metadata_file)
            .map_err(|e| StageError::InvalidParams(format!("metadata_file {}: {e} (grant its directory as `meta`)", self.metadata_file)))?;
        let rules = code::load_extension_rules(&csv, Some(&self.lang))
            .map_err(|e| StageError::InvalidParams(format!("{}: {e}", self.metadata_file)))?;
        self.rules = rules;
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let extensions = batch.column("extension")?.strings()?;
        let lang = code::csv_language(&self.lang);
        let (mut scores, mut keep) = (Vec::with_capacity(batch.len()), Vec::new());
        batch.for_each_doc(|doc| {
            let ext = extensions.get(doc.index()).unwrap_or("");
            let s = code::per_extension_score(doc.text(), self.rules.get(&(lang.clone(), ext.to_string())));
            if Output::score_filter_keeps(self.filter, self.invert, s != 0.0) {
                keep.push(doc.index() as u32);
            }
            scores.push(s);
            Ok::<_, StageError>(())
        })?;
        Ok(Output::score_filter(self.score_field.as_deref(), self.filter, &scores, keep))
    }
}
