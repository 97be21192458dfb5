//! Reading JSONL: lines split into top-level fields without building a tree, by the fast
//! scanner (`scan.rs`) or, for lines it leaves alone, by serde_json.

use std::borrow::Cow;
use std::fmt;
use std::io::BufReader;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::builder::StringBuilder;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::super::{InputFile, IoError, Reject, Rejects};
use super::lines::{Line, LineSplitter};
use super::scan::{Fields, Text, scan};
use super::text_column::TextColumn;
use crate::records::ReadOptions;
use crate::vectors::VectorColumn;
use curator_core::partition::Extent;

/// Deserialises [`Fields`], knowing which key is the text: the text field decoded (borrowed
/// when it has no escapes), every other value left raw. One pass over the line.
pub(super) struct FieldsSeed<'s>(pub(super) &'s str);

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
                        out.text = Some(map.next_value::<TextValue<'de>>()?.0.map(Text::Decoded));
                    } else {
                        out.others.push((key, map.next_value::<&'de RawValue>()?.get()));
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(self.0))
    }
}

fn json_type(raw: &str) -> &'static str {
    match raw.as_bytes().first() {
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
    lines: LineSplitter,
    parser: LineParser,
    /// Stop at the first line starting at or after this offset.
    end: Option<u64>,
    /// Lines read so far, when counted from the start of the file.
    line_no: Option<u64>,
    done: bool,
    /// Bytes of the id, text and meta columns of the last batch: the next one's capacity.
    last_bytes: [usize; 3],
}

/// Turns lines into documents; keeps what it rejected.
struct LineParser {
    source: String,
    id_prefix: String,
    opts: ReadOptions,
    rejects: Rejects,
    /// Scratch for the `_meta` of the line being parsed.
    meta: String,
}

/// How much of a rejected line is kept as an excerpt.
const EXCERPT: usize = 200;

/// Arrow columns being filled.
struct Columns {
    ids: StringBuilder,
    texts: TextColumn,
    metas: StringBuilder,
    vectors: Vec<VectorColumn>,
}

impl JsonlReader {
    /// Open `file` (the part of it that `extent` names).
    pub fn open(file: &InputFile, extent: Extent, opts: ReadOptions) -> Result<JsonlReader, IoError> {
        let source = file.display();
        let id_prefix = file.loc.file_name();
        let max = usize::try_from(opts.max_line_bytes).unwrap_or(usize::MAX);
        match extent {
            Extent::Bytes { start, end } => {
                let skip_to = start.saturating_sub(1);
                let input = Box::new(BufReader::with_capacity(1 << 20, file.loc.open_from(skip_to)?));
                let mut r = JsonlReader::new(LineSplitter::new(input, skip_to, max, EXCERPT), source, id_prefix, opts);
                r.end = Some(end);
                if start > 0 {
                    // The line that starts before `start` belongs to the previous range.
                    r.line_no = None;
                    r.lines.skip_line().map_err(|e| IoError::Read { file: r.parser.source.clone(), line: 0, source: e })?;
                }
                Ok(r)
            }
            _ => {
                let input = super::super::decoded(file.loc.open_from(0)?, &source)?;
                Ok(JsonlReader::new(LineSplitter::new(input, 0, max, EXCERPT), source, id_prefix, opts))
            }
        }
    }

    /// Read the whole of `input` (already decoded), naming it `source` in rejects and ids.
    pub fn from_reader(input: Box<dyn std::io::BufRead + Send>, source: &str, opts: ReadOptions) -> JsonlReader {
        let max = usize::try_from(opts.max_line_bytes).unwrap_or(usize::MAX);
        JsonlReader::new(LineSplitter::new(input, 0, max, EXCERPT), source.to_string(), source.to_string(), opts)
    }

    fn new(lines: LineSplitter, source: String, id_prefix: String, opts: ReadOptions) -> JsonlReader {
        JsonlReader {
            lines,
            parser: LineParser { source, id_prefix, rejects: Rejects::new(opts.strict), opts, meta: String::new() },
            end: None,
            line_no: Some(0),
            done: false,
            last_bytes: [0; 3],
        }
    }

    /// Rejected lines since the last call.
    pub fn take_rejects(&mut self) -> Vec<Reject> {
        self.parser.rejects.take()
    }

