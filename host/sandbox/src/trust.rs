//! Signed plugins: minisign-compatible ed25519 keys and signatures (the `minisign` crate),
//! a trust store of public keys, and the check every plugin file passes before anything reads
//! or loads it. A signature lives beside its file (`FILE.minisig`, as minisign writes it), so
//! `minisign -Vm FILE -p KEY.pub` verifies what `curator-host plugin sign` signed, and the
//! other way round.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use curator_core::trust::{TrustMode, TrustSpec};
use minisign::{KeyPair, PublicKey, PublicKeyBox, SecretKeyBox, SignatureBox};

pub const SIG_SUFFIX: &str = ".minisig";
/// The folder, beside the `curator-host` binary, of the keys its own build signed its
/// first-party plugins with.
pub const BUILD_TRUST_DIR: &str = "trust";

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Key { path: String, message: String },
}

fn io(path: &Path, source: std::io::Error) -> TrustError {
    TrustError::Io { path: path.display().to_string(), source }
}

/// A key's ID as minisign prints it: its 8-byte key number as 16 hex digits.
pub fn key_id(keynum: &[u8]) -> String {
    let mut b = [0u8; 8];
    b.copy_from_slice(&keynum[..8.min(keynum.len())]);
    format!("{:016X}", u64::from_le_bytes(b))
}

/// The signature file of `file`.
pub fn sig_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(SIG_SUFFIX);
    PathBuf::from(s)
}

/// Make a key pair: `PREFIX.key` (the secret key, unencrypted, readable by its owner only)
/// and `PREFIX.pub`. Returns the key ID.
pub fn keygen(prefix: &Path) -> Result<String, TrustError> {
    let key = PathBuf::from(format!("{}.key", prefix.display()));
    let public = PathBuf::from(format!("{}.pub", prefix.display()));
    for p in [&key, &public] {
        if p.exists() {
            return Err(TrustError::Key { path: p.display().to_string(), message: "already exists; not overwritten".into() });
        }
    }
    let bad = |p: &Path, e: minisign::PError| TrustError::Key { path: p.display().to_string(), message: e.to_string() };
    let KeyPair { pk, sk } = KeyPair::generate_unencrypted_keypair().map_err(|e| bad(&key, e))?;
    let id = key_id(pk.keynum());
    let sk_box = sk.to_box(Some(&format!("curator secret key {id}"))).map_err(|e| bad(&key, e))?;
    let pk_box = pk.to_box().map_err(|e| bad(&public, e))?;
    if let Some(d) = key.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&key).map_err(|e| io(&key, e))?;
        f.write_all(sk_box.to_string().as_bytes()).map_err(|e| io(&key, e))?;
    }
    std::fs::write(&public, pk_box.to_string()).map_err(|e| io(&public, e))?;
    Ok(id)
}

/// Sign `file` with the secret key in `key`: writes `FILE.minisig`; returns its path and the
/// key ID.
pub fn sign(file: &Path, key: &Path) -> Result<(PathBuf, String), TrustError> {
    let bad = |p: &Path, e: minisign::PError| TrustError::Key { path: p.display().to_string(), message: e.to_string() };
    let text = std::fs::read_to_string(key).map_err(|e| io(key, e))?;
    let sk = SecretKeyBox::from_string(&text).and_then(|b| b.into_unencrypted_secret_key()).map_err(|e| bad(key, e))?;
    let pk = PublicKey::from_secret_key(&sk).map_err(|e| bad(key, e))?;
    let data = std::fs::read(file).map_err(|e| io(file, e))?;
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("plugin");
    let comment = format!("curator plugin {name}");
    let sig = minisign::sign(Some(&pk), &sk, Cursor::new(&data), Some(&comment), None).map_err(|e| bad(file, e))?;
    let out = sig_path(file);
    std::fs::write(&out, sig.to_string()).map_err(|e| io(&out, e))?;
    Ok((out, key_id(pk.keynum())))
}

/// Public keys that may sign plugins: every `*.pub` file of the store's directories.
#[derive(Debug, Default, Clone)]
pub struct TrustStore {
    pub dirs: Vec<PathBuf>,
    keys: Vec<(String, PublicKey)>,
    /// Where verified signatures are remembered until their file changes.
    pub facts: crate::plugin_facts::FactCache,
}

