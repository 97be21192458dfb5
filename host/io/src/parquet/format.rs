//! Parquet as a source and a sink format.

use curator_core::partition::Splittable;
use curator_core::pipeline::{Compression, SinkSpec};

use super::{NAME, ParquetReader, ParquetWriter, row_group_sizes, source_fields};
use crate::format::{FileNames, PartReader, ReadPart, SinkContext, SinkFormat, SourceFormat};
use crate::writer::OutputWriter;
use crate::{InputFile, IoError, Loc};

/// Apache Parquet files.
pub struct Parquet;
pub static PARQUET: Parquet = Parquet;

/// Its file name endings.
pub const EXTENSIONS: &[&str] = &[".parquet", ".pq"];

static FILE_NAMES: FileNames = FileNames { format: NAME, extensions: EXTENSIONS, unnamed: &[".parquet"], outputs_drop_extension: true };

impl SourceFormat for Parquet {
    fn names(&self) -> &FileNames {
        &FILE_NAMES
    }
    fn splittable(&self, file: &InputFile) -> Result<Splittable, IoError> {
        Ok(Splittable::Units(row_group_sizes(file)?))
    }
    fn open(&self, part: &ReadPart<'_>) -> Result<Box<dyn PartReader>, IoError> {
        Ok(Box::new(ParquetReader::open(part.file(), part.extent, part.opts.clone(), part.batch_size)?))
    }
}

impl PartReader for ParquetReader {
    /// One row group's batch (its own size).
    fn next_batch(&mut self, _n: usize) -> Result<Option<arrow_array::RecordBatch>, IoError> {
        ParquetReader::next_batch(self)
    }
}

impl SinkFormat for Parquet {
    fn name(&self) -> &'static str {
        NAME
    }
    fn default_compression(&self) -> Compression {
        Compression::Zstd
    }
    fn compressions(&self) -> &'static [Compression] {
        &[Compression::None, Compression::Gzip, Compression::Zstd, Compression::Snappy]
    }
    fn extension(&self, _compression: Compression) -> String {
        ".parquet".into()
    }
    fn create(&self, loc: &Loc, sink: &SinkSpec, cx: &SinkContext<'_>) -> Result<Box<dyn OutputWriter>, IoError> {
        let writer = ParquetWriter::create(
            loc,
            sink.compression_or(self.default_compression()),
            sink.checksum,
            sink.row_group_size.unwrap_or(65536),
            cx.text_field,
        )?;
        Ok(Box::new(writer.with_source_fields(source_fields(&cx.inputs, cx.text_field))))
    }
}
