//! The entries of a pipeline's `stages:` list: plugin stages, the `dedup:` barrier and
//! `remove_ids:` filters, told apart by their key, and what a plugin stage says
//! ([`StageSpec`]: params, resources, grants, isolation, branches).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dedup::DedupSpec;
use crate::io_spec::{OneOrMany, SinkSpec, default_id_field};
use crate::resources::ResourceOverride;

/// One entry of `stages:`.
// A pipeline holds a few of these, parsed once: their size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
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

/// A directory granted to a stage: a path (read-only) or `{path, writable}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Grant {
    Path(String),
    Full {
        path: String,
        #[serde(default)]
        writable: bool,
    },
}

impl Grant {
    pub fn path(&self) -> &str {
        match self {
            Grant::Path(p) | Grant::Full { path: p, .. } => p,
        }
    }
    pub fn writable(&self) -> bool {
        matches!(self, Grant::Full { writable: true, .. })
    }
}

/// Where a stage's instances run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// In the host process (WASM only): the sandbox checks the time limit in the guest's code.
    InProcess,
    /// In a worker process the host stops when a call runs over its time limit.
    Process,
}

/// One stage of the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// Name of the plugin (as in `curator-host plugin list`).
    pub plugin: String,
    /// Label in logs and errors (default: the plugin name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Parameters, checked against the plugin's params schema before any data is read.
    #[serde(default = "empty_object")]
    pub params: serde_json::Value,
    /// Overrides of the manifest's resource request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceOverride>,
    /// Documents per batch for this stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    /// Wall-clock limit per call, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Where a WASM stage runs: `in_process` (the default: in the host, its time limit checked
    /// by the compiled code at every loop and call) or `process` (in a worker process that is
    /// stopped when a call runs over: the code runs without those checks, ~20 % faster on
    /// heavy stages, for one copy of each batch to and from the worker). Native stages always
    /// run in worker processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// Directories granted to the stage, by the name its manifest requests them under.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grants: BTreeMap<String, Grant>,
    /// A fixed number of workers for this stage (autoscaling leaves it alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_workers: Option<usize>,
    /// The service (of `services:`) this stage sends requests to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The column this stage reads and writes as the document's text (NeMo Curator's
    /// `text_field` of `ScoreFilter` and `Modify`): the host hands the stage that column as
    /// `text`, and what the stage writes to `text` goes back to it; the document's own text is
    /// untouched. A utf8 column an earlier stage wrote (an LLM's answer, say) or the source has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_field: Option<String>,
    /// A second branch: the documents this stage dropped, written to their own sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<SinkSpec>,
    /// A second branch: a copy of what this stage kept, written to their own sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tee: Option<SinkSpec>,
}

impl StageSpec {
    /// The label used in logs and errors.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.plugin)
    }
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}
