//! Reading: a Parquet file (or some of its row groups) as reader-schema batches.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use serde_json::Value;

use super::{EXTRA, JSON_COLUMNS_KEY, LocReader, decoder_guard, perr};
use crate::arrow_json::{self, CellJson, text_column};
use crate::records::ReadOptions;
use crate::vectors;
use crate::{InputFile, IoError};
use ::arrow_json::writer::EncoderOptions;
use curator_core::partition::Extent;

/// Reads a Parquet file (or some of its row groups) as reader-schema batches.
pub struct ParquetReader {
    inner: ParquetRecordBatchReader,
    source: String,
    id_prefix: String,
    opts: ReadOptions,
    json_columns: Vec<String>,
    row: u64,
    /// The decoder panicked on this file: it reads nothing more.
    failed: bool,
    /// Bytes of the last batch's `_meta`: the next one's capacity.
    meta_bytes: usize,
}
impl ParquetReader {
    pub fn open(file: &InputFile, extent: Extent, opts: ReadOptions, batch_size: usize) -> Result<ParquetReader, IoError> {
        let source = file.display();
        decoder_guard(&source, || Self::open_unguarded(file, source.clone(), extent, opts, batch_size))
    }

    fn open_unguarded(
        file: &InputFile,
        source: String,
        extent: Extent,
        opts: ReadOptions,
        batch_size: usize,
    ) -> Result<ParquetReader, IoError> {
        let reader = LocReader { loc: file.loc.clone(), size: file.size };
        let footer = ArrowReaderMetadata::load(&reader, ArrowReaderOptions::new()).map_err(|e| perr(&source, e))?;
        // Our writer stores the list in the Arrow schema's metadata (embedded in the file).
        let json_columns: Vec<String> =
            footer.schema().metadata().get(JSON_COLUMNS_KEY).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
        let schema = footer.schema().clone();
        // Strings are decoded in the file's own Arrow type: `Utf8` straight into the one buffer
        // the batch keeps. (Decoding them as views into the decompressed pages and copying them
        // into `Utf8` afterwards measured 4-8 % slower on a Zstd read with parquet 60: the copy
        // is a second pass over all the text, dearer than the buffer's growth.)
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, footer);
        // A file of images (Hugging Face's image datasets: an image column, a label, no text)
        // is read with empty texts, as a WebDataset sample without a caption is; any other
        // file needs its text column, and so does a `text_field` other than the default.
        let no_text = schema.field_with_name(&opts.text_field).is_err();
        if no_text && (opts.text_field != crate::TEXT || !schema.fields().iter().any(|f| holds_images(f.data_type()))) {
            return Err(IoError::Field {
                at: source,
                field: opts.text_field.clone(),
                message: "no such column (only a file with an image column, binary or Hugging Face's image struct, may have no text)"
                    .into(),
            });
        }
        if let Some(keep) = &opts.fields {
            let wanted: Vec<usize> = schema
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| {
                    let name = f.name();
                    name == &opts.text_field
                        || name == &opts.id_field
                        || name == EXTRA
                        || keep.contains(name)
                        || opts.vectors.contains(name)
                        || opts.typed.contains(name)
                })
                .map(|(i, _)| i)
                .collect();
            let mask = ProjectionMask::roots(builder.parquet_schema(), wanted);
            builder = builder.with_projection(mask);
        }
        let first_row = match extent {
            Extent::Units { start, end } => {
                let groups = builder.metadata().row_groups();
                let skipped: i64 = groups[..start.min(groups.len())].iter().map(|rg| rg.num_rows()).sum();
                builder = builder.with_row_groups((start..end).collect());
                skipped.max(0) as u64
            }
            _ => 0,
        };
        let inner = builder.with_batch_size(batch_size.max(1)).build().map_err(|e| perr(&source, e))?;
        Ok(ParquetReader {
            inner,
            source,
            id_prefix: file.loc.file_name(),
            opts,
            json_columns,
            row: first_row,
            failed: false,
            meta_bytes: 0,
        })
    }

    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, IoError> {
        if self.failed {
            return Ok(None);
        }
        let source = self.source.clone();
        let next = decoder_guard(&source, || Ok(self.inner.next()));
        let next = next.inspect_err(|_| self.failed = true)?;
        let Some(batch) = next else { return Ok(None) };
        let batch = batch.map_err(|e| perr(&self.source, e))?;
        self.convert(&batch).map(Some)
    }

    fn convert(&mut self, batch: &RecordBatch) -> Result<RecordBatch, IoError> {
        let n = batch.num_rows();
        let schema = batch.schema();
        // No text column: a file of images (checked when it was opened), read with empty texts.
        let text_idx = schema.index_of(&self.opts.text_field).ok();
        let text = match text_idx {
            Some(i) => text_column(batch.column(i)).ok_or_else(|| IoError::Field {
                at: self.source.clone(),
                field: self.opts.text_field.clone(),
                message: format!("expected a string column, found {}", schema.field(i).data_type()),
            })?,
            None => StringArray::from_iter_values(std::iter::repeat_n("", n)),
        };
        let id_idx = schema.index_of(&self.opts.id_field).ok();
        // A string id column gives the ids as they are; other ids (numbers, our own JSON-text
        // columns) are read from their JSON.
        let id_strings = id_idx.filter(|i| !self.json_columns.contains(schema.field(*i).name())).and_then(|i| text_column(batch.column(i)));
        // Every row kept and every id given: the id column is the ids as they are (no copy).
        let whole_ids = id_strings.as_ref().filter(|s| s.null_count() == 0 && text.null_count() == 0).cloned();
        let id_bytes = if whole_ids.is_some() { 0 } else { id_strings.as_ref().map_or(n * 16, |s| s.value_data().len()) };
        let mut ids = StringBuilder::with_capacity(n, id_bytes);
        let mut metas = StringBuilder::with_capacity(n, self.meta_bytes + self.meta_bytes / 8);
        let encoder_options = arrow_json::encoder_options();
        let mut sorted = self.sort_columns(batch, text_idx, &encoder_options)?;
        sorted.id_from_json = id_idx.filter(|_| id_strings.is_none());
        let mut meta = Vec::with_capacity(256);
        for r in 0..n {
            if text.is_null(r) {
                // A null text is a missing text: such rows are skipped, as JSONL lines are.
                continue;
            }
            let id = sorted.row_meta(r, &mut meta).map_err(|e| perr(&self.source, e))?;
            match (&id_strings, id) {
                _ if whole_ids.is_some() => {}
                (Some(s), _) if s.is_valid(r) => ids.append_value(s.value(r)),
                (_, Some(id)) => ids.append_value(id),
                _ => ids.append_value(format!("{}#{}", self.id_prefix, self.row + r as u64)),
            }
            metas.append_value(simdutf8::basic::from_utf8(&meta).map_err(|e| perr(&self.source, e))?);
        }
        // The text column as read when no row was skipped; else the kept rows.
        let kept = text
            .nulls()
            .filter(|n| n.null_count() > 0)
            .map(|n| arrow_select::filter::FilterBuilder::new(&BooleanArray::new(n.inner().clone(), None)).build());
        let texts: StringArray = if kept.is_none() {
            text
        } else {
            let mut b = StringBuilder::with_capacity(n, text.value_data().len());
            text.iter().flatten().for_each(|t| b.append_value(t));
            b.finish()
        };
        self.row += n as u64;
        let metas = metas.finish();
        self.meta_bytes = metas.value_data().len();
        let mut own = sorted.own;
        if let Some(filter) = &kept {
            for (_, column) in own.iter_mut() {
                *column = filter.filter(column).map_err(|e| perr(&self.source, e))?;
            }
        }
        let ids = whole_ids.unwrap_or_else(|| ids.finish());
        vectors::reader_batch([Arc::new(ids), Arc::new(texts), Arc::new(metas)], own).map_err(|e| perr(&self.source, e))
    }

    /// `col` as a float32-vector column (`None`: no row holds one); a bad row is named.
    fn lift(&self, name: &str, col: &ArrayRef) -> Result<Option<vectors::Lifted>, IoError> {
        super::vectors::from_arrow(name, col).map_err(|(row, message)| IoError::Field {
            at: match row {
                Some(r) => format!("{} row {}", self.source, self.row + r as u64),
                None => self.source.clone(),
            },
            field: name.to_string(),
            message,
        })
    }

    /// A column a stage reads, in the type the stage is given, when it has one: lists of
    /// numbers as float32 vectors (an embedding; a ragged row is an error naming it), bytes
    /// (`Binary`, `LargeBinary`, `BinaryView`) and Hugging Face's image struct (`{bytes, path}`:
    /// its bytes) as a binary column, integers as int64 and other numbers as float64 (the
    /// stage API's two number types). Other types: `None` (folded into `_meta`).
    fn own_column(&self, name: &str, col: &ArrayRef) -> Result<Option<vectors::Lifted>, IoError> {
        let binary = |a: &ArrayRef| -> Result<Option<vectors::Lifted>, IoError> {
            let a = arrow_cast::cast(a, &DataType::Binary).map_err(|e| perr(&self.source, e))?;
            Ok(Some((Field::new(name, DataType::Binary, true), a)))
        };
        match col.data_type() {
            DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _)
                if item.data_type().is_floating() || item.data_type().is_integer() =>
            {
                self.lift(name, col)
            }
            t if is_binary(t) => binary(col),
            // Numbers a stage reads keep their kind: integers as int64, the rest as float64.
            t if t.is_integer() || t.is_floating() => {
                let to = if t.is_integer() { DataType::Int64 } else { DataType::Float64 };
                let a = arrow_cast::cast(col, &to).map_err(|e| perr(&self.source, e))?;
                Ok(Some((Field::new(name, to, true), a)))
            }
            DataType::Struct(_) if holds_images(col.data_type()) => {
                let s = col.as_struct();
                let bytes = s.column_by_name("bytes").cloned().ok_or_else(|| perr(&self.source, "no bytes field"))?;
                // A null struct is a null image, whatever its bytes field holds.
                let bytes = match s.nulls() {
                    Some(n) if n.null_count() > 0 => {
                        let data = bytes.to_data().into_builder().nulls(NullBuffer::union(bytes.nulls(), Some(n))).build();
                        arrow_array::make_array(data.map_err(|e| perr(&self.source, e))?)
                    }
                    _ => bytes,
                };
                binary(&bytes)
            }
            _ => Ok(None),
        }
    }

    /// The batch's columns other than the text, sorted by how they reach the reader schema.
    fn sort_columns<'b>(
        &self,
        batch: &'b RecordBatch,
        text_idx: Option<usize>,
        encoder_options: &'b EncoderOptions,
    ) -> Result<Sorted<'b>, IoError> {
        let schema = batch.schema_ref();
        let mut sorted = Sorted { batch, others: Vec::new(), extra: None, own: Vec::new(), id_from_json: None };
        for (i, f) in schema.fields().iter().enumerate() {
            if Some(i) == text_idx {
                continue;
            }
            if self.opts.vectors.contains(f.name()) {
                sorted.own.extend(self.lift(f.name(), batch.column(i))?);
                continue;
            }
            if f.name() == EXTRA {
                sorted.extra = text_column(batch.column(i));
                continue;
            }
            if self.opts.typed.contains(f.name())
                && let Some(own) = self.own_column(f.name(), batch.column(i))?
            {
                sorted.own.push(own);
                continue;
            }
            let key = serde_json::to_vec(f.name()).map_err(|e| perr(&self.source, e))?;
            let cells = if self.json_columns.contains(f.name()) {
                // Our own JSON-text columns: copied as they are once checked.
                text_column(batch.column(i)).map(Cells::JsonText)
            } else {
                Some(Cells::Arrow(CellJson::new(f, batch.column(i), encoder_options)))
            };
            sorted.others.push(Folded { index: i, key, cells });
        }
        Ok(sorted)
    }
}

