//! Megatron-LM's indexed dataset (`megatron.core.datasets.indexed_dataset`, index version 1),
//! what `tools/preprocess_data.py --append-eod` writes and `IndexedDataset` reads: per
//! partition a `.bin` of token ids end to end and an `.idx` of
//!
//! | bytes | what |
//! |---|---|
//! | 9 | `MMIDIDX\0\0` |
//! | 8 | version 1 (u64) |
//! | 1 | dtype code (4 int32, 8 uint16) |
//! | 8 | sequences (u64) |
//! | 8 | documents + 1 (u64) |
//! | 4 × sequences | each sequence's length in tokens (i32) |
//! | 8 × sequences | each sequence's byte offset in the `.bin` (i64) |
//! | 8 × (documents + 1) | document boundaries, in sequences (i64, from 0) |
//!
//! One document is one sequence (no sentence splitting); an empty document (no ids) adds no
//! sequence but still ends a document, as `preprocess_data.py` does. [`merge`] joins prefixes
//! as `tools/merge_datasets.py` does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use curator_core::io_spec::TokenDtype;
use curator_core::pipeline::{Compression, SinkSpec};

use super::{Problem, Setup, Specials, Tokenizer};
use crate::format::{SinkContext, SinkFormat};
use crate::writer::{Committed, OutputWriter, Spool, SpoolWriter};
use crate::{IoError, Loc};

/// Its name in a pipeline file.
pub const NAME: &str = "megatron";

/// The index file's first bytes.
pub const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";

/// Megatron's `DType` code of a width.
fn code(d: TokenDtype) -> u8 {
    match d {
        TokenDtype::Uint16 => 8,
        TokenDtype::Int32 => 4,
        TokenDtype::Uint32 => 0,
    }
}

fn of_code(c: u8) -> Option<TokenDtype> {
    match c {
        8 => Some(TokenDtype::Uint16),
        4 => Some(TokenDtype::Int32),
        _ => None,
    }
}

/// The width Megatron picks for a vocabulary (`DType.optimal_dtype`).
pub fn optimal_dtype(vocab: usize) -> TokenDtype {
    if vocab < 65500 { TokenDtype::Uint16 } else { TokenDtype::Int32 }
}

/// The Megatron sink format.
pub struct Megatron;
pub static MEGATRON: Megatron = Megatron;

/// Resolve a sink's tokens settings (the tokenizer loaded and checked).
fn setup(sink: &mut SinkSpec, base: &Path) -> Result<Setup, Vec<Problem>> {
    let t = super::tokens_of(&mut sink.tokens, NAME, base)?;
    if t.seed.is_some() {
        return Err(vec![(
            "tokens.seed",
            "Megatron shuffles at training time (its blended datasets): a megatron sink keeps the documents' order".into(),
        )]);
    }
    let datatrove_only = [
        ("tokens.max_tokens_per_file", t.max_tokens_per_file.is_some()),
        ("tokens.shuffle_documents", t.shuffle_documents.is_some()),
        ("tokens.shuffle_chunk_size", t.shuffle_chunk_size.is_some()),
        ("tokens.save_loss_metadata", t.save_loss_metadata.is_some()),
    ];
    if let Some((field, _)) = datatrove_only.iter().find(|(_, set)| *set) {
        return Err(vec![(
            field,
            "datatrove_tokens only: a megatron sink writes one .bin/.idx per partition, in order (join them with `curator-host megatron-merge`)".into(),
        )]);
    }
    let tokenizer = Tokenizer::load(Path::new(&t.tokenizer)).map_err(|m| vec![("tokens.tokenizer", m)])?;
    let mut problems = Vec::new();
    let dtype = super::dtype(&tokenizer, t, optimal_dtype(tokenizer.vocab), &[TokenDtype::Uint16, TokenDtype::Int32])
        .map_err(|p| problems.push(p))
        .ok();
    let eod = if t.append_eod.unwrap_or(true) {
        super::eos_id(&tokenizer, t, "append_eod is on").map_err(|p| problems.push(p)).ok().flatten()
    } else {
        None
    };
    match dtype {
        Some(dtype) if problems.is_empty() => Ok(Setup { tokenizer, dtype, specials: Specials::PostProcessor, eod }),
        _ => Err(problems),
    }
}