    /// The next batch of up to `max_rows` documents.
    pub fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>, IoError> {
        let rows_hint = max_rows.min(1 << 16);
        let [ids, texts, metas] = self.last_bytes.map(|b| b + b / 8);
        let mut cols = Columns {
            ids: StringBuilder::with_capacity(rows_hint, ids),
            texts: TextColumn::with_capacity(rows_hint, texts),
            metas: StringBuilder::with_capacity(rows_hint, metas),
            vectors: self.parser.opts.vectors.iter().map(|v| VectorColumn::new(v)).collect(),
        };
        let mut rows = 0usize;
        let mut failed: Option<IoError> = None;
        while !self.done && rows < max_rows && failed.is_none() {
            let (parser, end, line_no, done) = (&mut self.parser, self.end, &mut self.line_no, &mut self.done);
            let more = self.lines.next_lines(&mut |line| {
                if end.is_some_and(|end| line.start >= end) {
                    *done = true;
                    return false;
                }
                if let Some(n) = line_no.as_mut() {
                    *n += 1;
                }
                match parser.parse_line(&line, *line_no, &mut cols) {
                    Ok(kept) => rows += kept as usize,
                    Err(e) => failed = Some(e),
                }
                failed.is_none() && rows < max_rows
            });
            match more {
                Ok(true) => {}
                Ok(false) => self.done = true,
                Err(e) => {
                    // A decoder error mid-stream: a truncated or corrupt compressed file.
                    self.done = true;
                    let line = self.line_no.map(|n| n + 1);
                    let offset = self.lines.offset();
                    let reason = format!("unreadable after this point (truncated or corrupt file?): {e}");
                    self.parser.reject(line, offset, reason, &[])?;
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if rows == 0 {
            return Ok(None);
        }
        let (ids, texts, metas) = (cols.ids.finish(), cols.texts.finish(), cols.metas.finish());
        self.last_bytes = [ids.value_data().len(), texts.value_data().len(), metas.value_data().len()];
        let vectors = cols.vectors.into_iter().filter_map(VectorColumn::finish).collect();
        let batch = crate::vectors::reader_batch([Arc::new(ids), Arc::new(texts), Arc::new(metas)], vectors)
            .map_err(|e| IoError::Line { at: self.parser.source.clone(), message: e.to_string() })?;
        Ok(Some(batch))
    }
}

impl LineParser {
    fn reject(&mut self, line: Option<u64>, byte_offset: u64, reason: String, excerpt: &[u8]) -> Result<(), IoError> {
        let excerpt = String::from_utf8_lossy(&excerpt[..excerpt.len().min(EXCERPT)]).into_owned();
        self.rejects.add(Reject { source: self.source.clone(), line, byte_offset, reason, excerpt })
    }

    /// Parse one line into `cols`; false for blank or rejected lines.
    fn parse_line(&mut self, raw: &Line<'_>, line_no: Option<u64>, cols: &mut Columns) -> Result<bool, IoError> {
        let offset = raw.start;
        if raw.too_long {
            let reason = format!("line longer than max_line_bytes ({} bytes)", self.opts.max_line_bytes);
            self.reject(line_no, offset, reason, raw.bytes)?;
            return Ok(false);
        }
        let mut line = trim_line(raw.bytes);
        if offset == 0 {
            // A UTF-8 byte-order mark (Windows tools write one) is not part of the document.
            line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(false);
        }
        let Ok(text_line) = simdutf8::basic::from_utf8(line) else {
            let at = std::str::from_utf8(line).err().map(|e| e.valid_up_to()).unwrap_or(0);
            self.reject(line_no, offset, format!("invalid UTF-8 at byte {at}"), line)?;
            return Ok(false);
        };
        let parsed = match scan(text_line, &self.opts.text_field, &mut cols.texts) {
            Some(fields) => Ok(fields),
            None => {
                use serde::de::DeserializeSeed;
                let mut de = serde_json::Deserializer::from_str(text_line);
                FieldsSeed(&self.opts.text_field).deserialize(&mut de).and_then(|f| de.end().map(|_| f))
            }
        };
        let fields: Fields<'_> = match parsed {
            Ok(f) => f,
            Err(e) => {
                self.reject(line_no, offset, format!("not a JSON object: {e}"), line)?;
                return Ok(false);
            }
        };
        let mut meta = std::mem::take(&mut self.meta);
        let kept = self.document(fields, offset, &mut meta, line_no, line, cols);
        self.meta = meta;
        if !matches!(kept, Ok(true)) {
            cols.texts.drop_pending();
        }
        kept
    }

    /// The id, text and `_meta` of a parsed line, appended to `cols` (or the line rejected).
    fn document(
        &mut self,
        fields: Fields<'_>,
        offset: u64,
        meta: &mut String,
        line_no: Option<u64>,
        line: &[u8],
        cols: &mut Columns,
    ) -> Result<bool, IoError> {
        let mut text: Option<Text<'_>> = None;
        let mut id: Option<Cow<'_, str>> = None;
        meta.clear();
        meta.push('{');
        let mut problem: Option<(String, String)> = None;
        let mut vectors: Vec<Option<&str>> = vec![None; cols.vectors.len()];
        match fields.text {
            Some(Ok(t)) => text = Some(t),
            Some(Err(found)) => problem = Some((self.opts.text_field.clone(), format!("expected a string, found {found}"))),
            None => {}
        }
        for (key, raw) in &fields.others {
            if key.as_ref() == self.opts.id_field {
                id = match raw.as_bytes().first() {
                    Some(b'"') => json_str(raw).ok(),
                    Some(b'-' | b'0'..=b'9') => Some(Cow::Borrowed(*raw)),
                    _ => {
                        problem = Some((self.opts.id_field.clone(), format!("expected a string or a number, found {}", json_type(raw))));
                        break;
                    }
                };
            } else if let Some(v) = cols.vectors.iter().position(|c| c.name() == key.as_ref()) {
                vectors[v] = Some(*raw);
                continue;
            } else if let Some(keep) = &self.opts.fields
                && !keep.iter().any(|k| k == key.as_ref())
            {
                continue;
            } else if nesting_depth(raw) > MAX_NESTING {
                // Kept verbatim it would pass here, then break every consumer that parses it
                // (serde_json, pyarrow and the Parquet writer stop at 128).
                problem = Some((key.to_string(), format!("nested deeper than {MAX_NESTING} levels")));
                break;
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
            meta.push_str(raw);
        }
        meta.push('}');
        if problem.is_none() && text.is_none() {
            problem = Some((self.opts.text_field.clone(), "missing".into()));
        }
        if let Some((field, message)) = problem {
            self.reject(line_no, offset, format!("field {field:?}: {message}"), line)?;
            return Ok(false);
        }
        let Some(text) = text else { return Ok(false) };
        let committed = match text {
            Text::Pending => cols.texts.commit(),
            Text::Decoded(t) => cols.texts.push(&t),
        };
        committed.map_err(|bytes| IoError::Field {
            at: super::super::line_at(&self.source, line_no, offset),
            field: self.opts.text_field.clone(),
            message: format!("a batch's texts would pass 2 GiB ({bytes} bytes): lower the source's batch size"),
        })?;
        for (column, raw) in cols.vectors.iter_mut().zip(vectors) {
            column.push_json(raw).map_err(|message| IoError::Field {
                at: super::super::line_at(&self.source, line_no, offset),
                field: column.name().to_string(),
                message,
            })?;
        }
        match id {
            Some(id) => cols.ids.append_value(id),
            None => cols.ids.append_value(format!("{}@{}", self.id_prefix, offset)),
        }
        cols.metas.append_value(meta.as_str());
        Ok(true)
    }
}

/// Deepest nesting a kept field may have (serde_json's own recursion limit).
const MAX_NESTING: usize = 128;

/// How deep arrays and objects nest in a well-formed JSON value (brackets inside strings
/// do not count).
fn nesting_depth(raw: &str) -> usize {
    let bytes = raw.as_bytes();
    if !matches!(bytes.first(), Some(b'[' | b'{')) {
        return 0;
    }
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A JSON string value's content, borrowed when it has no escapes.
fn json_str(s: &str) -> Result<Cow<'_, str>, serde_json::Error> {
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
