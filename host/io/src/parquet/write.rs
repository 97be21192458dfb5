//! Writing: one Parquet output file, its columns typed from the source or the data.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression as PqCompression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::Value;

use super::{EXTRA, JSON_COLUMNS_KEY};
use crate::arrow_json;
use crate::records::{cell_json, extra_columns, string_column};
use crate::writer::{Committed, OutputWriter, Spool, SpoolWriter};
use crate::{ID, IoError, Loc, META, TEXT};
use curator_core::io_spec::Checksum;
use curator_core::pipeline::Compression;

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
    pub fn create(
        target: &Loc,
        compression: Compression,
        checksum: Checksum,
        row_group_size: usize,
        text_field: &str,
    ) -> Result<ParquetWriter, IoError> {
        let (spool, w) = Spool::create(target, checksum)?;
        let codec = match compression {
            Compression::None => PqCompression::UNCOMPRESSED,
            Compression::Gzip => PqCompression::GZIP(GzipLevel::default()),
            Compression::Zstd => PqCompression::ZSTD(ZstdLevel::try_new(3).unwrap_or_default()),
            Compression::Snappy => PqCompression::SNAPPY,
        };
        let props = WriterProperties::builder()
            .set_compression(codec)
            .set_max_row_group_row_count(Some(row_group_size.max(1)))
            // Texts are nearly all distinct: a dictionary would hash and compare every one
            // before falling back to plain pages.
            .set_column_dictionary_enabled(parquet::schema::types::ColumnPath::from(text_field), false)
            .build();
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
        let (bytes, checksum) = spool.commit(w)?;
        Ok(Committed { documents: self.docs, bytes, checksum, tokens: None })
    }
}