impl SinkFormat for Megatron {
    fn name(&self) -> &'static str {
        NAME
    }
    fn extension(&self, _compression: Compression) -> String {
        ".bin".into()
    }
    fn prepare(&self, sink: &mut SinkSpec, base: &Path) -> Result<(), Vec<Problem>> {
        super::prepare(sink, base, "Megatron's files are read by memory map: they are never compressed", setup)
    }
    fn create(&self, loc: &Loc, sink: &SinkSpec, _cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError> {
        let s = super::writer_setup(loc, sink, setup)?;
        Ok(Box::new(MegatronWriter::create(loc, sink.checksum, s)?))
    }
    fn estimate(&self, sink: &SinkSpec, sample: &dyn Fn() -> Vec<String>, docs: u64) -> Option<crate::format::OutputEstimate> {
        // The `.idx` per document: its length (int32), its pointer (int64), its document index (int64).
        super::estimate(sink, setup, sample, docs, 4 + 8 + 8)
    }
}

/// The `.idx` beside a `.bin`.
pub fn idx_of(bin: &Loc) -> Loc {
    let name = bin.file_name();
    bin.sibling(&format!("{}.idx", name.strip_suffix(".bin").unwrap_or(&name)))
}

/// Writes one partition's `.bin` and, when it is complete, its `.idx`.
pub struct MegatronWriter {
    spool: Spool,
    bin: SpoolWriter,
    checksum: curator_core::io_spec::Checksum,
    tokenizer: Arc<Tokenizer>,
    dtype: TokenDtype,
    specials: Specials,
    eod: Option<u32>,
    index: Index,
    cache: super::bpe::PieceCache,
    ids: Vec<u32>,
    bytes: Vec<u8>,
    docs: u64,
    tokens: u64,
}

impl MegatronWriter {
    fn create(target: &Loc, checksum: curator_core::io_spec::Checksum, s: Setup) -> Result<MegatronWriter, IoError> {
        let (spool, bin) = Spool::create(target, checksum)?;
        Ok(MegatronWriter {
            spool,
            bin,
            checksum,
            tokenizer: s.tokenizer,
            dtype: s.dtype,
            specials: s.specials,
            eod: s.eod,
            index: Index::new(s.dtype),
            cache: Default::default(),
            ids: Vec::new(),
            bytes: Vec::new(),
            docs: 0,
            tokens: 0,
        })
    }
}

impl OutputWriter for MegatronWriter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let at = self.spool.target.display();
        let texts = super::texts(batch, &at)?;
        self.bytes.clear();
        for i in 0..batch.num_rows() {
            self.ids.clear();
            self.tokenizer.encode_into(super::text(texts, i), self.specials, &mut self.cache, &mut self.ids).map_err(|message| {
                IoError::Field { at: format!("{at}: document {}", self.docs + 1), field: crate::TEXT.into(), message }
            })?;
            if !self.ids.is_empty()
                && let Some(eod) = self.eod
            {
                self.ids.push(eod);
            }
            super::put_ids(&self.ids, self.dtype, &mut self.bytes);
            self.index.add_document(&[self.ids.len()]);
            self.tokens += self.ids.len() as u64;
            self.docs += 1;
        }
        self.bin.write_all(&self.bytes).map_err(|e| self.spool.werr(e))
    }

    fn finish(self: Box<Self>) -> Result<Committed, IoError> {
        let this = *self;
        let idx = idx_of(&this.spool.target);
        let (bytes, checksum) = this.spool.commit(this.bin)?;
        // A run killed here has a new `.bin` beside an old (or no) `.idx`: the partition is
        // not in the journal yet, so the resumed run writes both again.
        crate::os::crash_point("megatron-bin-committed");
        this.index.write(&idx, this.checksum)?;
        Ok(Committed { documents: this.docs, bytes, checksum, tokens: Some(this.tokens) })
    }
}

/// An index being built (or read): sequence lengths and document boundaries.
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    pub dtype: TokenDtype,
    pub lengths: Vec<i32>,
    /// Document boundaries in sequences, from 0.
    pub documents: Vec<i64>,
}

impl Index {
    pub fn new(dtype: TokenDtype) -> Index {
        Index { dtype, lengths: Vec::new(), documents: vec![0] }
    }

    /// A document of sequences of these lengths (`IndexedDatasetBuilder.add_document`).
    pub fn add_document(&mut self, lengths: &[usize]) {
        self.lengths.extend(lengths.iter().filter(|&&n| n > 0).map(|&n| n as i32));
        self.documents.push(self.lengths.len() as i64);
    }

