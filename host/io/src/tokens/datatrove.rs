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
//! does), each with its own `.ds.index` and `.ds.metadata`. With `shuffle_chunk_size`, the
//! tokens are then cut into chunks (`Units::chunks`, datatrove's `chunk_doc_ends`) shuffled
//! by the same generator's next permutation (`shuffle_documents: false`: its first). With
//! `save_loss_metadata`, a `.ds.loss` of a byte per token ([`super::loss`]) is written beside
//! each `.ds` and moves with its tokens through every copy.

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
    let mut refused = Vec::new();
    for (field, value) in [("tokens.max_tokens_per_file", t.max_tokens_per_file), ("tokens.shuffle_chunk_size", t.shuffle_chunk_size)] {
        match (value, t.seed) {
            (Some(0), _) => refused.push((field, "must be at least 1".to_string())),
            (Some(_), None) => refused.push((field, "applies to the shuffled output, as datatrove's does: set seed as well".to_string())),
            _ => {}
        }
    }
    match (t.shuffle_documents, t.seed, t.shuffle_chunk_size) {
        (Some(_), None, _) => refused.push(("tokens.shuffle_documents", "applies to the shuffled output: set seed as well".to_string())),
        (Some(false), Some(_), None) => refused.push((
            "tokens.shuffle_documents",
            "false with no shuffle_chunk_size shuffles nothing: set shuffle_chunk_size, or leave seed out".to_string(),
        )),
        _ => {}
    }
    if !refused.is_empty() {
        return Err(refused);
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
        let shuffle_documents = sink.tokens.as_ref().and_then(|t| t.shuffle_documents).unwrap_or(true);
        let shuffle_chunk_size = sink.tokens.as_ref().and_then(|t| t.shuffle_chunk_size);
        let first = if seed.is_some() { loc.sibling(&format!("{}.unshuffled", loc.file_name())) } else { loc.clone() };
        let (spool, ds) = Spool::create(&first, sink.checksum)?;
        let loss = match sink.tokens.as_ref().and_then(|t| t.save_loss_metadata) {
            Some(true) => {
                let tok = s.tokenizer.with_offsets(s.specials).map_err(|message| IoError::Field {
                    at: loc.display(),
                    field: "tokens.tokenizer".into(),
                    message,
                })?;
                let (spool, out) = Spool::create(&loss_of(&first), sink.checksum)?;
                Some(Loss { spool, out, tok, bytes: Vec::new() })
            }
            _ => None,
        };
        Ok(Box::new(DatatroveWriter {
            target: loc.clone(),
            spool,
            ds,
            loss,
            seed,
            max_tokens_per_file,
            shuffle_documents,
            shuffle_chunk_size,
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

/// A `.ds.loss` being written, and the tokenizer that maps a document's character ranges to
/// its tokens.
struct Loss {
    spool: Spool,
    out: SpoolWriter,
    tok: tokenizers::Tokenizer,
    bytes: Vec<u8>,
}

/// Where the loss masks of the token file at `ds` go: `NAME.ds.loss`.
fn loss_of(ds: &Loc) -> Loc {
    ds.sibling(&format!("{}.loss", ds.file_name()))
}

/// Writes one partition's `.ds` and, when it is complete, its `.ds.index` and `.ds.metadata`.
pub struct DatatroveWriter {
    /// Where the `.ds` goes.
    target: Loc,
    /// Where the ids are written as they come: the target's spool, or (shuffling) a spool
    /// of the unshuffled file beside it, never committed.
    spool: Spool,
    ds: SpoolWriter,
    /// With `save_loss_metadata`: the `.ds.loss` beside `ds`.
    loss: Option<Loss>,
    seed: Option<u64>,
    /// Shuffled: tokens after which a new file starts.
    max_tokens_per_file: Option<u64>,
    /// Shuffled: whether the documents are (else only chunks, `shuffle_chunk_size`).
    shuffle_documents: bool,
    shuffle_chunk_size: Option<u64>,
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
        // A document's ranges: a column of their own (a Parquet source), else a field of its
        // `_meta` (JSONL).
        let ranges_col = self.loss.as_ref().and_then(|_| batch.column_by_name(super::loss::NO_LOSS_RANGES));
        let metas = self.loss.as_ref().and_then(|_| crate::records::string_column(batch, crate::META));
        self.bytes.clear();
        if let Some(l) = self.loss.as_mut() {
            l.bytes.clear();
        }
        let mut end = self.ends.last().copied().unwrap_or(0);
        for i in 0..batch.num_rows() {
            self.ids.clear();
            let doc = || format!("{at}: document {}", self.ends.len() + 1);
            let text = super::text(texts, i);
            let tokenizer: &Arc<Tokenizer> = &self.s.tokenizer;
            tokenizer.encode_into(text, self.s.specials, &mut self.cache, &mut self.ids).map_err(|message| IoError::Field {
                at: doc(),
                field: crate::TEXT.into(),
                message,
            })?;
            if let Some(l) = self.loss.as_mut() {
                let field = |message| IoError::Field { at: doc(), field: super::loss::NO_LOSS_RANGES.into(), message };
                let ranges = match ranges_col {
                    Some(col) => super::loss::ranges_in_column(col.as_ref(), i),
                    None => super::loss::no_loss_ranges(
                        metas.filter(|m| !arrow_array::Array::is_null(*m, i)).map(|m| m.value(i)).unwrap_or("{}"),
                    ),
                };
                match ranges.map_err(field)? {
                    None => l.bytes.resize(l.bytes.len() + self.ids.len(), 1),
                    Some(ranges) => {
                        // The ids of the encoding the mask is made on (the same ids), cut to it.
                        let e = l.tok.encode_char_offsets(text, true).map_err(|e| field(e.to_string()))?;
                        let mask = super::loss::loss_mask(&e, &ranges);
                        self.ids.clear();
                        self.ids.extend_from_slice(&e.get_ids()[..mask.len()]);
                        l.bytes.extend_from_slice(&mask);
                    }
                }
            }
            super::put_ids(&self.ids, self.s.dtype, &mut self.bytes);
            end += self.ids.len() as u64;
            self.ends.push(end);
        }
        if let Some(l) = self.loss.as_mut() {
            l.out.write_all(&l.bytes).map_err(|e| l.spool.werr(e))?;
        }
        self.ds.write_all(&self.bytes).map_err(|e| self.spool.werr(e))
    }

    fn finish(self: Box<Self>) -> Result<Committed, IoError> {
        let this = *self;
        let documents = this.ends.len() as u64;
        let files: Vec<TokenFile> = match this.seed {
            None => {
                if let Some(l) = this.loss {
                    l.spool.commit(l.out)?;
                }
                vec![TokenFile { loc: this.target.clone(), committed: this.spool.commit(this.ds)?, ends: this.ends }]
            }
            Some(seed) => {
                let copied = shuffle(
                    (&this.target, (this.spool, this.ds), this.loss.map(|l| (l.spool, l.out)), this.ends),
                    Shuffle {
                        seed,
                        documents: this.shuffle_documents,
                        chunk: this.shuffle_chunk_size,
                        max_tokens: this.max_tokens_per_file,
                    },
                    this.s.dtype.size() as u64,
                    this.checksum,
                )?;
                let mut files = Vec::with_capacity(copied.len());
                for c in copied {
                    if let Some((spool, out)) = c.loss {
                        spool.commit(out)?;
                    }
                    files.push(TokenFile { loc: c.loc, committed: c.spool.commit(c.out)?, ends: c.ends });
                }
                files
            }
        };
        // The partition's first file is its journaled output; the ones split off it follow.
        let bytes = files.iter().map(|f| f.committed.0).sum();
        let checksum = files.first().map(|f| f.committed.1.clone()).unwrap_or_default();
        let mut tokens = 0;
        for f in &files {
            let name = f.loc.file_name();
            let index: Vec<u8> = f.ends.iter().flat_map(|e| e.to_le_bytes()).collect();
            write_whole(&f.loc.sibling(&format!("{name}.index")), &index, this.checksum)?;
            let file_tokens = f.ends.last().copied().unwrap_or(0);
            tokens += file_tokens;
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

/// A file being written: its spool and writer.
type Spooled = (Spool, SpoolWriter);

/// A `.ds` (and its `.ds.loss`) being written, not committed yet.
struct Copied {
    loc: Loc,
    spool: Spool,
    out: SpoolWriter,
    loss: Option<Spooled>,
    ends: Vec<u64>,
}

/// How a partition's token file is shuffled (`DocumentTokenizer`'s settings).
struct Shuffle {
    seed: u64,
    /// `shuffle_documents`.
    documents: bool,
    /// `shuffle_chunk_size`.
    chunk: Option<u64>,
    /// `max_tokens_per_file`, applied by the last copy.
    max_tokens: Option<u64>,
}

/// What one copy moves whole, in the order it draws (`TokenizedFile.copy`'s boundaries).
enum Units<'a> {
    /// One per document; `ends[d]` in tokens from the file's start.
    Docs(&'a [u64]),
    /// `chunk_doc_ends`: chunk `c` is tokens `[c·size, (c+1)·size)`; its boundaries (the
    /// ends of the documents that end inside it, then its own end) are `bounds[at[c]..at[c+1]]`.
    /// The tokens after the last whole chunk are in none (datatrove drops them).
    Chunks { size: u64, bounds: Vec<u64>, at: Vec<usize> },
}

impl Units<'_> {
    /// datatrove's `chunk_doc_ends(ends, size)`.
    fn chunks(ends: &[u64], size: u64) -> Units<'static> {
        let (mut bounds, mut at) = (Vec::new(), vec![0]);
        let total = ends.last().copied().unwrap_or(0);
        let mut d = 0;
        for c in 1..=total / size {
            let chunk_end = c * size;
            while d < ends.len() && ends[d] <= chunk_end {
                if ends[d] < chunk_end {
                    bounds.push(ends[d]);
                }
                d += 1;
            }
            bounds.push(chunk_end);
            at.push(bounds.len());
        }
        Units::Chunks { size, bounds, at }
    }

    fn len(&self) -> usize {
        match self {
            Units::Docs(ends) => ends.len(),
            Units::Chunks { at, .. } => at.len() - 1,
        }
    }

    /// Unit `i`: (first token, end, the absolute ends of the documents in it).
    fn get(&self, i: usize) -> (u64, u64, &[u64]) {
        match self {
            Units::Docs(ends) => (if i == 0 { 0 } else { ends[i - 1] }, ends[i], &ends[i..=i]),
            Units::Chunks { size, bounds, at } => (i as u64 * size, (i as u64 + 1) * size, &bounds[at[i]..at[i + 1]]),
        }
    }
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

/// A spool's file opened for reading, its writer flushed and closed.
fn reopen(spool: &Spool, w: SpoolWriter) -> Result<std::fs::File, IoError> {
    let (buf, _, _) = w.into_parts();
    drop(buf.into_inner().map_err(|e| spool.werr(e.into_error()))?.into_file());
    std::fs::File::open(&spool.tmp).map_err(|e| spool.werr(e))
}

/// The unshuffled file (`target`'s spool, its writer, its documents' ends) shuffled as
/// `DocumentTokenizer.run` shuffles a rank's: its documents in the order of the seed's
/// generator's first permutation (`shuffle_documents`), then (`shuffle_chunk_size`) chunks of
/// that in the order of its next one; `max_tokens_per_file` cuts the last copy's output.
fn shuffle(
    (target, (spool, ds), loss, ends): (&Loc, Spooled, Option<Spooled>, Vec<u64>),
    how: Shuffle,
    width: u64,
    checksum: curator_core::io_spec::Checksum,
) -> Result<Vec<Copied>, IoError> {
    let mut rng = super::numpy_rng::Rng::new(how.seed);
    // The files read from, and their spools: kept, never committed, until they have been read.
    let mut src = Source::open(spool, ds, loss)?;
    let mut ends = ends;
    if how.documents {
        let order = rng.permutation(ends.len());
        if how.chunk.is_none() {
            return copy(&src, &Units::Docs(&ends), &order, (width, how.max_tokens), target, checksum);
        }
        // The documents' copy, which the chunks' reads.
        let between = target.sibling(&format!("{}.doc_shuffled", target.file_name()));
        let c = copy(&src, &Units::Docs(&ends), &order, (width, None), &between, checksum)?
            .pop()
            .ok_or_else(|| src.spool.werr(std::io::Error::other("the documents' copy made no file")))?;
        ends = c.ends;
        src = Source::open(c.spool, c.out, c.loss)?;
    }
    let Some(size) = how.chunk else {
        return Err(src.spool.werr(std::io::Error::other("seed without shuffle_documents or shuffle_chunk_size shuffles nothing")));
    };
    let units = Units::chunks(&ends, size);
    let order = rng.permutation(units.len());
    copy(&src, &units, &order, (width, how.max_tokens), target, checksum)
}

/// A token file (and its loss masks) a copy reads, with the spools that remove them once read.
struct Source {
    spool: Spool,
    file: std::fs::File,
    loss: Option<(Spool, std::fs::File)>,
}

impl Source {
    fn open(spool: Spool, ds: SpoolWriter, loss: Option<Spooled>) -> Result<Source, IoError> {
        let file = reopen(&spool, ds)?;
        let loss = match loss {
            Some((s, w)) => {
                let f = reopen(&s, w)?;
                Some((s, f))
            }
            None => None,
        };
        Ok(Source { spool, file, loss })
    }
}

/// `units` of `src` copied in `order` into `target`, as `TokenizedFile.copy` copies them
/// (the loss masks, a byte per token, with them): with `max_tokens`, a new file starts
/// (`split_file`) once the current one holds more.
fn copy(
    src: &Source,
    units: &Units<'_>,
    order: &[usize],
    (width, max_tokens): (u64, Option<u64>),
    target: &Loc,
    checksum: curator_core::io_spec::Checksum,
) -> Result<Vec<Copied>, IoError> {
    use std::os::unix::fs::FileExt;
    let open = |k: usize| -> Result<Copied, IoError> {
        let loc = split_file(target, k);
        let (spool, out) = Spool::create(&loc, checksum)?;
        let loss = match src.loss {
            Some(_) => Some(Spool::create(&loss_of(&loc), checksum)?),
            None => None,
        };
        Ok(Copied { loc, spool, out, loss, ends: Vec::new() })
    };
    let mut files = Vec::new();
    let mut cur = open(0)?;
    let mut buf = Vec::new();
    for &i in order {
        let (start, end, bounds) = units.get(i);
        buf.resize(((end - start) * width) as usize, 0);
        src.file.read_exact_at(&mut buf, start * width).map_err(|e| src.spool.werr(e))?;
        cur.out.write_all(&buf).map_err(|e| cur.spool.werr(e))?;
        if let (Some((ls, lf)), Some((spool, out))) = (&src.loss, cur.loss.as_mut()) {
            buf.resize((end - start) as usize, 0);
            lf.read_exact_at(&mut buf, start).map_err(|e| ls.werr(e))?;
            out.write_all(&buf).map_err(|e| spool.werr(e))?;
        }
        let base = cur.ends.last().copied().unwrap_or(0);
        cur.ends.extend(bounds.iter().map(|b| base + (b - start)));
        if max_tokens.is_some_and(|m| base + (end - start) > m) {
            let next = open(files.len() + 1)?;
            files.push(std::mem::replace(&mut cur, next));
        }
    }
    files.push(cur);
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
    fn chunks_are_cut_as_datatroves_chunk_doc_ends_cuts_them() {
        // chunk_doc_ends([3, 10, 12, 20, 27], 5) == [[3, 5], [10], [12, 15], [20], [25]]
        let ends = [3, 10, 12, 20, 27];
        let units = Units::chunks(&ends, 5);
        let got: Vec<(u64, u64, Vec<u64>)> = (0..units.len()).map(|i| units.get(i)).map(|(a, b, e)| (a, b, e.to_vec())).collect();
        assert_eq!(got, [(0, 5, vec![3, 5]), (5, 10, vec![10]), (10, 15, vec![12, 15]), (15, 20, vec![20]), (20, 25, vec![25])]);
        assert_eq!(Units::chunks(&[], 5).len(), 0);
        assert_eq!(Units::chunks(&[4], 5).len(), 0, "a last chunk shorter than the size is dropped");
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
