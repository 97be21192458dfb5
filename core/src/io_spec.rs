//! Where a pipeline reads from and writes to: the `source` and `sink` sections of the
//! pipeline file (formats, paths, sizes, compression, write modes, object-store retries).
//! Re-exported by [`crate::pipeline`], whose file they are part of.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A data format, by the name pipeline files give it (`jsonl`, `parquet`, `video`, `warc`,
/// `webdataset`, `images`, `csv`, …). Which names exist, and which of them can be read or
/// written, is the host's registry of formats: core only carries the name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Format(Cow<'static, str>);

impl Format {
    /// JSON Lines, the default sink format.
    pub const JSONL: Format = Format(Cow::Borrowed("jsonl"));

    /// The format called `name` (looked up by the host when a run is planned).
    pub const fn named(name: &'static str) -> Format {
        Format(Cow::Borrowed(name))
    }

    /// Its name in a pipeline file.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl Default for Format {
    fn default() -> Self {
        Format::JSONL
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A size: bytes as a number, or text like `64MB`, `1.5GiB` (powers of 1024).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

impl Size {
    pub fn bytes(&self) -> Option<u64> {
        match self {
            Size::Bytes(0) => None,
            Size::Bytes(b) => Some(*b),
            Size::Text(t) => crate::partition::parse_size(t),
        }
    }
}

/// Default longest JSONL line accepted (longer lines are rejected, not read into memory).
pub const DEFAULT_MAX_LINE_BYTES: u64 = 64 << 20;
/// Where an image source cuts a batch by default (`image_batch_bytes`).
pub const DEFAULT_IMAGE_BATCH_BYTES: u64 = 32 << 20;

/// Where documents come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// A file, a directory (read recursively, sorted), an object-store URL (`s3://`, `gs://`,
    /// `az://`, `file://`) or a list of them. Relative paths are resolved against the
    /// pipeline file's directory.
    pub path: OneOrMany,
    /// `jsonl`, `parquet`, `csv`, `video`, `warc`, `webdataset` or `images`; by default from
    /// each file's extension (`.parquet`, `.csv` / `.tsv`, a video extension such as `.mp4`,
    /// `.warc[.gz]` / `.wet[.gz]`, `.tar`, an image's such as `.jpg`, or JSONL). A directory of
    /// images (or videos, or CSV files) needs its `format:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// Whole files per partition (exclusive with `blocksize`). Default: 1 (`images`: 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_per_partition: Option<usize>,
    /// Target bytes per partition (exclusive with `files_per_partition`): large files are
    /// split (JSONL at line boundaries, Parquet by row groups), small ones grouped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocksize: Option<Size>,
    /// Read only these fields (besides the text and id fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
    /// JSONL lines (WARC: record blocks) longer than this are rejected (default 64 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_line_bytes: Option<Size>,
    /// An image source's batch is cut when its images reach this many bytes (default 32 MiB):
    /// large photos (1080p JPEGs are ~750 KB) give a GPU stage few images per call below it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_batch_bytes: Option<Size>,
    /// Field holding the document text (default `text`).
    #[serde(default = "default_text_field")]
    pub text_field: String,
    /// Field holding the document id (default `id`); generated from file and line if absent.
    #[serde(default = "default_id_field")]
    pub id_field: String,
    /// Which files of a directory to read (default `.jsonl`, `.json`, `.jsonl.gz`, `.jsonl.zst`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_extensions: Option<Vec<String>>,
    /// Read at most this many documents in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// One path or a list of paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn as_vec(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// The checksum of each written file in `_manifest.json`, taken while it is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Checksum {
    /// XXH3-128 (`xxh3-128:HEX`): catches corruption in storage or transfer at ~20 GB/s a
    /// core. SHA-256 costs 13 % of a pass-through's CPU even with SHA-NI.
    #[default]
    Xxh3,
    /// SHA-256 (`sha256:HEX`), what `sha256sum` prints: for a manifest checked by tools
    /// that expect it, or against deliberate tampering.
    Sha256,
}

impl Checksum {
    /// The prefix of a checksum of this kind in the manifest.
    pub fn prefix(self) -> &'static str {
        match self {
            Checksum::Xxh3 => "xxh3-128",
            Checksum::Sha256 => "sha256",
        }
    }
}

/// Compression of written files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zstd,
    // Parquet sinks only: Parquet's own default codec (pyarrow's), fast to write and read.
    Snappy,
}

impl Compression {
    /// File name suffix for this compression.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
            // A codec inside Parquet's pages: the file is still `.parquet`.
            Compression::Snappy => "",
        }
    }
}

/// What to do when an output file already exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Refuse to start if an output file exists.
    #[default]
    Error,
    /// Replace existing output files (and remove those a previous run listed in its manifest).
    Overwrite,
    /// Keep existing files; new outputs whose names are taken get a numeric suffix.
    Append,
    /// Skip partitions whose output file already exists (they are not read).
    Ignore,
}