    /// The index's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(34 + self.lengths.len() * 12 + self.documents.len() * 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&1u64.to_le_bytes());
        out.push(code(self.dtype));
        out.extend_from_slice(&(self.lengths.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.documents.len() as u64).to_le_bytes());
        out.extend(self.lengths.iter().flat_map(|l| l.to_le_bytes()));
        let size = self.dtype.size() as i64;
        let mut at = 0i64;
        for &l in &self.lengths {
            out.extend_from_slice(&at.to_le_bytes());
            at += l as i64 * size;
        }
        out.extend(self.documents.iter().flat_map(|d| d.to_le_bytes()));
        out
    }

    /// Write the index to `loc` (spooled, committed whole).
    pub fn write(&self, loc: &Loc, checksum: curator_core::io_spec::Checksum) -> Result<(), IoError> {
        let (spool, mut w) = Spool::create(loc, checksum)?;
        w.write_all(&self.to_bytes()).map_err(|e| spool.werr(e))?;
        spool.commit(w).map(drop)
    }

    /// Parse an index file's bytes (`at` names it in errors).
    pub fn parse(b: &[u8], at: &str) -> Result<Index, IoError> {
        let bad = |m: String| IoError::Line { at: at.to_string(), message: m };
        let u64_at = |o: usize| -> Result<u64, IoError> {
            b.get(o..o + 8)
                .map(|s| u64::from_le_bytes(s.try_into().unwrap_or_default()))
                .ok_or_else(|| bad(format!("ends at byte {} inside its header", b.len())))
        };
        if b.get(..9) != Some(MAGIC.as_slice()) {
            return Err(bad("not a Megatron index (no MMIDIDX header)".into()));
        }
        let version = u64_at(9)?;
        if version != 1 {
            return Err(bad(format!("index version {version} (1 is read)")));
        }
        let dtype = b
            .get(17)
            .copied()
            .and_then(of_code)
            .ok_or_else(|| bad(format!("dtype code {:?} (4 int32 and 8 uint16 are read)", b.get(17))))?;
        let n = u64_at(18)? as usize;
        let d = u64_at(26)? as usize;
        let want = 34usize.saturating_add(n.saturating_mul(12)).saturating_add(d.saturating_mul(8));
        if b.len() < want {
            return Err(bad(format!("{} bytes for {n} sequences and {d} document boundaries: {want} expected", b.len())));
        }
        let lengths = b[34..34 + 4 * n].chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let start = 34 + 12 * n;
        let documents = b[start..start + 8 * d].chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default())).collect();
        Ok(Index { dtype, lengths, documents })
    }

    /// Append another index's sequences and documents (`IndexedDatasetBuilder.add_index`).
    pub fn append(&mut self, other: &Index) {
        let offset = self.lengths.len() as i64;
        self.lengths.extend_from_slice(&other.lengths);
        self.documents.extend(other.documents.iter().skip(1).map(|d| d + offset));
    }

    /// Tokens in all sequences.
    pub fn tokens(&self) -> u64 {
        self.lengths.iter().map(|&l| l as u64).sum()
    }
}

/// What [`merge`] wrote.
#[derive(Debug)]
pub struct Merged {
    pub prefixes: usize,
    pub documents: u64,
    pub tokens: u64,
}

/// The `.bin`/`.idx` prefixes in `dir`, in name order (files of other names, such as the
/// run's `_manifest.json`, are left alone; a `.bin` without its `.idx` or the other way
/// round is an error).
pub fn prefixes(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let oerr = |e| IoError::Open { path: dir.display().to_string(), source: e };
    let mut out = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(oerr)? {
        let path = entry.map_err(oerr)?.path();
        let (Some(ext), Some(stem)) = (path.extension().and_then(|e| e.to_str()), path.file_stem()) else { continue };
        if !matches!(ext, "bin" | "idx") || !path.is_file() {
            continue;
        }
        let prefix = dir.join(stem);
        let pair = prefix.with_extension(if ext == "bin" { "idx" } else { "bin" });
        if !pair.is_file() {
            return Err(IoError::Open {
                path: path.display().to_string(),
                source: std::io::Error::other(format!("{} is missing", pair.display())),
            });
        }
        out.insert(prefix);
    }
    Ok(out.into_iter().collect())
}

