//! Output files: spooled to a temp file, hashed while written, committed (rename or upload)
//! when complete. The [`OutputWriter`]s for JSONL and Parquet sit on top.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use arrow_array::RecordBatch;
use curator_core::io_spec::Checksum;
use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::Xxh3;

use super::{IoError, Loc};

/// A file that is written, with its document count and checksum.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct WrittenFile {
    /// Path relative to the output directory.
    pub path: String,
    pub documents: u64,
    pub bytes: u64,
    /// `xxh3-128:HEX` or `sha256:HEX` (the sink's `checksum`); a bare hex digest in a
    /// manifest written before there was a choice, under the old name `sha256`.
    #[serde(alias = "sha256")]
    pub checksum: String,
    /// The input files (and byte ranges or row groups) the documents came from.
    pub sources: Vec<String>,
    /// Token ids in the file, for a tokenized sink (`megatron`, `datatrove_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl WrittenFile {
    /// A partition that produced nothing: no file was written for it.
    pub fn is_empty(&self) -> bool {
        self.documents == 0 && self.bytes == 0
    }
}

/// Writes one partition's documents.
pub trait OutputWriter: Send {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), IoError>;
    /// Complete the file and put it in place.
    fn finish(self: Box<Self>) -> Result<Committed, IoError>;
}

/// What `finish` reports.
#[derive(Debug, Clone)]
pub struct Committed {
    pub documents: u64,
    pub bytes: u64,
    pub checksum: String,
    /// Token ids written, by a tokenized sink.
    pub tokens: Option<u64>,
}

/// A running checksum of one of the kinds a sink may ask for.
enum Hasher {
    Xxh3(Box<Xxh3>),
    Sha256(Sha256),
}

impl Hasher {
    fn new(kind: Checksum) -> Hasher {
        match kind {
            Checksum::Xxh3 => Hasher::Xxh3(Box::default()),
            Checksum::Sha256 => Hasher::Sha256(Sha256::new()),
        }
    }
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Xxh3(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
        }
    }
    /// `KIND:HEX`.
    fn finish(self) -> String {
        match self {
            Hasher::Xxh3(h) => format!("{}:{:032x}", Checksum::Xxh3.prefix(), h.digest128()),
            Hasher::Sha256(h) => format!("{}:{}", Checksum::Sha256.prefix(), hex::encode(h.finalize())),
        }
    }
}

