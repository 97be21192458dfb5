//! Reading JSONL: lines split into top-level fields without building a tree.

use std::borrow::Cow;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::super::{ID, InputFile, IoError, META, Reject, TEXT};
use curator_core::partition::Extent;

/// Schema of the batches the readers produce.
pub fn reader_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(ID, DataType::Utf8, false),
        Field::new(TEXT, DataType::Utf8, false),
        Field::new(META, DataType::Utf8, false),
    ]))
}

/// What the readers look for, and how strictly.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub text_field: String,
    pub id_field: String,
    /// Keep only these fields (besides text and id).
    pub fields: Option<Vec<String>>,
    /// Longer lines are rejected without being held in memory.
    pub max_line_bytes: u64,
    /// Turn the first rejected line into an error.
    pub strict: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            text_field: TEXT.into(),
            id_field: ID.into(),
            fields: None,
            max_line_bytes: curator_core::pipeline::DEFAULT_MAX_LINE_BYTES,
            strict: false,
        }
    }
}

/// Top-level fields of one JSON object: the text field decoded (borrowed when it has no
/// escapes), every other value left raw. One pass over the line.
struct Fields<'a> {
    text: Option<Result<Cow<'a, str>, &'static str>>,
    others: Vec<(Cow<'a, str>, &'a RawValue)>,
}

/// Deserialises [`Fields`], knowing which key is the text.
struct FieldsSeed<'s>(&'s str);