impl TrustStore {
    /// The directories given (`--trust-dir`), then `$CURATOR_TRUST_DIR`, then
    /// `~/.config/curator/trust`, then the build's own keys: [`BUILD_TRUST_DIR`] beside the
    /// `curator-host` binary, where `scripts/sign-build.sh` puts the key it signs the
    /// first-party plugins of that build with, or, for an installed binary, beside its
    /// installed plugins (`os::installed`). Missing ones are skipped, unreadable keys
    /// reported.
    pub fn default_dirs(given: &[PathBuf]) -> Vec<PathBuf> {
        let mut dirs = Self::user_dirs(given);
        if let Some(beside) = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|d| d.join(BUILD_TRUST_DIR))) {
            dirs.push(beside);
        }
        dirs.extend(crate::os::installed(BUILD_TRUST_DIR));
        dirs
    }

    fn user_dirs(given: &[PathBuf]) -> Vec<PathBuf> {
        let mut dirs = given.to_vec();
        if let Some(d) = std::env::var_os("CURATOR_TRUST_DIR") {
            dirs.push(PathBuf::from(d));
        }
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home).join(".config/curator/trust"));
        }
        dirs
    }

    pub fn load(dirs: &[PathBuf]) -> (TrustStore, Vec<TrustError>) {
        let mut store = TrustStore { dirs: dirs.to_vec(), keys: Vec::new(), facts: crate::plugin_facts::FactCache::default_dir() };
        let mut problems = Vec::new();
        for d in dirs {
            let Ok(entries) = std::fs::read_dir(d) else { continue };
            let mut files: Vec<PathBuf> =
                entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "pub")).collect();
            files.sort();
            for f in files {
                match std::fs::read_to_string(&f).map_err(|e| io(&f, e)).and_then(|t| parse_public(&f, &t)) {
                    Ok(pk) => store.keys.push((key_id(pk.keynum()), pk)),
                    Err(e) => problems.push(e),
                }
            }
        }
        (store, problems)
    }

    pub fn ids(&self) -> Vec<String> {
        self.keys.iter().map(|(id, _)| id.clone()).collect()
    }

    fn find(&self, id: &str) -> Option<&PublicKey> {
        self.keys.iter().find(|(k, _)| k == id).map(|(_, pk)| pk)
    }
}

fn parse_public(path: &Path, text: &str) -> Result<PublicKey, TrustError> {
    let bad = |e: minisign::PError| TrustError::Key { path: path.display().to_string(), message: e.to_string() };
    // A minisign .pub file (two lines), or the bare base64 key.
    match PublicKeyBox::from_string(text).and_then(|b| b.into_public_key()) {
        Ok(pk) => Ok(pk),
        Err(_) => PublicKey::from_base64(text.trim()).map_err(bad),
    }
}

/// How a plugin file stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Part of curator-host itself (`remove_ids`).
    BuiltIn,
    /// A valid signature by this trusted key.
    Signed(String),
    /// No signature (allowed under `trust: any`, with a warning).
    Unsigned,
    /// A signature by a key not in the store (allowed under `trust: any`, with a warning;
    /// the signature was not checked).
    UnknownKey(String),
}

impl Standing {
    /// What to warn about under `trust: any`.
    pub fn warning(&self) -> Option<String> {
        match self {
            Standing::Signed(_) | Standing::BuiltIn => None,
            Standing::Unsigned => Some("is not signed".into()),
            Standing::UnknownKey(id) => Some(format!("is signed by key {id}, which is not in the trust store")),
        }
    }
}

