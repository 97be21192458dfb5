//! JSONL as a source and a sink format (the default of both).

use curator_core::partition::Splittable;
use curator_core::pipeline::{Compression, SinkSpec};

use super::{JsonlReader, JsonlWriter};
use crate::format::{FileNames, PartReader, ReadPart, SinkContext, SinkFormat, SourceFormat};
use crate::records::ReadOptions;
use crate::writer::OutputWriter;
use crate::{Codec, InputFile, IoError, Loc, Reject, codec};

/// JSON Lines, plain or compressed.
pub struct Jsonl;
pub static JSONL: Jsonl = Jsonl;
/// Its name in a pipeline file.
pub const NAME: &str = "jsonl";

/// Its file name endings: `.jsonl`, `.json` and `.ndjson`, plain or with a
/// [`codec::COMPRESSED_EXTENSIONS`] ending.
pub const EXTENSIONS: &[&str] = &[
    ".jsonl",
    ".json",
    ".ndjson", //
    ".jsonl.gz",
    ".json.gz",
    ".ndjson.gz", //
    ".jsonl.zst",
    ".json.zst",
    ".ndjson.zst",
    ".jsonl.zstd",
    ".json.zstd",
    ".ndjson.zstd", //
    ".jsonl.bz2",
    ".json.bz2",
    ".ndjson.bz2", //
    ".jsonl.xz",
    ".json.xz",
    ".ndjson.xz", //
    ".jsonl.lz4",
    ".json.lz4",
    ".ndjson.lz4",
];

static FILE_NAMES: FileNames = FileNames { format: NAME, extensions: EXTENSIONS, unnamed: EXTENSIONS, outputs_drop_extension: true };

impl SourceFormat for Jsonl {
    fn names(&self) -> &FileNames {
        &FILE_NAMES
    }
    fn compressed(&self, lower_name: &str) -> bool {
        Codec::from_name(lower_name).is_some()
    }
    fn splittable(&self, file: &InputFile) -> Result<Splittable, IoError> {
        // A compressed file under a plain name is read whole, decoded (never cut as text).
        Ok(if !file.compressed && codec::starts_plain(&file.loc, file.size)? { Splittable::Bytes } else { Splittable::No })
    }
    fn open(&self, part: &ReadPart<'_>) -> Result<Box<dyn PartReader>, IoError> {
        Ok(Box::new(JsonlReader::open(part.file(), part.extent, part.opts.clone())?))
    }
    fn no_documents_hint(&self, _input: &InputFile, opts: &ReadOptions) -> String {
        format!("; is it JSONL with a {:?} field?", opts.text_field)
    }
}

impl PartReader for JsonlReader {
    fn next_batch(&mut self, n: usize) -> Result<Option<arrow_array::RecordBatch>, IoError> {
        JsonlReader::next_batch(self, n)
    }
    fn take_rejects(&mut self) -> Vec<Reject> {
        JsonlReader::take_rejects(self)
    }
}

impl SinkFormat for Jsonl {
    fn name(&self) -> &'static str {
        NAME
    }
    fn extension(&self, compression: Compression) -> String {
        format!(".jsonl{}", compression.suffix())
    }
    fn create(&self, loc: &Loc, sink: &SinkSpec, cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError> {
        let writer = JsonlWriter::create(loc, sink.compression_or(self.default_compression()), sink.checksum, cx.text_field)?;
        Ok(Box::new(writer.with_compression_workers(sink.compression_workers(cx.idle_cores))?))
    }
}
