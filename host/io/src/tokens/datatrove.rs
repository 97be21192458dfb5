//! datatrove's token files, what `DocumentTokenizer(shuffle_documents=False)` writes and
//! nanotron's datatrove loaders read: per partition a `.ds` of token ids end to end
//! (little-endian uint16, or uint32 for a vocabulary over 65,536), a `.ds.index` of each
//! document's end in tokens (u64, cumulative), and a `.ds.metadata` (`TOKENIZER|WIDTH`, the
//! token count, the count in SI units). With `eos_token` each document ends with it (datatrove
//! swaps the tokenizer's post-processor for `$A <EOS>`); without, the tokenizer's own
//! post-processor adds what it adds.
//!
//! With `seed` a partition's documents are shuffled as `DocumentTokenizer(seed=…)` shuffles a
//! rank's ([`super::numpy_rng`]: the same permutation numpy draws); without, they keep their
//! order (`shuffle_documents=False`). With `max_tokens_per_file` as well, the shuffled
//! documents are cut into files as `TokenizedFile.copy` cuts them: a new file starts once the
//! current one holds more than that many tokens (so one may follow empty, as datatrove's
//! does), each with its own `.ds.index` and `.ds.metadata`. Not yet: the chunk shuffle
//! (`shuffle_chunk_size`) and the `.ds.loss` masks.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use curator_core::io_spec::TokenDtype;
use curator_core::pipeline::{Compression, SinkSpec};

use super::{Problem, Setup, Specials, Tokenizer};
use crate::format::{SinkContext, SinkFormat};
use crate::writer::{Committed, OutputWriter, Spool, SpoolWriter};
use crate::{IoError, Loc};

/// Its name in a pipeline file.
pub const NAME: &str = "datatrove_tokens";

/// The width datatrove picks (`token_size`: 4 bytes past uint16's range).
pub fn datatrove_dtype(vocab: usize) -> TokenDtype {
    if vocab > u16::MAX as usize + 1 { TokenDtype::Uint32 } else { TokenDtype::Uint16 }
}

/// The datatrove token-file sink format.
pub struct DatatroveTokens;
pub static DATATROVE_TOKENS: DatatroveTokens = DatatroveTokens;

fn setup(sink: &mut SinkSpec, base: &Path) -> Result<Setup, Vec<Problem>> {
    let t = super::tokens_of(&mut sink.tokens, NAME, base)?;
    if t.append_eod.is_some() {
        return Err(vec![("tokens.append_eod", "datatrove appends eos_token when one is named: set eos_token, not append_eod".into())]);
    }
    match (t.max_tokens_per_file, t.seed) {
        (Some(0), _) => return Err(vec![("tokens.max_tokens_per_file", "must be at least 1".into())]),
        (Some(_), None) => {
            return Err(vec![(
                "tokens.max_tokens_per_file",
                "splits the shuffled output, as datatrove's does (which ignores it unshuffled): set seed as well".into(),
            )]);
        }
        _ => {}
    }
    let tokenizer = Tokenizer::load(Path::new(&t.tokenizer)).map_err(|m| vec![("tokens.tokenizer", m)])?;
    let mut problems = Vec::new();
    let dtype = super::dtype(&tokenizer, t, datatrove_dtype(tokenizer.vocab), &[TokenDtype::Uint16, TokenDtype::Uint32])
        .map_err(|p| problems.push(p))
        .ok();
    let specials = match &t.eos_token {
        Some(_) => super::eos_id(&tokenizer, t, "").map_err(|p| problems.push(p)).ok().flatten().map(Specials::ThenEos),
        None => Some(Specials::PostProcessor),
    };
    match (dtype, specials) {
        (Some(dtype), Some(specials)) if problems.is_empty() => Ok(Setup { tokenizer, dtype, specials, eod: None }),
        _ => Err(problems),
    }
}

impl SinkFormat for DatatroveTokens {
    fn name(&self) -> &'static str {
        NAME
    }
    fn extension(&self, _compression: Compression) -> String {
        ".ds".into()
    }
    fn prepare(&self, sink: &mut SinkSpec, base: &Path) -> Result<(), Vec<Problem>> {
        super::prepare(sink, base, "datatrove's token files are read by seeking: they are never compressed", setup)
    }
    fn estimate(&self, sink: &SinkSpec, sample: &dyn Fn() -> Vec<String>, docs: u64) -> Option<crate::format::OutputEstimate> {
        // The `.ds.index`: each document's end, a uint64.
        super::estimate(sink, setup, sample, docs, 8)
    }
    fn create(&self, loc: &Loc, sink: &SinkSpec, _cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError> {
        let name = sink.tokens.as_ref().map(|t| t.tokenizer.clone()).unwrap_or_default();
        let s = super::writer_setup(loc, sink, setup)?;
        let seed = sink.tokens.as_ref().and_then(|t| t.seed);
        let max_tokens_per_file = sink.tokens.as_ref().and_then(|t| t.max_tokens_per_file);
        let first = if seed.is_some() { loc.sibling(&format!("{}.unshuffled", loc.file_name())) } else { loc.clone() };
        let (spool, ds) = Spool::create(&first, sink.checksum)?;
        Ok(Box::new(DatatroveWriter {
            target: loc.clone(),
            spool,
            ds,
            seed,
            max_tokens_per_file,
            checksum: sink.checksum,
            tokenizer_name: name,
            s,
            ends: Vec::new(),
            cache: Default::default(),
            ids: Vec::new(),
            bytes: Vec::new(),
        }))
    }
}

