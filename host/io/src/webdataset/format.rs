//! WebDataset shards as a source and a sink format.

use curator_core::pipeline::{Compression, SinkSpec};

use super::{WebdatasetReader, WebdatasetWriter};
use crate::format::{FileNames, PartReader, ReadPart, SinkContext, SinkFormat, SourceFormat};
use crate::writer::OutputWriter;
use crate::{IoError, Loc};

/// WebDataset tar shards.
pub struct Webdataset;
pub static WEBDATASET: Webdataset = Webdataset;
/// Its name in a pipeline file.
pub const NAME: &str = "webdataset";

/// Extensions of WebDataset shards.
pub const EXTENSIONS: &[&str] = &[".tar"];

static FILE_NAMES: FileNames = FileNames { format: NAME, extensions: EXTENSIONS, unnamed: EXTENSIONS, outputs_drop_extension: true };

impl SourceFormat for Webdataset {
    fn names(&self) -> &FileNames {
        &FILE_NAMES
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
    fn create(&self, loc: &Loc, sink: &SinkSpec, _cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError> {
        Ok(Box::new(WebdatasetWriter::create(loc, sink.checksum)?))
    }
}
