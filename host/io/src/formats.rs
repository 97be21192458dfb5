//! The registry of data formats: every [`SourceFormat`] and [`SinkFormat`] the host knows, and
//! their lookup by the name a pipeline file gives. Adding a format is its folder and a line
//! here (see `csv/`).

use curator_core::pipeline::{Compression, Format, SinkSpec};

use super::format::{SinkFormat, Source, SourceFormat};

/// Every source format, in the order a file's name is offered to them when the source names
/// none (the first that [claims](SourceFormat::claims) it reads it; else [`DEFAULT_SOURCE`]).
pub static SOURCES: &[&dyn SourceFormat] = &[
    #[cfg(feature = "parquet")]
    &super::parquet::PARQUET,
    &super::video::VIDEO,
    &super::warc::WARC,
    &super::webdataset::WEBDATASET,
    &super::images::IMAGES,
    &super::csv::CSV,
    &super::jsonl::JSONL,
];

/// Every sink format.
pub static SINKS: &[&dyn SinkFormat] = &[
    &super::jsonl::JSONL,
    #[cfg(feature = "parquet")]
    &super::parquet::PARQUET,
    &super::webdataset::WEBDATASET,
    #[cfg(feature = "tokens")]
    &super::tokens::megatron::MEGATRON,
    #[cfg(feature = "tokens")]
    &super::tokens::datatrove::DATATROVE_TOKENS,
];

/// A format this build leaves out (its cargo feature): its name, the file name endings it
/// would claim, and what to say to a pipeline or a file that needs it.
struct NotBuilt {
    name: &'static str,
    extensions: &'static [&'static str],
    why: &'static str,
}

/// Formats this build leaves out.
static NOT_BUILT: &[NotBuilt] = &[
    #[cfg(not(feature = "parquet"))]
    NotBuilt { name: "parquet", extensions: &[".parquet", ".pq"], why: crate::not_built!("parquet") },
    #[cfg(not(feature = "tokens"))]
    NotBuilt { name: "megatron", extensions: &[], why: crate::not_built!("tokens") },
    #[cfg(not(feature = "tokens"))]
    NotBuilt { name: "datatrove_tokens", extensions: &[], why: crate::not_built!("tokens") },
];

/// Why `name` is not a format of this build, when it is one of another.
fn not_built(name: &str) -> Option<String> {
    NOT_BUILT.iter().find(|f| f.name == name).map(|f| format!("format {:?}: {}", f.name, f.why))
}

/// The format a file of this name would be read as in a build with every feature, and why
/// this one cannot, when that format is left out of this build.
pub fn not_built_file(name: &str) -> Option<(&'static str, &'static str)> {
    // The full build leaves nothing out: no lower-case copy of every listed file's name.
    if NOT_BUILT.is_empty() {
        return None;
    }
    let lower = name.to_lowercase();
    NOT_BUILT.iter().find(|f| f.extensions.iter().any(|e| lower.ends_with(e))).map(|f| (f.name, f.why))
}

/// What a file is read as when no format claims its name.
pub static DEFAULT_SOURCE: &dyn SourceFormat = &super::jsonl::JSONL;

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
}

/// The names of `formats`, for messages.
fn names<'a>(formats: impl Iterator<Item = &'a str>) -> String {
    formats.collect::<Vec<_>>().join(", ")
}

/// The source format a pipeline names, or what to say about the name.
pub fn source(format: &Format) -> Result<Source, String> {
    if let Some(why) = not_built(format.name()) {
        return Err(why);
    }
    Source::named(format.name())
        .ok_or_else(|| format!("unknown format {:?} (source formats: {})", format.name(), names(SOURCES.iter().map(|f| f.name()))))
}

/// The sink format a pipeline names, or what to say about the name.
pub fn sink(format: &Format) -> Result<&'static dyn SinkFormat, String> {
    if let Some(f) = SINKS.iter().find(|f| f.name() == format.name()) {
        return Ok(*f);
    }
    if let Some(why) = not_built(format.name()) {
        return Err(why);
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

/// What to add to "no document could be read from it": a file that sits beside an image of
/// its name is a sidecar of a folder of images, whatever format it was read as; otherwise
/// the format's own hint.
pub fn no_documents_hint(input: &super::InputFile, opts: &super::records::ReadOptions) -> String {
    if !input.format.is(super::images::NAME) && super::images::beside_an_image(&input.loc) {
        "; it sits beside an image of its name: a folder of images (and their .json files) is read with `format: images`".into()
    } else {
        input.format.no_documents_hint(input, opts)
    }
}

// The tests name Parquet, a format of the default build.
#[cfg(all(test, feature = "parquet"))]
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
        let known =
            if cfg!(feature = "tokens") { "jsonl, parquet, webdataset, megatron, datatrove_tokens" } else { "jsonl, parquet, webdataset" };
        for name in ["video", "warc", "images", "csv"] {
            let e = sink(&Format::named(name)).err().unwrap();
            assert!(e.starts_with(&format!("{name} is a source format")), "{e}");
            assert!(e.ends_with(&format!("(sink formats: {known})")), "{e}");
        }
        let e = sink(&Format::named("jsonlines")).err().unwrap();
        assert_eq!(e, format!("unknown format \"jsonlines\" (sink formats: {known})"));
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
