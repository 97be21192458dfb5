//! Where files live: the local filesystem or an object store (`s3://`, `gs://`, `az://`,
//! `file://`), behind one small blocking API used by the reader and writer threads. The
//! object-store side is [`remote`](crate::remote)'s (the `remote` feature).
//!
//! Writes to an object store are spooled to a local temp file and uploaded when complete, so
//! a reader never sees a partial object; local writes are temp file + rename.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::IoError;
use crate::remote::{Object, PutError, PutMode};

/// Whether `host` (a URL's host, without port) is this machine: the only place plain HTTP is
/// spoken to (test registries and servers on loopback).
pub fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.starts_with("127.") || host == "[::1]" || host == "::1"
}

/// A file or directory, local or in an object store.
#[derive(Clone)]
pub enum Loc {
    Local(PathBuf),
    Remote(Object),
}

impl std::fmt::Debug for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display())
    }
}

impl PartialEq for Loc {
    fn eq(&self, other: &Self) -> bool {
        self.display() == other.display()
    }
}

fn obj_err(loc: &str, e: impl std::fmt::Display) -> IoError {
    IoError::Open { path: loc.to_string(), source: std::io::Error::other(e.to_string()) }
}

impl Loc {
    /// Parse a path or URL. Relative local paths resolve against `base`.
    pub fn parse(s: &str, base: &Path) -> Result<Loc, IoError> {
        if let Some((scheme, _)) = s.split_once("://") {
            if scheme == "file" {
                let url = url::Url::parse(s).map_err(|e| obj_err(s, e))?;
                let p = url.to_file_path().map_err(|_| obj_err(s, "not a local file URL"))?;
                return Ok(Loc::Local(p));
            }
            let url = url::Url::parse(s).map_err(|e| obj_err(s, e))?;
            return Object::open(&url).map(Loc::Remote).map_err(|e| obj_err(s, e));
        }
        let p = Path::new(s);
        Ok(Loc::Local(if p.is_absolute() { p.to_path_buf() } else { base.join(p) }))
    }

    /// As the user would write it.
    pub fn display(&self) -> String {
        match self {
            Loc::Local(p) => p.display().to_string(),
            Loc::Remote(o) => o.display(),
        }
    }

    /// The location `rel` (a `/`-separated relative path) below this one.
    pub fn join(&self, rel: &str) -> Loc {
        match self {
            Loc::Local(p) => Loc::Local(p.join(rel)),
            Loc::Remote(o) => Loc::Remote(o.join(rel)),
        }
    }

    /// The file named `name` in this one's directory.
    pub fn sibling(&self, name: &str) -> Loc {
        match self {
            Loc::Local(p) => Loc::Local(p.with_file_name(name)),
            Loc::Remote(o) => Loc::Remote(o.sibling(name)),
        }
    }

