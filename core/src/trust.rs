//! Which plugin files a pipeline lets run (`trust:`): the setting only; checking signatures
//! is the host's job.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pipeline's `trust:` setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TrustSpec {
    Mode(TrustMode),
    Keys {
        /// Key IDs (16 hex digits, as `curator-host plugin keygen` and minisign print them;
        /// quote them in YAML, or an ID of digits only reads as a number).
        keys: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TrustMode {
    Any,
    Signed,
}

impl Default for TrustSpec {
    fn default() -> Self {
        TrustSpec::Mode(TrustMode::Any)
    }
}

impl TrustSpec {
    pub fn is_any(&self) -> bool {
        *self == TrustSpec::Mode(TrustMode::Any)
    }
}