/// Counts and checksums bytes on their way to `inner`.
pub struct HashingWriter<W> {
    inner: W,
    hash: Hasher,
    bytes: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W, checksum: Checksum) -> Self {
        HashingWriter { inner, hash: Hasher::new(checksum), bytes: 0 }
    }
    /// The writer, the bytes written and their checksum (`KIND:HEX`).
    pub fn into_parts(self) -> (W, u64, String) {
        (self.inner, self.bytes, self.hash.finish())
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A file whose written bytes are sent on to the disk every [`WRITE_BEHIND`] bytes, without
/// waiting (`os::start_writeback`): a partition's commit (`fsync`) then waits for its last
/// stretch only. Without it the partitions that end together at the end of a run each wait
/// in their fsync for all of their data: on a 2-GPU machine, 32 Parquet files of 130 MB, the
/// slowest partitions took 0.89–1.25 s to close; with it, 0.06–0.71 s.
pub struct WriteBehind {
    file: File,
    written: u64,
    sent: u64,
}

/// Bytes between two write-back hints.
const WRITE_BEHIND: u64 = 8 << 20;

impl WriteBehind {
    pub fn new(file: File) -> WriteBehind {
        WriteBehind { file, written: 0, sent: 0 }
    }
    /// The file, every byte written to it.
    pub fn into_file(self) -> File {
        self.file
    }
}

impl Write for WriteBehind {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.sent >= WRITE_BEHIND {
            crate::os::start_writeback(&self.file, self.sent, self.written - self.sent);
            self.sent = self.written;
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// The temp file an output is written to; removed on drop unless committed.
pub struct Spool {
    pub tmp: PathBuf,
    pub target: Loc,
    committed: bool,
}

pub type SpoolWriter = HashingWriter<BufWriter<WriteBehind>>;

impl Spool {
    /// A spool for `target` whose bytes get a `checksum` (files nobody checks, such as the
    /// manifest itself: [`Checksum::default`]).
    pub fn create(target: &Loc, checksum: Checksum) -> Result<(Spool, SpoolWriter), IoError> {
        let tmp = target.spool_path();
        let werr = |source| IoError::write(target.display(), source);
        if let Some(dir) = tmp.parent() {
            std::fs::create_dir_all(dir).map_err(werr)?;
        }
        let file = File::create(&tmp).map_err(werr)?;
        Ok((
            Spool { tmp, target: target.clone(), committed: false },
            HashingWriter::new(BufWriter::with_capacity(1 << 20, WriteBehind::new(file)), checksum),
        ))
    }

    pub fn werr(&self, source: std::io::Error) -> IoError {
        IoError::write(self.target.display(), source)
    }

    /// Flush and sync `w`, then rename or upload the temp file into place.
    pub fn commit(mut self, w: SpoolWriter) -> Result<(u64, String), IoError> {
        let (buf, bytes, checksum) = w.into_parts();
        let file = buf.into_inner().map_err(|e| self.werr(e.into_error()))?.into_file();
        file.sync_all().map_err(|e| self.werr(e))?;
        drop(file);
        self.target.commit(&self.tmp)?;
        self.committed = true;
        Ok((bytes, checksum))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The output manifest, `_manifest.json` in the output directory: every file written.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct OutputManifest {
    pub files: Vec<WrittenFile>,
}

impl OutputManifest {
    pub const NAME: &'static str = "_manifest.json";

    /// The manifest in `dir`, or an empty one.
    pub fn load(dir: &Loc) -> OutputManifest {
        let loc = dir.join(Self::NAME);
        if !loc.exists() {
            return OutputManifest::default();
        }
        loc.read_all().ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// Write atomically into `dir`.
    pub fn save(&self, dir: &Loc) -> Result<(), IoError> {
        let loc = dir.join(Self::NAME);
        let text = serde_json::to_vec_pretty(self).map_err(|e| IoError::Write { path: loc.display(), source: e.into() })?;
        write_small(&loc, &text)
    }
}

/// Write a small file whole, through a spool (never partially under its name).
pub fn write_small(loc: &Loc, bytes: &[u8]) -> Result<(), IoError> {
    let (spool, mut w) = Spool::create(loc, Checksum::default())?;
    w.write_all(bytes).map_err(|e| spool.werr(e))?;
    spool.commit(w)?;
    Ok(())
}

/// Writes records as JSONL into a spooled file: rejected input lines
/// (`<output>/_rejected/<name>.jsonl`), dead letters (`<output>/_dead_letter/<name>.jsonl`).
pub struct RecordWriter {
    spool: Spool,
    w: SpoolWriter,
    pub count: u64,
}

impl RecordWriter {
    pub fn create(target: &Loc) -> Result<RecordWriter, IoError> {
        let (spool, w) = Spool::create(target, Checksum::default())?;
        Ok(RecordWriter { spool, w, count: 0 })
    }

    pub fn write<T: serde::Serialize>(&mut self, r: &T) -> Result<(), IoError> {
        let mut line = serde_json::to_vec(r).map_err(|e| self.spool.werr(e.into()))?;
        line.push(b'\n');
        self.w.write_all(&line).map_err(|e| self.spool.werr(e))?;
        self.count += 1;
        Ok(())
    }

    pub fn finish(self) -> Result<u64, IoError> {
        let n = self.count;
        self.spool.commit(self.w)?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spooled file larger than several write-back stretches arrives whole, with its
    /// checksum of the kind asked for, over every byte.
    #[test]
    fn a_spool_past_many_write_back_hints_commits_every_byte() {
        let data: Vec<u8> = (0..(3 * WRITE_BEHIND as usize + 12_345)).map(|i| (i * 7 % 251) as u8).collect();
        let want = [
            (Checksum::Sha256, format!("sha256:{}", hex::encode(Sha256::digest(&data)))),
            (Checksum::Xxh3, format!("xxh3-128:{:032x}", xxhash_rust::xxh3::xxh3_128(&data))),
        ];
        for (kind, checksum) in want {
            let dir = tempfile::tempdir().unwrap();
            let target = Loc::Local(dir.path().join("out.bin"));
            let (spool, mut w) = Spool::create(&target, kind).unwrap();
            for piece in data.chunks(1_000_003) {
                w.write_all(piece).unwrap();
            }
            assert_eq!(spool.commit(w).unwrap(), (data.len() as u64, checksum));
            assert_eq!(std::fs::read(dir.path().join("out.bin")).unwrap(), data);
        }
    }
}
