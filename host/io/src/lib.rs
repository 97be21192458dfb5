//! `curator-io`: the host's readers and writers, and the OS probes they need ([`os`]). A crate
//! of its own below the host (which re-exports it as `curator_host::io`), so Cargo refuses an
//! import of the engine from here and compiles it beside wasmtime.
//!
//! Readers and writers, on local disk or in an object store ([`storage::Loc`]): one folder (or
//! file) per data format — JSONL (plain or compressed: [`codec`]), Parquet, CSV, WARC,
//! WebDataset, folders of images, video — each implementing [`format`]'s traits, the seam the
//! engine reads and writes through, and registered in [`formats`]. Bad input is quarantined ([`Reject`]) unless strict.

#[cfg(feature = "parquet")]
pub mod arrow_json;
pub mod codec;
pub mod csv;
pub mod format;
pub mod formats;
pub mod images;
pub mod journal;
pub mod json_str;
pub mod jsonl;
pub mod os;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod records;
// Object stores, plugin URLs and OCI registries (the `remote` feature); a build without it
// gets the same API that opens nothing and says why.
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(not(feature = "remote"))]
#[path = "remote_absent.rs"]
pub mod remote;
pub mod run_lock;
pub mod shards;
pub mod storage;
// Tokenized sinks (Megatron, datatrove), with the `tokenizers` crate (the `tokens` feature).
#[cfg(feature = "remote")]
pub mod tls;
#[cfg(feature = "tokens")]
pub mod tokens;
pub mod vectors;
pub mod video;
pub mod warc;
pub mod webdataset;
pub mod writer;

use std::io::Read;
use std::path::Path;

/// What a build without the cargo feature `$feature` says to a pipeline that needs it (after
/// what needed it): one sentence for every left-out piece, a string literal (`concat!`).
#[macro_export]
macro_rules! not_built {
    ($feature:literal) => {
        concat!(
            "this curator-host was built without the `",
            $feature,
            "` feature; `cargo build --release -p curator-host` builds one with it"
        )
    };
}

pub use codec::{Codec, decoded};
pub use format::Source;
pub use storage::Loc;

/// Column names of the batches the readers produce.
pub const ID: &str = "id";
pub const TEXT: &str = "text";
/// JSON object (as text) holding every input field but the text, in input order.
pub const META: &str = "_meta";
/// Row of each document within its batch as read (executor bookkeeping; never written).
pub const ROW: &str = "_row";
/// The column that holds each WebDataset sample's other members (hidden from JSONL and
/// Parquet sinks).
pub const SAMPLE: &str = "_sample";

/// How an object is written to an object store ([`remote::Object::put`]); `V` is the
/// implementation's version of an object as read.
pub enum PutMode<V> {
    /// Only if absent (`If-None-Match: *`).
    Create,
    /// Only if still at this version.
    Update(V),
    Overwrite,
}

/// Why a put to an object store did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PutError {
    #[error("the object exists")]
    Exists,
    #[error("the object changed since it was read")]
    Changed,
    #[error(transparent)]
    Other(std::io::Error),
}

/// An IO error that names the file (and line and field, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("{path}: {why}")]
    NotBuilt { path: String, why: String },
    #[error("{path}: no input files found (looked for {extensions}){hint}")]
    NoInput { path: String, extensions: String, hint: String },
    #[error("{at}: {message}")]
    Line { at: String, message: String },
    #[error("{at}: field {field:?}: {message}")]
    Field { at: String, field: String, message: String },
    #[error("{file}: read failed after line {line}: {source}")]
    Read { file: String, line: u64, source: std::io::Error },
    #[error("{path}: write failed: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("{path}: no space left on {filesystem} (free space there and run again: committed partitions are kept)")]
    NoSpace { path: String, filesystem: String },
    #[error("{path}: {message}")]
    Parquet { path: String, message: String },
    #[error("output {path} already exists (sink.mode is \"error\"; use overwrite, append or ignore)")]
    Exists { path: String },
    #[error("inputs {a} and {b} would both be written to {out}")]
    Collision { a: String, b: String, out: String },
}

impl IoError {
    /// A failed write to `path`; a full filesystem is named as such.
    pub fn write(path: impl Into<String>, source: std::io::Error) -> IoError {
        let path = path.into();
        if source.kind() == std::io::ErrorKind::StorageFull {
            let filesystem = crate::os::mount_point(std::path::Path::new(&path))
                .map(|m| format!("the filesystem mounted at {}", m.display()))
                .unwrap_or_else(|| "its filesystem".into());
            return IoError::NoSpace { path, filesystem };
        }
        IoError::Write { path, source }
    }
}

/// A line (or row) of input that could not be used, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Reject {
    pub source: String,
    /// 1-based line number, when the reader knows it (it does unless reading a byte range).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Byte offset of the line in the (decompressed) file.
    pub byte_offset: u64,
    pub reason: String,
    /// The start of the offending line (up to 200 bytes, lossy UTF-8).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub excerpt: String,
}

impl Reject {
    /// `file:line` or `file@byte` for messages.
    pub fn at(&self) -> String {
        line_at(&self.source, self.line, self.byte_offset)
    }

    pub fn into_error(self) -> IoError {
        IoError::Line { at: self.at(), message: self.reason }
    }
}

/// A reader's rejects: kept for `_rejected/`, or the first one an error when reading strictly.
#[derive(Debug, Default)]
pub struct Rejects {
    strict: bool,
    list: Vec<Reject>,
}

impl Rejects {
    pub fn new(strict: bool) -> Rejects {
        Rejects { strict, list: Vec::new() }
    }