/// Where kept documents go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SinkSpec {
    /// Output directory or object-store URL; one output file per partition. Relative paths
    /// resolve against the pipeline file.
    pub path: String,
    /// `jsonl` (the default), `parquet`, `webdataset`, or token ids for training: `megatron`,
    /// `datatrove_tokens` (with `tokens`).
    #[serde(default)]
    pub format: Format,
    /// Default: none for JSONL, zstd for Parquet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// Rows per Parquet row group (default 65536).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_group_size: Option<usize>,
    #[serde(default)]
    pub mode: WriteMode,
    /// Threads compressing each zstd JSONL file besides the writer (0: the writer compresses).
    /// Default: the cores the stages leave idle, at most 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_threads: Option<u32>,
    /// How object-store requests that fail (5xx, dropped connections, timeouts) are retried,
    /// for every object store the run reads or writes. Run-wide, so it is set on the main
    /// sink only; a `rejected:` or `tee:` sink that sets it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
    /// The checksum `_manifest.json` records for each file: `xxh3` (the default) or `sha256`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub checksum: Checksum,
    /// How documents become token ids, for the tokenized formats (`megatron`,
    /// `datatrove_tokens`): required by them, refused by the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Box<TokensSpec>>,
}

/// Tokenized output: the tokenizer and what is added to each document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokensSpec {
    /// A directory holding `tokenizer.json` (and `tokenizer_config.json`, whose `eos_token`
    /// is the end-of-document token unless `eos_token` names one), or a `tokenizer.json`
    /// itself. Relative paths resolve against the pipeline file. Never downloaded.
    pub tokenizer: String,
    /// `megatron`: append the end-of-document token to each non-empty document
    /// (`preprocess_data.py --append-eod`). Default true. `datatrove_tokens` appends
    /// `eos_token` when one is named, as `DocumentTokenizer` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_eod: Option<bool>,
    /// The end-of-document token's text (e.g. `<|endoftext|>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eos_token: Option<String>,
    /// The width of a token id on disk. Default: as the tool picks it from the vocabulary
    /// size (Megatron: `uint16` below 65,500 tokens, else `int32`; datatrove: `uint16` up to
    /// 65,536, else `uint32`). A vocabulary that does not fit the width named is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<TokenDtype>,
    /// `datatrove_tokens`: shuffle each partition's documents with
    /// `numpy.random.default_rng(seed).permutation`, as `DocumentTokenizer(seed=…)` does (the
    /// same files for the same seed). Without, documents keep their order
    /// (`shuffle_documents=False`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// `datatrove_tokens` with `seed`: start a new file once one holds more than this many
    /// tokens, as `DocumentTokenizer(max_tokens_per_file=…)` splits its shuffled output (the
    /// partition's first file keeps its name, the next ones add `_00001`, `_00002`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_file: Option<u64>,
    /// `datatrove_tokens` with `seed`: shuffle the documents (default true); false with
    /// `shuffle_chunk_size` shuffles only the chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_documents: Option<bool>,
    /// `datatrove_tokens` with `seed`: then cut the (shuffled) tokens into chunks of this many
    /// and shuffle those, as `DocumentTokenizer(shuffle_chunk_size=…)` does (the tokens after
    /// the last whole chunk are dropped; a document a chunk cuts ends at the chunk's end in
    /// the index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_chunk_size: Option<u64>,
    /// `datatrove_tokens`: also write `.ds.loss`, a byte per token (1: the loss counts; 0: in
    /// the document's `no_loss_ranges` metadata, character ranges), as
    /// `DocumentTokenizer(save_loss_metadata=True)` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_loss_metadata: Option<bool>,
}

/// The on-disk type of a token id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenDtype {
    Uint16,
    Int32,
    Uint32,
}

impl TokenDtype {
    /// Bytes per token id.
    pub fn size(self) -> usize {
        match self {
            TokenDtype::Uint16 => 2,
            TokenDtype::Int32 | TokenDtype::Uint32 => 4,
        }
    }

    /// Whether every id of a vocabulary of `vocab` tokens fits.
    pub fn fits(self, vocab: usize) -> bool {
        let max = match self {
            TokenDtype::Uint16 => u16::MAX as u64,
            TokenDtype::Int32 => i32::MAX as u64,
            TokenDtype::Uint32 => u32::MAX as u64,
        };
        vocab == 0 || (vocab as u64 - 1) <= max
    }

    /// Its name in a pipeline file.
    pub fn name(self) -> &'static str {
        match self {
            TokenDtype::Uint16 => "uint16",
            TokenDtype::Int32 => "int32",
            TokenDtype::Uint32 => "uint32",
        }
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Retries of object-store requests, with exponential backoff (object_store's defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetrySpec {
    /// Attempts after the first (0: fail at the first error).
    pub max_retries: u32,
    /// Give up retrying a request this long after its first attempt.
    pub retry_timeout_s: f64,
    /// First backoff; each next one doubles, up to `max_backoff_s`.
    pub initial_backoff_ms: u64,
    pub max_backoff_s: f64,
}

impl Default for RetrySpec {
    fn default() -> Self {
        RetrySpec { max_retries: 10, retry_timeout_s: 180.0, initial_backoff_ms: 100, max_backoff_s: 15.0 }
    }
}

impl SinkSpec {
    /// The retry settings, or object_store's defaults.
    pub fn retry(&self) -> RetrySpec {
        self.retry.clone().unwrap_or_default()
    }

    /// zstd worker threads per output file, given the cores no stage reserves.
    pub fn compression_workers(&self, idle_cores: usize) -> u32 {
        self.compression_threads.unwrap_or(idle_cores.min(2) as u32)
    }

    /// The compression in effect, given the sink format's default.
    pub fn compression_or(&self, format_default: Compression) -> Compression {
        self.compression.unwrap_or(format_default)
    }
}

pub(crate) fn default_text_field() -> String {
    "text".into()
}
pub(crate) fn default_id_field() -> String {
    "id".into()
}