/// A string that borrows from the input when it can (serde's `Cow<str>` never does).
struct BorrowStr<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for BorrowStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BorrowStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(BorrowStr(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(BorrowStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The text value: a string, or the name of the JSON type found instead.
struct TextValue<'a>(Result<Cow<'a, str>, &'static str>);

impl<'de> serde::Deserialize<'de> for TextValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, SeqAccess};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TextValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(TextValue(Ok(Cow::Borrowed(v))))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TextValue(Ok(Cow::Owned(v.to_string()))))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(TextValue(Ok(Cow::Owned(v))))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(TextValue(Err("a boolean")))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(TextValue(Err("a number")))
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(TextValue(Err("a number")))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(TextValue(Err("a number")))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(TextValue(Err("null")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(TextValue(Err("an array")))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(TextValue(Err("an object")))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for FieldsSeed<'_> {
    type Value = Fields<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V<'s>(&'s str);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Fields { text: None, others: Vec::new() };
                while let Some(BorrowStr(key)) = map.next_key::<BorrowStr<'de>>()? {
                    if key == self.0 {
                        out.text = Some(map.next_value::<TextValue<'de>>()?.0);
                    } else {
                        out.others.push((key, map.next_value::<&'de RawValue>()?));
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(self.0))
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

/// Reads batches of documents from one JSONL file, or from the lines that start in a byte
/// range of it.
pub struct JsonlReader {
    input: Box<dyn BufRead + Send>,
    source: String,
    id_prefix: String,
    opts: ReadOptions,
    /// Offset of the next unread byte.
    offset: u64,
    /// Stop at the first line starting at or after this offset.
    end: Option<u64>,
    /// Lines read so far, when counted from the start of the file.
    line_no: Option<u64>,
    line: Vec<u8>,
    done: bool,
    rejects: Vec<Reject>,
}

/// How much of a rejected line is kept as an excerpt.
const EXCERPT: usize = 200;

impl JsonlReader {
    /// Open `file` (the part of it that `extent` names).
    pub fn open(file: &InputFile, extent: Extent, opts: ReadOptions) -> Result<JsonlReader, IoError> {
        let source = file.display();
        let id_prefix = file.loc.file_name();
        let mut r = JsonlReader {
            input: Box::new(std::io::empty()),
            source,
            id_prefix,
            opts,
            offset: 0,
            end: None,
            line_no: Some(0),
            line: Vec::new(),
            done: false,
            rejects: Vec::new(),
        };
        match extent {
            Extent::Bytes { start, end } => {
                let skip_to = start.saturating_sub(1);
                r.input = Box::new(BufReader::with_capacity(1 << 20, file.loc.open_from(skip_to)?));
                r.offset = skip_to;
                r.end = Some(end);
                if start > 0 {
                    // The line that starts before `start` belongs to the previous range.
                    r.line_no = None;
                    let mut skipped = Vec::new();
                    let n = r.input.read_until(b'\n', &mut skipped).map_err(|e| IoError::Read {
                        file: r.source.clone(),
                        line: 0,
                        source: e,
                    })?;
                    r.offset += n as u64;
                }
            }
            _ => r.input = super::super::decoded(file.loc.open_from(0)?, &r.source)?,
        }
        Ok(r)
    }

    /// Rejected lines since the last call.
    pub fn take_rejects(&mut self) -> Vec<Reject> {
        std::mem::take(&mut self.rejects)
    }

    fn reject(&mut self, line: Option<u64>, byte_offset: u64, reason: String, excerpt: &[u8]) -> Result<(), IoError> {
        let excerpt = String::from_utf8_lossy(&excerpt[..excerpt.len().min(EXCERPT)]).into_owned();
        let r = Reject { source: self.source.clone(), line, byte_offset, reason, excerpt };
        if self.opts.strict {
            return Err(r.into_error());
        }
        self.rejects.push(r);
        Ok(())
    }

    /// Read the next line into `self.line` (without its newline). Returns its offset and
    /// whether it was longer than `max_line_bytes` (then only an excerpt is kept).
    fn next_line(&mut self) -> std::io::Result<Option<(u64, bool)>> {
        self.line.clear();
        let start = self.offset;
        let max = self.opts.max_line_bytes as usize;
        let mut total = 0usize;
        let mut too_long = false;
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                if total == 0 {
                    return Ok(None);
                }
                break;
            }
            let (take, found) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            if !too_long {
                if self.line.len() + take > max {
                    too_long = true;
                    let room = EXCERPT.saturating_sub(self.line.len());
                    self.line.extend_from_slice(&buf[..take.min(room)]);
                } else {
                    self.line.extend_from_slice(&buf[..take]);
                }
            }
            let consumed = take + found as usize;
            self.input.consume(consumed);
            total += consumed;
            if found {
                break;
            }
        }
        self.offset += total as u64;
        if let Some(n) = self.line_no.as_mut() {
            *n += 1;
        }
        Ok(Some((start, too_long)))
    }

    /// The next batch of up to `max_rows` documents.
    pub fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>, IoError> {
        let mut ids = StringBuilder::default();
        let mut texts = StringBuilder::default();
        let mut metas = StringBuilder::default();
        let mut meta = String::new();
        let mut rows = 0usize;
        while !self.done && rows < max_rows {
            let (start, too_long) = match self.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Err(e) => {
                    // A decoder error mid-stream: a truncated or corrupt compressed file.
                    self.done = true;
                    let line = self.line_no.map(|n| n + 1);
                    let offset = self.offset;
                    self.reject(line, offset, format!("unreadable after this point (truncated or corrupt file?): {e}"), &[])?;
                    break;
                }
            };
            if self.end.is_some_and(|end| start >= end) {
                self.done = true;
                break;
            }
            let line_no = self.line_no;
            let line = std::mem::take(&mut self.line);
            let parsed = self.parse_line(&line, start, line_no, too_long, &mut meta);
            let kept = match parsed {
                Ok(Some((id, text))) => {
                    ids.push(&id);
                    texts.push(&text);
                    metas.push(&meta);
                    Ok(true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            };
            self.line = line;
            rows += kept? as usize;
        }
        if rows == 0 {
            return Ok(None);
        }
        let columns: Vec<ArrayRef> = vec![ids.finish(), texts.finish(), metas.finish()];
        let batch = RecordBatch::try_new(reader_schema(), columns)
            .map_err(|e| IoError::Line { at: self.source.clone(), message: e.to_string() })?;
        Ok(Some(batch))
    }

    /// Parse one line; `Ok(None)` for blank or rejected lines. Fills `meta`.
    fn parse_line<'l>(
        &mut self,
        raw: &'l [u8],
        offset: u64,
        line_no: Option<u64>,
        too_long: bool,
        meta: &mut String,
    ) -> Result<Option<IdAndText<'l>>, IoError> {
        if too_long {
            self.reject(line_no, offset, format!("line longer than max_line_bytes ({} bytes)", self.opts.max_line_bytes), raw)?;
            return Ok(None);
        }
        let line = trim_line(raw);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let text_line = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(e) => {
                self.reject(line_no, offset, format!("invalid UTF-8 at byte {}", e.valid_up_to()), line)?;
                return Ok(None);
            }
        };
        let parsed = {
            use serde::de::DeserializeSeed;
            let mut de = serde_json::Deserializer::from_str(text_line);
            FieldsSeed(&self.opts.text_field).deserialize(&mut de).and_then(|f| de.end().map(|_| f))
        };
        let fields: Fields<'_> = match parsed {
            Ok(f) => f,
            Err(e) => {
                self.reject(line_no, offset, format!("not a JSON object: {e}"), line)?;
                return Ok(None);
            }
        };
        let mut text: Option<Cow<'l, str>> = None;
        let mut id: Option<Cow<'l, str>> = None;
        meta.clear();
        meta.push('{');
        let mut problem: Option<(String, String)> = None;
        match fields.text {
            Some(Ok(t)) => text = Some(t),
            Some(Err(found)) => problem = Some((self.opts.text_field.clone(), format!("expected a string, found {found}"))),
            None => {}
        }
        for (key, raw) in &fields.others {
            if key.as_ref() == self.opts.id_field {
                id = match raw.get().as_bytes().first() {
                    Some(b'"') => json_str(raw).ok(),
                    Some(b'-' | b'0'..=b'9') => Some(Cow::Borrowed(raw.get())),
                    _ => {
                        problem = Some((self.opts.id_field.clone(), format!("expected a string or a number, found {}", json_type(raw))));
                        break;
                    }
                };
            } else if let Some(keep) = &self.opts.fields
                && !keep.iter().any(|k| k == key.as_ref())
            {
                continue;
            }
            if meta.len() > 1 {
                meta.push(',');
            }
            match key {
                // Borrowed keys had no escapes in the input: quote them as they were.
                Cow::Borrowed(k) => {
                    meta.push('"');
                    meta.push_str(k);
                    meta.push('"');
                }
                Cow::Owned(k) => meta.push_str(&serde_json::to_string(k).unwrap_or_default()),
            }
            meta.push(':');
            meta.push_str(raw.get());
        }
        meta.push('}');
        if problem.is_none() && text.is_none() {
            problem = Some((self.opts.text_field.clone(), "missing".into()));
        }
        if let Some((field, message)) = problem {
            self.reject(line_no, offset, format!("field {field:?}: {message}"), line)?;
            return Ok(None);
        }
        let id = id.unwrap_or_else(|| Cow::Owned(format!("{}@{}", self.id_prefix, offset)));
        Ok(text.map(|t| (id, t)))
    }
}

/// A document's id and text, borrowed from its line where possible.
type IdAndText<'l> = (Cow<'l, str>, Cow<'l, str>);

/// A JSON string value's content, borrowed when it has no escapes.
fn json_str<'l>(raw: &'l RawValue) -> Result<Cow<'l, str>, serde_json::Error> {
    let s = raw.get();
    if s.len() >= 2 && memchr::memchr(b'\\', s.as_bytes()).is_none() {
        // The parser already checked it is a well-formed string; without escapes its content
        // is the text between the quotes.
        return Ok(Cow::Borrowed(&s[1..s.len() - 1]));
    }
    serde_json::from_str::<String>(s).map(Cow::Owned)
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
        Arc::new(StringArray::new(arrow_buffer::OffsetBuffer::new(offsets.into()), self.data.into(), None))
    }
}
