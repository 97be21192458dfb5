//! Plugins in OCI registries, in the layout `wkg` and wasmCloud use for WebAssembly
//! components (config `application/vnd.wasm.config.v0+json`, layer `application/wasm`), with
//! the plugin's minisign signature as a second layer and its file name as the layer's title.
//! Native libraries travel the same way under their own media type. `oci-client` does the
//! protocol (token auth included) on the host's IO runtime; loopback registries are spoken
//! to over plain HTTP, all others over HTTPS.

// The registry client (`oci-client`, over the `remote` feature's HTTP stack).
#[cfg(feature = "remote")]
mod registry;
#[cfg(feature = "remote")]
pub use registry::{fetch, publish};

pub const WASM_LAYER: &str = "application/wasm";
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
pub const NATIVE_LAYER: &str = "application/vnd.curator.plugin.native.v1";
pub const NATIVE_CONFIG: &str = "application/vnd.curator.plugin.config.v1+json";
pub const SIGNATURE_LAYER: &str = "application/vnd.curator.minisig.v1";

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("{0:?} is not an OCI reference such as oci://registry.example.com/team/stage:1.0: {1}")]
    Reference(String, String),
    #[error("{reference}: {message}")]
    Registry { reference: String, message: String },
    #[error("{0}: {msg}", msg = crate::io::remote::NOT_BUILT)]
    #[cfg(not(feature = "remote"))]
    NotBuilt(String),
}

/// A plugin file as it travels: its name, bytes and signature (the `.minisig` text).
pub struct Artifact {
    pub file_name: String,
    pub bytes: Vec<u8>,
    pub signature: Option<String>,
}

/// Push `artifact` to `reference`: not in a build without the `remote` feature.
#[cfg(not(feature = "remote"))]
pub fn publish(_artifact: &Artifact, reference: &str) -> Result<String, OciError> {
    Err(OciError::NotBuilt(reference.to_string()))
}

/// Pull the plugin at `reference`: not in a build without the `remote` feature.
#[cfg(not(feature = "remote"))]
pub fn fetch(reference: &str) -> Result<Artifact, OciError> {
    Err(OciError::NotBuilt(reference.to_string()))
}
