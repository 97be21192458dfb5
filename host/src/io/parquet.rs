//! Parquet: reading (row-group aware, column projection) into the reader schema
//! (`id`, `text`, `_meta`), and writing with typed columns inferred from the documents.
//!
//! Reading: any column type; the text column in any string layout; other columns as faithful
//! JSON in `_meta` ([`super::arrow_json`]).
//!
//! Writing: the text, then one column per input field: in the Parquet source's own type when
//! the partition was read from Parquet; else with a type inferred from the first batch (bool,
//! int64, float64, utf8; arrays and objects as list and struct columns when one type holds
//! them all; anything else, explicit nulls included, as its JSON text in a utf8 column listed
//! under the `curator.json_columns` metadata key); then columns added by stages. A value that does not fit its column later in the file goes
//! into the `_extra` column (a JSON object per row). Null means "field absent". Reading our
//! own files restores every field exactly, so JSONL → Parquet → JSONL is lossless.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression as PqCompression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use serde_json::Value;

use super::arrow_json::{self, CellJson, text_column};
use super::jsonl::{ReadOptions, cell_json, extra_columns, reader_schema, string_column};
use super::writer::{Committed, OutputWriter, Spool, SpoolWriter};
use super::{ID, InputFile, IoError, Loc, META, TEXT};
use curator_core::partition::Extent;
use curator_core::pipeline::{Compression, Format};

/// Metadata key listing the utf8 columns that hold JSON text.
pub const JSON_COLUMNS_KEY: &str = "curator.json_columns";
/// Column holding values that did not fit their typed column.
pub const EXTRA: &str = "_extra";

fn perr(loc: &str, e: impl std::fmt::Display) -> IoError {
    IoError::Parquet { path: loc.to_string(), message: e.to_string() }
}

/// Random access to a file for the Parquet reader: local files directly, object-store files
/// by range requests.
#[derive(Clone)]
pub struct LocReader {
    loc: Loc,
    size: u64,
}

impl Length for LocReader {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for LocReader {
    type T = Box<dyn std::io::Read + Send>;
    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        self.loc.open_from(start).map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }
    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.loc.read_range(start, start + length as u64).map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }
}

/// Row-group sizes (compressed bytes) of a Parquet file, for partitioning.
pub fn row_group_sizes(file: &InputFile) -> Result<Vec<u64>, IoError> {
    let reader = LocReader { loc: file.loc.clone(), size: file.size };
    decoder_guard(&file.display(), || {
        let builder = ParquetRecordBatchReaderBuilder::try_new(reader).map_err(|e| perr(&file.display(), e))?;
        Ok(builder.metadata().row_groups().iter().map(|rg| rg.compressed_size().max(0) as u64).collect())
    })
}

/// Rows of a Parquet file, from its footer.
pub fn row_count(file: &InputFile) -> Result<u64, IoError> {
    let reader = LocReader { loc: file.loc.clone(), size: file.size };
    decoder_guard(&file.display(), || {
        let builder = ParquetRecordBatchReaderBuilder::try_new(reader).map_err(|e| perr(&file.display(), e))?;
        Ok(builder.metadata().file_metadata().num_rows().max(0) as u64)
    })
}

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
}