/// Join the datasets of `inputs` (prefixes, in order) into `output` (`OUTPUT.bin`,
/// `OUTPUT.idx`), as `tools/merge_datasets.py` does: each `.bin` copied, indexes appended.
/// Every input must have the first one's width.
pub fn merge(inputs: &[PathBuf], output: &Path) -> Result<Merged, IoError> {
    let with = |p: &Path, ext: &str| PathBuf::from(format!("{}.{ext}", p.display()));
    let Some(first) = inputs.first() else {
        return Err(IoError::Open { path: output.display().to_string(), source: std::io::Error::other("no .bin/.idx pair to merge") });
    };
    let read_index = |p: &Path| -> Result<Index, IoError> {
        let path = with(p, "idx");
        let b = std::fs::read(&path).map_err(|e| IoError::Open { path: path.display().to_string(), source: e })?;
        Index::parse(&b, &path.display().to_string())
    };
    let mut index = Index::new(read_index(first)?.dtype);
    let bin = Loc::Local(with(output, "bin"));
    let (spool, mut w) = Spool::create(&bin, Default::default())?;
    for p in inputs {
        let part = read_index(p)?;
        if part.dtype != index.dtype {
            return Err(IoError::Line {
                at: with(p, "idx").display().to_string(),
                message: format!(
                    "its ids are {}, the first dataset's {}: datasets of one width are merged",
                    part.dtype.name(),
                    index.dtype.name()
                ),
            });
        }
        let path = with(p, "bin");
        let mut f = std::fs::File::open(&path).map_err(|e| IoError::Open { path: path.display().to_string(), source: e })?;
        std::io::copy(&mut f, &mut w).map_err(|e| spool.werr(e))?;
        index.append(&part);
    }
    spool.commit(w)?;
    index.write(&Loc::Local(with(output, "idx")), Default::default())?;
    Ok(Merged { prefixes: inputs.len(), documents: index.documents.len() as u64 - 1, tokens: index.tokens() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_has_megatrons_layout() {
        let mut ix = Index::new(TokenDtype::Uint16);
        ix.add_document(&[3]);
        ix.add_document(&[0]); // an empty document: a boundary, no sequence
        ix.add_document(&[2]);
        let b = ix.to_bytes();
        assert_eq!(&b[..9], MAGIC);
        assert_eq!(b[9..17], 1u64.to_le_bytes());
        assert_eq!(b[17], 8);
        assert_eq!(b[18..26], 2u64.to_le_bytes(), "sequences");
        assert_eq!(b[26..34], 4u64.to_le_bytes(), "documents + 1");
        assert_eq!(b[34..42], [3, 0, 0, 0, 2, 0, 0, 0], "lengths");
        assert_eq!(b[42..58], [0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0], "byte offsets (uint16)");
        let docs: Vec<i64> = b[58..].chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(docs, [0, 1, 1, 2]);
        assert_eq!(Index::parse(&b, "x").unwrap(), ix);
    }

    #[test]
    fn appended_indexes_shift_the_boundaries() {
        let mut a = Index::new(TokenDtype::Int32);
        a.add_document(&[4]);
        let mut b = Index::new(TokenDtype::Int32);
        b.add_document(&[1]);
        b.add_document(&[2]);
        a.append(&b);
        assert_eq!(a.lengths, [4, 1, 2]);
        assert_eq!(a.documents, [0, 1, 2, 3]);
        assert_eq!(a.tokens(), 7);
    }

    #[test]
    fn a_torn_index_is_named_not_read() {
        let mut ix = Index::new(TokenDtype::Uint16);
        ix.add_document(&[3]);
        let b = ix.to_bytes();
        let e = Index::parse(&b[..b.len() - 1], "a.idx").unwrap_err().to_string();
        assert!(e.starts_with("a.idx: 61 bytes for 1 sequences and 2 document boundaries: 62 expected"), "{e}");
        assert!(Index::parse(b"MMIDIDX\0\0", "a.idx").is_err());
        assert!(Index::parse(b"nope", "a.idx").unwrap_err().to_string().contains("not a Megatron index"));
    }

    #[test]
    fn megatron_picks_its_width_from_the_vocabulary() {
        assert_eq!(optimal_dtype(50257), TokenDtype::Uint16);
        assert_eq!(optimal_dtype(65500), TokenDtype::Int32);
        assert_eq!(optimal_dtype(128_256), TokenDtype::Int32);
    }
}
