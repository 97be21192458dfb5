//! The plugin manifest: what a plugin file says about itself (DESIGN §6).
//!
//! A WASM plugin carries it as JSON in the custom section [`MANIFEST_SECTION`]; the host reads
//! it from there without instantiating the plugin.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resources::{ResourceError, Resources};

/// The WIT package that WASM stages implement.
pub const WIT_PACKAGE: &str = "curator:stage@0.4.0";
/// Major version of the stage contract (`sdk/include/curator_stage.h` is the source; a test in
/// the SDK checks that this agrees). A plugin built for another major is refused.
pub const ABI_MAJOR: u32 = 0;
/// Minor version of the stage contract. From 1.0 on, plugins with a lower minor still load;
/// while the major is 0 every minor breaks, so only this one does.
pub const ABI_MINOR: u32 = 4;

/// Whether a plugin built for `major.minor` runs on this host.
pub fn abi_compatible(major: u32, minor: u32) -> bool {
    major == ABI_MAJOR && if ABI_MAJOR == 0 { minor == ABI_MINOR } else { minor <= ABI_MINOR }
}
/// Name of the custom section holding the manifest JSON.
pub const MANIFEST_SECTION: &str = "curator-manifest";

/// How the plugin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// A sandboxed WASM component (`wasm32-wasip2`).
    Wasm,
    /// A native shared library behind the C ABI, run in worker processes.
    Native,
}

/// A directory the plugin asks to see. The pipeline grants it by `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectoryRequest {
    /// Logical name; the guest sees the granted directory at `/<name>`.
    pub name: String,
    /// Whether the stage needs to write there (read-only otherwise).
    #[serde(default)]
    pub writable: bool,
    /// Why the stage needs it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// What the plugin may touch beyond its own memory. Nothing by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<DirectoryRequest>,
}

/// ABI version a plugin was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Abi {
    pub major: u32,
    pub minor: u32,
}

impl Default for Abi {
    fn default() -> Self {
        Abi { major: ABI_MAJOR, minor: ABI_MINOR }
    }
}

/// A plugin's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Stage name used in pipeline files (`[a-z0-9_-]+`).
    pub name: String,
    /// Semantic version of the plugin.
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub license: String,
    pub abi: Abi,
    pub kind: PluginKind,
    #[serde(default)]
    pub resources: Resources,
    /// Preferred documents per batch; the pipeline may override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    /// Columns the stage reads.
    #[serde(default)]
    pub input_columns: Vec<String>,
    /// Params whose value names one more column the stage reads (`text_field`,
    /// `embedding_field`: a pipeline that renames a column tells the stage, and the host
    /// hands that column over). Each must be a string property of `params_schema`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_params: Vec<String>,
    /// Columns the stage writes or adds.
    #[serde(default)]
    pub output_columns: Vec<String>,
    /// Int64 output columns whose totals the run's summary reports for this stage (the
    /// tokens a model server counted, say). Each must be one of `output_columns`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sums: Vec<String>,
    /// JSON Schema of the `params:` object.
    pub params_schema: serde_json::Value,
    #[serde(default)]
    pub permissions: Permissions,
    /// Node-level assets to fetch once per machine before workers start (reserved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_on_node: Vec<String>,
}

/// Why a manifest is invalid. Messages name the field.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest: {path}: {message}")]
    Parse { path: String, message: String },
    #[error("manifest: name: {0:?} is not a valid stage name (use lowercase letters, digits, '_' and '-')")]
    BadName(String),
    #[error("manifest: abi: plugin built for ABI {found_major}.{found_minor}, host supports {ABI_MAJOR}.{ABI_MINOR}")]
    AbiMismatch { found_major: u32, found_minor: u32 },
    #[error("manifest: resources.{0}")]
    Resources(#[from] ResourceError),
    #[error("manifest: params_schema: must be a JSON object with \"type\": \"object\"")]
    BadParamsSchema,
    #[error("manifest: permissions.directories: {0}")]
    BadDirectory(String),
    #[error("manifest: input_params: {0:?} is not a string property of params_schema")]
    BadInputParam(String),
    #[error("manifest: sums: {0:?} is not one of output_columns")]
    BadSum(String),
}

impl Manifest {
    /// Parse and validate a manifest from its JSON text.
    pub fn from_json(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let manifest: Manifest = serde_path_to_error::deserialize(de)
            .map_err(|e| ManifestError::Parse { path: e.path().to_string(), message: e.inner().to_string() })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Check the manifest's invariants.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if !is_valid_name(&self.name) {
            return Err(ManifestError::BadName(self.name.clone()));
        }
        if !abi_compatible(self.abi.major, self.abi.minor) {
            return Err(ManifestError::AbiMismatch { found_major: self.abi.major, found_minor: self.abi.minor });
        }
        self.resources.validate()?;
        if self.params_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(ManifestError::BadParamsSchema);
        }
        for d in &self.permissions.directories {
            if !is_valid_name(&d.name) {
                return Err(ManifestError::BadDirectory(format!("{:?} is not a valid directory name", d.name)));
            }
        }
        for p in &self.input_params {
            if self.params_schema.pointer(&format!("/properties/{p}/type")).and_then(|t| t.as_str()) != Some("string") {
                return Err(ManifestError::BadInputParam(p.clone()));
            }
        }
        if let Some(c) = self.sums.iter().find(|c| !self.output_columns.contains(c)) {
            return Err(ManifestError::BadSum(c.clone()));
        }
        Ok(())
    }

    /// The columns a stage with these `params` reads: `input_columns`, then the column each
    /// of `input_params` names (its value, or its schema default when the pipeline leaves it
    /// out), each once.
    pub fn columns_read(&self, params: &serde_json::Value) -> Vec<String> {
        let mut cols = self.input_columns.clone();
        for p in &self.input_params {
            let named = params.get(p).or_else(|| self.params_schema.pointer(&format!("/properties/{p}/default"))).and_then(|v| v.as_str());
            // An empty name names no column (an optional one left out).
            if let Some(c) = named
                && !c.is_empty()
                && !cols.iter().any(|x| x == c)
            {
                cols.push(c.to_string());
            }
        }
        cols
    }
}

