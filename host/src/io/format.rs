//! The seam between the engine and its data formats. A [`SourceFormat`] says which files are
//! its own and turns a part of one (or a partition's files together) into batches; a
//! [`SinkFormat`] names and writes a partition's output. Each format implements them in its
//! own folder (`jsonl/format.rs`, `parquet/format.rs`, …) and is registered once, in
//! [`SOURCES`] or [`SINKS`]; discovery, planning and execution look formats up here by name
//! (the pipeline file's `format:`) and never match on them.
//!
//! Adding a format is a folder and a line: see `csv/` and its line in [`SOURCES`].

use arrow_array::RecordBatch;
use curator_core::partition::{Extent, Splittable};
use curator_core::pipeline::{Compression, Format, SinkSpec};

use super::jsonl::ReadOptions;
use super::writer::OutputWriter;
use super::{InputFile, IoError, Loc, Reject};

/// Every source format, in the order a file's name is offered to them when the source names
/// none (the first that [claims](SourceFormat::claims) it reads it; else [`DEFAULT_SOURCE`]).
pub static SOURCES: &[&dyn SourceFormat] = &[
    &super::parquet::PARQUET,
    &super::video::VIDEO,
    &super::warc::WARC,
    &super::webdataset::WEBDATASET,
    &super::images::IMAGES,
    &super::csv::CSV,
    &super::jsonl::JSONL,
];

/// Every sink format.
pub static SINKS: &[&dyn SinkFormat] = &[&super::jsonl::JSONL, &super::parquet::PARQUET, &super::webdataset::WEBDATASET];

/// What a file is read as when no format claims its name.
pub static DEFAULT_SOURCE: &dyn SourceFormat = &super::jsonl::JSONL;

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

/// A format documents are read from.
pub trait SourceFormat: Sync {
    /// Its name in a pipeline file (`source.format`).
    fn name(&self) -> &'static str;
    /// File name endings (lower case; names are matched without regard to case) a directory
    /// is read for when the source names this format.
    fn extensions(&self) -> &'static [&'static str];
    /// The endings a directory is read for when the source names no format; empty (the
    /// default) when its files are only read when named: discovery then says so, with a hint.
    fn unnamed_extensions(&self) -> &'static [&'static str] {
        &[]
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
    /// Whether output files are named after an input without its extension (`a.jsonl` →
    /// `a.parquet`) rather than with it (`a.warc` → `a.warc.jsonl`).
    fn output_names_drop_extension(&self) -> bool {
        false
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
    /// The ending of its output files' names (`.jsonl.zst`, `.parquet`, …).
    fn extension(&self, compression: Compression) -> String;
    /// A writer of one output file at `loc`.
    fn create(&self, loc: &Loc, sink: &SinkSpec, cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError>;
}

/// A registered source format, as input files carry it: compared and shown by name.
#[derive(Clone, Copy)]
pub struct Source(pub &'static dyn SourceFormat);

impl Source {
    /// The source format called `name`.
    pub fn named(name: &str) -> Option<Source> {
        SOURCES.iter().find(|f| f.name() == name).map(|f| Source(*f))
    }

    /// The source format of a file by its name (`format` when the source names one).
    pub fn of_file(name: &str, format: Option<Source>) -> Source {
        format.unwrap_or_else(|| {
            let lower = name.to_lowercase();
            Source(SOURCES.iter().copied().find(|f| f.claims(&lower)).unwrap_or(DEFAULT_SOURCE))
        })
    }

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

/// The names of `formats`, for messages.
fn names<'a>(formats: impl Iterator<Item = &'a str>) -> String {
    formats.collect::<Vec<_>>().join(", ")
}

/// The source format a pipeline names, or what to say about the name.
pub fn source(format: &Format) -> Result<Source, String> {
    Source::named(format.name())
        .ok_or_else(|| format!("unknown format {:?} (source formats: {})", format.name(), names(SOURCES.iter().map(|f| f.name()))))
}

/// The sink format a pipeline names, or what to say about the name.
pub fn sink(format: &Format) -> Result<&'static dyn SinkFormat, String> {
    if let Some(f) = SINKS.iter().find(|f| f.name() == format.name()) {
        return Ok(*f);
    }
    let known = names(SINKS.iter().map(|f| f.name()));
    Err(match Source::named(format.name()) {
        Some(s) => format!("{} (sink formats: {known})", s.not_a_sink()),
        None => format!("unknown format {:?} (sink formats: {known})", format.name()),
    })
}

/// The compression a sink writes with: its own, else its format's default.
pub fn sink_compression(sink: &SinkSpec) -> Compression {
    let default = self::sink(&sink.format).map(|f| f.default_compression()).unwrap_or(Compression::None);
    sink.compression_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_registered_once_under_its_name() {
        for list in [SOURCES.iter().map(|f| f.name()).collect::<Vec<_>>(), SINKS.iter().map(|f| f.name()).collect()] {
            let mut sorted = list.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), list.len(), "{list:?}");
        }
        for f in SOURCES {
            assert_eq!(source(&Format::named(f.name())).unwrap().name(), f.name());
        }
    }

    #[test]
    fn source_only_formats_are_refused_as_sinks_with_the_formats_that_are() {
        for name in ["video", "warc", "images", "csv"] {
            let e = sink(&Format::named(name)).err().unwrap();
            assert!(e.starts_with(&format!("{name} is a source format")), "{e}");
            assert!(e.ends_with("(sink formats: jsonl, parquet, webdataset)"), "{e}");
        }
        let e = sink(&Format::named("jsonlines")).err().unwrap();
        assert_eq!(e, "unknown format \"jsonlines\" (sink formats: jsonl, parquet, webdataset)");
        assert!(source(&Format::named("Parquet")).unwrap_err().starts_with("unknown format \"Parquet\" (source formats: parquet, video,"));
    }

    #[test]
    fn a_parquet_sink_compresses_with_zstd_unless_told() {
        let mut sink: SinkSpec = serde_json::from_str(r#"{"path": "out", "format": "parquet"}"#).unwrap();
        assert_eq!(sink_compression(&sink), Compression::Zstd);
        sink.compression = Some(Compression::Gzip);
        assert_eq!(sink_compression(&sink), Compression::Gzip);
        sink.format = Format::JSONL;
        sink.compression = None;
        assert_eq!(sink_compression(&sink), Compression::None);
    }

    #[test]
    fn files_are_sniffed_by_name() {
        let of = |n: &str| Source::of_file(n, None).name();
        assert_eq!(
            ["a.parquet", "b.PQ", "c.mp4", "d.warc.gz", "e.tar", "f.jpg", "g.csv", "h.tsv.gz", "i.jsonl.zst", "j.txt"].map(of),
            ["parquet", "parquet", "video", "warc", "webdataset", "images", "csv", "csv", "jsonl", "jsonl"]
        );
        let warc = Source::named("warc");
        assert_eq!(Source::of_file("x.jsonl", warc).name(), "warc", "the source's format wins");
    }
}
