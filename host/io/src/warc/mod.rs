//! The `warc` source: WARC and WET files (Common Crawl's layout: one gzip member per record;
//! plain files and files compressed whole are read too), one document per HTML `response`
//! record with HTTP status 200 and per WET `conversion` record (extracted text). `id` is the
//! record's UUID, `text` the page decoded to UTF-8 ([`charset`]; for WET, its text) and
//! `_meta` holds `url`, `warc_date`, `warc_record_id`, `warc_id` (the UUID, as NeMo Curator
//! names it), `source_id` (the file's name), `content_type`, `charset`, `http_status` (responses)
//! and `language` (WET's identified languages). Other records (request, metadata, warcinfo,
//! revisit, non-HTML or non-200 responses) are skipped and counted; a record that cannot be
//! read is a [`Reject`] at its offset (its gzip member's compressed offset), and the file goes
//! on where the framing allows it.

pub mod charset;
pub mod record;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};

use super::records::{ReadOptions, reader_schema};
use super::{InputFile, IoError, Reject, Rejects};
use record::{Item, Record, Records};

/// WARC and WET files as a source format (`format: warc`).
pub struct Warc;
pub static WARC: Warc = Warc;

/// File name endings of WARC and WET files (a directory source with `format: warc` reads these).
pub const EXTENSIONS: &[&str] = &[".warc", ".warc.gz", ".wet", ".wet.gz", ".warc.zst", ".warc.bz2", ".warc.xz"];

static FILE_NAMES: super::format::FileNames = super::format::FileNames {
    format: "warc",
    extensions: EXTENSIONS,
    unnamed: &[".warc", ".warc.gz", ".wet", ".wet.gz"],
    outputs_drop_extension: false,
};

impl super::format::SourceFormat for Warc {
    fn names(&self) -> &super::format::FileNames {
        &FILE_NAMES
    }
    fn open(&self, part: &super::format::ReadPart<'_>) -> Result<Box<dyn super::format::PartReader>, IoError> {
        Ok(Box::new(WarcReader::open(part.file(), part.opts)?))
    }
    fn not_a_sink(&self) -> String {
        "warc is a source format; write the documents as jsonl or parquet".into()
    }
}

/// A batch is cut when its text reaches this many bytes (pages are large: a batch of a
/// thousand would hold a hundred megabytes). The run's bounded queues hold a few batches per
/// core, so this bounds the host's memory: at 2 MiB, 64 files peak at 73–75 MB on one core
/// (8 MiB: 180 MB, most of it glibc's heap fragmented by batch-sized blocks), and the run is
/// no slower (about a hundred pages a batch: the per-batch costs stay small).
const BATCH_TEXT_BYTES: usize = 2 << 20;

/// Why records were not made into documents, counted per file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Skipped {
    /// By WARC-Type (request, metadata, warcinfo, revisit, …).
    pub by_type: BTreeMap<String, u64>,
    pub not_html: u64,
    pub not_200: u64,
}

impl Skipped {
    fn total(&self) -> u64 {
        self.by_type.values().sum::<u64>() + self.not_html + self.not_200
    }
}

pub struct WarcReader {
    input: InputFile,
    records: Option<Records>,
    rejects: Rejects,
    skipped: Skipped,
    documents: u64,
    file_name: String,
}

/// One document, its text borrowed from its record where the page was UTF-8.
struct Doc<'r> {
    id: &'r str,
    text: Cow<'r, str>,
    /// `_meta`, as JSON.
    meta: String,
}

impl WarcReader {
    pub fn open(input: &InputFile, opts: &ReadOptions) -> Result<WarcReader, IoError> {
        let records = Records::open(input.loc.open_from(0)?, &input.display(), opts.max_line_bytes)?;
        let file_name = input.rel.rsplit('/').next().unwrap_or(&input.rel).to_string();
        Ok(WarcReader {
            input: input.clone(),
            records: Some(records),
            rejects: Rejects::new(opts.strict),
            skipped: Skipped::default(),
            documents: 0,
            file_name,
        })
    }

