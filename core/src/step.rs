//! The entries of a pipeline's `stages:` list: plugin stages, the `dedup:` barrier and
//! `remove_ids:` filters, told apart by their key.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dedup::DedupSpec;
use crate::pipeline::{OneOrMany, StageSpec};
use crate::resources::ResourceOverride;

/// One entry of `stages:`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Step {
    /// `- plugin: NAME`.
    Plugin(StageSpec),
    /// `- dedup: {method: exact | fuzzy, ...}`.
    Dedup(DedupStep),
    /// `- remove_ids: {path: ...}`.
    RemoveIds(RemoveIdsStep),
}

/// `- dedup: {...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DedupStep {
    pub dedup: DedupSpec,
    /// Label in logs (default `dedup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Overrides of the `minhash` stage's resources (fuzzy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceOverride>,
}

/// `- remove_ids: {...}`: drop the documents whose id is listed (NeMo Curator's removal step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveIdsStep {
    pub remove_ids: RemoveIdsSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveIdsSpec {
    /// Files or directories of ids: Parquet (a `_duplicates/` directory) or JSONL, read
    /// whole before the first batch. Relative paths resolve against the pipeline file.
    pub path: OneOrMany,
    /// The column (Parquet) or field (JSONL) holding the ids (default `id`).
    #[serde(default = "default_id_field")]
    pub field: String,
}

impl Step {
    /// Which kind of entry a mapping is: `dedup` and `remove_ids` keys mark the built-in
    /// steps, anything else is a plugin stage. Errors: (path inside the entry, message).
    pub fn from_value(v: serde_json::Value) -> Result<Step, (String, String)> {
        fn de<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, (String, String)> {
            serde_path_to_error::deserialize(v).map_err(|e| (e.path().to_string(), e.inner().to_string()))
        }
        let has = |k: &str| v.as_object().is_some_and(|m| m.contains_key(k));
        if has("dedup") {
            de(v).map(Step::Dedup)
        } else if has("remove_ids") {
            de(v).map(Step::RemoveIds)
        } else {
            de(v).map(Step::Plugin)
        }
    }

    /// The plugin stage, if this is one.
    pub fn plugin(&self) -> Option<&StageSpec> {
        match self {
            Step::Plugin(s) => Some(s),
            _ => None,
        }
    }

    /// The label used in logs and errors.
    pub fn label(&self) -> &str {
        match self {
            Step::Plugin(s) => s.label(),
            Step::Dedup(d) => d.name.as_deref().unwrap_or("dedup"),
            Step::RemoveIds(r) => r.name.as_deref().unwrap_or("remove_ids"),
        }
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Step::from_value(v)
            .map_err(|(path, msg)| serde::de::Error::custom(if path.is_empty() || path == "." { msg } else { format!("{path}: {msg}") }))
    }
}

fn default_id_field() -> String {
    "id".into()
}