/// Writes one partition's `.ds` and, when it is complete, its `.ds.index` and `.ds.metadata`.
pub struct DatatroveWriter {
    /// Where the `.ds` goes.
    target: Loc,
    /// Where the ids are written as they come: the target's spool, or (shuffling) a spool
    /// of the unshuffled file beside it, never committed.
    spool: Spool,
    ds: SpoolWriter,
    seed: Option<u64>,
    /// Shuffled: tokens after which a new file starts.
    max_tokens_per_file: Option<u64>,
    checksum: curator_core::io_spec::Checksum,
    tokenizer_name: String,
    s: Setup,
    /// Each document's end, in tokens from the file's start.
    ends: Vec<u64>,
    cache: super::bpe::PieceCache,
    ids: Vec<u32>,
    bytes: Vec<u8>,
}

impl OutputWriter for DatatroveWriter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let at = self.target.display();
        let texts = super::texts(batch, &at)?;
        self.bytes.clear();
        let mut end = self.ends.last().copied().unwrap_or(0);
        for i in 0..batch.num_rows() {
            self.ids.clear();
            let tokenizer: &Arc<Tokenizer> = &self.s.tokenizer;
            tokenizer.encode_into(super::text(texts, i), self.s.specials, &mut self.cache, &mut self.ids).map_err(|message| {
                IoError::Field { at: format!("{at}: document {}", self.ends.len() + 1), field: crate::TEXT.into(), message }
            })?;
            super::put_ids(&self.ids, self.s.dtype, &mut self.bytes);
            end += self.ids.len() as u64;
            self.ends.push(end);
        }
        self.ds.write_all(&self.bytes).map_err(|e| self.spool.werr(e))
    }

    fn finish(self: Box<Self>) -> Result<Committed, IoError> {
        let this = *self;
        let documents = this.ends.len() as u64;
        let tokens = this.ends.last().copied().unwrap_or(0);
        let files = match this.seed {
            None => vec![TokenFile { loc: this.target.clone(), committed: this.spool.commit(this.ds)?, ends: this.ends }],
            Some(seed) => {
                let width = this.s.dtype.size() as u64;
                let order = super::numpy_rng::permutation(seed, this.ends.len());
                shuffled(&this.target, this.spool, this.ds, (&this.ends, &order), (width, this.max_tokens_per_file), this.checksum)?
            }
        };
        // The partition's first file is its journaled output; the ones split off it follow.
        let bytes = files.iter().map(|f| f.committed.0).sum();
        let checksum = files.first().map(|f| f.committed.1.clone()).unwrap_or_default();
        for f in &files {
            let name = f.loc.file_name();
            let index: Vec<u8> = f.ends.iter().flat_map(|e| e.to_le_bytes()).collect();
            write_whole(&f.loc.sibling(&format!("{name}.index")), &index, this.checksum)?;
            let file_tokens = f.ends.last().copied().unwrap_or(0);
            let meta = format!("{}|{}\n{file_tokens}\n{}", this.tokenizer_name, this.s.dtype.size(), metric(file_tokens as f64, "T"));
            write_whole(&f.loc.sibling(&format!("{name}.metadata")), meta.as_bytes(), this.checksum)?;
        }
        Ok(Committed { documents, bytes, checksum, tokens: Some(tokens) })
    }
}

/// One `.ds` written: where, (bytes, checksum), and its documents' ends in tokens.
struct TokenFile {
    loc: Loc,
    committed: (u64, String),
    ends: Vec<u64>,
}

/// Where split file `k` of a partition whose output is `target` goes: `target` itself for
/// the first, `STEM_0000k.ds` beside it for the next.
fn split_file(target: &Loc, k: usize) -> Loc {
    match k {
        0 => target.clone(),
        _ => {
            let name = target.file_name();
            let stem = name.strip_suffix(".ds").unwrap_or(&name);
            target.sibling(&format!("{stem}_{k:05}.ds"))
        }
    }
}

