//! What was learnt about a plugin file once, kept in the cache directory until the file
//! changes: the key whose signature it matched (`trust.rs`) and its manifest's bytes
//! (`registry.rs`). Without it every run hashes every plugin file of the search path for its
//! signature and starts a worker process per native library to read its manifest: 0.3–0.6 s
//! of each run's start with the first-party plugins.
//!
//! A file is known by its identity: device, inode, size, modification and status-change
//! times. Writing to a file, or replacing it, changes its status-change time, which only the
//! kernel sets, so a fact never outlives the bytes it was learnt from. The cache directory
//! is already trusted as much as the plugins (it holds their compiled machine code).
//! Facts are advisory: an unreadable or stale entry is a miss, and nothing is cached when
//! there is no cache directory.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file's identity: while it is the same, so are the file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileId {
    /// The identity of the file at `path` (`None`: it cannot be read).
    pub fn of(path: &Path) -> Option<FileId> {
        let m = std::fs::metadata(path).ok()?;
        let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
        Some(FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        })
    }
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Facts {
    /// The identity of the file the facts were learnt from.
    id: Option<FileId>,
    /// (xxh3-64 of the signature file's text, id of the key it was verified with).
    verified: Option<(u64, String)>,
    /// The manifest's JSON, as the file carries it (parsed and validated on every use).
    manifest: Option<String>,
}

fn entry(dir: &Path, file: &Path) -> PathBuf {
    let canonical = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    let key = xxhash_rust::xxh3::xxh3_64(canonical.as_os_str().as_encoded_bytes());
    dir.join("plugin-facts").join(format!("{key:016x}.json"))
}

/// The facts about `file` as it is now (empty when none, or when it changed since).
fn load(dir: &Path, file: &Path) -> (Option<FileId>, Facts) {
    let id = FileId::of(file);
    let facts = std::fs::read(entry(dir, file))
        .ok()
        .and_then(|b| serde_json::from_slice::<Facts>(&b).ok())
        .filter(|f| f.id.is_some() && f.id == id)
        .unwrap_or_default();
    (id, facts)
}

/// Record a fact about `file` learnt while it had identity `id` (written whole under a
/// temporary name, then renamed; a failure only loses the fact).
fn store(dir: &Path, file: &Path, id: Option<FileId>, learn: impl FnOnce(&mut Facts)) {
    let Some(id) = id else { return };
    let (_, mut facts) = load(dir, file);
    if facts.id != Some(id) {
        facts = Facts { id: Some(id), ..Facts::default() };
    }
    learn(&mut facts);
    let path = entry(dir, file);
    let Ok(json) = serde_json::to_vec(&facts) else { return };
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::create_dir_all(path.parent().unwrap_or(dir));
    if std::fs::write(&tmp, json).is_ok() && std::fs::rename(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The kept facts, in the default cache directory (`os::default_cache_dir`), or in a given
/// one; the default keeps nothing.
#[derive(Debug, Clone, Default)]
pub struct FactCache {
    dir: Option<PathBuf>,
}

impl FactCache {
    pub fn default_dir() -> FactCache {
        FactCache { dir: crate::os::default_cache_dir() }
    }

    pub fn at(dir: Option<PathBuf>) -> FactCache {
        FactCache { dir }
    }

    /// A verification to look up, or to record once done: `file`'s identity taken now,
    /// before its bytes are read.
    pub fn signature(&self, file: &Path, sig_text: &str) -> Verification {
        let sig = xxhash_rust::xxh3::xxh3_64(sig_text.as_bytes());
        let (id, known) = match &self.dir {
            Some(d) => {
                let (id, facts) = load(d, file);
                (id, facts.verified.filter(|(s, _)| *s == sig).map(|(_, key)| key))
            }
            None => (None, None),
        };
        Verification { cache: self.clone(), file: file.to_path_buf(), id, sig, known }
    }

    /// The manifest JSON `file` carries, read by `read` unless known.
    pub fn manifest<E>(&self, file: &Path, read: impl FnOnce() -> Result<String, E>) -> Result<String, E> {
        let Some(dir) = &self.dir else { return read() };
        let (id, facts) = load(dir, file);
        if let Some(m) = facts.manifest {
            return Ok(m);
        }
        let m = read()?;
        store(dir, file, id, |f| f.manifest = Some(m.clone()));
        Ok(m)
    }
}

/// A signature check of one file: which key it matched before, if it has not changed since.
pub struct Verification {
    cache: FactCache,
    file: PathBuf,
    id: Option<FileId>,
    sig: u64,
    known: Option<String>,
}

impl Verification {
    /// The key this file and signature were verified with, when that is known.
    pub fn known_key(&self) -> Option<&str> {
        self.known.as_deref()
    }

    /// Record that the file (as it was when this check began) matched its signature by `key`.
    pub fn verified(self, key: &str) {
        if let Some(dir) = &self.cache.dir {
            store(dir, &self.file, self.id, |f| f.verified = Some((self.sig, key.to_string())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_last_until_the_file_or_its_signature_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FactCache::at(Some(dir.path().join("cache")));
        let file = dir.path().join("p.wasm");
        std::fs::write(&file, b"plugin bytes").unwrap();
        let v = cache.signature(&file, "sig");
        assert_eq!(v.known_key(), None);
        v.verified("KEY1");
        assert_eq!(cache.signature(&file, "sig").known_key(), Some("KEY1"));
        assert_eq!(cache.signature(&file, "another sig").known_key(), None);
        let reads = std::cell::Cell::new(0);
        let read = || -> Result<String, ()> {
            reads.set(reads.get() + 1);
            Ok("{\"m\":1}".into())
        };
        assert_eq!(cache.manifest(&file, read), Ok("{\"m\":1}".into()));
        assert_eq!(cache.manifest(&file, read), Ok("{\"m\":1}".into()));
        assert_eq!(reads.get(), 1, "the second read is the cached one");
        assert_eq!(cache.signature(&file, "sig").known_key(), Some("KEY1"), "learning a manifest keeps the signature");
        // Same size, rewritten in place: its status-change time moves, the facts go.
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(&file, b"PLUGIN BYTES").unwrap();
        assert_eq!(cache.signature(&file, "sig").known_key(), None);
        assert_eq!(cache.manifest(&file, read), Ok("{\"m\":1}".into()));
        assert_eq!(reads.get(), 2);
        // No cache directory: nothing is kept.
        let none = FactCache::at(None);
        none.signature(&file, "sig").verified("KEY1");
        assert_eq!(none.signature(&file, "sig").known_key(), None);
    }
}
