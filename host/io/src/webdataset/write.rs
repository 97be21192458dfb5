//! Writing WebDataset shards: each kept sample's members as they were read, in their order,
//! the image from the [`IMAGE`] column. The `.json` member is written back byte for byte
//! unless stages added columns: then it is the original object with those columns' values
//! added (replacing fields of the same name), or a new `KEY.json` when the sample had none.
//! Vector columns (embeddings) are not put in the JSON: each is a member of its own,
//! `KEY.<column>.npy` (a NumPy float32 array, which webdataset's decoders read).
//! Documents that did not come from a WebDataset source (a Parquet image column, say) get
//! `KEY.<format>` for the image, `KEY.txt` for a non-empty text and `KEY.json` from `_meta`.

use curator_core::io_spec::Checksum;
use std::io::Write;

use arrow_array::{Array, ArrayRef, BinaryArray, RecordBatch};

use super::{IMAGE, SAMPLE, split_key, unpack};
use crate::records::{cell_json, extra_columns, string_column};
use crate::writer::{Committed, OutputWriter, Spool, SpoolWriter};
use crate::{IoError, Loc, META, TEXT};

pub struct WebdatasetWriter {
    spool: Spool,
    tar: tar::Builder<SpoolWriter>,
    docs: u64,
}

impl WebdatasetWriter {
    pub fn create(target: &Loc, checksum: Checksum) -> Result<WebdatasetWriter, IoError> {
        let (spool, w) = Spool::create(target, checksum)?;
        Ok(WebdatasetWriter { spool, tar: tar::Builder::new(w), docs: 0 })
    }

    fn member(&mut self, path: &str, data: &[u8]) -> Result<(), IoError> {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        self.tar.append_data(&mut header, path, data).map_err(|e| self.spool.werr(e))
    }
}

/// Named columns of a batch.
type Columns<'a> = Vec<(&'a str, &'a ArrayRef)>;

fn binary<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a BinaryArray> {
    batch.column_by_name(name)?.as_any().downcast_ref::<BinaryArray>()
}

/// A NumPy `.npy` file (format 1.0) of one float32 vector.
pub fn npy(values: &[f32]) -> Vec<u8> {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", values.len());
    // Magic (6) + version (2) + length (2) + header, a multiple of 64 with the newline.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    out
}

/// The row's vector in a float32-vector column.
fn vector(array: &ArrayRef, row: usize) -> Option<Vec<f32>> {
    let list = array.as_any().downcast_ref::<arrow_array::FixedSizeListArray>()?;
    let v = list.value(row);
    Some(v.as_any().downcast_ref::<arrow_array::Float32Array>()?.values().to_vec())
}

/// `object` (a JSON object's text) with the row's added columns set.
fn with_columns(object: &[u8], added: &[(&str, &ArrayRef)], row: usize) -> Result<Vec<u8>, String> {
    let mut map: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(object).map_err(|e| e.to_string())?;
    for (name, array) in added {
        map.insert(name.to_string(), cell_json(array, row));
    }
    serde_json::to_vec(&map).map_err(|e| e.to_string())
}

impl OutputWriter for WebdatasetWriter {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let images =
            binary(batch, IMAGE).ok_or_else(|| self.fail(format!("a webdataset sink needs a binary {IMAGE:?} column (the images)")))?;
        let samples = binary(batch, SAMPLE);
        let ids = string_column(batch, crate::ID);
        let texts = string_column(batch, TEXT);
        let metas = string_column(batch, META);
        // Columns stages added, which go into the sample's metadata.
        let (vectors, added): (Columns, Columns) = extra_columns(batch)
            .into_iter()
            .filter(|(n, _)| *n != IMAGE && !n.starts_with('_'))
            .partition(|(_, a)| matches!(a.data_type(), arrow_schema::DataType::FixedSizeList(..)));
        for row in 0..batch.num_rows() {
            if images.is_null(row) {
                continue;
            }
            let image = images.value(row);
            let members = match samples.filter(|s| !s.is_null(row)).map(|s| unpack(s.value(row))) {
                Some(None) => return Err(self.fail(format!("row {row}: the {SAMPLE:?} column is damaged"))),
                Some(Some(m)) => Some(m),
                None => None,
            };
            let key = match &members {
                Some(m) => m.first().and_then(|(p, _)| split_key(p)).map(|(k, _)| k.to_string()).unwrap_or_default(),
                None => ids.map(|c| c.value(row).to_string()).unwrap_or_else(|| format!("{:09}", self.docs)),
            };
            match members {
                Some(members) => {
                    let mut has_json = false;
                    for (path, data) in &members {
                        match data {
                            None => self.member(path, image)?,
                            Some(d) if !added.is_empty() && split_key(path).is_some_and(|(_, e)| e.eq_ignore_ascii_case("json")) => {
                                has_json = true;
                                let json = with_columns(d, &added, row).map_err(|e| self.fail(format!("{path}: {e}")))?;
                                self.member(path, &json)?;
                            }
                            Some(d) => self.member(path, d)?,
                        }
                    }
                    if !added.is_empty() && !has_json {
                        let json = with_columns(b"{}", &added, row).map_err(|e| self.fail(e))?;
                        self.member(&format!("{key}.json"), &json)?;
                    }
                }
                None => {
                    let ext = curator_image::sniff(image).map(|f| if f == "jpeg" { "jpg" } else { f }).unwrap_or("bin");
                    self.member(&format!("{key}.{ext}"), image)?;
                    if let Some(t) = texts.map(|c| c.value(row)).filter(|t| !t.is_empty()) {
                        self.member(&format!("{key}.txt"), t.as_bytes())?;
                    }
                    let meta = metas.map(|m| m.value(row)).unwrap_or("{}");
                    let json = with_columns(meta.as_bytes(), &added, row).map_err(|e| self.fail(format!("_meta: {e}")))?;
                    self.member(&format!("{key}.json"), &json)?;
                }
            }
            for (name, array) in &vectors {
                if let Some(v) = vector(array, row) {
                    self.member(&format!("{key}.{name}.npy"), &npy(&v))?;
                }
            }
            self.docs += 1;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Committed, IoError> {
        let this = *self;
        let mut w = this.tar.into_inner().map_err(|e| this.spool.werr(e))?;
        w.flush().map_err(|e| this.spool.werr(e))?;
        let (bytes, checksum) = this.spool.commit(w)?;
        Ok(Committed { documents: this.docs, bytes, checksum, tokens: None })
    }
}

impl WebdatasetWriter {
    fn fail(&self, message: String) -> IoError {
        self.spool.werr(std::io::Error::other(message))
    }
}
