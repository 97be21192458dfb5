//! Reading WebDataset shards: a thread walks the tar (the `tar` crate over the shard's stream,
//! local or object store) and hands whole samples over a bounded channel; the reader turns
//! them into documents and batches.

use std::io::Read;
use std::sync::Arc;

use arrow_array::builder::BinaryBuilder;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use crossbeam_channel::{Receiver, Sender, bounded};

use super::{IMAGE, SAMPLE, pack, split_key};
use crate::records::{ReadOptions, reader_schema};
use crate::{InputFile, IoError, Reject, Rejects};

/// Samples the tar thread may run ahead.
const AHEAD: usize = 64;

/// A sample being gathered: its key, its first header's offset, its members.
type Gathering = Option<(String, u64, Vec<(String, Vec<u8>)>)>;

enum Item {
    Sample { offset: u64, members: Vec<(String, Vec<u8>)> },
    Defect { offset: u64, reason: String },
}

/// One document: id, text, `_meta`, image, packed members.
pub(crate) struct Doc {
    id: String,
    text: String,
    meta: String,
    image: Vec<u8>,
    sample: Vec<u8>,
}

pub struct WebdatasetReader {
    input: InputFile,
    items: Option<Receiver<Item>>,
    rejects: Rejects,
    /// A batch is cut when its images reach this many bytes.
    batch_bytes: usize,
}

impl WebdatasetReader {
    pub fn open(input: &InputFile, opts: &ReadOptions) -> Result<WebdatasetReader, IoError> {
        let stream = input.loc.open_from(0)?;
        let (tx, rx) = bounded(AHEAD);
        let max = opts.max_line_bytes;
        std::thread::Builder::new().name("webdataset".into()).spawn(move || walk(stream, &tx, max)).map_err(|e| IoError::Read {
            file: input.display(),
            line: 0,
            source: e,
        })?;
        Ok(WebdatasetReader {
            input: input.clone(),
            items: Some(rx),
            rejects: Rejects::new(opts.strict),
            batch_bytes: opts.image_batch_bytes,
        })
    }

    fn reject(&mut self, offset: u64, reason: String, excerpt: String) -> Result<(), IoError> {
        self.rejects.add(Reject { source: self.input.display(), line: None, byte_offset: offset, reason, excerpt })
    }

    fn document(&self, members: Vec<(String, Vec<u8>)>) -> Result<Doc, (String, String)> {
        document(members, &self.input.display())
    }
}

impl crate::format::PartReader for WebdatasetReader {
    /// The next batch of at most `n` samples (fewer when their images reach `image_batch_bytes`).
    fn next_batch(&mut self, n: usize) -> Result<Option<RecordBatch>, IoError> {
        let mut docs = Vec::new();
        let mut bytes = 0usize;
        while docs.len() < n.max(1) && bytes < self.batch_bytes {
            let Some(item) = self.items.as_ref().and_then(|rx| rx.recv().ok()) else {
                self.items = None;
                break;
            };
            match item {
                Item::Sample { offset, members } => match self.document(members) {
                    Ok(doc) => {
                        bytes += doc.image.len();
                        docs.push(doc);
                    }
                    Err((key, reason)) => self.reject(offset, reason, key)?,
                },
                Item::Defect { offset, reason } => self.reject(offset, reason, String::new())?,
            }
        }
        if docs.is_empty() {
            return Ok(None);
        }
        batch(&docs).map(Some).map_err(|e| IoError::Line { at: self.input.display(), message: format!("cannot build the batch: {e}") })
    }

    fn take_rejects(&mut self) -> Vec<Reject> {
        self.rejects.take()
    }
}

/// Documents as the reader's batch: id, text, `_meta`, image, packed members.
pub(crate) fn batch(docs: &[Doc]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let strings = |f: fn(&Doc) -> &str| Arc::new(docs.iter().map(f).map(Some).collect::<StringArray>()) as ArrayRef;
    // Sized to the bytes once: a batch carries ~32 MiB of images, which a growing builder
    // would copy again at every doubling (and fault in the pages each time).
    let binary = |f: fn(&Doc) -> &[u8]| {
        let mut b = BinaryBuilder::with_capacity(docs.len(), docs.iter().map(|d| f(d).len()).sum());
        docs.iter().for_each(|d| b.append_value(f(d)));
        Arc::new(b.finish()) as ArrayRef
    };
    let columns = vec![strings(|d| &d.id), strings(|d| &d.text), strings(|d| &d.meta), binary(|d| &d.image), binary(|d| &d.sample)];
    RecordBatch::try_new(schema(), columns)
}

impl Doc {
    /// The bytes of its image.
    pub(crate) fn image_bytes(&self) -> usize {
        self.image.len()
    }
}

