//! JSONL: one JSON object per line.
//!
//! The reader never builds a JSON tree: each line is split into top-level `(key, raw value)`
//! pairs; the text (and id) are decoded, every other field is kept verbatim in `_meta` so the
//! writer can emit it unchanged.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{ID, IoError, META, TEXT};
use curator_core::pipeline::Compression;

/// Schema of the batches the reader produces.
pub fn reader_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(ID, DataType::Utf8, false),
        Field::new(TEXT, DataType::Utf8, false),
        Field::new(META, DataType::Utf8, false),
    ]))
}

/// What the reader looks for in each line.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub text_field: String,
    pub id_field: String,
}

/// Top-level fields of one JSON object, values left raw.
struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    out.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Fields(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn json_type(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// Reads batches of documents from one JSONL file.
pub struct JsonlReader {
    input: Box<dyn BufRead + Send>,
    file: String,
    id_prefix: String,
    opts: ReadOptions,
    line_no: u64,
    rows: u64,
    line: Vec<u8>,
    done: bool,
}

impl JsonlReader {
    pub fn open(path: &Path, opts: ReadOptions) -> Result<JsonlReader, IoError> {
        let input = super::open_decoded(path)?;
        let file = path.display().to_string();
        let id_prefix = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(JsonlReader {
            input,
            file,
            id_prefix,
            opts,
            line_no: 0,
            rows: 0,
            line: Vec::new(),
            done: false,
        })
    }

    /// Documents read so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The next batch of up to `max_rows` documents, with the row number of its first one.
    pub fn next_batch(&mut self, max_rows: usize) -> Result<Option<(RecordBatch, u64)>, IoError> {
        if self.done {
            return Ok(None);
        }
        let first_row = self.rows;
        let mut ids = StringBuilder::default();
        let mut texts = StringBuilder::default();
        let mut metas = StringBuilder::default();
        let mut meta = String::new();
        while (self.rows - first_row) < max_rows as u64 {
            self.line.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.line)
                .map_err(|source| IoError::Read {
                    file: self.file.clone(),
                    line: self.line_no,
                    source,
                })?;
            if n == 0 {
                self.done = true;
                break;
            }
            self.line_no += 1;
            let line_no = self.line_no;
            let line = trim_line(&self.line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line_err = |message: String| IoError::Line {
                file: self.file.clone(),
                line: line_no,
                message,
            };
            let text_line = std::str::from_utf8(line)
                .map_err(|e| line_err(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
            let fields: Fields<'_> = serde_json::from_str(text_line)
                .map_err(|e| line_err(format!("not a JSON object: {e}")))?;
            let field_err = |field: &str, message: String| IoError::Field {
                file: self.file.clone(),
                line: line_no,
                field: field.to_string(),
                message,
            };

            let mut text: Option<String> = None;
            let mut id: Option<String> = None;
            meta.clear();
            meta.push('{');
            for (key, raw) in &fields.0 {
                if key.as_ref() == self.opts.text_field {
                    if !raw.get().starts_with('"') {
                        return Err(field_err(
                            &self.opts.text_field,
                            format!("expected a string, found {}", json_type(raw)),
                        ));
                    }
                    text = Some(
                        serde_json::from_str(raw.get())
                            .map_err(|e| field_err(&self.opts.text_field, e.to_string()))?,
                    );
                    continue;
                }
                if key.as_ref() == self.opts.id_field {
                    id = Some(match raw.get().as_bytes().first() {
                        Some(b'"') => serde_json::from_str(raw.get())
                            .map_err(|e| field_err(&self.opts.id_field, e.to_string()))?,
                        Some(b'-' | b'0'..=b'9') => raw.get().to_string(),
                        _ => {
                            return Err(field_err(
                                &self.opts.id_field,
                                format!("expected a string or a number, found {}", json_type(raw)),
                            ));
                        }
                    });
                }
                if meta.len() > 1 {
                    meta.push(',');
                }
                // Keys were unescaped by the parser; re-escape them.
                meta.push_str(&serde_json::to_string(key.as_ref()).unwrap_or_default());
                meta.push(':');
                meta.push_str(raw.get());
            }
            meta.push('}');
            let text = text.ok_or_else(|| field_err(&self.opts.text_field, "missing".into()))?;
            let id = id.unwrap_or_else(|| format!("{}:{}", self.id_prefix, line_no));
            ids.push(&id);
            texts.push(&text);
            metas.push(&meta);
            self.rows += 1;
        }
        if self.rows == first_row {
            return Ok(None);
        }
        let columns: Vec<ArrayRef> = vec![ids.finish(), texts.finish(), metas.finish()];
        let batch = RecordBatch::try_new(reader_schema(), columns).map_err(|e| IoError::Line {
            file: self.file.clone(),
            line: self.line_no,
            message: e.to_string(),
        })?;
        Ok(Some((batch, first_row)))
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && (line[end - 1] == b'\n' || line[end - 1] == b'\r') {
        end -= 1;
    }
    &line[..end]
}

/// Appends strings into one Arrow buffer.
#[derive(Default)]
struct StringBuilder {
    offsets: Vec<i32>,
    data: Vec<u8>,
}

impl StringBuilder {
    fn push(&mut self, s: &str) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(s.as_bytes());
        self.offsets.push(self.data.len() as i32);
    }

    fn finish(self) -> ArrayRef {
        let mut offsets = self.offsets;
        if offsets.is_empty() {
            offsets.push(0);
        }
        // SAFETY-free: StringArray::new validates offsets and UTF-8; strings came from &str.
        Arc::new(StringArray::new(
            arrow_buffer::OffsetBuffer::new(offsets.into()),
            self.data.into(),
            None,
        ))
    }
}

enum Encoder {
    Plain(BufWriter<File>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

impl Encoder {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Encoder::Plain(w) => w,
            Encoder::Gzip(w) => w,
            Encoder::Zstd(w) => w,
        }
    }

    fn finish(self) -> std::io::Result<File> {
        let buf = match self {
            Encoder::Plain(w) => w,
            Encoder::Gzip(w) => w.finish()?,
            Encoder::Zstd(w) => w.finish()?,
        };
        buf.into_inner().map_err(|e| e.into_error())
    }
}

/// Writes one output file atomically: into a hidden temp file beside it, renamed into place
/// by [`JsonlWriter::finish`]. Dropped unfinished, it deletes the temp file.
pub struct JsonlWriter {
    encoder: Option<Encoder>,
    tmp: PathBuf,
    final_path: PathBuf,
    text_field: String,
    docs: u64,
    line: Vec<u8>,
}

impl JsonlWriter {
    pub fn create(
        final_path: &Path,
        compression: Compression,
        text_field: &str,
    ) -> Result<JsonlWriter, IoError> {
        let werr = |source| IoError::Write {
            path: final_path.display().to_string(),
            source,
        };
        let dir = final_path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(werr)?;
        let name = final_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let file = BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(werr)?);
        let encoder = match compression {
            Compression::None => Encoder::Plain(file),
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::default(),
            )),
            Compression::Zstd => {
                Encoder::Zstd(zstd::stream::write::Encoder::new(file, 3).map_err(werr)?)
            }
        };
        Ok(JsonlWriter {
            encoder: Some(encoder),
            tmp,
            final_path: final_path.into(),
            text_field: text_field.into(),
            docs: 0,
            line: Vec::new(),
        })
    }

    fn werr(&self, source: std::io::Error) -> IoError {
        IoError::Write {
            path: self.final_path.display().to_string(),
            source,
        }
    }

    /// Append the documents of `batch` (columns `text`, `_meta`, plus any added by stages).
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let schema = batch.schema();
        let text = string_column(batch, TEXT)
            .ok_or_else(|| self.werr(std::io::Error::other("batch has no utf8 text column")))?;
        let meta = string_column(batch, META);
        let extras: Vec<(&str, &ArrayRef)> = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .filter(|(f, _)| ![ID, TEXT, META].contains(&f.name().as_str()))
            .map(|(f, a)| (f.name().as_str(), a))
            .collect();
        for row in 0..batch.num_rows() {
            self.line.clear();
            let line = &mut self.line;
            line.push(b'{');
            serde_json::to_writer(&mut *line, self.text_field.as_str())
                .map_err(std::io::Error::from)
                .map_err(|e| IoError::Write {
                    path: self.final_path.display().to_string(),
                    source: e,
                })?;
            line.push(b':');
            serde_json::to_writer(&mut *line, text.value(row))
                .map_err(std::io::Error::from)
                .map_err(|e| IoError::Write {
                    path: self.final_path.display().to_string(),
                    source: e,
                })?;
            let meta_text = meta.map(|m| m.value(row)).unwrap_or("{}");
            if extras.is_empty() {
                let inner = meta_text
                    .trim()
                    .strip_prefix('{')
                    .and_then(|s| s.strip_suffix('}'))
                    .unwrap_or("")
                    .trim();
                if !inner.is_empty() {
                    line.push(b',');
                    line.extend_from_slice(inner.as_bytes());
                }
            } else {
                // Columns added by stages replace input fields of the same name.
                let mut fields: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(meta_text).unwrap_or_default();
                for (name, array) in &extras {
                    fields.insert(name.to_string(), cell_json(array, row));
                }
                for (k, v) in fields.iter().filter(|(k, _)| **k != self.text_field) {
                    line.push(b',');
                    serde_json::to_writer(&mut *line, k)
                        .map_err(std::io::Error::from)
                        .map_err(|e| IoError::Write {
                            path: self.final_path.display().to_string(),
                            source: e,
                        })?;
                    line.push(b':');
                    serde_json::to_writer(&mut *line, v)
                        .map_err(std::io::Error::from)
                        .map_err(|e| IoError::Write {
                            path: self.final_path.display().to_string(),
                            source: e,
                        })?;
                }
            }
            line.extend_from_slice(b"}\n");
            let enc = self.encoder.as_mut().ok_or_else(|| IoError::Write {
                path: self.final_path.display().to_string(),
                source: std::io::Error::other("writer already finished"),
            })?;
            enc.writer()
                .write_all(&self.line)
                .map_err(|e| IoError::Write {
                    path: self.final_path.display().to_string(),
                    source: e,
                })?;
            self.docs += 1;
        }
        Ok(())
    }

    /// Flush, sync and rename into place. Returns the number of documents written.
    pub fn finish(mut self) -> Result<u64, IoError> {
        let enc = self
            .encoder
            .take()
            .ok_or_else(|| self.werr(std::io::Error::other("writer already finished")))?;
        let file = enc.finish().map_err(|e| self.werr(e))?;
        file.sync_all().map_err(|e| self.werr(e))?;
        std::fs::rename(&self.tmp, &self.final_path).map_err(|e| self.werr(e))?;
        Ok(self.docs)
    }
}

