//! Pushing and pulling plugins with `oci-client` on the host's IO runtime.

use std::collections::BTreeMap;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::Digest;

use super::{Artifact, NATIVE_CONFIG, NATIVE_LAYER, OciError, SIGNATURE_LAYER, WASM_CONFIG, WASM_LAYER};

const TITLE: &str = "org.opencontainers.image.title";

fn parse(reference: &str) -> Result<Reference, OciError> {
    let bare = reference.strip_prefix("oci://").unwrap_or(reference);
    bare.parse::<Reference>().map_err(|e| OciError::Reference(reference.to_string(), e.to_string()))
}

fn client(r: &Reference) -> Client {
    let registry = r.resolve_registry();
    // `host:port`, `[::1]:port` or a bare host.
    let host = match registry.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => registry,
    };
    let protocol = if crate::io::storage::is_loopback(host) { ClientProtocol::Http } else { ClientProtocol::Https };
    crate::io::tls::install_crypto_provider();
    Client::new(ClientConfig { protocol, ..Default::default() })
}

/// Credentials from `CURATOR_OCI_USERNAME` / `CURATOR_OCI_PASSWORD`, else anonymous.
fn auth() -> RegistryAuth {
    match (std::env::var("CURATOR_OCI_USERNAME"), std::env::var("CURATOR_OCI_PASSWORD")) {
        (Ok(u), Ok(p)) => RegistryAuth::Basic(u, p),
        _ => RegistryAuth::Anonymous,
    }
}

/// Push `artifact` to `reference`; returns the manifest's URL.
pub fn publish(artifact: &Artifact, reference: &str) -> Result<String, OciError> {
    let r = parse(reference)?;
    let wasm = artifact.file_name.ends_with(".wasm");
    let title = BTreeMap::from([(TITLE.to_string(), artifact.file_name.clone())]);
    let mut layers = vec![ImageLayer::new(artifact.bytes.clone(), (if wasm { WASM_LAYER } else { NATIVE_LAYER }).to_string(), Some(title))];
    if let Some(sig) = &artifact.signature {
        let name = BTreeMap::from([(TITLE.to_string(), format!("{}{}", artifact.file_name, crate::trust::SIG_SUFFIX))]);
        layers.push(ImageLayer::new(sig.clone().into_bytes(), SIGNATURE_LAYER.to_string(), Some(name)));
    }
    let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&artifact.bytes)));
    let config = if wasm {
        let json = serde_json::json!({"architecture": "wasm", "os": "wasip2", "layerDigests": [digest]});
        Config::new(json.to_string().into_bytes(), WASM_CONFIG.to_string(), None)
    } else {
        Config::new(b"{}".to_vec(), NATIVE_CONFIG.to_string(), None)
    };
    let manifest = OciImageManifest::build(&layers, &config, None);
    let err = |e: oci_client::errors::OciDistributionError| OciError::Registry { reference: reference.to_string(), message: e.to_string() };
    crate::io::remote::runtime()
        .block_on(async { client(&r).push(&r, &layers, config, &auth(), Some(manifest)).await.map(|p| p.manifest_url).map_err(err) })
}

/// Pull the plugin at `reference`.
pub fn fetch(reference: &str) -> Result<Artifact, OciError> {
    let r = parse(reference)?;
    let err = |e: oci_client::errors::OciDistributionError| OciError::Registry { reference: reference.to_string(), message: e.to_string() };
    let image = crate::io::remote::runtime()
        .block_on(async { client(&r).pull(&r, &auth(), vec![WASM_LAYER, NATIVE_LAYER, SIGNATURE_LAYER]).await.map_err(err) })?;
    let bad = |message: &str| OciError::Registry { reference: reference.to_string(), message: message.to_string() };
    let plugin = image
        .layers
        .iter()
        .find(|l| l.media_type == WASM_LAYER || l.media_type == NATIVE_LAYER)
        .ok_or_else(|| bad("holds no plugin layer (application/wasm or a curator native plugin)"))?;
    let title = plugin.annotations.as_ref().and_then(|a| a.get(TITLE)).cloned();
    let file_name = match title {
        Some(t) if !t.contains('/') && !t.starts_with('.') && !t.is_empty() => t,
        Some(t) => return Err(bad(&format!("its file name {t:?} is not a plain file name"))),
        None => format!(
            "{}.{}",
            r.repository().rsplit('/').next().unwrap_or("plugin"),
            if plugin.media_type == WASM_LAYER { "wasm" } else { "so" }
        ),
    };
    let signature = image.layers.iter().find(|l| l.media_type == SIGNATURE_LAYER).map(|l| String::from_utf8_lossy(&l.data).into_owned());
    Ok(Artifact { file_name, bytes: plugin.data.to_vec(), signature })
}