    /// What this file's records that were not documents were, so far.
    pub fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    fn reject(&mut self, offset: u64, reason: String, excerpt: String) -> Result<(), IoError> {
        self.rejects.add(Reject { source: self.input.display(), line: None, byte_offset: offset, reason, excerpt })
    }

    fn log_skipped(&self) {
        let s = &self.skipped;
        if s.total() > 0 {
            let types: Vec<String> = s.by_type.iter().map(|(t, n)| format!("{n} {t}")).collect();
            tracing::info!(
                "{}: {} documents; skipped {} records ({}; {} responses not HTML, {} not status 200)",
                self.input.display(),
                self.documents,
                s.total(),
                if types.is_empty() { "no other types".to_string() } else { types.join(", ") },
                s.not_html,
                s.not_200,
            );
        }
    }

    /// The document a record makes, `None` for a record that is skipped, or why it is bad.
    fn document<'r>(&mut self, r: &'r Record) -> Result<Option<Doc<'r>>, String> {
        let kind = r.header("WARC-Type").unwrap_or("").to_ascii_lowercase();
        let url = r.header("WARC-Target-URI").unwrap_or("");
        let record_id = r.header("WARC-Record-ID").unwrap_or("");
        let uuid = record_id.trim_start_matches('<').trim_end_matches('>');
        let uuid = uuid.strip_prefix("urn:uuid:").unwrap_or(uuid);
        let mut meta = serde_json::Map::new();
        let (text, content_type, charset) = match kind.as_str() {
            "response" => {
                let http = match http_response(&r.block)? {
                    Some(h) => h,
                    // Responses of other protocols (dns:, ftp:) are not web pages.
                    None => return Ok(self.skip("response (not HTTP)")),
                };
                if http.status != 200 {
                    self.skipped.not_200 += 1;
                    return Ok(None);
                }
                let body = &r.block[http.body..];
                if !is_html(http.content_type.as_deref(), body) {
                    self.skipped.not_html += 1;
                    return Ok(None);
                }
                meta.insert("http_status".into(), http.status.into());
                let (text, enc, _) = charset::decode(body, http.content_type.as_deref(), url);
                (text, http.content_type.unwrap_or_default(), enc.name())
            }
            "conversion" => {
                if let Some(lang) = r.header("WARC-Identified-Content-Language") {
                    meta.insert("language".into(), lang.into());
                }
                let text = String::from_utf8_lossy(&r.block);
                (text, r.header("Content-Type").unwrap_or("text/plain").to_string(), "UTF-8")
            }
            "" => return Err("the record has no WARC-Type".into()),
            other => return Ok(self.skip(other)),
        };
        if record_id.is_empty() {
            return Err("the record has no WARC-Record-ID".into());
        }
        let mut all = serde_json::Map::new();
        all.insert("id".into(), uuid.into());
        all.insert("url".into(), url.into());
        all.insert("warc_date".into(), r.header("WARC-Date").unwrap_or("").into());
        all.insert("warc_record_id".into(), record_id.into());
        all.insert("warc_id".into(), uuid.into());
        all.insert("source_id".into(), self.file_name.clone().into());
        all.insert("content_type".into(), content_type.into());
        all.insert("charset".into(), charset.into());
        all.extend(meta);
        Ok(Some(Doc { id: uuid, text, meta: serde_json::Value::Object(all).to_string() }))
    }

    fn skip(&mut self, kind: &str) -> Option<Doc<'static>> {
        *self.skipped.by_type.entry(kind.to_string()).or_default() += 1;
        None
    }
}

