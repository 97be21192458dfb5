//! JSONL: one JSON object per line.
//!
//! The reader (`read.rs`) never builds a JSON tree: each line is split into top-level
//! `(key, raw value)` pairs (by hand in `scan.rs`, by serde_json for the lines it leaves); the
//! text (and id) are decoded, every other field is kept verbatim in `_meta` so the writer
//! (`write.rs`) can emit it unchanged.

mod format;
mod lines;
mod read;
mod scan;
mod text_column;
mod write;

pub use format::{EXTENSIONS, JSONL, NAME};
pub use read::*;
pub use write::*;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::records::{ReadOptions, string_column};
    use crate::writer::OutputWriter;
    use crate::{ID, InputFile, Loc, META, Reject, TEXT};
    use std::io::Write;

    use arrow_array::{Float64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use curator_core::partition::Extent;
    use curator_core::pipeline::Compression;
    use std::path::{Path, PathBuf};

    fn opts() -> ReadOptions {
        ReadOptions::default()
    }

    fn input(path: &Path) -> InputFile {
        let (format, compressed) = super::super::sniff_name(&path.display().to_string(), None);
        InputFile {
            loc: Loc::Local(path.to_path_buf()),
            rel: path.file_name().unwrap().to_string_lossy().into(),
            size: std::fs::metadata(path).unwrap().len(),
            format,
            compressed,
        }
    }

    fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    fn read_all(path: &Path, extent: Extent, opts: ReadOptions) -> (Vec<(String, String, String)>, Vec<Reject>) {
        let mut r = JsonlReader::open(&input(path), extent, opts).unwrap();
        let mut docs = Vec::new();
        while let Some(b) = r.next_batch(3).unwrap() {
            for i in 0..b.num_rows() {
                docs.push((
                    string_column(&b, ID).unwrap().value(i).to_string(),
                    string_column(&b, TEXT).unwrap().value(i).to_string(),
                    string_column(&b, META).unwrap().value(i).to_string(),
                ));
            }
        }
        (docs, r.take_rejects())
    }

    #[test]
    fn reads_batches_keeps_meta_and_generates_ids() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "in.jsonl", b"{\"id\": 7, \"text\": \"h\\u00e9llo\", \"url\": \"x\", \"n\": [1, 2]}\n\n{\"text\": \"\", \"we\\\"ird\": null}\r\n{\"text\": \"last\"}");
        let (docs, rejects) = read_all(&p, Extent::Whole, opts());
        assert!(rejects.is_empty());
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[0], ("7".into(), "héllo".into(), r#"{"id":7,"url":"x","n":[1, 2]}"#.into()));
        assert_eq!(docs[1].0, "in.jsonl@58");
        assert_eq!(docs[1].2, r#"{"we\"ird":null}"#);
        let (projected, _) = read_all(&p, Extent::Whole, ReadOptions { fields: Some(vec!["url".into()]), ..opts() });
        assert_eq!(projected[0].2, r#"{"id":7,"url":"x"}"#);
    }

    #[test]
    fn a_byte_order_mark_is_skipped_whole_file_or_first_range() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "bom.jsonl", "\u{feff}{\"text\": \"first\"}\r\n{\"text\": \"\u{feff}kept\"}\r\n".as_bytes());
        for extent in [Extent::Whole, Extent::Bytes { start: 0, end: 10 }] {
            let (docs, rejects) = read_all(&p, extent, opts());
            assert!(rejects.is_empty(), "{rejects:?}");
            assert_eq!(docs[0].1, "first");
        }
        // Only the file's first bytes are a mark; one inside a text is text.
        let (docs, _) = read_all(&p, Extent::Whole, opts());
        assert_eq!(docs[1].1, "\u{feff}kept");
    }

    #[test]
    fn defects_are_rejected_with_line_numbers_and_valid_lines_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut content = Vec::new();
        content.extend_from_slice(b"{\"text\": \"good one\"}\n");
        content.extend_from_slice(b"{\"text\": 5}\n");
        content.extend_from_slice(b"{\"body\": \"x\"}\n");
        content.extend_from_slice(b"not json\n");
        content.extend_from_slice(b"{\"text\": \"a\xffb\"}\n");
        content.extend_from_slice(format!("{{\"text\": \"{}\"}}\n", "x".repeat(300)).as_bytes());
        content.extend_from_slice(b"{\"text\": \"ok\", \"id\": [1]}\n");
        content.extend_from_slice(b"{\"text\": \"good two\"}\n");
        let p = write(dir.path(), "bad.jsonl", &content);
        let (docs, rejects) = read_all(&p, Extent::Whole, ReadOptions { max_line_bytes: 100, ..opts() });
        let texts: Vec<&str> = docs.iter().map(|d| d.1.as_str()).collect();
        assert_eq!(texts, vec!["good one", "good two"]);
        let got: Vec<(Option<u64>, &str)> = rejects.iter().map(|r| (r.line, r.reason.as_str())).collect();
        assert_eq!(got[0], (Some(2), "field \"text\": expected a string, found a number"));
        assert_eq!(got[1], (Some(3), "field \"text\": missing"));
        assert!(got[2].0 == Some(4) && got[2].1.starts_with("not a JSON object"), "{got:?}");
        assert_eq!(got[3], (Some(5), "invalid UTF-8 at byte 11"));
        assert_eq!(got[4], (Some(6), "line longer than max_line_bytes (100 bytes)"));
        assert_eq!(got[5], (Some(7), "field \"id\": expected a string or a number, found an array"));
        assert_eq!(rejects[4].excerpt.len(), 200);

        let mut strict = JsonlReader::open(&input(&p), Extent::Whole, ReadOptions { strict: true, ..opts() }).unwrap();
        let e = strict.next_batch(100).unwrap_err().to_string();
        assert!(e.contains("bad.jsonl:2: field \"text\": expected a string, found a number"), "{e}");
    }

    /// A value nested 100,000 deep: the line is rejected naming the field (no consumer could
    /// parse it back), in bounded stack and memory, and the next line is read. 128 levels pass.
    #[test]
    fn deeply_nested_values_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let deep = format!("{{\"text\": \"x\", \"meta\": {}{}}}\n", "[".repeat(100_000), "]".repeat(100_000));
        let p = write(dir.path(), "deep.jsonl", format!("{deep}{{\"text\": \"after\"}}\n").as_bytes());
        let (docs, rejects) = read_all(&p, Extent::Whole, opts());
        assert_eq!(docs.iter().map(|d| d.1.as_str()).collect::<Vec<_>>(), vec!["after"]);
        assert_eq!(rejects.len(), 1);
        assert_eq!(rejects[0].reason, "field \"meta\": nested deeper than 128 levels");
        assert_eq!(rejects[0].line, Some(1));
        let ok = format!("{{\"text\": \"y\", \"m\": {}\"]\"{}}}\n", "[".repeat(128), "]".repeat(128));
        let p = write(dir.path(), "ok.jsonl", ok.as_bytes());
        let (docs, rejects) = read_all(&p, Extent::Whole, opts());
        assert!(rejects.is_empty(), "{rejects:?}");
        assert_eq!(docs.len(), 1);
    }

    #[test]
    fn truncated_gzip_keeps_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let lines: String = (0..2000).map(|i| format!("{{\"text\": \"document number {i} with some words\"}}\n")).collect();
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(lines.as_bytes()).unwrap();
        let gz = e.finish().unwrap();
        let p = write(dir.path(), "cut.jsonl.gz", &gz[..gz.len() / 2]);
        let (docs, rejects) = read_all(&p, Extent::Whole, opts());
        assert!(docs.len() > 100 && docs.len() < 2000, "{}", docs.len());
        assert_eq!(docs.last().unwrap().1, format!("document number {} with some words", docs.len() - 1));
        assert_eq!(rejects.len(), 1);
        assert!(rejects[0].reason.contains("truncated or corrupt"), "{:?}", rejects[0]);
    }

    #[test]
    fn byte_ranges_cover_every_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let lines: String = (0..500).map(|i| format!("{{\"text\": \"{}\"}}\n", "w ".repeat(i % 17))).collect();
        let p = write(dir.path(), "big.jsonl", lines.as_bytes());
        let size = lines.len() as u64;
        let (whole, _) = read_all(&p, Extent::Whole, opts());
        for pieces in [2u64, 3, 7, 64] {
            let step = size.div_ceil(pieces);
            let mut all = Vec::new();
            for k in 0..pieces {
                let (docs, rejects) = read_all(&p, Extent::Bytes { start: k * step, end: ((k + 1) * step).min(size) }, opts());
                assert!(rejects.is_empty());
                all.extend(docs);
            }
            assert_eq!(all, whole, "{pieces} pieces");
        }
    }

    #[test]
    fn roundtrip_through_writer_all_compressions() {
        let dir = tempfile::tempdir().unwrap();
        let text = "{\"text\":\"a \\\"q\\\" ünï\",\"id\":\"x1\",\"meta\":{\"k\":[1,2]}}\n{\"text\":\"\",\"id\":\"x2\"}\n";
        let p = write(dir.path(), "in.jsonl", text.as_bytes());
        for c in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let mut r = JsonlReader::open(&input(&p), Extent::Whole, opts()).unwrap();
            let batch = r.next_batch(100).unwrap().unwrap();
            let out = dir.path().join(format!("out.jsonl{}", c.suffix()));
            let mut w: Box<dyn OutputWriter> =
                Box::new(JsonlWriter::create(&Loc::Local(out.clone()), c, Default::default(), "text").unwrap());
            w.write_batch(&batch).unwrap();
            assert!(!out.exists(), "final name must not exist before finish");
            let done = w.finish().unwrap();
            assert_eq!(done.documents, 2);
            assert_eq!(done.bytes, std::fs::metadata(&out).unwrap().len());
            let back = String::from_utf8(super::super::read_decoded(&out).unwrap()).unwrap();
            let a: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            let b: Vec<serde_json::Value> = back.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(a, b, "{c:?}");
        }
        let leftovers = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .count();
        assert_eq!(leftovers, 0);
    }

    #[test]
    fn zstd_workers_write_the_same_documents() {
        let dir = tempfile::tempdir().unwrap();
        let lines: String = (0..20_000).map(|i| format!("{{\"text\":\"doc {i} {}\",\"id\":\"d{i}\"}}\n", "w ".repeat(i % 50))).collect();
        let p = write(dir.path(), "in.jsonl", lines.as_bytes());
        let mut outputs = Vec::new();
        for workers in [0, 2] {
            let mut r = JsonlReader::open(&input(&p), Extent::Whole, opts()).unwrap();
            let out = dir.path().join(format!("out-{workers}.jsonl.zst"));
            let w = JsonlWriter::create(&Loc::Local(out.clone()), Compression::Zstd, Default::default(), "text").unwrap();
            let mut w: Box<dyn OutputWriter> = Box::new(w.with_compression_workers(workers).unwrap());
            while let Some(b) = r.next_batch(1000).unwrap() {
                w.write_batch(&b).unwrap();
            }
            assert_eq!(w.finish().unwrap().documents, 20_000);
            outputs.push(String::from_utf8(super::super::read_decoded(&out).unwrap()).unwrap());
        }
        assert_eq!(outputs[0], outputs[1]);
        assert_eq!(outputs[0].lines().count(), 20_000);
    }

    #[test]
    fn dropped_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let w = JsonlWriter::create(&Loc::Local(dir.path().join("o.jsonl")), Compression::None, Default::default(), "text").unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn added_columns_replace_same_named_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "in.jsonl", b"{\"text\":\"a\",\"score\":1,\"k\":2}\n");
        let batch = JsonlReader::open(&input(&p), Extent::Whole, opts()).unwrap().next_batch(10).unwrap().unwrap();
        let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("score", DataType::Float64, false));
        let mut cols = batch.columns().to_vec();
        cols.push(Arc::new(Float64Array::from(vec![0.5])));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
        let out = dir.path().join("o.jsonl");
        let mut w: Box<dyn OutputWriter> =
            Box::new(JsonlWriter::create(&Loc::Local(out.clone()), Compression::None, Default::default(), "text").unwrap());
        w.write_batch(&batch).unwrap();
        w.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"text\":\"a\",\"score\":0.5,\"k\":2}\n");
    }
}
