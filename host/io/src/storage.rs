//! Where files live: the local filesystem or an object store (`s3://`, `gs://`, `az://`,
//! `file://`), behind one small blocking API used by the reader and writer threads.
//!
//! Object stores are reached through the `object_store` crate, configured from the usual
//! environment variables (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`,
//! `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`, …). Writes to an object store are
//! spooled to a local temp file and uploaded when complete, so a reader never sees a partial
//! object; local writes are temp file + rename.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::IoError;

/// The private runtime every async client of the host runs on (object stores, OCI registries).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("curator-io")
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("cannot start the IO runtime: {e}"))
    })
}

/// How requests to object stores are retried (from the pipeline's `sink.retry`); set before
/// the run opens its first store.
static RETRY: std::sync::RwLock<Option<curator_core::pipeline::RetrySpec>> = std::sync::RwLock::new(None);

/// Use `spec` for the object stores opened from now on.
pub fn configure_retry(spec: &curator_core::pipeline::RetrySpec) {
    if let Ok(mut r) = RETRY.write() {
        *r = Some(spec.clone());
    }
}

fn retry_config() -> object_store::RetryConfig {
    let spec = RETRY.read().ok().and_then(|r| r.clone()).unwrap_or_default();
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: std::time::Duration::from_millis(spec.initial_backoff_ms),
            max_backoff: std::time::Duration::from_secs_f64(spec.max_backoff_s),
            base: 2.0,
        },
        max_retries: spec.max_retries as usize,
        retry_timeout: std::time::Duration::from_secs_f64(spec.retry_timeout_s),
    }
}

/// The store behind `url` (configured from the environment, retrying as configured) and the
/// path inside it.
fn open_store(url: &url::Url) -> Result<(Box<dyn ObjectStore>, ObjPath), object_store::Error> {
    use object_store::ObjectStoreScheme as S;
    super::tls::install_crypto_provider();
    let (scheme, path) = S::parse(url)?;
    let path = ObjPath::parse(path)?;
    let store: Box<dyn ObjectStore> = match scheme {
        S::AmazonS3 => Box::new(object_store::aws::AmazonS3Builder::from_env().with_url(url.as_str()).with_retry(retry_config()).build()?),
        S::GoogleCloudStorage => {
            Box::new(object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(url.as_str()).with_retry(retry_config()).build()?)
        }
        S::MicrosoftAzure => {
            Box::new(object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url.as_str()).with_retry(retry_config()).build()?)
        }
        _ => return object_store::parse_url_opts(url, std::env::vars()),
    };
    Ok((store, path))
}

/// Whether `host` (a URL's host, without port) is this machine: the only place plain HTTP is
/// spoken to (test registries and servers on loopback).
pub fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.starts_with("127.") || host == "[::1]" || host == "::1"
}

