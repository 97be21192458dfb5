//! Writing JSONL: the text, the input's other fields verbatim, then the columns stages added.

use std::io::Write;

use arrow_array::{ArrayRef, RecordBatch};

use super::super::json_str::push_json_str;
use super::super::writer::{Committed, OutputWriter, Spool, SpoolWriter};
use super::super::{IoError, Loc, META, TEXT};
use crate::records::{cell_json, extra_columns, string_column};
use curator_core::io_spec::Checksum;
use curator_core::pipeline::Compression;

enum Encoder {
    Plain(SpoolWriter),
    Gzip(flate2::write::GzEncoder<SpoolWriter>),
    Zstd(zstd::stream::write::Encoder<'static, SpoolWriter>),
}

impl Encoder {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Encoder::Plain(w) => w,
            Encoder::Gzip(w) => w,
            Encoder::Zstd(w) => w,
        }
    }

    fn finish(self) -> std::io::Result<SpoolWriter> {
        match self {
            Encoder::Plain(w) => Ok(w),
            Encoder::Gzip(w) => w.finish(),
            Encoder::Zstd(w) => w.finish(),
        }
    }
}

/// Encoded lines gathered before a write (the spool's buffer is a MiB: a write this large
/// bypasses it).
const WRITE_CHUNK: usize = 1 << 20;

/// Writes one JSONL output file (spooled, committed by [`OutputWriter::finish`]).
pub struct JsonlWriter {
    spool: Spool,
    encoder: Encoder,
    text_field: String,
    docs: u64,
    line: Vec<u8>,
}

impl JsonlWriter {
    pub fn create(target: &Loc, compression: Compression, checksum: Checksum, text_field: &str) -> Result<JsonlWriter, IoError> {
        let (spool, w) = Spool::create(target, checksum)?;
        let encoder = match compression {
            Compression::None => Encoder::Plain(w),
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(w, flate2::Compression::default())),
            Compression::Zstd => Encoder::Zstd(zstd::stream::write::Encoder::new(w, 3).map_err(|e| spool.werr(e))?),
            // Planning refuses it (`SinkFormat::compressions`).
            Compression::Snappy => {
                return Err(spool.werr(std::io::Error::other("snappy is a Parquet codec: JSONL is written plain, gzip or zstd")));
            }
        };
        Ok(JsonlWriter { spool, encoder, text_field: text_field.into(), docs: 0, line: Vec::new() })
    }

    /// Compress zstd output on `workers` threads besides this one (0: on this thread). The
    /// file is the same valid zstd stream; only who compresses changes.
    pub fn with_compression_workers(mut self, workers: u32) -> Result<JsonlWriter, IoError> {
        if let Encoder::Zstd(z) = &mut self.encoder
            && workers > 0
        {
            z.multithread(workers).map_err(|e| self.spool.werr(e))?;
        }
        Ok(self)
    }
}

/// Append one document of `batch` as a JSON object line: the text field, the input's other
/// fields verbatim, then columns added by stages (replacing input fields of the same name).
pub fn encode_row(line: &mut Vec<u8>, text_field: &str, text: &str, meta_text: &str, extras: &[(&str, &ArrayRef)], row: usize) {
    line.push(b'{');
    push_json_str(line, text_field);
    line.push(b':');
    push_json_str(line, text);
    if extras.is_empty() {
        let inner = meta_text.trim().strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or("").trim();
        if !inner.is_empty() {
            line.push(b',');
            line.extend_from_slice(inner.as_bytes());
        }
    } else {
        let mut fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(meta_text).unwrap_or_default();
        for (name, array) in extras {
            fields.insert(name.to_string(), cell_json(array, row));
        }
        for (k, v) in fields.iter().filter(|(k, _)| k.as_str() != text_field) {
            line.push(b',');
            push_json_str(line, k);
            line.push(b':');
            line.extend_from_slice(v.to_string().as_bytes());
        }
    }
    line.extend_from_slice(b"}\n");
}

impl OutputWriter for JsonlWriter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let text = string_column(batch, TEXT).ok_or_else(|| self.spool.werr(std::io::Error::other("batch has no utf8 text column")))?;
        let meta = string_column(batch, META);
        let extras = extra_columns(batch);
        // Lines are encoded into one buffer written a megabyte or more at a time: the spool's
        // buffered writer passes writes that large straight through instead of copying them.
        self.line.clear();
        for row in 0..batch.num_rows() {
            encode_row(&mut self.line, &self.text_field, text.value(row), meta.map(|m| m.value(row)).unwrap_or("{}"), &extras, row);
            self.docs += 1;
            if self.line.len() >= WRITE_CHUNK {
                self.encoder.writer().write_all(&self.line).map_err(|e| self.spool.werr(e))?;
                self.line.clear();
            }
        }
        self.encoder.writer().write_all(&self.line).map_err(|e| self.spool.werr(e))?;
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Committed, IoError> {
        let this = *self;
        let w = this.encoder.finish().map_err(|e| this.spool.werr(e))?;
        let (bytes, checksum) = this.spool.commit(w)?;
        Ok(Committed { documents: this.docs, bytes, checksum, tokens: None })
    }
}