impl Drop for JsonlWriter {
    fn drop(&mut self) {
        if self.encoder.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a StringArray> {
    batch
        .column_by_name(name)?
        .as_any()
        .downcast_ref::<StringArray>()
}

fn cell_json(array: &ArrayRef, row: usize) -> serde_json::Value {
    use serde_json::Value;
    if array.is_null(row) {
        return Value::Null;
    }
    let any = array.as_any();
    if let Some(a) = any.downcast_ref::<StringArray>() {
        Value::String(a.value(row).to_string())
    } else if let Some(a) = any.downcast_ref::<Int64Array>() {
        Value::from(a.value(row))
    } else if let Some(a) = any.downcast_ref::<Float64Array>() {
        serde_json::Number::from_f64(a.value(row))
            .map(Value::Number)
            .unwrap_or(Value::Null)
    } else if let Some(a) = any.downcast_ref::<BooleanArray>() {
        Value::Bool(a.value(row))
    } else {
        Value::Null
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ReadOptions {
        ReadOptions {
            text_field: "text".into(),
            id_field: "id".into(),
        }
    }

    fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    #[test]
    fn reads_batches_keeps_meta_and_generates_ids() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "in.jsonl",
            "{\"id\": 7, \"text\": \"h\\u00e9llo\", \"url\": \"x\", \"n\": [1, 2]}\n\n{\"text\": \"\", \"we\\\"ird\": null}\r\n{\"text\": \"last\"}",
        );
        let mut r = JsonlReader::open(&p, opts()).unwrap();
        let (b1, first) = r.next_batch(2).unwrap().unwrap();
        assert_eq!((b1.num_rows(), first), (2, 0));
        let ids = string_column(&b1, ID).unwrap();
        assert_eq!(ids.value(0), "7");
        assert_eq!(ids.value(1), "in.jsonl:3");
        assert_eq!(string_column(&b1, TEXT).unwrap().value(0), "héllo");
        assert_eq!(
            string_column(&b1, META).unwrap().value(0),
            r#"{"id":7,"url":"x","n":[1, 2]}"#
        );
        assert_eq!(
            string_column(&b1, META).unwrap().value(1),
            r#"{"we\"ird":null}"#
        );
        let (b2, first) = r.next_batch(2).unwrap().unwrap();
        assert_eq!((b2.num_rows(), first), (1, 2));
        assert!(r.next_batch(2).unwrap().is_none());
    }

    #[test]
    fn bad_lines_name_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "{\"text\": 5}\n",
                "bad.jsonl:1: field \"text\": expected a string, found a number",
            ),
            (
                "{\"body\": \"x\"}\n",
                "bad.jsonl:1: field \"text\": missing",
            ),
            (
                "{\"text\": \"ok\"}\nnot json\n",
                "bad.jsonl:2: not a JSON object",
            ),
            (
                "{\"text\": \"ok\", \"id\": [1]}\n",
                "bad.jsonl:1: field \"id\": expected a string or a number, found an array",
            ),
        ];
        for (content, want) in cases {
            let p = write(dir.path(), "bad.jsonl", content);
            let mut r = JsonlReader::open(&p, opts()).unwrap();
            let e = r.next_batch(10).unwrap_err().to_string();
            assert!(e.contains(want), "{e} should contain {want}");
        }
        let p = dir.path().join("utf8.jsonl");
        std::fs::write(&p, b"{\"text\": \"a\xffb\"}\n").unwrap();
        let e = JsonlReader::open(&p, opts())
            .unwrap()
            .next_batch(10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("utf8.jsonl:1: invalid UTF-8 at byte 11"), "{e}");
    }

    #[test]
    fn roundtrip_through_writer_all_compressions() {
        let dir = tempfile::tempdir().unwrap();
        let input = "{\"text\":\"a \\\"q\\\" ünï\",\"id\":\"x1\",\"meta\":{\"k\":[1,2]}}\n{\"text\":\"\",\"id\":\"x2\"}\n";
        let p = write(dir.path(), "in.jsonl", input);
        for c in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let mut r = JsonlReader::open(&p, opts()).unwrap();
            let (batch, _) = r.next_batch(100).unwrap().unwrap();
            let out = dir.path().join(format!("out.jsonl{}", c.suffix()));
            let mut w = JsonlWriter::create(&out, c, "text").unwrap();
            w.write_batch(&batch).unwrap();
            assert!(!out.exists(), "final name must not exist before finish");
            assert_eq!(w.finish().unwrap(), 2);
            let text = String::from_utf8(super::super::read_decoded(&out).unwrap()).unwrap();
            let a: Vec<serde_json::Value> = input
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let b: Vec<serde_json::Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(a, b, "{c:?}");
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn dropped_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("o.jsonl");
        let w = JsonlWriter::create(&out, Compression::None, "text").unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn added_columns_replace_same_named_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "in.jsonl",
            "{\"text\":\"a\",\"score\":1,\"k\":2}\n",
        );
        let (batch, _) = JsonlReader::open(&p, opts())
            .unwrap()
            .next_batch(10)
            .unwrap()
            .unwrap();
        let mut fields: Vec<Field> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("score", DataType::Float64, false));
        let mut cols = batch.columns().to_vec();
        cols.push(Arc::new(Float64Array::from(vec![0.5])));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
        let out = dir.path().join("o.jsonl");
        let mut w = JsonlWriter::create(&out, Compression::None, "text").unwrap();
        w.write_batch(&batch).unwrap();
        w.finish().unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "{\"text\":\"a\",\"score\":0.5,\"k\":2}\n"
        );
    }
}
