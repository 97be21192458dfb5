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

mod format;
mod read;
mod vectors;
mod write;

use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{ChunkReader, Length};

use super::{InputFile, IoError, Loc};

pub use format::PARQUET;

/// Its name in a pipeline file.
pub const NAME: &str = "parquet";
pub use read::{ParquetReader, source_fields};
pub use write::ParquetWriter;

/// Metadata key listing the utf8 columns that hold JSON text.
pub const JSON_COLUMNS_KEY: &str = "curator.json_columns";
/// Column holding values that did not fit their typed column.
pub const EXTRA: &str = "_extra";
pub(super) fn perr(loc: &str, e: impl std::fmt::Display) -> IoError {
    IoError::Parquet { path: loc.to_string(), message: e.to_string() }
}

/// Random access to a file for the Parquet reader: local files directly, object-store files
/// by range requests.
#[derive(Clone)]
pub struct LocReader {
    pub(super) loc: Loc,
    pub(super) size: u64,
}

impl Length for LocReader {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for LocReader {
    type T = Box<dyn std::io::Read + Send>;
    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        // Buffered: the decoder reads page headers a field at a time.
        let read = self.loc.open_from(start).map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        Ok(Box::new(std::io::BufReader::with_capacity(8 << 10, read)))
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
/// Run a call into the Parquet decoder, turning a panic (the parquet crate panics on some
/// corrupt files rather than returning an error) into an error naming the file.
pub(super) fn decoder_guard<T>(source: &str, f: impl FnOnce() -> Result<T, IoError>) -> Result<T, IoError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        Err(IoError::Parquet { path: source.to_string(), message: format!("corrupt Parquet file (the decoder failed: {why})") })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonl::{JsonlReader, JsonlWriter};
    use crate::records::{ReadOptions, string_column};
    use crate::writer::OutputWriter;
    use crate::{ID, META, TEXT};
    use curator_core::partition::Extent;
    use curator_core::pipeline::Compression;
    use serde_json::Value;

    fn input(path: &std::path::Path) -> InputFile {
        let (format, compressed) = crate::sniff_name(&path.display().to_string(), None);
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
        let mut w: Box<dyn OutputWriter> =
            Box::new(ParquetWriter::create(&Loc::Local(pq.clone()), Compression::Zstd, Default::default(), 2, "text").unwrap());
        while let Some(b) = r.next_batch(2).unwrap() {
            w.write_batch(&b).unwrap();
        }
        assert_eq!(w.finish().unwrap().documents, 3);

        let mut pr = ParquetReader::open(&input(&pq), Extent::Whole, opts, 10).unwrap();
        let back = dir.path().join("back.jsonl");
        let mut jw: Box<dyn OutputWriter> =
            Box::new(JsonlWriter::create(&Loc::Local(back.clone()), Compression::None, Default::default(), "text").unwrap());
        while let Some(b) = pr.next_batch().unwrap() {
            jw.write_batch(&b).unwrap();
        }
        jw.finish().unwrap();
        let want: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let got: Vec<Value> = std::fs::read_to_string(&back).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(got, want);
    }

    /// The ids a Parquet file gives back are the ids its documents had, whether the id
    /// column holds plain strings or (ids of mixed types) our JSON text.
    #[test]
    fn ids_read_back_as_they_were_from_string_and_json_id_columns() {
        let dir = tempfile::tempdir().unwrap();
        for (name, lines) in [
            (
                "plain",
                r#"{"id": "a", "text": "x"}
{"id": "b", "text": "y"}"#,
            ),
            (
                "mixed",
                r#"{"id": "a", "text": "x"}
{"id": 7, "text": "y"}"#,
            ),
        ] {
            let src = dir.path().join(format!("{name}.jsonl"));
            std::fs::write(&src, lines).unwrap();
            let batch = JsonlReader::open(&input(&src), Extent::Whole, ReadOptions::default()).unwrap().next_batch(10).unwrap().unwrap();
            let want: Vec<String> = string_column(&batch, ID).unwrap().iter().map(|v| v.unwrap().to_string()).collect();
            let pq = dir.path().join(format!("{name}.parquet"));
            let mut w = ParquetWriter::create(&Loc::Local(pq.clone()), Compression::Zstd, Default::default(), 10, "text").unwrap();
            w.write_batch(&batch).unwrap();
            Box::new(w).finish().unwrap();
            let back = ParquetReader::open(&input(&pq), Extent::Whole, ReadOptions::default(), 10).unwrap().next_batch().unwrap().unwrap();
            let got: Vec<String> = string_column(&back, ID).unwrap().iter().map(|v| v.unwrap().to_string()).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    /// A file as another tool writes it (string columns read as views): a row without text
    /// is skipped, the others keep their own ids (or get `file#row` where the id is null), and
    /// string cells reach `_meta` escaped as serde_json escapes them.
    #[test]
    fn string_ids_and_cells_survive_skipped_rows() {
        use arrow_array::{ArrayRef, RecordBatch, StringArray};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let pq = dir.path().join("t.parquet");
        let col = |v: Vec<Option<&str>>| Arc::new(StringArray::from(v)) as ArrayRef;
        let url = "a \"quoted\"\nline \\ ünï 模型 \u{1}";
        for skip in [false, true] {
            let texts = if skip { vec![Some("x"), None, Some("z"), Some("w")] } else { vec![Some("x"), Some("y"), Some("z"), Some("w")] };
            let batch = RecordBatch::try_from_iter([
                ("id", col(vec![Some("a"), Some("b"), None, Some("d")])),
                ("text", col(texts)),
                ("url", col(vec![Some(url); 4])),
            ])
            .unwrap();
            let mut w = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&pq).unwrap(), batch.schema(), None).unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            let back = ParquetReader::open(&input(&pq), Extent::Whole, ReadOptions::default(), 10).unwrap().next_batch().unwrap().unwrap();
            let strings =
                |name: &str| -> Vec<String> { string_column(&back, name).unwrap().iter().map(|v| v.unwrap().to_string()).collect() };
            let (ids, texts) = if skip {
                (vec!["a", "t.parquet#2", "d"], vec!["x", "z", "w"])
            } else {
                (vec!["a", "b", "t.parquet#2", "d"], vec!["x", "y", "z", "w"])
            };
            assert_eq!(strings(ID), ids, "skip {skip}");
            assert_eq!(strings(TEXT), texts, "skip {skip}");
            let metas = strings(META);
            for (meta, id) in metas.iter().zip(&ids) {
                let id = if id.contains('#') { String::new() } else { format!("\"id\":\"{id}\",") };
                assert_eq!(*meta, format!("{{{id}\"url\":{}}}", serde_json::to_string(url).unwrap()), "skip {skip}");
            }
        }
    }

    #[test]
    fn row_groups_and_projection() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("in.jsonl");
        let lines: String = (0..10).map(|i| format!("{{\"text\": \"doc {i}\", \"i\": {i}, \"drop\": \"x\"}}\n")).collect();
        std::fs::write(&src, lines).unwrap();
        let mut r = JsonlReader::open(&input(&src), Extent::Whole, ReadOptions::default()).unwrap();
        let pq = dir.path().join("rg.parquet");
        let mut w: Box<dyn OutputWriter> =
            Box::new(ParquetWriter::create(&Loc::Local(pq.clone()), Compression::Zstd, Default::default(), 4, "text").unwrap());
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