/// Run a call into the Parquet decoder, turning a panic (the parquet crate panics on some
/// corrupt files rather than returning an error) into an error naming the file.
fn decoder_guard<T>(source: &str, f: impl FnOnce() -> Result<T, IoError>) -> Result<T, IoError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        Err(IoError::Parquet { path: source.to_string(), message: format!("corrupt Parquet file (the decoder failed: {why})") })
    })
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
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(reader).map_err(|e| perr(&source, e))?;
        // Our writer stores the list in the Arrow schema's metadata (embedded in the file).
        let json_columns: Vec<String> =
            builder.schema().metadata().get(JSON_COLUMNS_KEY).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default();
        let schema = builder.schema().clone();
        if schema.field_with_name(&opts.text_field).is_err() {
            return Err(IoError::Field { at: source, field: opts.text_field.clone(), message: "no such column".into() });
        }
        if let Some(keep) = &opts.fields {
            let wanted: Vec<usize> = schema
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| f.name() == &opts.text_field || f.name() == &opts.id_field || f.name() == EXTRA || keep.contains(f.name()))
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
        Ok(ParquetReader { inner, source, id_prefix: file.loc.file_name(), opts, json_columns, row: first_row, failed: false })
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
        let text_idx = schema.index_of(&self.opts.text_field).map_err(|e| perr(&self.source, e))?;
        let text = text_column(batch.column(text_idx)).ok_or_else(|| IoError::Field {
            at: self.source.clone(),
            field: self.opts.text_field.clone(),
            message: format!("expected a string column, found {}", schema.field(text_idx).data_type()),
        })?;
        let id_idx = schema.index_of(&self.opts.id_field).ok();
        let mut ids = StringBuilder::with_capacity(n, n * 16);
        let mut metas = StringBuilder::with_capacity(n, n * 32);
        let encoder_options = arrow_json::encoder_options();
        // Per column: its key as JSON text, and how its cells read as JSON (`None`: our own
        // JSON-text columns, copied as they are once checked). `_extra` is merged after.
        let mut others: Vec<(usize, Vec<u8>, Option<CellJson<'_>>)> = Vec::new();
        let mut extra_col = None;
        for (i, f) in schema.fields().iter().enumerate() {
            if i == text_idx {
                continue;
            }
            if f.name() == EXTRA {
                extra_col = text_column(batch.column(i));
                continue;
            }
            let key = serde_json::to_vec(f.name()).map_err(|e| perr(&self.source, e))?;
            let ours = self.json_columns.contains(f.name());
            others.push((i, key, (!ours).then(|| CellJson::new(f, batch.column(i), &encoder_options))));
        }
        let json_texts: Vec<Option<StringArray>> =
            others.iter().map(|(i, _, c)| if c.is_none() { text_column(batch.column(*i)) } else { None }).collect();
        let mut meta = Vec::with_capacity(256);
        let mut id_json = Vec::new();
        for r in 0..n {
            if text.is_null(r) {
                // A null text is a missing text: such rows are skipped, as JSONL lines are.
                continue;
            }
            meta.clear();
            meta.push(b'{');
            let mut id = None;
            for ((i, key, cells), json_text) in others.iter_mut().zip(&json_texts) {
                if batch.column(*i).is_null(r) {
                    continue;
                }
                let mark = meta.len();
                if mark > 1 {
                    meta.push(b',');
                }
                meta.extend_from_slice(key);
                meta.push(b':');
                let value_at = meta.len();
                let wrote = match (cells, json_text) {
                    (Some(c), _) => c.write(r, &mut meta),
                    (None, Some(t)) => match serde_json::from_str::<&serde_json::value::RawValue>(t.value(r)) {
                        Ok(raw) => {
                            meta.extend_from_slice(raw.get().as_bytes());
                            true
                        }
                        Err(_) => {
                            meta.extend_from_slice(b"null");
                            true
                        }
                    },
                    (None, None) => false,
                };
                if !wrote {
                    meta.truncate(mark);
                    continue;
                }
                if Some(*i) == id_idx {
                    id_json.clear();
                    id_json.extend_from_slice(&meta[value_at..]);
                    id = Some(match serde_json::from_slice::<String>(&id_json) {
                        Ok(s) => s,
                        Err(_) => String::from_utf8_lossy(&id_json).into_owned(),
                    });
                }
            }
            if let Some(extra) = extra_col.as_ref().filter(|c| c.is_valid(r))
                && let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(extra.value(r))
            {
                for (k, v) in fields {
                    if meta.len() > 1 {
                        meta.push(b',');
                    }
                    serde_json::to_writer(&mut meta, &k).map_err(|e| perr(&self.source, e))?;
                    meta.push(b':');
                    serde_json::to_writer(&mut meta, &v).map_err(|e| perr(&self.source, e))?;
                }
            }
            meta.push(b'}');
            ids.append_value(id.unwrap_or_else(|| format!("{}#{}", self.id_prefix, self.row + r as u64)));
            metas.append_value(std::str::from_utf8(&meta).map_err(|e| perr(&self.source, e))?);
        }
        // The text column as read when no row was skipped; else the kept rows.
        let texts: StringArray = if text.null_count() == 0 {
            text
        } else {
            let mut b = StringBuilder::with_capacity(n, text.value_data().len());
            text.iter().flatten().for_each(|t| b.append_value(t));
            b.finish()
        };
        self.row += n as u64;
        let cols: Vec<ArrayRef> = vec![Arc::new(ids.finish()), Arc::new(texts), Arc::new(metas.finish())];
        RecordBatch::try_new(reader_schema(), cols).map_err(|e| perr(&self.source, e))
    }
}

