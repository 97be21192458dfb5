//! The `csv` source: comma- (`.csv`) or tab-separated (`.tsv`) files with a header row, plain
//! or compressed, as datatrove's `CSVReader` reads them: one document per record, `text` from
//! the source's `text_field` column, `id` from its `id_field` column (else `<file>@<byte
//! offset>`, as for JSONL), every column but the text a string field in `_meta`, in header
//! order (the id among them, as JSONL keeps it).
//! Quoted fields may hold separators and newlines. A record with another number of fields
//! than the header, or without the text column, or not UTF-8, is a [`Reject`] naming its line.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};

use super::format::{FileNames, PartReader, ReadPart, SourceFormat};
use super::json_str::push_json_str;
use super::records::{ReadOptions, reader_schema};
use super::{Codec, InputFile, IoError, Reject, Rejects};

/// CSV and TSV files as a source format (`format: csv`).
pub struct Csv;
pub static CSV: Csv = Csv;

/// Its file name endings, plain or compressed.
pub const EXTENSIONS: &[&str] =
    &[".csv", ".tsv", ".csv.gz", ".tsv.gz", ".csv.zst", ".tsv.zst", ".csv.bz2", ".tsv.bz2", ".csv.xz", ".tsv.xz", ".csv.lz4", ".tsv.lz4"];

static FILE_NAMES: FileNames = FileNames { format: "csv", extensions: EXTENSIONS, unnamed: &[], outputs_drop_extension: true };

impl SourceFormat for Csv {
    fn names(&self) -> &FileNames {
        &FILE_NAMES
    }
    fn compressed(&self, lower_name: &str) -> bool {
        Codec::from_name(lower_name).is_some()
    }
    fn open(&self, part: &ReadPart<'_>) -> Result<Box<dyn PartReader>, IoError> {
        Ok(Box::new(CsvReader::open(part.file(), part.opts)?))
    }
    fn no_documents_hint(&self, _input: &InputFile, opts: &ReadOptions) -> String {
        format!("; does its header name a {:?} column?", opts.text_field)
    }
}

/// Reads the records of one CSV or TSV file.
pub struct CsvReader {
    records: csv::Reader<Box<dyn std::io::BufRead + Send>>,
    source: String,
    id_prefix: String,
    /// The header's columns, and where the text and id are among them.
    header: Vec<String>,
    text_at: Option<usize>,
    id_at: Option<usize>,
    /// The columns that go to `_meta`, in header order (all but the text; of the others only
    /// the source's `fields`, when it names them, and the id), each with its key as JSON
    /// (`"name":`), escaped once.
    kept: Vec<(usize, Vec<u8>)>,
    text_field: String,
    rejects: Rejects,
    done: bool,
}

impl CsvReader {
    pub fn open(file: &InputFile, opts: &ReadOptions) -> Result<CsvReader, IoError> {
        let source = file.display();
        let input = super::decoded(file.loc.open_from(0)?, &source)?;
        let tabs = file.rel.to_lowercase().contains(".tsv");
        let mut records = csv::ReaderBuilder::new().delimiter(if tabs { b'\t' } else { b',' }).from_reader(input);
        let header: Vec<String> = records
            .headers()
            .map_err(|e| IoError::Line { at: format!("{source}:1"), message: format!("cannot read the header row: {e}") })?
            .iter()
            .map(str::to_string)
            .collect();
        let at = |name: &str| header.iter().position(|h| h == name);
        let (text_at, id_at) = (at(&opts.text_field), at(&opts.id_field));
        // As JSONL keeps them: every field but the text (the id among them, whatever `fields` says).
        let kept = (0..header.len())
            .filter(|&i| Some(i) != text_at)
            .filter(|&i| Some(i) == id_at || opts.fields.as_ref().is_none_or(|keep| keep.contains(&header[i])))
            .map(|i| {
                let mut key = Vec::new();
                push_json_str(&mut key, &header[i]);
                key.push(b':');
                (i, key)
            })
            .collect();
        Ok(CsvReader {
            records,
            id_prefix: file.loc.file_name(),
            source,
            header,
            text_at,
            id_at,
            kept,
            text_field: opts.text_field.clone(),
            rejects: Rejects::new(opts.strict),
            done: false,
        })
    }

    fn reject(&mut self, line: u64, byte_offset: u64, reason: String) -> Result<(), IoError> {
        self.rejects.add(Reject { source: self.source.clone(), line: Some(line), byte_offset, reason, excerpt: String::new() })
    }
}

