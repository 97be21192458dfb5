//! Readers and writers. JSONL (plain, `.gz`, `.zst`) for now; Parquet and object storage
//! plug in behind the same [`InputFile`] / [`jsonl::JsonlWriter`] shapes.

pub mod jsonl;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Column names of the batches the reader produces.
pub const ID: &str = "id";
pub const TEXT: &str = "text";
/// JSON object (as text) holding every input field but the text, in input order.
pub const META: &str = "_meta";

/// File name endings read from a directory when `file_extensions` is not given.
pub const DEFAULT_EXTENSIONS: &[&str] = &[
    ".jsonl",
    ".json",
    ".ndjson",
    ".jsonl.gz",
    ".json.gz",
    ".jsonl.zst",
    ".json.zst",
    ".jsonl.zstd",
];

/// An IO error that names the file (and line and field, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: no input files found (looked for {extensions})")]
    NoInput { path: String, extensions: String },
    #[error("{file}:{line}: {message}")]
    Line {
        file: String,
        line: u64,
        message: String,
    },
    #[error("{file}:{line}: field {field:?}: {message}")]
    Field {
        file: String,
        line: u64,
        field: String,
        message: String,
    },
    #[error("{file}: read failed after line {line}: {source}")]
    Read {
        file: String,
        line: u64,
        source: std::io::Error,
    },
    #[error("{path}: write failed: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "output {path} already exists (sink.mode is \"error\"; use \"overwrite\" to replace it)"
    )]
    Exists { path: String },
    #[error("inputs {a} and {b} would both be written to {out}")]
    Collision { a: String, b: String, out: String },
}

/// One input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: PathBuf,
    /// Path relative to the source root it was found under (names the output file).
    pub rel: PathBuf,
}

impl InputFile {
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }
}

fn matches_ext(path: &Path, exts: &[String]) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    exts.iter().any(|e| name.ends_with(&e.to_lowercase()))
}

fn walk(dir: &Path, root: &Path, exts: &[String], out: &mut Vec<InputFile>) -> Result<(), IoError> {
    let entries = std::fs::read_dir(dir).map_err(|source| IoError::Open {
        path: dir.display().to_string(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let hidden = p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(['.', '_']));
        if hidden {
            continue;
        }
        if p.is_dir() {
            walk(&p, root, exts, out)?;
        } else if matches_ext(&p, exts) {
            let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
            out.push(InputFile { path: p, rel });
        }
    }
    Ok(())
}

/// Expand source paths (files or directories, read recursively in name order).
pub fn discover(
    paths: &[PathBuf],
    extensions: Option<&[String]>,
) -> Result<Vec<InputFile>, IoError> {
    let exts: Vec<String> = match extensions {
        Some(e) => e.to_vec(),
        None => DEFAULT_EXTENSIONS.iter().map(|s| s.to_string()).collect(),
    };
    let mut files = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|source| IoError::Open {
            path: p.display().to_string(),
            source,
        })?;
        if meta.is_dir() {
            let before = files.len();
            walk(p, p, &exts, &mut files)?;
            if files.len() == before {
                return Err(IoError::NoInput {
                    path: p.display().to_string(),
                    extensions: exts.join(", "),
                });
            }
        } else {
            let rel = PathBuf::from(p.file_name().unwrap_or(p.as_os_str()));
            files.push(InputFile {
                path: p.clone(),
                rel,
            });
        }
    }
    Ok(files)
}

/// Open a file for reading, decompressing gzip (multi-member) or zstd (multi-frame) when its
/// magic bytes say so, whatever its name.
pub fn open_decoded(path: &Path) -> Result<Box<dyn BufRead + Send>, IoError> {
    let open_err = |source| IoError::Open {
        path: path.display().to_string(),
        source,
    };
    let mut file = BufReader::with_capacity(1 << 20, File::open(path).map_err(open_err)?);
    let head = file.fill_buf().map_err(open_err)?;
    let reader: Box<dyn BufRead + Send> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(file),
        ))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(BufReader::with_capacity(
            1 << 20,
            zstd::stream::read::Decoder::with_buffer(file).map_err(open_err)?,
        ))
    } else {
        Box::new(file)
    };
    Ok(reader)
}

/// Read all of a file, decoded (for tests and small inputs).
pub fn read_decoded(path: &Path) -> Result<Vec<u8>, IoError> {
    let mut out = Vec::new();
    open_decoded(path)?
        .read_to_end(&mut out)
        .map_err(|source| IoError::Read {
            file: path.display().to_string(),
            line: 0,
            source,
        })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn decodes_by_magic_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let plain = b"{\"text\":\"a\"}\n{\"text\":\"b\"}\n";
        // Multi-member gzip and multi-frame zstd, with misleading names.
        let mut gz = Vec::new();
        for half in plain.chunks(13) {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(half).unwrap();
            gz.extend(e.finish().unwrap());
        }
        let mut zs = Vec::new();
        for half in plain.chunks(13) {
            zs.extend(zstd::encode_all(half, 3).unwrap());
        }
        std::fs::write(dir.path().join("g.jsonl"), &gz).unwrap();
        std::fs::write(dir.path().join("z.jsonl"), &zs).unwrap();
        assert_eq!(read_decoded(&dir.path().join("g.jsonl")).unwrap(), plain);
        assert_eq!(read_decoded(&dir.path().join("z.jsonl")).unwrap(), plain);
    }

    #[test]
    fn discovers_sorted_recursive_with_extensions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for f in [
            "b.jsonl",
            "a.jsonl.zst",
            "sub/c.json.gz",
            "notes.txt",
            ".hidden.jsonl",
            "_rejected.jsonl",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let files = discover(&[dir.path().to_path_buf()], None).unwrap();
        let rels: Vec<String> = files.iter().map(|f| f.rel.display().to_string()).collect();
        assert_eq!(rels, vec!["a.jsonl.zst", "b.jsonl", "sub/c.json.gz"]);
        let only = discover(&[dir.path().to_path_buf()], Some(&[".zst".to_string()])).unwrap();
        assert_eq!(only.len(), 1);
        let none =
            discover(&[dir.path().join("sub")], Some(&[".parquet".to_string()])).unwrap_err();
        assert!(none.to_string().contains("no input files"), "{none}");
    }
}