/// The columns of the Parquet files among `inputs` that a Parquet sink should write in
/// their own types (see [`arrow_json::needs_own_type`]): the text, `_extra` and our own
/// JSON-text columns aside, and a name whose type differs between files left out.
pub fn source_fields(inputs: &[&InputFile], text_field: &str) -> Vec<Field> {
    let mut fields: Vec<Field> = Vec::new();
    let mut conflicting: Vec<String> = Vec::new();
    for file in inputs.iter().filter(|f| f.format == Format::Parquet) {
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

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Bool,
    Int,
    Float,
    Str,
    Json,
    /// The source column's own type (a Parquet source's list, timestamp, int32…).
    Typed,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_i64() => Kind::Int,
        Value::Number(n) if n.is_f64() => Kind::Float,
        Value::String(_) => Kind::Str,
        _ => Kind::Json,
    }
}

fn data_type(k: Kind) -> DataType {
    match k {
        Kind::Bool => DataType::Boolean,
        Kind::Int => DataType::Int64,
        Kind::Float => DataType::Float64,
        Kind::Str | Kind::Json | Kind::Typed => DataType::Utf8,
    }
}

/// Writes one Parquet output file.
pub struct ParquetWriter {
    spool: Option<Spool>,
    writer: Option<ArrowWriter<SpoolWriter>>,
    pending: Option<SpoolWriter>,
    props: Option<WriterProperties>,
    text_field: String,
    /// Inferred meta fields, in order.
    fields: Vec<(String, Kind)>,
    /// Stage-added columns, in order.
    extras: Vec<(String, DataType)>,
    /// Columns written in a type of their own rather than an inferred scalar one: a Parquet
    /// source's (lists, timestamps, int32…), and lists and structs inferred from JSON.
    typed_fields: Vec<Field>,
    schema: Option<SchemaRef>,
    docs: u64,
}

impl ParquetWriter {
    pub fn create(target: &Loc, compression: Compression, row_group_size: usize, text_field: &str) -> Result<ParquetWriter, IoError> {
        let (spool, w) = Spool::create(target)?;
        let codec = match compression {
            Compression::None => PqCompression::UNCOMPRESSED,
            Compression::Gzip => PqCompression::GZIP(GzipLevel::default()),
            Compression::Zstd => PqCompression::ZSTD(ZstdLevel::try_new(3).unwrap_or_default()),
        };
        let props = WriterProperties::builder().set_compression(codec).set_max_row_group_row_count(Some(row_group_size.max(1))).build();
        Ok(ParquetWriter {
            spool: Some(spool),
            writer: None,
            pending: Some(w),
            props: Some(props),
            text_field: text_field.into(),
            fields: Vec::new(),
            extras: Vec::new(),
            typed_fields: Vec::new(),
            schema: None,
            docs: 0,
        })
    }

    /// Write these columns (from [`source_fields`]) in their own types rather than inferring
    /// a type from the first batch's values.
    pub fn with_source_fields(mut self, fields: Vec<Field>) -> ParquetWriter {
        self.typed_fields = fields;
        self
    }

    fn source_type(&self, name: &str) -> Option<&DataType> {
        self.typed_fields.iter().find(|f| f.name() == name).map(|f| f.data_type())
    }

    fn werr(&self, e: impl std::fmt::Display) -> IoError {
        let path = self.spool.as_ref().map(|s| s.target.display()).unwrap_or_default();
        IoError::Parquet { path, message: e.to_string() }
    }