/// A column folded into `_meta`.
struct Folded<'b> {
    index: usize,
    /// Its name as JSON text.
    key: Vec<u8>,
    /// How its cells read as JSON (`None`: a JSON-text column that is not a string column).
    cells: Option<Cells<'b>>,
}

enum Cells<'b> {
    Arrow(CellJson<'b>),
    JsonText(StringArray),
}

/// A batch's columns other than the text, by how they reach the reader schema.
struct Sorted<'b> {
    batch: &'b RecordBatch,
    others: Vec<Folded<'b>>,
    /// `_extra`, merged into `_meta` after the other columns.
    extra: Option<StringArray>,
    /// Columns kept in their own type: a step's vectors, the stages' typed columns.
    own: Vec<vectors::Lifted>,
    /// The id column, when ids are read from its cells' JSON.
    id_from_json: Option<usize>,
}

impl Sorted<'_> {
    /// Row `r`'s `_meta` object into `meta` (cleared first), and its id when
    /// [`Sorted::id_from_json`] names a column and the row has a value there.
    fn row_meta(&mut self, r: usize, meta: &mut Vec<u8>) -> Result<Option<String>, serde_json::Error> {
        meta.clear();
        meta.push(b'{');
        let mut id = None;
        for folded in self.others.iter_mut() {
            if self.batch.column(folded.index).is_null(r) {
                continue;
            }
            let mark = meta.len();
            if mark > 1 {
                meta.push(b',');
            }
            meta.extend_from_slice(&folded.key);
            meta.push(b':');
            let value_at = meta.len();
            let wrote = match &mut folded.cells {
                Some(Cells::Arrow(c)) => c.write(r, meta),
                Some(Cells::JsonText(t)) => {
                    match serde_json::from_str::<&serde_json::value::RawValue>(t.value(r)) {
                        Ok(raw) => meta.extend_from_slice(raw.get().as_bytes()),
                        Err(_) => meta.extend_from_slice(b"null"),
                    }
                    true
                }
                None => false,
            };
            if !wrote {
                meta.truncate(mark);
                continue;
            }
            if Some(folded.index) == self.id_from_json {
                let json = &meta[value_at..];
                id = Some(serde_json::from_slice::<String>(json).unwrap_or_else(|_| String::from_utf8_lossy(json).into_owned()));
            }
        }
        if let Some(extra) = self.extra.as_ref().filter(|c| c.is_valid(r))
            && let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(extra.value(r))
        {
            for (k, v) in fields {
                if meta.len() > 1 {
                    meta.push(b',');
                }
                serde_json::to_writer(&mut *meta, &k)?;
                meta.push(b':');
                serde_json::to_writer(&mut *meta, &v)?;
            }
        }
        meta.push(b'}');
        Ok(id)
    }
}

