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
        let csv = read_granted("metadata_file", &self.metadata_file, "meta")?;
        let rules = code::load_extension_rules(&String::from_utf8_lossy(&csv), Some(&self.lang))
            .map_err(|e| StageError::InvalidParams(format!("{}: {e}", self.metadata_file)))?;
        self.rules = rules;
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let extensions = batch.column("extension")?.strings()?;
        let lang = code::csv_language(&self.lang);
        score_filter(&batch, self.score_field.as_deref(), self.filter, self.invert, |doc| {
            let ext = extensions.get(doc.index()).unwrap_or("");
            let s = code::per_extension_score(doc.text(), self.rules.get(&(lang.clone(), ext.to_string())));
            Ok((s, s != 0.0))
        })
    }
}