/// A sample (members with one key, in order) as a document, or its key and why not; `url`:
/// where it was read (`__url__`: the shard, or the image file of a folder).
pub(crate) fn document(mut members: Vec<(String, Vec<u8>)>, url: &str) -> Result<Doc, (String, String)> {
    let key = members.first().and_then(|(p, _)| split_key(p)).map(|(k, _)| k.to_string()).unwrap_or_default();
    let fail = |reason: String| (key.clone(), reason);
    let ext = |p: &str| split_key(p).map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    let Some(img) = members.iter().position(|(p, _)| curator_image::EXTENSIONS.contains(&ext(p).as_str())) else {
        let exts: Vec<String> = members.iter().map(|(p, _)| ext(p)).collect();
        return Err(fail(format!("sample {key} has no image member (its members: {})", exts.join(", "))));
    };
    let (name, data) = &members[img];
    if let Err(why) = curator_image::check(data) {
        return Err(fail(format!("member {name}: {why}")));
    }
    let mut meta = serde_json::Map::new();
    meta.insert("id".into(), key.clone().into());
    meta.insert("__url__".into(), url.into());
    let mut text = None;
    for (path, data) in &members {
        match ext(path).as_str() {
            "json" => match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(data) {
                Ok(fields) => meta.extend(fields.into_iter().filter(|(k, _)| k != "id" && k != "__url__")),
                Err(e) => return Err(fail(format!("member {path} is not a JSON object: {e}"))),
            },
            "cls" => {
                let s = String::from_utf8_lossy(data).trim().to_string();
                meta.insert("cls".into(), s.parse::<i64>().map(Into::into).unwrap_or_else(|_| s.into()));
            }
            "txt" | "caption" | "text" if text.is_none() => text = Some(String::from_utf8_lossy(data).into_owned()),
            _ => {}
        }
    }
    let packed: Vec<(&str, Option<&[u8]>)> =
        members.iter().enumerate().map(|(i, (p, d))| (p.as_str(), (i != img).then_some(d.as_slice()))).collect();
    let sample = pack(&packed);
    // The image moves into the document (the packed members hold a placeholder for it).
    let image = std::mem::take(&mut members[img].1);
    Ok(Doc { id: key, text: text.unwrap_or_default(), meta: serde_json::Value::Object(meta).to_string(), sample, image })
}

/// The reader's columns: id, text, `_meta`, then the image and the packed members.
fn schema() -> Arc<Schema> {
    let mut fields: Vec<Field> = reader_schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(IMAGE, DataType::Binary, false));
    fields.push(Field::new(SAMPLE, DataType::Binary, false));
    Arc::new(Schema::new(fields))
}

/// Walk the tar in `stream`, sending each run of members with one key as a sample and what
/// cannot be read as a defect (after which the shard ends); stops when the reader is gone.
fn walk(stream: Box<dyn Read + Send>, tx: &Sender<Item>, max_member: u64) {
    let mut archive = tar::Archive::new(stream);
    let mut current: Gathering = None;
    let flush = |current: &mut Gathering| match current.take() {
        Some((_, offset, members)) => tx.send(Item::Sample { offset, members }).is_ok(),
        None => true,
    };
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => {
            let _ = tx.send(Item::Defect { offset: 0, reason: format!("not a tar file: {e}") });
            return;
        }
    };
    let mut end = 0u64;
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                if flush(&mut current) {
                    let _ = tx.send(Item::Defect { offset: end, reason: format!("the shard cannot be read past byte {end}: {e}") });
                }
                return;
            }
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let (offset, at, size) = (entry.raw_header_position(), entry.raw_file_position(), entry.size());
        end = at + size;
        if size > max_member {
            if !flush(&mut current) {
                return;
            }
            let reason = format!("member {path} is {size} bytes, over max_line_bytes ({max_member}); its sample is skipped");
            if tx.send(Item::Defect { offset, reason }).is_err() {
                return;
            }
            continue;
        }
        let mut data = Vec::with_capacity(size as usize);
        let read = entry.read_to_end(&mut data);
        if read.is_err() || (data.len() as u64) < size {
            if flush(&mut current) {
                let why = read.err().map(|e| format!(": {e}")).unwrap_or_default();
                let reason = format!(
                    "the shard is cut short: member {path} (header at byte {offset}) needs {size} bytes from byte {at}, {} are there{why}",
                    data.len()
                );
                let _ = tx.send(Item::Defect { offset, reason });
            }
            return;
        }
        let Some((key, _)) = split_key(&path) else { continue };
        if current.as_ref().is_some_and(|(k, _, _)| k != key) && !flush(&mut current) {
            return;
        }
        current.get_or_insert_with(|| (key.to_string(), offset, Vec::new())).2.push((path, data));
    }
    flush(&mut current);
}