impl crate::format::PartReader for WarcReader {
    /// The next batch of at most `n` documents (fewer when their text reaches [`BATCH_TEXT_BYTES`]).
    fn next_batch(&mut self, n: usize) -> Result<Option<RecordBatch>, IoError> {
        // A page's text is copied once, from its record's block into the batch's column.
        let mut ids = StringBuilder::new();
        let mut texts = StringBuilder::with_capacity(0, 0);
        let mut metas = StringBuilder::new();
        let mut rows = 0usize;
        while rows < n.max(1) && texts.values_slice().len() < BATCH_TEXT_BYTES {
            let Some(records) = self.records.as_mut() else { break };
            let Some(item) = records.next_item() else {
                self.records = None;
                self.log_skipped();
                break;
            };
            match item {
                Item::Record(r) => match self.document(&r) {
                    Ok(Some(doc)) => {
                        if rows == 0 {
                            texts = StringBuilder::with_capacity(n.clamp(1, 1 << 16), BATCH_TEXT_BYTES + doc.text.len());
                        }
                        ids.append_value(doc.id);
                        texts.append_value(&doc.text);
                        metas.append_value(doc.meta);
                        rows += 1;
                    }
                    Ok(None) => {}
                    Err(reason) => self.reject(r.offset, reason, r.header("WARC-Target-URI").unwrap_or_default().to_string())?,
                },
                Item::Defect(d) => self.reject(d.offset, d.reason, String::new())?,
            }
        }
        if rows == 0 {
            return Ok(None);
        }
        self.documents += rows as u64;
        let cols = [ids, texts, metas].map(|mut c| Arc::new(c.finish()) as ArrayRef);
        let batch = RecordBatch::try_new(reader_schema(), cols.to_vec())
            .map_err(|e| IoError::Line { at: self.input.display(), message: format!("cannot build the batch: {e}") })?;
        Ok(Some(batch))
    }

    fn take_rejects(&mut self) -> Vec<Reject> {
        self.rejects.take()
    }
}

/// The parts of an HTTP response a document needs.
struct Http {
    status: u16,
    content_type: Option<String>,
    /// Where the body starts in the block.
    body: usize,
}

/// The HTTP response at the start of a `response` block, `None` when it is not HTTP (dns:
/// records), or why it cannot be read. Lenient as crawlers must be: spaces after header
/// names, folded headers and invalid header lines are accepted (invalid lines ignored).
fn http_response(block: &[u8]) -> Result<Option<Http>, String> {
    if !block.starts_with(b"HTTP/") {
        return Ok(None);
    }
    let mut config = httparse::ParserConfig::default();
    config
        .allow_spaces_after_header_name_in_responses(true)
        .allow_obsolete_multiline_headers_in_responses(true)
        .allow_multiple_spaces_in_response_status_delimiters(true)
        .ignore_invalid_headers_in_responses(true);
    let mut capacity = 64;
    loop {
        let mut headers = vec![httparse::EMPTY_HEADER; capacity];
        let mut resp = httparse::Response::new(&mut headers);
        match config.parse_response(&mut resp, block) {
            Ok(httparse::Status::Complete(body)) => {
                let content_type = resp
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("Content-Type"))
                    .map(|h| String::from_utf8_lossy(h.value).trim().to_string());
                return Ok(Some(Http { status: resp.code.unwrap_or(0), content_type, body }));
            }
            Ok(httparse::Status::Partial) => return Err("the HTTP headers are cut short".into()),
            Err(httparse::Error::TooManyHeaders) if capacity < 4096 => capacity *= 4,
            Err(e) => return Err(format!("cannot read the HTTP response: {e}")),
        }
    }
}