    /// Last path component.
    pub fn file_name(&self) -> String {
        match self {
            Loc::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            Loc::Remote(o) => o.file_name(),
        }
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Loc::Remote(_))
    }

    /// Files below this location (or the location itself if it is a file): `(relative path,
    /// location, size)`, in path order. Names starting with `.` or `_` are skipped.
    pub fn list_files(&self) -> Result<Vec<(String, Loc, u64)>, IoError> {
        match self {
            Loc::Local(p) => {
                let meta = std::fs::metadata(p).map_err(|source| IoError::Open { path: p.display().to_string(), source })?;
                if !meta.is_dir() {
                    return Ok(vec![(self.file_name(), self.clone(), meta.len())]);
                }
                let mut out = Vec::new();
                walk_local(p, p, &mut out)?;
                Ok(out)
            }
            Loc::Remote(o) => {
                let listed = o.list().map_err(|e| obj_err(&self.display(), e))?;
                Ok(listed.into_iter().map(|(rel, o, size)| (rel, Loc::Remote(o), size)).collect())
            }
        }
    }

    pub fn exists(&self) -> bool {
        match self {
            Loc::Local(p) => p.exists(),
            Loc::Remote(o) => o.exists(),
        }
    }

    pub fn delete(&self) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => std::fs::remove_file(p).map_err(|source| IoError::Write { path: self.display(), source }),
            Loc::Remote(o) => o.delete().map_err(|source| IoError::Write { path: self.display(), source }),
        }
    }

    /// A reader from byte `start` to the end.
    pub fn open_from(&self, start: u64) -> Result<Box<dyn Read + Send>, IoError> {
        match self {
            Loc::Local(p) => {
                let mut f = File::open(p).map_err(|source| IoError::Open { path: self.display(), source })?;
                if start > 0 {
                    f.seek(SeekFrom::Start(start)).map_err(|source| IoError::Open { path: self.display(), source })?;
                }
                Ok(Box::new(f))
            }
            Loc::Remote(o) => o.reader(start).map_err(|e| obj_err(&self.display(), e)),
        }
    }

    /// Bytes `[start, end)`.
    pub fn read_range(&self, start: u64, end: u64) -> Result<Bytes, IoError> {
        match self {
            Loc::Local(_) => {
                let want = (end - start) as usize;
                // Read into spare capacity (a file reads into it without zeroing it first).
                let mut out = Vec::with_capacity(want);
                let read = self.open_from(start)?.take(want as u64).read_to_end(&mut out);
                let read = read.map_err(|source| IoError::Read { file: self.display(), line: 0, source })?;
                if read < want {
                    let source = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, format!("{read} of {want} bytes at {start}"));
                    return Err(IoError::Read { file: self.display(), line: 0, source });
                }
                Ok(Bytes::from(out))
            }
            Loc::Remote(o) => o.read_range(start, end).map_err(|e| obj_err(&self.display(), e)),
        }
    }

    pub fn size(&self) -> Result<u64, IoError> {
        match self {
            Loc::Local(p) => std::fs::metadata(p).map(|m| m.len()).map_err(|source| IoError::Open { path: self.display(), source }),
            Loc::Remote(o) => o.size().map_err(|e| obj_err(&self.display(), e)),
        }
    }

    /// Where to spool a file that will become this location: beside it when local (so the
    /// rename is atomic), in [`remote_spool_dir`] when remote.
    pub fn spool_path(&self) -> PathBuf {
        let name = self.file_name();
        let tag = format!(".{name}.tmp-{}-{:x}", std::process::id(), xxhash_rust::xxh3::xxh3_64(self.display().as_bytes()));
        match self {
            Loc::Local(p) => p.parent().unwrap_or(Path::new(".")).join(tag),
            Loc::Remote(_) => remote_spool_dir().join(tag),
        }
    }

    /// Make the spooled file `tmp` this location: rename (local) or upload (remote).
    pub fn commit(&self, tmp: &Path) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => std::fs::rename(tmp, p).map_err(|source| IoError::write(self.display(), source)),
            Loc::Remote(_) => {
                let result = self.upload(tmp);
                let _ = std::fs::remove_file(tmp);
                result
            }
        }
    }

    /// Copy the local file `from` to this location, whole: a reader sees the old object or
    /// the new one, never part of it (object stores: one put, or a multipart upload above 8
    /// MiB; local: a temporary name beside it, then a rename).
    pub fn upload(&self, from: &Path) -> Result<(), IoError> {
        let werr = |source| IoError::write(self.display(), source);
        match self {
            Loc::Local(p) => {
                let tmp = self.spool_path();
                self.create_parent()?;
                std::fs::copy(from, &tmp).and_then(|_| std::fs::rename(&tmp, p)).map_err(werr)
            }
            Loc::Remote(o) => o.upload(from).map_err(werr),
        }
    }

    /// Copy this file to the local path `to`, streamed, through a temporary name beside it.
    pub fn download(&self, to: &Path) -> Result<(), IoError> {
        let tmp = Loc::Local(to.to_path_buf()).spool_path();
        let werr = |source| IoError::write(tmp.display().to_string(), source);
        let mut out = std::io::BufWriter::new(File::create(&tmp).map_err(werr)?);
        let copied = match self {
            Loc::Local(p) => File::open(p)
                .map_err(|source| IoError::Open { path: self.display(), source })
                .and_then(|mut f| std::io::copy(&mut f, &mut out).map(|_| ()).map_err(werr)),
            Loc::Remote(o) => o.download(&mut out).map_err(|e| obj_err(&self.display(), e)),
        };
        let done = copied.and_then(|()| out.into_inner().map_err(|e| werr(e.into_error()))).and_then(|f| f.sync_all().map_err(werr));
        match done.and_then(|()| std::fs::rename(&tmp, to).map_err(werr)) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Create this file holding `bytes` unless it exists: `Ok(true)` when this call created
    /// it, `Ok(false)` when another writer did first (a conditional put on object stores, a
    /// hard link on local disks: the first writer wins either way).
    pub fn create_new(&self, bytes: &[u8]) -> Result<bool, IoError> {
        let werr = |source| IoError::write(self.display(), source);
        match self {
            Loc::Local(p) => {
                let tmp = self.spool_path();
                self.create_parent()?;
                std::fs::write(&tmp, bytes).map_err(werr)?;
                let linked = std::fs::hard_link(&tmp, p);
                let _ = std::fs::remove_file(&tmp);
                match linked {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(werr(e)),
                }
            }
            Loc::Remote(o) => match o.put(bytes.to_vec(), PutMode::Create) {
                Ok(()) => Ok(true),
                Err(PutError::Exists) => Ok(false),
                Err(e) => Err(werr(std::io::Error::other(e.to_string()))),
            },
        }
    }

    /// Remove this directory (or prefix) and everything below it; how many files it held.
    pub fn remove_all(&self) -> Result<u64, IoError> {
        let werr = |source| IoError::write(self.display(), source);
        match self {
            Loc::Local(p) if !p.exists() => Ok(0),
            Loc::Local(p) => {
                let n = walkdir_count(p);
                std::fs::remove_dir_all(p).map_err(werr)?;
                Ok(n)
            }
            Loc::Remote(o) => o.remove_all().map_err(werr),
        }
    }

    /// Make the directory this file goes in exist (local only).
    fn create_parent(&self) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => match p.parent() {
                Some(d) => std::fs::create_dir_all(d).map_err(|source| IoError::write(self.display(), source)),
                None => Ok(()),
            },
            Loc::Remote(_) => Ok(()),
        }
    }

    /// Make the directory exist (local only; object stores have no directories).
    pub fn create_dir_all(&self) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => std::fs::create_dir_all(p).map_err(|source| IoError::write(self.display(), source)),
            Loc::Remote(_) => Ok(()),
        }
    }

    /// Read a whole (small) file.
    pub fn read_all(&self) -> Result<Vec<u8>, IoError> {
        let mut out = Vec::new();
        self.open_from(0)?.read_to_end(&mut out).map_err(|source| IoError::Read { file: self.display(), line: 0, source })?;
        Ok(out)
    }
}