    /// An error of the Parquet encoder: a failed write underneath (a full disk) as such.
    fn encoder_err(&self, e: parquet::errors::ParquetError) -> IoError {
        let path = self.spool.as_ref().map(|s| s.target.display()).unwrap_or_default();
        match e {
            parquet::errors::ParquetError::External(inner) => match inner.downcast::<std::io::Error>() {
                Ok(io) => IoError::write(path, *io),
                Err(other) => IoError::Parquet { path, message: other.to_string() },
            },
            other => IoError::Parquet { path, message: other.to_string() },
        }
    }

    /// Fix the schema from the first batch.
    fn infer(&mut self, metas: &[serde_json::Map<String, Value>], batch: &RecordBatch) -> Result<(), IoError> {
        let mut order: Vec<String> = Vec::new();
        let mut kinds: HashMap<String, Kind> = HashMap::new();
        for m in metas {
            for (k, v) in m {
                let kind = kind_of(v);
                match kinds.get(k) {
                    None => {
                        order.push(k.clone());
                        kinds.insert(k.clone(), kind);
                    }
                    Some(prev) if *prev == kind => {}
                    Some(_) => {
                        kinds.insert(k.clone(), Kind::Json);
                    }
                }
            }
        }
        self.extras = extra_columns(batch).iter().map(|(n, a)| (n.to_string(), a.data_type().clone())).collect();
        let extra_names: Vec<&str> = self.extras.iter().map(|(n, _)| n.as_str()).collect();
        self.fields = order
            .into_iter()
            .filter(|k| k != &self.text_field && k != EXTRA && !extra_names.contains(&k.as_str()))
            .collect::<Vec<String>>()
            .into_iter()
            .map(|k| {
                if self.source_type(&k).is_none() && kinds[&k] == Kind::Json {
                    // Arrays or objects (from JSONL): a list or struct column when one type
                    // holds them all.
                    let values: Vec<&Value> = metas.iter().filter_map(|m| m.get(&k)).filter(|v| !v.is_null()).collect();
                    if let Some(ty) = arrow_json::nested_type(&k, &values) {
                        self.typed_fields.push(Field::new(&k, ty, true));
                    }
                }
                let kind = if self.source_type(&k).is_some() { Kind::Typed } else { kinds[&k] };
                (k, kind)
            })
            .collect();
        let mut fields = vec![Field::new(&self.text_field, DataType::Utf8, false)];
        fields.extend(self.fields.iter().map(|(k, kind)| match (kind, self.source_type(k)) {
            (Kind::Typed, Some(t)) => Field::new(k, t.clone(), true),
            _ => Field::new(k, data_type(*kind), true),
        }));
        fields.extend(self.extras.iter().map(|(k, t)| Field::new(k, t.clone(), true)));
        fields.push(Field::new(EXTRA, DataType::Utf8, true));
        let json_cols: Vec<&str> = self.fields.iter().filter(|(_, k)| *k == Kind::Json).map(|(n, _)| n.as_str()).collect();
        let mut md = HashMap::new();
        md.insert(JSON_COLUMNS_KEY.to_string(), serde_json::to_string(&json_cols).unwrap_or_default());
        let schema = Arc::new(Schema::new_with_metadata(fields, md));
        let w = self.pending.take().ok_or_else(|| self.werr("writer already started"))?;
        let writer = ArrowWriter::try_new(w, schema.clone(), self.props.take()).map_err(|e| self.werr(e))?;
        self.writer = Some(writer);
        self.schema = Some(schema);
        Ok(())
    }
}