/// HTML by its Content-Type, or (when it has none) by how the body starts.
fn is_html(content_type: Option<&str>, body: &[u8]) -> bool {
    match content_type.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase()) {
        Some(mime) if !mime.is_empty() => mime == "text/html" || mime == "application/xhtml+xml",
        _ => {
            let start = body.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(body.len());
            let head = &body[start..body.len().min(start + 16)];
            let lower = head.to_ascii_lowercase();
            lower.starts_with(b"<!doctype html") || lower.starts_with(b"<html")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::record::tests::{gzip, record};
    use super::*;
    use crate::Loc;
    use crate::format::PartReader;
    use arrow_array::StringArray;

    type Read = (Vec<(String, String, serde_json::Value)>, Vec<Reject>, Skipped);

    /// A reader of `bytes` as a WARC file (kept in `dir`).
    fn open(dir: &tempfile::TempDir, bytes: &[u8], strict: bool) -> Result<WarcReader, IoError> {
        let f = dir.path().join("CC-MAIN-x.warc.gz");
        std::fs::write(&f, bytes).unwrap();
        let input = InputFile {
            loc: Loc::Local(f),
            rel: "crawl/CC-MAIN-x.warc.gz".into(),
            size: bytes.len() as u64,
            format: crate::Source(&WARC),
            compressed: false,
        };
        WarcReader::open(&input, &ReadOptions { strict, ..ReadOptions::default() })
    }

    fn read(bytes: &[u8], strict: bool) -> Result<Read, IoError> {
        let dir = tempfile::tempdir().unwrap();
        let mut r = open(&dir, bytes, strict)?;
        let mut docs = Vec::new();
        while let Some(b) = r.next_batch(2)? {
            let col = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>().unwrap().clone();
            let (ids, texts, metas) = (col(0), col(1), col(2));
            for i in 0..b.num_rows() {
                docs.push((ids.value(i).to_string(), texts.value(i).to_string(), serde_json::from_str(metas.value(i)).unwrap()));
            }
        }
        Ok((docs, r.take_rejects(), r.skipped().clone()))
    }

    fn response(id: &str, url: &str, http: &str) -> Vec<u8> {
        let headers = [("WARC-Target-URI", url), ("WARC-Date", "2024-01-02T03:04:05Z"), ("WARC-Record-ID", id)];
        gzip(&record("response", &headers, http.as_bytes()))
    }

    #[test]
    fn html_responses_become_documents_and_the_rest_is_counted_or_rejected() {
        let page = "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=UTF-8\r\nServer : odd\r\n\r\n<html><p>hello</p></html>";
        let members = [
            gzip(&record("warcinfo", &[("WARC-Record-ID", "<urn:uuid:0>")], b"software: x")),
            gzip(&record("request", &[("WARC-Record-ID", "<urn:uuid:1>")], b"GET / HTTP/1.1\r\n\r\n")),
            response("<urn:uuid:2>", "http://a.example/", page),
            response("<urn:uuid:3>", "http://a.example/404", "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n\r\nno"),
            response("<urn:uuid:4>", "http://a.example/x.pdf", "HTTP/1.1 200 OK\r\nContent-Type: application/pdf\r\n\r\n%PDF"),
            response("<urn:uuid:5>", "http://a.example/bad", "HTTP/1.1 2x0 OK\r\n\r\n"),
            response("<urn:uuid:6>", "http://b.example/", "HTTP/1.0 200 OK\r\n\r\n  <!DOCTYPE html><p>no type</p>"),
            gzip(&record("metadata", &[("WARC-Record-ID", "<urn:uuid:7>")], b"fetchTimeMs: 1")),
            gzip(&record(
                "conversion",
                &[
                    ("WARC-Record-ID", "<urn:uuid:8>"),
                    ("WARC-Target-URI", "http://c.example/"),
                    ("WARC-Identified-Content-Language", "eng"),
                    ("Content-Type", "text/plain"),
                ],
                "plain text ü".as_bytes(),
            )),
        ];
        let file = members.concat();
        let (docs, rejects, skipped) = read(&file, false).unwrap();
        let ids: Vec<&str> = docs.iter().map(|d| d.0.as_str()).collect();
        assert_eq!(ids, ["2", "6", "8"]);
        assert_eq!(docs[0].1, "<html><p>hello</p></html>");
        assert_eq!(
            docs[0].2,
            serde_json::json!({"id": "2", "url": "http://a.example/", "warc_date": "2024-01-02T03:04:05Z", "warc_record_id": "<urn:uuid:2>",
                "warc_id": "2", "source_id": "CC-MAIN-x.warc.gz", "content_type": "text/html; charset=UTF-8", "charset": "UTF-8", "http_status": 200})
        );
        assert_eq!(docs[2].1, "plain text ü");
        assert_eq!(docs[2].2["language"], "eng");
        assert_eq!(rejects.len(), 1);
        assert!(rejects[0].reason.starts_with("cannot read the HTTP response"), "{rejects:?}");
        assert_eq!(rejects[0].excerpt, "http://a.example/bad");
        // Its offset is its gzip member's.
        assert_eq!(rejects[0].byte_offset, members[..5].iter().map(Vec::len).sum::<usize>() as u64);
        let types: Vec<(&str, u64)> = skipped.by_type.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(types, [("metadata", 1), ("request", 1), ("warcinfo", 1)]);
        assert_eq!((skipped.not_html, skipped.not_200), (1, 1));
        // --strict: the bad record fails the read, naming the file and offset.
        let e = read(&file, true).unwrap_err().to_string();
        assert!(e.contains("CC-MAIN-x.warc.gz@") && e.contains("cannot read the HTTP response"), "{e}");
    }

    #[test]
    fn a_batch_is_cut_once_its_text_reaches_the_byte_budget() {
        // Pages of 40 % of the budget: a batch takes pages while its text is under the budget,
        // so three each (the third crosses it), whatever the row count asked for.
        let body = format!("<p>{}</p>", "x".repeat(BATCH_TEXT_BYTES * 2 / 5));
        let http = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n{body}");
        let pages = |n: usize| -> Vec<u8> { (0..n).flat_map(|i| response(&format!("<urn:uuid:{i}>"), "http://a/", &http)).collect() };
        let file = pages(7);
        let dir = tempfile::tempdir().unwrap();
        let mut r = open(&dir, &file, false).unwrap();
        let mut rows = Vec::new();
        while let Some(b) = r.next_batch(1000).unwrap() {
            rows.push(b.num_rows());
        }
        assert_eq!(rows, [3, 3, 1]);
        // The row count still caps a batch of small pages.
        let mut r = open(&dir, &pages(2), false).unwrap();
        assert_eq!(r.next_batch(1).unwrap().map(|b| b.num_rows()), Some(1));
    }

    #[test]
    fn a_truncated_last_member_keeps_the_documents_before_it() {
        let a = response("<urn:uuid:a>", "http://a/", "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>a</p>");
        let b = response("<urn:uuid:b>", "http://b/", "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>b</p>");
        let file = [a.clone(), b[..b.len() - 10].to_vec()].concat();
        let (docs, rejects, _) = read(&file, false).unwrap();
        assert_eq!(docs.len(), 1);
        assert_eq!(rejects[0].byte_offset, a.len() as u64);
        assert_eq!(rejects[0].at(), format!("{}@{}", rejects[0].source, a.len()));
        assert!(rejects[0].reason.starts_with("truncated gzip member"), "{rejects:?}");
    }

    #[test]
    fn the_page_is_decoded_from_its_declared_charset() {
        let mut http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=windows-1251\r\n\r\n<p>".to_vec();
        http.extend_from_slice(b"\xcf\xf0\xe8\xe2\xe5\xf2</p>");
        let file = gzip(&record("response", &[("WARC-Record-ID", "<urn:uuid:r>"), ("WARC-Target-URI", "http://x.ru/")], &http));
        let (docs, _, _) = read(&file, false).unwrap();
        assert_eq!(docs[0].1, "<p>Привет</p>");
        assert_eq!(docs[0].2["charset"], "windows-1251");
    }
}
