//! `plugin install SRC` and `plugin publish FILE REF`: a plugin file (with its signature) from
//! a path or an OCI registry into a plugins directory, passing the trust check (and the lock,
//! when given) before it gets its final name there.

use std::path::{Path, PathBuf};

use curator_core::trust::TrustSpec;

use crate::oci::{self, Artifact};
use crate::plan::lock::LockFile;
use crate::trust::{self, Standing, TrustStore};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    #[error("{src}: refused: it {reason}")]
    Refused { src: String, reason: String },
}

fn io(path: &Path, source: std::io::Error) -> InstallError {
    InstallError::Io { path: path.display().to_string(), source }
}

/// A plugin file and the signature beside it, if any.
pub fn read_local(file: &Path) -> Result<Artifact, InstallError> {
    let bytes = std::fs::read(file).map_err(|e| io(file, e))?;
    let signature = std::fs::read_to_string(trust::sig_path(file)).ok();
    let file_name = file.file_name().and_then(|n| n.to_str()).unwrap_or("plugin.wasm").to_string();
    Ok(Artifact { file_name, bytes, signature })
}

/// A plugin file at an `https://` URL (plain `http://` only on loopback), and the signature
/// at the same URL plus `.minisig`.
pub fn read_url(url: &str) -> Result<Artifact, InstallError> {
    let err = |e: String| InstallError::Io { path: url.to_string(), source: std::io::Error::other(e) };
    let parsed = url::Url::parse(url).map_err(|e| err(e.to_string()))?;
    let loopback = crate::io::storage::is_loopback(parsed.host_str().unwrap_or_default());
    if parsed.scheme() == "http" && !loopback {
        return Err(err("plain http:// is accepted only from this machine; use https://".into()));
    }
    let file_name = parsed.path().rsplit('/').next().filter(|n| !n.is_empty() && !n.starts_with('.')).unwrap_or("plugin.wasm").to_string();
    let (bytes, signature) = crate::io::remote::fetch_with(&parsed, loopback, trust::SIG_SUFFIX)
        .map_err(|source| InstallError::Io { path: url.to_string(), source })?;
    Ok(Artifact { file_name, bytes, signature: signature.map(|b| String::from_utf8_lossy(&b).into_owned()) })
}

/// Fetch `src` (`oci://…`, `https://…` or a path), check it, and put it into `dir`; returns its path and
/// standing. Nothing lands under its final name unless every check passed.
pub fn install(
    src: &str,
    dir: &Path,
    policy: &TrustSpec,
    store: &TrustStore,
    lock: Option<&LockFile>,
) -> Result<(PathBuf, Standing), InstallError> {
    let artifact = if src.starts_with("oci://") {
        oci::fetch(src)?
    } else if src.starts_with("https://") || src.starts_with("http://") {
        read_url(src)?
    } else {
        read_local(Path::new(src))?
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    // Checked where it will live (same filesystem), under a name the registry skips.
    let staging = tempfile::Builder::new().prefix(".install-").tempdir_in(dir).map_err(|e| io(dir, e))?;
    let staged = staging.path().join(&artifact.file_name);
    std::fs::write(&staged, &artifact.bytes).map_err(|e| io(&staged, e))?;
    if let Some(sig) = &artifact.signature {
        std::fs::write(trust::sig_path(&staged), sig).map_err(|e| io(&staged, e))?;
    }
    let refused = |reason: String| InstallError::Refused { src: src.to_string(), reason };
    let standing = trust::check(&staged, policy, store).map_err(refused)?;
    if let Some(lock) = lock {
        let sha = crate::plan::lock::sha256_file(&staged).map_err(|e| io(&staged, e))?;
        if !lock.plugins.iter().any(|p| p.sha256 == sha) {
            return Err(refused(format!(
                "has sha256 {sha}, which the lock pins for no plugin (it pins {})",
                lock.plugins.iter().map(|p| format!("{} {}", p.name, p.sha256)).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let target = dir.join(&artifact.file_name);
    if artifact.signature.is_some() {
        std::fs::rename(trust::sig_path(&staged), trust::sig_path(&target)).map_err(|e| io(&target, e))?;
    } else {
        // A stale signature of an earlier file would make the new one look tampered.
        let _ = std::fs::remove_file(trust::sig_path(&target));
    }
    std::fs::rename(&staged, &target).map_err(|e| io(&target, e))?;
    Ok((target, standing))
}