    /// Keep `r`, or (`--strict`) answer it as the read's error.
    pub fn add(&mut self, r: Reject) -> Result<(), IoError> {
        if self.strict {
            return Err(r.into_error());
        }
        self.list.push(r);
        Ok(())
    }

    /// The rejects so far, handed over once.
    pub fn take(&mut self) -> Vec<Reject> {
        std::mem::take(&mut self.list)
    }
}

/// Where in `source` a line is, for messages: `file:line` when the line number is known
/// (it is unless reading a byte range), else `file@byte`.
pub fn line_at(source: &str, line: Option<u64>, byte_offset: u64) -> String {
    match line {
        Some(l) => format!("{source}:{l}"),
        None => format!("{source}@{byte_offset}"),
    }
}

/// One input file.
#[derive(Debug, Clone, PartialEq)]
pub struct InputFile {
    pub loc: Loc,
    /// Path relative to the source root it was found under (names the output file).
    pub rel: String,
    pub size: u64,
    pub format: Source,
    /// Compressed as a whole ([`Codec`]), by its name or, for JSONL that planning cuts into
    /// byte ranges, by its first bytes: it cannot be split.
    pub compressed: bool,
}

impl InputFile {
    pub fn display(&self) -> String {
        self.loc.display()
    }
}

fn matches_ext(name: &str, exts: &[String]) -> bool {
    let name = name.to_lowercase();
    exts.iter().any(|e| name.ends_with(&e.to_lowercase()))
}

/// Format and compression from a file name (`format`, when the source names one, wins).
pub fn sniff_name(name: &str, format: Option<Source>) -> (Source, bool) {
    let format = Source::of_file(name, format);
    let compressed = format.compressed(&name.to_lowercase());
    (format, compressed)
}

/// The file name endings a directory is read for: `extensions` when the source gives them,
/// else its format's, else those of every format read without being named.
fn listed_extensions(extensions: Option<&[String]>, format: Option<Source>) -> Vec<String> {
    match (extensions, format) {
        (Some(e), _) => e.to_vec(),
        (None, Some(f)) => f.extensions().iter().map(|e| e.to_string()).collect(),
        (None, None) => formats::SOURCES.iter().flat_map(|f| f.unnamed_extensions()).map(|e| e.to_string()).collect(),
    }
}

/// Expand source locations (files, directories read recursively in name order, URL prefixes).
pub fn discover(locs: &[Loc], extensions: Option<&[String]>, format: Option<Source>) -> Result<Vec<InputFile>, IoError> {
    let exts = listed_extensions(extensions, format);
    let mut files = Vec::new();
    for loc in locs {
        let listed = loc.list_files()?;
        let single = listed.len() == 1 && listed[0].1 == *loc;
        let before = files.len();
        // Files of a format a directory is only read as when the source names it.
        let mut others: std::collections::BTreeMap<&'static str, usize> = Default::default();
        // Files of a format this build leaves out (its cargo feature).
        let mut not_built: Option<(&'static str, &'static str)> = None;
        for (rel, file, size) in listed {
            if format.is_none()
                && let Some((name, why)) = formats::not_built_file(&rel)
            {
                if single {
                    return Err(IoError::NotBuilt { path: file.display(), why: format!("a {name} file: {why}") });
                }
                not_built.get_or_insert((name, why));
                continue;
            }
            if !single && !matches_ext(&rel, &exts) {
                let theirs = Source::of_file(&rel, None);
                if format.is_none() && !theirs.is(formats::DEFAULT_SOURCE.name()) {
                    *others.entry(theirs.name()).or_default() += 1;
                }
                continue;
            }
            let (format, compressed) = sniff_name(&rel, format);
            files.push(InputFile { loc: file, rel, size, format, compressed });
        }
        if files.len() == before {
            let hint = match (others.iter().max_by_key(|(_, n)| **n), not_built) {
                (_, Some((name, why))) => format!("; it holds {name} files: {why}"),
                (Some((name, n)), None) => format!("; it holds {n} {name} file(s): set the source's `format: {name}`"),
                (None, None) => String::new(),
            };
            return Err(IoError::NoInput { path: loc.display(), extensions: exts.join(", "), hint });
        }
    }
    Ok(files)
}

/// Read all of a local file, decoded (for tests and small inputs).
pub fn read_decoded(path: &Path) -> Result<Vec<u8>, IoError> {
    let file = std::fs::File::open(path).map_err(|source| IoError::Open { path: path.display().to_string(), source })?;
    let mut out = Vec::new();
    decoded(Box::new(file), &path.display().to_string())?.read_to_end(&mut out).map_err(|source| IoError::Read {
        file: path.display().to_string(),
        line: 0,
        source,
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovers_sorted_recursive_with_extensions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for f in ["b.jsonl", "a.jsonl.zst", "sub/c.json.gz", "d.parquet", "notes.txt", ".hidden.jsonl", "_rejected.jsonl"] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let root = Loc::Local(dir.path().to_path_buf());
        let files = discover(std::slice::from_ref(&root), None, None).unwrap();
        let rels: Vec<(&str, &str, bool)> = files.iter().map(|f| (f.rel.as_str(), f.format.name(), f.compressed)).collect();
        assert_eq!(
            rels,
            vec![
                ("a.jsonl.zst", "jsonl", true),
                ("b.jsonl", "jsonl", false),
                ("d.parquet", "parquet", false),
                ("sub/c.json.gz", "jsonl", true)
            ]
        );
        let only = discover(std::slice::from_ref(&root), Some(&[".zst".to_string()]), None).unwrap();
        assert_eq!(only.len(), 1);
        let none = discover(&[root.join("sub")], Some(&[".parquet".to_string()]), None).unwrap_err();
        assert!(none.to_string().contains("no input files"), "{none}");
    }
}