/// The columns of the Parquet files among `inputs` that a Parquet sink should write in
/// their own types (see [`arrow_json::needs_own_type`]): the text, `_extra` and our own
/// JSON-text columns aside, and a name whose type differs between files left out.
pub fn source_fields(inputs: &[&InputFile], text_field: &str) -> Vec<Field> {
    let mut fields: Vec<Field> = Vec::new();
    let mut conflicting: Vec<String> = Vec::new();
    for file in inputs.iter().filter(|f| f.format.is(super::NAME)) {
        let reader = LocReader { loc: file.loc.clone(), size: file.size };
        let schema = decoder_guard(&file.display(), || {
            ParquetRecordBatchReaderBuilder::try_new(reader).map(|b| b.schema().clone()).map_err(|e| perr(&file.display(), e))
        });
        // An unreadable footer fails the read itself, with its own message.
        let Ok(schema) = schema else { continue };
        let ours: Vec<String> = schema.metadata().get(JSON_COLUMNS_KEY).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
        for f in schema.fields() {
            if f.name() == text_field || f.name() == EXTRA || ours.contains(f.name()) || !arrow_json::needs_own_type(f.data_type()) {
                continue;
            }
            match fields.iter().position(|g| g.name() == f.name()) {
                Some(i) if fields[i].data_type() != f.data_type() => conflicting.push(f.name().clone()),
                Some(_) => {}
                None => fields.push(f.as_ref().clone().with_nullable(true)),
            }
        }
    }
    fields.retain(|f| !conflicting.contains(f.name()));
    fields
}

fn is_binary(t: &DataType) -> bool {
    matches!(t, DataType::Binary | DataType::LargeBinary | DataType::BinaryView)
}

/// Whether a column can hold images: bytes, or Hugging Face's image struct (`{bytes, path}`).
fn holds_images(t: &DataType) -> bool {
    match t {
        DataType::Struct(fields) => fields.find("bytes").is_some_and(|(_, f)| is_binary(f.data_type())),
        t => is_binary(t),
    }
}