impl PartReader for CsvReader {
    fn next_batch(&mut self, n: usize) -> Result<Option<RecordBatch>, IoError> {
        let (mut ids, mut texts, mut metas) = (StringBuilder::new(), StringBuilder::new(), StringBuilder::new());
        let mut record = csv::StringRecord::new();
        let mut meta = Vec::new();
        let mut rows = 0;
        while rows < n.max(1) && !self.done {
            match self.records.read_record(&mut record) {
                Ok(false) => self.done = true,
                Ok(true) => {
                    let at = record.position().map(|p| (p.line(), p.byte())).unwrap_or_default();
                    let Some(text) = self.text_at.and_then(|i| record.get(i)) else {
                        let columns = self.header.join(", ");
                        self.reject(at.0, at.1, format!("field {:?}: missing (the header's columns: {columns})", self.text_field))?;
                        continue;
                    };
                    match self.id_at.and_then(|i| record.get(i)) {
                        Some(id) => ids.append_value(id),
                        None => ids.append_value(format!("{}@{}", self.id_prefix, at.1)),
                    }
                    texts.append_value(text);
                    meta.clear();
                    meta.push(b'{');
                    for (k, (i, key)) in self.kept.iter().enumerate() {
                        if k > 0 {
                            meta.push(b',');
                        }
                        meta.extend_from_slice(key);
                        push_json_str(&mut meta, record.get(*i).unwrap_or_default());
                    }
                    meta.push(b'}');
                    // Made of UTF-8 strings and ASCII punctuation only.
                    metas.append_value(std::str::from_utf8(&meta).unwrap_or_default());
                    rows += 1;
                }
                Err(e) => {
                    let (line, byte) = e.position().map(|p| (p.line(), p.byte())).unwrap_or_default();
                    let reason = match e.kind() {
                        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                            format!("{len} fields where the header has {expected_len}")
                        }
                        csv::ErrorKind::Utf8 { .. } => "not UTF-8".to_string(),
                        csv::ErrorKind::Io(_) => {
                            return Err(IoError::Read { file: self.source.clone(), line, source: std::io::Error::other(e.to_string()) });
                        }
                        _ => e.to_string(),
                    };
                    self.reject(line, byte, reason)?;
                }
            }
        }
        if rows == 0 {
            return Ok(None);
        }
        let cols = [ids, texts, metas].map(|mut c| Arc::new(c.finish()) as ArrayRef);
        RecordBatch::try_new(reader_schema(), cols.to_vec())
            .map(Some)
            .map_err(|e| IoError::Line { at: self.source.clone(), message: format!("cannot build the batch: {e}") })
    }

    fn take_rejects(&mut self) -> Vec<Reject> {
        self.rejects.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Loc;
    use arrow_array::{Array, StringArray};

    fn read(name: &str, bytes: &[u8], opts: &ReadOptions) -> Result<(Vec<[String; 3]>, Vec<Reject>), IoError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let (format, compressed) = crate::sniff_name(name, None);
        assert_eq!(format.name(), "csv");
        let file = InputFile { loc: Loc::Local(path), rel: name.into(), size: bytes.len() as u64, format, compressed };
        let mut r = CsvReader::open(&file, opts)?;
        let mut docs = Vec::new();
        while let Some(b) = r.next_batch(2)? {
            let col = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>().unwrap().clone();
            let (ids, texts, metas) = (col(0), col(1), col(2));
            for i in 0..b.num_rows() {
                docs.push([ids.value(i), texts.value(i), metas.value(i)].map(str::to_string));
            }
        }
        Ok((docs, r.take_rejects()))
    }

    #[test]
    fn records_become_documents_with_quoted_separators_and_newlines() {
        let csv = "id,text,lang\nd1,\"Hello, world\",en\nd2,\"two\nlines, \"\"quoted\"\"\",de\nd3,plain,fr\n";
        let (docs, rejects) = read("a.csv", csv.as_bytes(), &ReadOptions::default()).unwrap();
        assert!(rejects.is_empty(), "{rejects:?}");
        assert_eq!(docs[0], ["d1", "Hello, world", r#"{"id":"d1","lang":"en"}"#].map(str::to_string));
        assert_eq!(docs[1][1], "two\nlines, \"quoted\"");
        assert_eq!(docs.len(), 3);
        // Fields keep the header's order (not sorted), names and values escaped as JSON.
        let (docs, _) = read("o.csv", "zeta,text,\"a\"\"b\",alpha\n1,t,\"x\ty\",2\n".as_bytes(), &ReadOptions::default()).unwrap();
        assert_eq!(docs[0][2], r#"{"zeta":"1","a\"b":"x\ty","alpha":"2"}"#);
    }

    #[test]
    fn tsv_compressed_and_without_an_id_column() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, "content\turl\nfirst page\thttp://a\nsecond\thttp://b\n".as_bytes()).unwrap();
        let opts = ReadOptions { text_field: "content".into(), ..ReadOptions::default() };
        let (docs, _) = read("pages.tsv.gz", &gz.finish().unwrap(), &opts).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!((docs[1][1].as_str(), docs[1][2].as_str()), ("second", r#"{"url":"http://b"}"#));
        assert!(docs[0][0].starts_with("pages.tsv.gz@") && docs[0][0] != docs[1][0], "{docs:?}");
    }

    #[test]
    fn bad_records_are_rejected_by_line_and_the_rest_read() {
        let csv = "id,text\na,one\nb,two,extra\nc,three\n";
        let (docs, rejects) = read("b.csv", csv.as_bytes(), &ReadOptions::default()).unwrap();
        assert_eq!(docs.iter().map(|d| d[1].as_str()).collect::<Vec<_>>(), ["one", "three"]);
        assert!(rejects[0].at().ends_with("/b.csv:3"), "{rejects:?}");
        assert_eq!(rejects[0].reason, "3 fields where the header has 2");
        let (docs, rejects) = read("c.csv", b"id,body\na,one\n", &ReadOptions::default()).unwrap();
        assert!(docs.is_empty());
        assert_eq!(rejects[0].reason, "field \"text\": missing (the header's columns: id, body)");
        let strict = ReadOptions { strict: true, ..ReadOptions::default() };
        let e = read("d.csv", csv.as_bytes(), &strict).unwrap_err().to_string();
        assert!(e.ends_with("/d.csv:3: 3 fields where the header has 2"), "{e}");
    }
}