/// A file or directory, local or in an object store.
#[derive(Clone)]
pub enum Loc {
    Local(PathBuf),
    Remote {
        store: Arc<dyn ObjectStore>,
        /// `scheme://bucket` of the URL, for display.
        base: String,
        path: ObjPath,
    },
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
            let (store, path) = open_store(&url).map_err(|e| obj_err(s, e))?;
            let base = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
            return Ok(Loc::Remote { store: Arc::from(store), base, path });
        }
        let p = Path::new(s);
        Ok(Loc::Local(if p.is_absolute() { p.to_path_buf() } else { base.join(p) }))
    }

    /// As the user would write it.
    pub fn display(&self) -> String {
        match self {
            Loc::Local(p) => p.display().to_string(),
            Loc::Remote { base, path, .. } => format!("{base}/{path}"),
        }
    }

    /// The location `rel` (a `/`-separated relative path) below this one.
    pub fn join(&self, rel: &str) -> Loc {
        match self {
            Loc::Local(p) => Loc::Local(p.join(rel)),
            Loc::Remote { store, base, path } => {
                let mut parts: Vec<String> = path.parts().map(|p| p.as_ref().to_string()).collect();
                parts.extend(rel.split('/').filter(|s| !s.is_empty()).map(str::to_string));
                Loc::Remote { store: store.clone(), base: base.clone(), path: ObjPath::from_iter(parts) }
            }
        }
    }

    /// Last path component.
    pub fn file_name(&self) -> String {
        match self {
            Loc::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            Loc::Remote { path, .. } => path.filename().unwrap_or_default().to_string(),
        }
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Loc::Remote { .. })
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
            Loc::Remote { store, base, path } => {
                // A single object?
                if let Ok(meta) = runtime().block_on(store.head(path)) {
                    return Ok(vec![(self.file_name(), self.clone(), meta.size)]);
                }
                let prefix = if path.as_ref().is_empty() { None } else { Some(path) };
                let metas: Vec<_> = runtime().block_on(store.list(prefix).collect::<Vec<_>>());
                let mut out = Vec::new();
                for m in metas {
                    let m = m.map_err(|e| obj_err(&self.display(), e))?;
                    let rel: Vec<String> = match m.location.prefix_match(path) {
                        Some(parts) => parts.map(|p| p.as_ref().to_string()).collect(),
                        None => continue,
                    };
                    if rel.iter().any(|p| p.starts_with(['.', '_'])) {
                        continue;
                    }
                    out.push((rel.join("/"), Loc::Remote { store: store.clone(), base: base.clone(), path: m.location.clone() }, m.size));
                }
                out.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(out)
            }
        }
    }

    pub fn exists(&self) -> bool {
        match self {
            Loc::Local(p) => p.exists(),
            Loc::Remote { store, path, .. } => runtime().block_on(store.head(path)).is_ok(),
        }
    }

    pub fn delete(&self) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => std::fs::remove_file(p).map_err(|source| IoError::Write { path: self.display(), source }),
            Loc::Remote { store, path, .. } => runtime()
                .block_on(store.delete(path))
                .map_err(|e| IoError::Write { path: self.display(), source: std::io::Error::other(e.to_string()) }),
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
            Loc::Remote { store, path, .. } => {
                let size = runtime().block_on(store.head(path)).map_err(|e| obj_err(&self.display(), e))?.size;
                Ok(Box::new(RemoteReader { store: store.clone(), path: path.clone(), pos: start, size, buf: Bytes::new() }))
            }
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
            Loc::Remote { store, path, .. } => {
                runtime().block_on(store.get_range(path, start..end)).map_err(|e| obj_err(&self.display(), e))
            }
        }
    }

    pub fn size(&self) -> Result<u64, IoError> {
        match self {
            Loc::Local(p) => std::fs::metadata(p).map(|m| m.len()).map_err(|source| IoError::Open { path: self.display(), source }),
            Loc::Remote { store, path, .. } => Ok(runtime().block_on(store.head(path)).map_err(|e| obj_err(&self.display(), e))?.size),
        }
    }

    /// Where to spool a file that will become this location: beside it when local (so the
    /// rename is atomic), in the system temp directory when remote.
    pub fn spool_path(&self) -> PathBuf {
        let name = self.file_name();
        let tag = format!(".{name}.tmp-{}-{:x}", std::process::id(), xxhash_rust::xxh3::xxh3_64(self.display().as_bytes()));
        match self {
            Loc::Local(p) => p.parent().unwrap_or(Path::new(".")).join(tag),
            Loc::Remote { .. } => std::env::temp_dir().join(tag),
        }
    }

    /// Make the spooled file `tmp` this location: rename (local) or upload (remote).
    pub fn commit(&self, tmp: &Path) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => std::fs::rename(tmp, p).map_err(|source| IoError::write(self.display(), source)),
            Loc::Remote { .. } => {
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
            Loc::Remote { store, path, .. } => {
                let size = std::fs::metadata(from).map_err(werr)?.len();
                let mut file = File::open(from).map_err(werr)?;
                let result = if size <= 8 << 20 {
                    let mut data = Vec::with_capacity(size as usize);
                    file.read_to_end(&mut data).map_err(werr)?;
                    runtime().block_on(store.put(path, PutPayload::from(data))).map(|_| ())
                } else {
                    runtime().block_on(async {
                        let upload = store.put_multipart(path).await?;
                        let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, 8 << 20);
                        let mut chunk = vec![0u8; 8 << 20];
                        loop {
                            let n =
                                file.read(&mut chunk).map_err(|e| object_store::Error::Generic { store: "upload", source: Box::new(e) })?;
                            if n == 0 {
                                break;
                            }
                            w.wait_for_capacity(4).await?;
                            w.write(&chunk[..n]);
                        }
                        w.finish().await.map(|_| ())
                    })
                };
                result.map_err(|e| werr(std::io::Error::other(e.to_string())))
            }
        }
    }

    /// Copy this file to the local path `to`, streamed, through a temporary name beside it.
    pub fn download(&self, to: &Path) -> Result<(), IoError> {
        use std::io::Write;
        let tmp = Loc::Local(to.to_path_buf()).spool_path();
        let werr = |source| IoError::write(tmp.display().to_string(), source);
        let mut out = std::io::BufWriter::new(File::create(&tmp).map_err(werr)?);
        let copied = match self {
            Loc::Local(p) => File::open(p)
                .map_err(|source| IoError::Open { path: self.display(), source })
                .and_then(|mut f| std::io::copy(&mut f, &mut out).map(|_| ()).map_err(werr)),
            Loc::Remote { store, path, .. } => runtime().block_on(async {
                let mut chunks = store.get(path).await.map_err(|e| obj_err(&self.display(), e))?.into_stream();
                while let Some(chunk) = chunks.next().await {
                    out.write_all(&chunk.map_err(|e| obj_err(&self.display(), e))?).map_err(werr)?;
                }
                Ok(())
            }),
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
            Loc::Remote { store, path, .. } => {
                let opts = object_store::PutOptions { mode: object_store::PutMode::Create, ..Default::default() };
                match runtime().block_on(store.put_opts(path, PutPayload::from(bytes.to_vec()), opts)) {
                    Ok(_) => Ok(true),
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                    Err(e) => Err(werr(std::io::Error::other(e.to_string()))),
                }
            }
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
            Loc::Remote { store, path, .. } => runtime().block_on(async {
                let listed = store.list(Some(path)).map(|m| m.map(|m| m.location)).boxed();
                let deleted: Vec<_> = store.delete_stream(listed).collect().await;
                let n = deleted.len() as u64;
                deleted.into_iter().collect::<Result<Vec<_>, _>>().map_err(|e| werr(std::io::Error::other(e.to_string())))?;
                Ok(n)
            }),
        }
    }

    /// Make the directory this file goes in exist (local only).
    fn create_parent(&self) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => match p.parent() {
                Some(d) => std::fs::create_dir_all(d).map_err(|source| IoError::write(self.display(), source)),
                None => Ok(()),
            },
            Loc::Remote { .. } => Ok(()),
        }
    }

    /// Make the directory exist (local only; object stores have no directories).
    pub fn create_dir_all(&self) -> Result<(), IoError> {
        match self {
            Loc::Local(p) => std::fs::create_dir_all(p).map_err(|source| IoError::write(self.display(), source)),
            Loc::Remote { .. } => Ok(()),
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

/// Sequential reads of an object in 8 MiB ranges.
struct RemoteReader {
    store: Arc<dyn ObjectStore>,
    path: ObjPath,
    pos: u64,
    size: u64,
    buf: Bytes,
}

impl Read for RemoteReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            if self.pos >= self.size {
                return Ok(0);
            }
            let end = (self.pos + (8 << 20)).min(self.size);
            self.buf =
                runtime().block_on(self.store.get_range(&self.path, self.pos..end)).map_err(|e| std::io::Error::other(e.to_string()))?;
            self.pos = end;
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}

/// Files below `dir`, counted.
fn walkdir_count(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| if e.path().is_dir() { walkdir_count(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}
