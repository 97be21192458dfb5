//! Nemotron-CC's knowledge-list post-processing (NeMo Curator's
//! `KnowledgeListPostProcessingStage`) as a map: the model's preamble line dropped, list
//! bullets and indentation removed. Run it on the answer's column with the stage's
//! `text_field` (NeMo's `input_field`). The logic lives in `curator-heuristics`
//! (`nemotron_cc`).

use curator_heuristics::nemotron_cc;
use curator_sdk::prelude::*;

/// Cleans up a knowledge-list answer.
#[stage(name = "knowledge_list_postprocess", cpus = 1.0, memory_mb = 128)]
pub struct KnowledgeListPostprocess {}

impl Map for KnowledgeListPostprocess {
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        Cow::Owned(nemotron_cc::knowledge_list(doc.text()))
    }
}
