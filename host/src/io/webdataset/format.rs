//! WebDataset shards as a source and a sink format.

use curator_core::pipeline::{Compression, SinkSpec};

use super::{WebdatasetReader, WebdatasetWriter};
use crate::io::format::{PartReader, ReadPart, SinkContext, SinkFormat, SourceFormat};
use crate::io::writer::OutputWriter;
use crate::io::{IoError, Loc};

/// WebDataset tar shards.
pub struct Webdataset;
pub static WEBDATASET: Webdataset = Webdataset;
/// Its name in a pipeline file.
pub const NAME: &str = "webdataset";

/// Extensions of WebDataset shards.
pub const EXTENSIONS: &[&str] = &[".tar"];

impl SourceFormat for Webdataset {
    fn name(&self) -> &'static str {
        NAME
    }
    fn extensions(&self) -> &'static [&'static str] {
        EXTENSIONS
    }
    fn unnamed_extensions(&self) -> &'static [&'static str] {
        EXTENSIONS
    }
    fn output_names_drop_extension(&self) -> bool {
        true
    }
    fn open(&self, part: &ReadPart<'_>) -> Result<Box<dyn PartReader>, IoError> {
        Ok(Box::new(WebdatasetReader::open(part.file(), part.opts)?))
    }
}

impl SinkFormat for Webdataset {
    fn name(&self) -> &'static str {
        NAME
    }
    fn extension(&self, _compression: Compression) -> String {
        ".tar".into()
    }
    fn create(&self, loc: &Loc, _sink: &SinkSpec, _cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError> {
        Ok(Box::new(WebdatasetWriter::create(loc)?))
    }
}
