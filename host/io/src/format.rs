//! The seam between the engine and its data formats. A [`SourceFormat`] says which files are
//! its own and turns a part of one (or a partition's files together) into batches; a
//! [`SinkFormat`] names and writes a partition's output. Each format implements them in its
//! own folder (`jsonl/format.rs`, `parquet/format.rs`, `csv/`, …) and is registered once, in
//! [`super::formats`]; discovery, planning and execution look formats up there by name (the
//! pipeline file's `format:`) and never match on them.

use arrow_array::RecordBatch;
use curator_core::partition::{Extent, Splittable};
use curator_core::pipeline::{Compression, SinkSpec};

use super::records::ReadOptions;
use super::writer::OutputWriter;
use super::{InputFile, IoError, Loc, Reject};

/// Reads one part of an input (or a partition's files, for a format that reads them together)
/// into batches.
pub trait PartReader: Send {
    /// The next batch of at most `n` documents (a format may cut batches smaller: a Parquet
    /// row group, a byte budget of images), or `None` at the end.
    fn next_batch(&mut self, n: usize) -> Result<Option<RecordBatch>, IoError>;
    /// The lines or records rejected since the last call (they go to `_rejected/`).
    fn take_rejects(&mut self) -> Vec<Reject> {
        Vec::new()
    }
}

/// How a source format's files are named.
pub struct FileNames {
    /// The format's name in a pipeline file (`source.format`).
    pub format: &'static str,
    /// File name endings (lower case; names are matched without regard to case) a directory
    /// is read for when the source names this format.
    pub extensions: &'static [&'static str],
    /// The endings a directory is read for when the source names no format; empty when its
    /// files are only read when named: discovery then says so, with a hint.
    pub unnamed: &'static [&'static str],
    /// Whether output files are named after an input without its extension (`a.jsonl` →
    /// `a.parquet`) rather than with it (`a.warc` → `a.warc.jsonl`).
    pub outputs_drop_extension: bool,
}

/// A format documents are read from.
pub trait SourceFormat: Sync {
    /// How its files are named.
    fn names(&self) -> &FileNames;
    /// Its name in a pipeline file (`source.format`).
    fn name(&self) -> &'static str {
        self.names().format
    }
    /// See [`FileNames::extensions`].
    fn extensions(&self) -> &'static [&'static str] {
        self.names().extensions
    }
    /// See [`FileNames::unnamed`].
    fn unnamed_extensions(&self) -> &'static [&'static str] {
        self.names().unnamed
    }
    /// See [`FileNames::outputs_drop_extension`].
    fn output_names_drop_extension(&self) -> bool {
        self.names().outputs_drop_extension
    }
    /// Whether a file of this lower-case name is of this format, when the source names none.
    fn claims(&self, lower_name: &str) -> bool {
        self.extensions().iter().any(|e| lower_name.ends_with(e))
    }
    /// Whether a file of this lower-case name is compressed as a whole (it cannot be cut).
    fn compressed(&self, _lower_name: &str) -> bool {
        false
    }
    /// What planning may cut inside `file` when partitions are made by size.
    fn splittable(&self, _file: &InputFile) -> Result<Splittable, IoError> {
        Ok(Splittable::No)
    }
    /// Files per partition when the source sets neither `files_per_partition` nor `blocksize`.
    fn files_per_partition(&self) -> usize {
        1
    }
    /// Whether a partition's files are read as one stream (batches span them) rather than one
    /// after another.
    fn reads_files_together(&self) -> bool {
        false
    }
    /// A reader over a part of a partition.
    fn open(&self, part: &ReadPart<'_>) -> Result<Box<dyn PartReader>, IoError>;
    /// Said after a file gave no document and every line of it was rejected.
    fn no_documents_hint(&self, _input: &InputFile, _opts: &ReadOptions) -> String {
        String::new()
    }
    /// Said when a pipeline names this format as its sink's and it cannot be one.
    fn not_a_sink(&self) -> String {
        format!("{} is a source format", self.name())
    }
}

/// What a source format reads: one file, cut to `extent`; or, for a format that
/// [reads files together](SourceFormat::reads_files_together), a partition's files.
pub struct ReadPart<'a> {
    pub files: &'a [InputFile],
    pub extent: Extent,
    pub opts: &'a ReadOptions,
    /// The documents a batch should hold (a format may cut batches smaller).
    pub batch_size: usize,
}

impl ReadPart<'_> {
    /// The (first) file.
    pub fn file(&self) -> &InputFile {
        &self.files[0]
    }
}

/// What a sink's writer needs to know of the run.
pub struct SinkContext<'a> {
    /// The source's text field: the writer writes the text under it.
    pub text_field: &'a str,
    /// Cores no stage reserves (zstd may use them).
    pub idle_cores: usize,
    /// The files the partition was read from (a Parquet sink keeps their column types).
    pub inputs: Vec<&'a InputFile>,
}

/// A format documents are written in.
pub trait SinkFormat: Sync {
    /// Its name in a pipeline file (`sink.format`).
    fn name(&self) -> &'static str;
    /// The compression when the sink names none.
    fn default_compression(&self) -> Compression {
        Compression::None
    }
    /// The compressions it writes (planning refuses the others).
    fn compressions(&self) -> &'static [Compression] {
        &[Compression::None, Compression::Gzip, Compression::Zstd]
    }
    /// The ending of its output files' names (`.jsonl.zst`, `.parquet`, …).
    fn extension(&self, compression: Compression) -> String;
    /// Check the sink's settings at planning and resolve the paths in them against the
    /// pipeline file's directory `base` (a tokenizer), or say what is wrong: `(field below
    /// `sink.`, message)`. Only the tokenized formats take `tokens:`.
    fn prepare(&self, sink: &mut SinkSpec, _base: &std::path::Path) -> Result<(), Vec<(&'static str, String)>> {
        match sink.tokens {
            Some(_) => {
                Err(vec![("tokens", format!("format {} writes no token ids (tokenized formats: megatron, datatrove_tokens)", self.name()))])
            }
            None => Ok(()),
        }
    }
    /// A writer of one output file at `loc`.
    fn create(&self, loc: &Loc, sink: &SinkSpec, cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError>;
    /// What `docs` documents like the texts `sample` gives (read only when asked) would make
    /// in this format, for `plan` (a prepared sink); `None` where the format does not
    /// estimate it.
    fn estimate(&self, _sink: &SinkSpec, _sample: &dyn Fn() -> Vec<String>, _docs: u64) -> Option<OutputEstimate> {
        None
    }
}

/// A sink's output, estimated at planning from a sample of the input.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct OutputEstimate {
    /// Token ids written (tokenized formats).
    pub tokens: u64,
    /// Bytes of every output file.
    pub bytes: u64,
}

/// A registered source format, as input files carry it: compared and shown by name.
#[derive(Clone, Copy)]
pub struct Source(pub &'static dyn SourceFormat);

impl Source {
    /// Whether it is the format called `name`.
    pub fn is(self, name: &str) -> bool {
        self.0.name() == name
    }
}

impl std::ops::Deref for Source {
    type Target = dyn SourceFormat;
    fn deref(&self) -> &Self::Target {
        self.0
    }
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}