impl OutputWriter for ParquetWriter {
    #[allow(clippy::needless_range_loop)] // rows index several parallel vectors
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let n = batch.num_rows();
        let text = string_column(batch, TEXT).ok_or_else(|| self.werr("batch has no utf8 text column"))?;
        let metas: Vec<serde_json::Map<String, Value>> = match string_column(batch, META) {
            Some(m) => (0..n).map(|r| serde_json::from_str(m.value(r)).unwrap_or_default()).collect(),
            None => vec![serde_json::Map::new(); n],
        };
        if self.writer.is_none() {
            self.infer(&metas, batch)?;
        }
        let schema = self.schema.clone().ok_or_else(|| self.werr("no schema"))?;
        let mut columns: Vec<ArrayRef> = vec![Arc::new(text.clone())];
        let mut leftovers: Vec<serde_json::Map<String, Value>> = metas.clone();
        for (name, kind) in &self.fields {
            let mut fits = |v: Option<&Value>, r: usize| -> Option<Value> {
                let v = v?.clone();
                if *kind == Kind::Json || kind_of(&v) == *kind {
                    leftovers[r].remove(name);
                    Some(v)
                } else {
                    None
                }
            };
            let col: ArrayRef = match kind {
                Kind::Typed => {
                    let ty = self.source_type(name).cloned().unwrap_or(DataType::Utf8);
                    let values: Vec<Option<&Value>> = metas.iter().map(|m| m.get(name).filter(|v| !v.is_null())).collect();
                    // A value that does not fit (a stage changed it) stays in `_extra`.
                    let (col, kept) = arrow_json::typed_column(name, &ty, &values);
                    for (m, _) in leftovers.iter_mut().zip(&kept).filter(|(_, k)| **k) {
                        m.remove(name);
                    }
                    col
                }
                Kind::Bool => {
                    let mut b = BooleanBuilder::with_capacity(n);
                    for r in 0..n {
                        b.append_option(fits(metas[r].get(name), r).and_then(|v| v.as_bool()));
                    }
                    Arc::new(b.finish())
                }
                Kind::Int => {
                    let mut b = Int64Builder::with_capacity(n);
                    for r in 0..n {
                        b.append_option(fits(metas[r].get(name), r).and_then(|v| v.as_i64()));
                    }
                    Arc::new(b.finish())
                }
                Kind::Float => {
                    let mut b = Float64Builder::with_capacity(n);
                    for r in 0..n {
                        b.append_option(fits(metas[r].get(name), r).and_then(|v| v.as_f64()));
                    }
                    Arc::new(b.finish())
                }
                Kind::Str | Kind::Json => {
                    let mut b = StringBuilder::with_capacity(n, n * 16);
                    for r in 0..n {
                        let v = fits(metas[r].get(name), r);
                        b.append_option(v.map(|v| match (kind, v) {
                            (Kind::Str, Value::String(s)) => s,
                            (_, v) => v.to_string(),
                        }));
                    }
                    Arc::new(b.finish())
                }
            };
            columns.push(col);
        }
        for (name, ty) in &self.extras {
            let col =
                batch.column_by_name(name).cloned().filter(|c| c.data_type() == ty).unwrap_or_else(|| arrow_array::new_null_array(ty, n));
            for m in leftovers.iter_mut() {
                m.remove(name);
            }
            columns.push(col);
        }
        // Stage columns that appeared after the first batch also go to _extra.
        for (name, array) in extra_columns(batch) {
            if !self.extras.iter().any(|(n, _)| n == name) {
                for (r, m) in leftovers.iter_mut().enumerate() {
                    m.insert(name.to_string(), cell_json(array, r));
                }
            }
        }
        let mut extra = StringBuilder::with_capacity(n, 0);
        for m in leftovers {
            if m.is_empty() { extra.append_null() } else { extra.append_value(Value::Object(m).to_string()) }
        }
        columns.push(Arc::new(extra.finish()));
        let out = RecordBatch::try_new(schema, columns).map_err(|e| self.werr(e))?;
        let written = match self.writer.as_mut() {
            Some(w) => w.write(&out),
            None => return Err(self.werr("writer not started")),
        };
        written.map_err(|e| self.encoder_err(e))?;
        self.docs += n as u64;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<Committed, IoError> {
        if self.writer.is_none() {
            // No batch at all: an empty file with just the text column.
            let empty = RecordBatch::new_empty(Arc::new(Schema::new(vec![
                Field::new(ID, DataType::Utf8, false),
                Field::new(TEXT, DataType::Utf8, false),
                Field::new(META, DataType::Utf8, false),
            ])));
            self.infer(&[], &empty)?;
        }
        let writer = self.writer.take().ok_or_else(|| self.werr("writer not started"))?;
        let w = writer.into_inner().map_err(|e| self.encoder_err(e))?;
        let spool = self.spool.take().ok_or_else(|| self.werr("already finished"))?;
        let (bytes, sha256) = spool.commit(w)?;
        Ok(Committed { documents: self.docs, bytes, sha256 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::jsonl::{JsonlReader, JsonlWriter};
    use crate::io::writer::OutputWriter;

    fn input(path: &std::path::Path) -> InputFile {
        let (format, compressed) = crate::io::sniff_name(&path.display().to_string(), None);
        InputFile {
            loc: Loc::Local(path.to_path_buf()),
            rel: String::new(),
            size: std::fs::metadata(path).unwrap().len(),
            format,
            compressed,
        }
    }

    #[test]
    fn jsonl_parquet_jsonl_is_lossless() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            r#"{"id": "a", "text": "héllo wörld 日本", "n": 1, "f": 0.5, "ok": true, "tags": ["x", "y"], "nested": {"k": null}, "maybe": null}"#,
            r#"{"id": "b", "text": "", "n": 2, "f": 1.5, "ok": false, "tags": [], "extra_only_here": "z"}"#,
            r#"{"id": "c", "text": "third", "n": "not a number", "maybe": 3}"#,
        ];
        let src = dir.path().join("in.jsonl");
        std::fs::write(&src, lines.join("\n")).unwrap();
        let opts = ReadOptions::default();
        // Two batches so the second exercises values that do not fit the inferred types.
        let mut r = JsonlReader::open(&input(&src), Extent::Whole, opts.clone()).unwrap();
        let pq = dir.path().join("mid.parquet");
        let mut w: Box<dyn OutputWriter> = Box::new(ParquetWriter::create(&Loc::Local(pq.clone()), Compression::Zstd, 2, "text").unwrap());
        while let Some(b) = r.next_batch(2).unwrap() {
            w.write_batch(&b).unwrap();
        }
        assert_eq!(w.finish().unwrap().documents, 3);

        let mut pr = ParquetReader::open(&input(&pq), Extent::Whole, opts, 10).unwrap();
        let back = dir.path().join("back.jsonl");
        let mut jw: Box<dyn OutputWriter> = Box::new(JsonlWriter::create(&Loc::Local(back.clone()), Compression::None, "text").unwrap());
        while let Some(b) = pr.next_batch().unwrap() {
            jw.write_batch(&b).unwrap();
        }
        jw.finish().unwrap();
        let want: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let got: Vec<Value> = std::fs::read_to_string(&back).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn row_groups_and_projection() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("in.jsonl");
        let lines: String = (0..10).map(|i| format!("{{\"text\": \"doc {i}\", \"i\": {i}, \"drop\": \"x\"}}\n")).collect();
        std::fs::write(&src, lines).unwrap();
        let mut r = JsonlReader::open(&input(&src), Extent::Whole, ReadOptions::default()).unwrap();
        let pq = dir.path().join("rg.parquet");
        let mut w: Box<dyn OutputWriter> = Box::new(ParquetWriter::create(&Loc::Local(pq.clone()), Compression::Zstd, 4, "text").unwrap());
        w.write_batch(&r.next_batch(100).unwrap().unwrap()).unwrap();
        w.finish().unwrap();
        assert_eq!(row_group_sizes(&input(&pq)).unwrap().len(), 3);
        let opts = ReadOptions { fields: Some(vec!["i".into()]), ..ReadOptions::default() };
        let mut pr = ParquetReader::open(&input(&pq), Extent::Units { start: 1, end: 3 }, opts, 100).unwrap();
        let b = pr.next_batch().unwrap().unwrap();
        let texts = string_column(&b, TEXT).unwrap();
        assert_eq!(texts.value(0), "doc 4");
        assert_eq!(string_column(&b, META).unwrap().value(0), r#"{"i":4}"#);
        assert_eq!(string_column(&b, ID).unwrap().value(0), "rg.parquet#4");
    }
}
