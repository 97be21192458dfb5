//! `PIPELINE.lock`: the plugins a pipeline was tested with, by name, version, ABI and
//! sha256 (`curator-host lock PIPELINE.yaml` writes it). A plan made with a lock beside its
//! pipeline refuses a plugin whose file differs, naming the plugin and both hashes, before
//! anything starts it.

use std::io::Read;
use std::path::{Path, PathBuf};

use curator_core::SpecError;
use sha2::Digest;

use super::PlannedStage;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LockFile {
    pub version: u32,
    pub plugins: Vec<LockedPlugin>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LockedPlugin {
    pub name: String,
    pub version: String,
    pub abi: String,
    pub kind: String,
    pub sha256: String,
    /// The file it was found in, for people (the hash is what is checked).
    pub file: String,
}

/// The lock file of `pipeline`: `x.yaml` → `x.lock`.
pub fn lock_path(pipeline: &Path) -> PathBuf {
    pipeline.with_extension("lock")
}

/// sha256 of a file, hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// The stages' plugin files (those that are files: not the built-in ones), each once.
fn files(stages: &[PlannedStage]) -> Vec<&PlannedStage> {
    let mut out: Vec<&PlannedStage> = Vec::new();
    for s in stages {
        if s.plugin.path.is_file() && !out.iter().any(|o| o.plugin.manifest.name == s.plugin.manifest.name) {
            out.push(s);
        }
    }
    out
}

/// The lock of a planned pipeline.
pub fn build(stages: &[PlannedStage]) -> std::io::Result<LockFile> {
    let mut plugins = Vec::new();
    for s in files(stages) {
        let m = &s.plugin.manifest;
        plugins.push(LockedPlugin {
            name: m.name.clone(),
            version: m.version.clone(),
            abi: format!("{}.{}", m.abi.major, m.abi.minor),
            kind: format!("{:?}", m.kind).to_lowercase(),
            sha256: sha256_file(&s.plugin.path)?,
            file: s.plugin.path.display().to_string(),
        });
    }
    plugins.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(LockFile { version: 1, plugins })
}

/// Read a lock file; `None` when there is none.
pub fn load(path: &Path) -> Result<Option<LockFile>, SpecError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| SpecError::new(&path.display().to_string(), "", format!("not a curator lock file: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SpecError::new(&path.display().to_string(), "", e.to_string())),
    }
}

/// Every planned plugin against the lock: each must be in it with the same sha256.
pub fn check(label: &str, lock_file: &Path, stages: &[PlannedStage], lock: &LockFile) -> Vec<SpecError> {
    let mut errors = Vec::new();
    for s in files(stages) {
        let m = &s.plugin.manifest;
        let at = format!("stages[{}].plugin", s.index);
        let Some(locked) = lock.plugins.iter().find(|p| p.name == m.name) else {
            errors.push(SpecError::new(
                label,
                at,
                format!("{} is not in {} (run `curator-host lock` to add it)", m.name, lock_file.display()),
            ));
            continue;
        };
        match sha256_file(&s.plugin.path) {
            Ok(h) if h == locked.sha256 => {}
            Ok(h) => errors.push(SpecError::new(
                label,
                at,
                format!(
                    "{} {} ({}) has sha256 {h}, but {} pins {} {} with sha256 {} (another build or a tampered file; run `curator-host lock` to accept it)",
                    m.name,
                    m.version,
                    s.plugin.path.display(),
                    lock_file.display(),
                    locked.name,
                    locked.version,
                    locked.sha256
                ),
            )),
            Err(e) => errors.push(SpecError::new(label, at, format!("{}: {e}", s.plugin.path.display()))),
        }
    }
    errors
}