/// The documents of the unshuffled file (`spool`, `ds`; `ends` in tokens) in `order` (numpy's
/// `default_rng(seed).permutation`), committed at `target`, as `TokenizedFile.copy` does:
/// with `max_tokens`, a new file starts (`split_file`) once the current one holds more.
fn shuffled(
    target: &Loc,
    spool: Spool,
    ds: SpoolWriter,
    (ends, order): (&[u64], &[usize]),
    (width, max_tokens): (u64, Option<u64>),
    checksum: curator_core::io_spec::Checksum,
) -> Result<Vec<TokenFile>, IoError> {
    use std::os::unix::fs::FileExt;
    let (buf, _, _) = ds.into_parts();
    // Flushed, then read back (the spool was opened for writing only).
    drop(buf.into_inner().map_err(|e| spool.werr(e.into_error()))?.into_file());
    let file = std::fs::File::open(&spool.tmp).map_err(|e| spool.werr(e))?;
    let mut files = Vec::new();
    let (mut out_spool, mut out) = Spool::create(target, checksum)?;
    let mut file_ends: Vec<u64> = Vec::new();
    let mut doc = Vec::new();
    for &d in order {
        let (a, b) = (if d == 0 { 0 } else { ends[d - 1] }, ends[d]);
        doc.resize(((b - a) * width) as usize, 0);
        file.read_exact_at(&mut doc, a * width).map_err(|e| spool.werr(e))?;
        out.write_all(&doc).map_err(|e| out_spool.werr(e))?;
        let end = file_ends.last().copied().unwrap_or(0) + (b - a);
        file_ends.push(end);
        if max_tokens.is_some_and(|m| end > m) {
            let (next_spool, next_out) = Spool::create(&split_file(target, files.len() + 1), checksum)?;
            let done = std::mem::replace(&mut out_spool, next_spool);
            let committed = done.commit(std::mem::replace(&mut out, next_out))?;
            files.push(TokenFile { loc: split_file(target, files.len()), committed, ends: std::mem::take(&mut file_ends) });
        }
    }
    drop(spool);
    let committed = out_spool.commit(out)?;
    files.push(TokenFile { loc: split_file(target, files.len()), committed, ends: file_ends });
    Ok(files)
}

fn write_whole(loc: &Loc, bytes: &[u8], checksum: curator_core::io_spec::Checksum) -> Result<(), IoError> {
    let (spool, mut w) = Spool::create(loc, checksum)?;
    w.write_all(bytes).map_err(|e| spool.werr(e))?;
    spool.commit(w).map(drop)
}

/// A count in SI units with three significant digits, as the `humanize` package's
/// `metric(value, unit)` prints it (datatrove's `.metadata` third line).
pub fn metric(value: f64, unit: &str) -> String {
    let mut exponent = if value != 0.0 { value.abs().log10().floor() as i32 } else { 0 };
    let bucket = |e: i32| e.div_euclid(3) * 3;
    let digits = |e: i32| (3 - e.rem_euclid(3) - 1).max(0) as usize;
    let old = bucket(exponent);
    let mut scaled = value / 10f64.powi(old);
    let mut decimals = digits(exponent);
    // A rounding carry (999.9 → 1000) moves to the next prefix, as humanize does.
    let rounded: f64 = format!("{:.decimals$}", scaled.abs()).parse().unwrap_or(scaled.abs());
    if exponent < 30 && rounded >= 10f64.powi(exponent.rem_euclid(3) + 1) {
        exponent += 1;
        scaled /= 10f64.powi(bucket(exponent) - old);
        decimals = digits(exponent);
    }
    let prefix = match exponent {
        e if e >= 3 => "kMGTPEZYRQ".chars().nth((e / 3 - 1) as usize).map(String::from).unwrap_or_default(),
        _ => String::new(),
    };
    let space = if unit.is_empty() && prefix.is_empty() { "" } else { " " };
    format!("{scaled:.decimals$}{space}{prefix}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_prints_as_humanize_does() {
        // humanize 4.x: metric(0, "T"), metric(7, "T"), metric(1234, "T"), metric(1234567, "T")…
        assert_eq!(metric(0.0, "T"), "0.00 T");
        assert_eq!(metric(7.0, "T"), "7.00 T");
        assert_eq!(metric(42.0, "T"), "42.0 T");
        assert_eq!(metric(1234.0, "T"), "1.23 kT");
        assert_eq!(metric(999_999.0, "T"), "1.00 MT");
        assert_eq!(metric(99_960.0, "T"), "100 kT");
        assert_eq!(metric(1_234_567.0, "T"), "1.23 MT");
        assert_eq!(metric(25_500_000_000.0, "T"), "25.5 GT");
    }

    #[test]
    fn split_files_are_named_after_the_partitions_file() {
        let target = Loc::Local("/out/shard-003.ds".into());
        assert_eq!(split_file(&target, 0), target);
        assert_eq!(split_file(&target, 1), Loc::Local("/out/shard-003_00001.ds".into()));
        assert_eq!(split_file(&target, 12), Loc::Local("/out/shard-003_00012.ds".into()));
    }

    #[test]
    fn datatrove_widens_past_uint16() {
        assert_eq!(datatrove_dtype(65536), TokenDtype::Uint16);
        assert_eq!(datatrove_dtype(65537), TokenDtype::Uint32);
    }
}