/// Check `file` against `policy` before anything reads it: `Ok` with its standing, or the
/// reason it is refused. A signature that does not match its file is refused under every
/// policy.
pub fn check(file: &Path, policy: &TrustSpec, store: &TrustStore) -> Result<Standing, String> {
    let sig = sig_path(file);
    let strict = !matches!(policy, TrustSpec::Mode(TrustMode::Any));
    let text = match std::fs::read_to_string(&sig) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return if strict {
                Err(format!("is not signed (no {}) and the pipeline's trust requires a signature", sig.display()))
            } else {
                Ok(Standing::Unsigned)
            };
        }
        Err(e) => return Err(format!("cannot read its signature {}: {e}", sig.display())),
    };
    let sig_box = SignatureBox::from_string(&text).map_err(|e| format!("{} is not a minisign signature: {e}", sig.display()))?;
    let id = key_id(sig_box.keynum());
    let Some(pk) = store.find(&id) else {
        return if strict {
            Err(format!(
                "is signed by key {id}, which is not in the trust store ({})",
                if store.dirs.is_empty() {
                    "no directories".to_string()
                } else {
                    store.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
                }
            ))
        } else {
            Ok(Standing::UnknownKey(id))
        };
    };
    // A file verified before and unchanged since is not hashed again (`plugin_facts.rs`).
    let verification = store.facts.signature(file, &text);
    if verification.known_key() != Some(id.as_str()) {
        let data = std::fs::File::open(file).map_err(|e| format!("cannot read: {e}"))?;
        minisign::verify(pk, &sig_box, std::io::BufReader::new(data), true, false, false)
            .map_err(|e| format!("does not match its signature by key {id} (tampered or re-built after signing): {e}"))?;
        verification.verified(&id);
    }
    if let TrustSpec::Keys { keys } = policy
        && !keys.iter().any(|k| k.eq_ignore_ascii_case(&id))
    {
        return Err(format!("is signed by key {id}, which is not one of the pipeline's trust.keys ({})", keys.join(", ")));
    }
    Ok(Standing::Signed(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_beside_the_binary_come_last() {
        let given = PathBuf::from("/given");
        let dirs = TrustStore::default_dirs(std::slice::from_ref(&given));
        assert_eq!(dirs.first(), Some(&given));
        // The build's keys beside the binary, then those an installed binary ships with
        // (PREFIX/share/curator/trust for PREFIX/bin/curator-host).
        let exe = std::env::current_exe().unwrap();
        let installed = exe.parent().unwrap().parent().unwrap().join("share/curator").join(BUILD_TRUST_DIR);
        assert_eq!(dirs[dirs.len() - 2..], [exe.parent().unwrap().join(BUILD_TRUST_DIR), installed]);
    }

    #[test]
    fn signed_tampered_unsigned_and_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let id = keygen(&keys.join("me")).unwrap();
        assert!(keygen(&keys.join("me")).is_err(), "never overwrites a key");
        let other = keygen(&dir.path().join("other/them")).unwrap();
        let plugin = dir.path().join("p.wasm");
        std::fs::write(&plugin, b"\0asm plugin bytes").unwrap();
        let (store, problems) = TrustStore::load(std::slice::from_ref(&keys));
        assert!(problems.is_empty());
        let any = TrustSpec::default();
        let signed = TrustSpec::Mode(TrustMode::Signed);
        assert_eq!(check(&plugin, &any, &store), Ok(Standing::Unsigned));
        assert!(check(&plugin, &signed, &store).unwrap_err().contains("is not signed"));
        sign(&plugin, &keys.join("me.key")).unwrap();
        assert_eq!(check(&plugin, &signed, &store), Ok(Standing::Signed(id.clone())));
        assert_eq!(check(&plugin, &TrustSpec::Keys { keys: vec![id.to_lowercase()] }, &store), Ok(Standing::Signed(id.clone())));
        assert!(
            check(&plugin, &TrustSpec::Keys { keys: vec![other.clone()] }, &store)
                .unwrap_err()
                .contains("not one of the pipeline's trust.keys")
        );
        // One byte changed: refused under every policy.
        std::fs::write(&plugin, b"\0asm plugin bytez").unwrap();
        for p in [&any, &signed] {
            assert!(check(&plugin, p, &store).unwrap_err().contains("does not match its signature"), "{p:?}");
        }
        // Signed by a key the store does not hold.
        sign(&plugin, &dir.path().join("other/them.key")).unwrap();
        assert_eq!(check(&plugin, &any, &store), Ok(Standing::UnknownKey(other.clone())));
        assert!(check(&plugin, &signed, &store).unwrap_err().contains(&format!("key {other}, which is not in the trust store")));
    }
}