fn walk_local(dir: &Path, root: &Path, out: &mut Vec<(String, Loc, u64)>) -> Result<(), IoError> {
    let entries = std::fs::read_dir(dir).map_err(|source| IoError::Open { path: dir.display().to_string(), source })?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(['.', '_'])) {
            continue;
        }
        if p.is_dir() {
            walk_local(&p, root, out)?;
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/");
            let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            out.push((rel, Loc::Local(p), size));
        }
    }
    Ok(())
}

/// Files below `dir`, counted.
fn walkdir_count(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| if e.path().is_dir() { walkdir_count(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

/// Where files bound for an object store are spooled before their upload:
/// `curator-spool/` in the system temp directory. A process killed mid-upload leaves its
/// spool behind; the first process of this host to spool after it removes the files of every
/// process that is gone (the writer's pid is in each name: `.NAME.tmp-PID-HASH`).
pub fn remote_spool_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join("curator-spool");
        let _ = std::fs::create_dir_all(&dir);
        sweep_spools_of_gone_processes(&dir);
        dir
    })
    .clone()
}

/// Remove the spool files in `dir` whose writer (the pid in the name) is no longer running.
fn sweep_spools_of_gone_processes(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.rsplit_once(".tmp-").and_then(|(_, rest)| rest.split('-').next()).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() && !crate::os::process_alive(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_removes_the_spools_of_gone_processes_only() {
        let dir = tempfile::tempdir().unwrap();
        let mine = format!(".part-0.jsonl.tmp-{}-ab12", std::process::id());
        let gone = format!(".part-1.jsonl.tmp-{}-cd34", u32::MAX);
        let other = "notes.txt";
        for f in [&mine, &gone, &other.to_string()] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        sweep_spools_of_gone_processes(dir.path());
        let mut left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, vec![mine, other.to_string()]);
    }
}