/// Stage and directory names: non-empty, lowercase ASCII letters, digits, `_` and `-`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_params_add_the_columns_their_values_name() {
        let mut m = sample();
        m["input_columns"] = serde_json::json!(["id"]);
        m["input_params"] = serde_json::json!(["text_field"]);
        m["params_schema"] = serde_json::json!({"type": "object", "properties": {"text_field": {"type": "string", "default": "text"}}});
        let m = Manifest::from_json(m.to_string().as_bytes()).expect("valid");
        assert_eq!(m.columns_read(&serde_json::json!({})), ["id", "text"]);
        assert_eq!(m.columns_read(&serde_json::json!({"text_field": "title"})), ["id", "title"]);
        assert_eq!(m.columns_read(&serde_json::json!({"text_field": "id"})), ["id"]);
        let mut bad = sample();
        bad["input_params"] = serde_json::json!(["missing"]);
        let err = Manifest::from_json(bad.to_string().as_bytes()).expect_err("no such param");
        assert!(err.to_string().contains("\"missing\""), "{err}");
    }

    #[test]
    fn sums_name_output_columns() {
        let mut m = sample();
        m["output_columns"] = serde_json::json!(["tokens"]);
        m["sums"] = serde_json::json!(["tokens"]);
        assert_eq!(Manifest::from_json(m.to_string().as_bytes()).expect("valid").sums, ["tokens"]);
        m["sums"] = serde_json::json!(["tokens", "other"]);
        let err = Manifest::from_json(m.to_string().as_bytes()).expect_err("not an output");
        assert_eq!(err.to_string(), "manifest: sums: \"other\" is not one of output_columns");
    }

    fn sample() -> serde_json::Value {
        serde_json::json!({
            "name": "word_count_filter",
            "version": "0.1.0",
            "abi": {"major": ABI_MAJOR, "minor": ABI_MINOR},
            "kind": "wasm",
            "resources": {"cpus": 1.0},
            "params_schema": {"type": "object", "properties": {}},
        })
    }

    #[test]
    fn parses_valid_manifest() {
        let m = Manifest::from_json(sample().to_string().as_bytes()).unwrap();
        assert_eq!(m.name, "word_count_filter");
        assert_eq!(m.kind, PluginKind::Wasm);
        assert!(m.permissions.directories.is_empty());
    }

    #[test]
    fn unknown_field_is_named() {
        let mut v = sample();
        v["resources"]["cpu"] = serde_json::json!(2);
        let err = Manifest::from_json(v.to_string().as_bytes()).unwrap_err().to_string();
        assert!(err.contains("resources") && err.contains("unknown field `cpu`"), "{err}");
    }

    #[test]
    fn a_plugin_built_for_a_newer_minor_is_refused_naming_both_versions() {
        let mut v = sample();
        v["abi"]["minor"] = serde_json::json!(ABI_MINOR + 1);
        let err = Manifest::from_json(v.to_string().as_bytes()).unwrap_err().to_string();
        assert!(err.contains(&format!("built for ABI {ABI_MAJOR}.{}, host supports {ABI_MAJOR}.{ABI_MINOR}", ABI_MINOR + 1)), "{err}");
    }

    #[test]
    fn abi_major_mismatch_refused() {
        let mut v = sample();
        v["abi"]["major"] = serde_json::json!(ABI_MAJOR + 1);
        let err = Manifest::from_json(v.to_string().as_bytes()).unwrap_err().to_string();
        assert!(err.contains(&format!("built for ABI {}.", ABI_MAJOR + 1)), "{err}");
        assert!(err.contains(&format!("host supports {ABI_MAJOR}.{ABI_MINOR}")), "{err}");
    }

    #[test]
    fn both_gpu_kinds_refused() {
        let mut v = sample();
        v["resources"] = serde_json::json!({"cpus": 1, "gpus": 1, "gpu_memory_gb": 4});
        let err = Manifest::from_json(v.to_string().as_bytes()).unwrap_err().to_string();
        assert!(err.contains("gpus") && err.contains("gpu_memory_gb"), "{err}");
    }

    #[test]
    fn names() {
        assert!(is_valid_name("word_count-2"));
        assert!(!is_valid_name("Word"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("../x"));
    }
}
