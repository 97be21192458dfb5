//! Objects in object stores (`s3://`, `gs://`, `az://`, `http(s)://`) through the
//! `object_store` crate, on the host's private IO runtime: the mechanism behind
//! [`Loc::Remote`](crate::Loc). Built with the `remote` feature (on by default); without it
//! `remote_absent.rs` stands in with the same API and a clear error.
//!
//! Stores are configured from the usual environment variables (`AWS_ACCESS_KEY_ID`,
//! `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, `GOOGLE_SERVICE_ACCOUNT`,
//! `AZURE_STORAGE_ACCOUNT_NAME`, …). Errors come back as `std::io::Error`s for
//! [`storage`](crate::storage) to name the location in.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

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

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// One object (or prefix) in a store.
#[derive(Clone)]
pub struct Object {
    store: Arc<dyn ObjectStore>,
    /// `scheme://bucket` of the URL, for display.
    base: String,
    path: ObjPath,
}

/// The version of an object as read, for a conditional overwrite.
pub struct Version(object_store::UpdateVersion);

/// How [`Object::put`] writes.
pub type PutMode = crate::PutMode<Version>;
pub use crate::PutError;

impl Object {
    /// The object at `url` (the store configured from the environment, retrying as
    /// configured).
    pub fn open(url: &url::Url) -> Result<Object, std::io::Error> {
        use object_store::ObjectStoreScheme as S;
        crate::tls::install_crypto_provider();
        let (scheme, path) = S::parse(url).map_err(other)?;
        let path = ObjPath::parse(path).map_err(other)?;
        let store: Box<dyn ObjectStore> = match scheme {
            S::AmazonS3 => Box::new(
                object_store::aws::AmazonS3Builder::from_env().with_url(url.as_str()).with_retry(retry_config()).build().map_err(other)?,
            ),
            S::GoogleCloudStorage => Box::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry_config())
                    .build()
                    .map_err(other)?,
            ),
            S::MicrosoftAzure => Box::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry_config())
                    .build()
                    .map_err(other)?,
            ),
            _ => object_store::parse_url_opts(url, std::env::vars()).map_err(other)?.0,
        };
        let base = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
        Ok(Object { store: Arc::from(store), base, path })
    }

    /// As the user would write it.
    pub fn display(&self) -> String {
        format!("{}/{}", self.base, self.path)
    }

    fn at(&self, path: ObjPath) -> Object {
        Object { store: self.store.clone(), base: self.base.clone(), path }
    }

    /// The object `rel` (a `/`-separated relative path) below this one.
    pub fn join(&self, rel: &str) -> Object {
        let mut parts: Vec<String> = self.path.parts().map(|p| p.as_ref().to_string()).collect();
        parts.extend(rel.split('/').filter(|s| !s.is_empty()).map(str::to_string));
        self.at(ObjPath::from_iter(parts))
    }

    pub fn file_name(&self) -> String {
        self.path.filename().unwrap_or_default().to_string()
    }

    /// The object named `name` beside this one.
    pub fn sibling(&self, name: &str) -> Object {
        let mut parts: Vec<String> = self.path.parts().map(|p| p.as_ref().to_string()).collect();
        parts.pop();
        parts.push(name.to_string());
        self.at(ObjPath::from_iter(parts))
    }

    /// This object itself, or the objects below this prefix: `(relative path, object, size)`
    /// in path order, skipping any whose path has a part starting with `.` or `_`.
    pub fn list(&self) -> Result<Vec<(String, Object, u64)>, std::io::Error> {
        if let Ok(meta) = runtime().block_on(self.store.head(&self.path)) {
            return Ok(vec![(self.file_name(), self.clone(), meta.size)]);
        }
        let prefix = if self.path.as_ref().is_empty() { None } else { Some(&self.path) };
        let metas: Vec<_> = runtime().block_on(self.store.list(prefix).collect::<Vec<_>>());
        let mut out = Vec::new();
        for m in metas {
            let m = m.map_err(other)?;
            let rel: Vec<String> = match m.location.prefix_match(&self.path) {
                Some(parts) => parts.map(|p| p.as_ref().to_string()).collect(),
                None => continue,
            };
            if rel.iter().any(|p| p.starts_with(['.', '_'])) {
                continue;
            }
            out.push((rel.join("/"), self.at(m.location.clone()), m.size));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The objects directly in this prefix (not those below), by file name.
    pub fn list_here(&self) -> Result<Vec<Object>, std::io::Error> {
        let listed = runtime().block_on(self.store.list_with_delimiter(Some(&self.path))).map_err(other)?;
        Ok(listed.objects.into_iter().map(|m| self.at(m.location)).collect())
    }

    pub fn exists(&self) -> bool {
        runtime().block_on(self.store.head(&self.path)).is_ok()
    }

    pub fn delete(&self) -> Result<(), std::io::Error> {
        runtime().block_on(self.store.delete(&self.path)).map_err(other)
    }

    pub fn size(&self) -> Result<u64, std::io::Error> {
        Ok(runtime().block_on(self.store.head(&self.path)).map_err(other)?.size)
    }

    /// A reader from byte `start` to the end, in 8 MiB ranges.
    pub fn reader(&self, start: u64) -> Result<Box<dyn Read + Send>, std::io::Error> {
        let size = self.size()?;
        Ok(Box::new(Ranges { object: self.clone(), pos: start, size, buf: Bytes::new() }))
    }

    /// Bytes `[start, end)`.
    pub fn read_range(&self, start: u64, end: u64) -> Result<Bytes, std::io::Error> {
        runtime().block_on(self.store.get_range(&self.path, start..end)).map_err(other)
    }

    /// The whole object with its version, or `None` when there is none.
    pub fn get_versioned(&self) -> Result<Option<(Bytes, Version)>, std::io::Error> {
        runtime()
            .block_on(async {
                match self.store.get(&self.path).await {
                    Ok(r) => {
                        let version = object_store::UpdateVersion { e_tag: r.meta.e_tag.clone(), version: r.meta.version.clone() };
                        r.bytes().await.map(|b| Some((b, Version(version))))
                    }
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .map_err(other)
    }

    /// Write `bytes` as this object, in one request.
    pub fn put(&self, bytes: Vec<u8>, mode: PutMode) -> Result<(), PutError> {
        let mode = match mode {
            PutMode::Create => object_store::PutMode::Create,
            PutMode::Update(v) => object_store::PutMode::Update(v.0),
            PutMode::Overwrite => object_store::PutMode::Overwrite,
        };
        let opts = object_store::PutOptions { mode, ..Default::default() };
        match runtime().block_on(self.store.put_opts(&self.path, PutPayload::from(bytes), opts)) {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => Err(PutError::Exists),
            Err(object_store::Error::Precondition { .. }) => Err(PutError::Changed),
            Err(e) => Err(PutError::Other(other(e))),
        }
    }

    /// Copy the local file `from` to this object, whole: one put, or a multipart upload
    /// above 8 MiB (a reader sees the old object or the new one, never part of it).
    pub fn upload(&self, from: &Path) -> Result<(), std::io::Error> {
        let size = std::fs::metadata(from)?.len();
        let mut file = File::open(from)?;
        if size <= 8 << 20 {
            let mut data = Vec::with_capacity(size as usize);
            file.read_to_end(&mut data)?;
            return runtime().block_on(self.store.put(&self.path, PutPayload::from(data))).map(|_| ()).map_err(other);
        }
        runtime()
            .block_on(async {
                let upload = self.store.put_multipart(&self.path).await?;
                let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, 8 << 20);
                let mut chunk = vec![0u8; 8 << 20];
                loop {
                    let n = file.read(&mut chunk).map_err(|e| object_store::Error::Generic { store: "upload", source: Box::new(e) })?;
                    if n == 0 {
                        break;
                    }
                    w.wait_for_capacity(4).await?;
                    w.write(&chunk[..n]);
                }
                w.finish().await.map(|_| ())
            })
            .map_err(other)
    }

    /// Stream this object into `out`.
    pub fn download(&self, out: &mut dyn Write) -> Result<(), std::io::Error> {
        runtime().block_on(async {
            let mut chunks = self.store.get(&self.path).await.map_err(other)?.into_stream();
            while let Some(chunk) = chunks.next().await {
                out.write_all(&chunk.map_err(other)?)?;
            }
            Ok(())
        })
    }

    /// Remove every object below this prefix; how many there were.
    pub fn remove_all(&self) -> Result<u64, std::io::Error> {
        runtime().block_on(async {
            let listed = self.store.list(Some(&self.path)).map(|m| m.map(|m| m.location)).boxed();
            let deleted: Vec<_> = self.store.delete_stream(listed).collect().await;
            let n = deleted.len() as u64;
            deleted.into_iter().collect::<Result<Vec<_>, _>>().map_err(other)?;
            Ok(n)
        })
    }
}

/// Sequential reads of an object in 8 MiB ranges.
struct Ranges {
    object: Object,
    pos: u64,
    size: u64,
    buf: Bytes,
}

impl Read for Ranges {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            if self.pos >= self.size {
                return Ok(0);
            }
            let end = (self.pos + (8 << 20)).min(self.size);
            self.buf = self.object.read_range(self.pos, end)?;
            self.pos = end;
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}

/// The file at `url` (`https://`, or `http://` when `allow_http`: loopback only) and the one
/// at `url` + `suffix` if there is one (a plugin and its signature).
pub fn fetch_with(url: &url::Url, allow_http: bool, suffix: &str) -> Result<(Vec<u8>, Option<Vec<u8>>), std::io::Error> {
    crate::tls::install_crypto_provider();
    let store = object_store::http::HttpBuilder::new()
        .with_url(url.origin().ascii_serialization())
        .with_client_options(object_store::ClientOptions::new().with_allow_http(allow_http))
        .build()
        .map_err(other)?;
    let path = ObjPath::from(url.path().trim_start_matches('/'));
    let with = ObjPath::from(format!("{}{suffix}", url.path().trim_start_matches('/')));
    runtime().block_on(async {
        let bytes = store.get(&path).await.map_err(other)?.bytes().await.map_err(other)?;
        let also = match store.get(&with).await {
            Ok(r) => r.bytes().await.ok().map(|b| b.to_vec()),
            Err(_) => None,
        };
        Ok((bytes.to_vec(), also))
    })
}
