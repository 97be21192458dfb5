//! A step whose output reads its source again (`DedupSpec::output_rereads_source`): the
//! documents spill holds, for each batch whose source columns no stage in front changed,
//! everything but the text, `_meta` and the MinHash signatures, plus the document's key
//! (exact dedup's hash of the text, or fuzzy dedup's band keys); the output phase reads the
//! source by partition, takes the rows the spill kept (by `_row`) and adds the columns the
//! stages in front added. The text is read twice and written once, never spilled.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeBinaryArray, Int64Array, RecordBatch, UInt32Array};
use arrow_buffer::Buffer;
use arrow_schema::{ArrowError, Field, Schema};
use curator_core::dedup::{ExactHash, FuzzyParams};

use super::DedupError;

/// The column of a lean batch that holds each document's key.
pub const KEY: &str = "_dedup_key";

/// What a lean batch keeps of each document in place of its text.
#[derive(Debug, Clone, Copy)]
pub enum DocKey {
    /// Exact dedup: the text's 16-byte hash (`exact::key`).
    Exact(ExactHash),
    /// Fuzzy dedup without the pair check: the band keys of the document's MinHash
    /// signature, 8 bytes a band (`fuzzy::band_keys`).
    Bands(FuzzyParams),
}

impl DocKey {
    /// Bytes per document.
    pub fn width(&self) -> usize {
        match self {
            DocKey::Exact(_) => 16,
            DocKey::Bands(p) => super::keys::Records::BandKeys.width(p),
        }
    }
}

/// `batch` as the lean documents spill keeps it: each document's key added; the text,
/// `_meta` and the signatures left out.
pub fn lean_batch(batch: &RecordBatch, key: &DocKey) -> Result<RecordBatch, ArrowError> {
    let mut values = Vec::with_capacity(batch.num_rows() * key.width());
    match key {
        DocKey::Exact(h) => exact_keys(batch, *h, &mut values)?,
        DocKey::Bands(p) => {
            let sigs = super::keys::signatures(batch, p.num_hashes(), "").map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
            super::keys::band_keys(&sigs, p, &mut values);
        }
    }
    let keys = FixedSizeBinaryArray::try_new(key.width() as i32, Buffer::from_vec(values), None)?;
    let schema = batch.schema();
    let (mut fields, mut cols): (Vec<Field>, Vec<ArrayRef>) = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(f, _)| ![crate::io::TEXT, crate::io::META, super::SIGNATURE].contains(&f.name().as_str()))
        .map(|(f, c)| (f.as_ref().clone(), c.clone()))
        .unzip();
    fields.push(Field::new(KEY, arrow_schema::DataType::FixedSizeBinary(key.width() as i32), false));
    cols.push(Arc::new(keys));
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())), cols)
}

/// Exact dedup's key of each document of `batch` (the 16-byte hash of its text), appended to
/// `out` back to back: what the lean spill keeps, and what the streamed output decides by.
pub fn exact_keys(batch: &RecordBatch, h: ExactHash, out: &mut Vec<u8>) -> Result<(), ArrowError> {
    let text = batch
        .column_by_name(crate::io::TEXT)
        .and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>())
        .ok_or_else(|| ArrowError::SchemaError("no utf8 \"text\" column".into()))?;
    out.reserve(text.len() * 16);
    for r in 0..text.len() {
        out.extend_from_slice(&super::keys::key(text.value(r), h));
    }
    Ok(())
}

/// The keys of a lean batch, back to back (`DocKey::width` bytes a document), or `None` for
/// a batch spilled whole.
pub fn key_bytes(batch: &RecordBatch) -> Option<&[u8]> {
    let col = batch.column_by_name(KEY)?.as_any().downcast_ref::<FixedSizeBinaryArray>()?;
    let w = col.value_length() as usize;
    Some(&col.value_data()[..col.len() * w])
}

/// The 16-byte keys of an exact step's lean batch (`exact::key`'s layout), or `None` for a
/// batch spilled whole.
pub fn keys(batch: &RecordBatch) -> Option<impl Iterator<Item = [u8; 16]> + '_> {
    let bytes = key_bytes(batch)?;
    Some(bytes.chunks_exact(16).map(|c| {
        let mut k = [0u8; 16];
        k.copy_from_slice(c);
        k
    }))
}

/// Whether a spilled batch is lean (its text is in the source, not in the spill): it has
/// the key column.
pub fn is_lean(batch: &RecordBatch) -> bool {
    batch.column_by_name(KEY).is_some()
}

/// The rows of `read` (a batch the source gave again) that the lean `spilled` batch kept,
/// matched by `_row`, with the columns the stages in front added: `read`'s columns, then
/// the spilled ones it lacks (the key left out).
pub fn join(read: &RecordBatch, spilled: &RecordBatch, first_row: u64, at: &str) -> Result<RecordBatch, DedupError> {
    let data = |message: String| DedupError::Data { path: at.to_string(), message };
    let rows = |b: &RecordBatch| b.column_by_name(crate::io::ROW).and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned());
    // A batch of no rows (every line of it rejected) may lack the columns of one with rows.
    let kept = match rows(spilled) {
        Some(kept) => kept,
        None if spilled.num_rows() == 0 => Int64Array::from(Vec::<i64>::new()),
        None => return Err(data("the spilled batch has no _row column".into())),
    };
    let mut take = Vec::with_capacity(kept.len());
    for &r in kept.values().iter() {
        let i = r.checked_sub(first_row as i64).filter(|&i| i >= 0 && (i as usize) < read.num_rows());
        let Some(i) = i.filter(|&i| take.last().is_none_or(|&p: &u32| (i as u32) > p)) else {
            return Err(data(format!("spilled row {r} is not a row of the batch read again (did the source change?)")));
        };
        take.push(i as u32);
    }
    let taken = arrow_select::take::take_record_batch(read, &UInt32Array::from(take)).map_err(|e| data(e.to_string()))?;
    let schema = taken.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut cols = taken.columns().to_vec();
    let sp = spilled.schema();
    for (f, c) in sp.fields().iter().zip(spilled.columns()) {
        if f.name() != KEY && schema.field_with_name(f.name()).is_err() {
            fields.push(f.as_ref().clone());
            cols.push(c.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())), cols).map_err(|e| data(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, StringArray};

    fn read_batch() -> RecordBatch {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["a", "b", "c", "d"])),
            Arc::new(StringArray::from(vec!["one", "two", "one", "four"])),
            Arc::new(StringArray::from(vec!["{}", "{\"x\":1}", "{}", "{}"])),
            Arc::new(Int64Array::from(vec![10, 11, 12, 13])),
        ];
        let schema = Schema::new(vec![
            Field::new(crate::io::ID, arrow_schema::DataType::Utf8, false),
            Field::new(crate::io::TEXT, arrow_schema::DataType::Utf8, false),
            Field::new(crate::io::META, arrow_schema::DataType::Utf8, false),
            Field::new(crate::io::ROW, arrow_schema::DataType::Int64, false),
        ]);
        RecordBatch::try_new(Arc::new(schema), cols).unwrap()
    }

    #[test]
    fn a_lean_batch_keeps_the_key_and_not_the_text_and_joins_back() {
        let read = read_batch();
        // A filter in front kept rows 11 and 13 and a score stage added a column.
        let kept = arrow_select::take::take_record_batch(&read, &UInt32Array::from(vec![1, 3])).unwrap();
        let mut fields: Vec<Field> = kept.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("score", arrow_schema::DataType::Float64, false));
        let mut cols = kept.columns().to_vec();
        cols.push(Arc::new(Float64Array::from(vec![0.5, 0.25])));
        let scored = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
        let lean = lean_batch(&scored, &DocKey::Exact(ExactHash::Xxh3)).unwrap();
        assert!(is_lean(&lean));
        assert!(lean.column_by_name(crate::io::META).is_none());
        let k: Vec<[u8; 16]> = keys(&lean).unwrap().collect();
        assert_eq!(k[0], super::super::keys::key("two", ExactHash::Xxh3));
        assert_eq!(k[1], super::super::keys::key("four", ExactHash::Xxh3));
        let back = join(&read, &lean, 10, "t").unwrap();
        let names: Vec<String> = back.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["id", "text", "_meta", "_row", "score"]);
        assert_eq!(back, scored);
    }

    #[test]
    fn a_row_the_source_no_longer_has_is_an_error() {
        let read = read_batch();
        let lean = lean_batch(&read, &DocKey::Exact(ExactHash::Md5)).unwrap();
        let e = join(&read.slice(0, 2), &lean, 10, "docs/00000000-0000000000.arrow").unwrap_err().to_string();
        assert!(e.contains("spilled row 12") && e.contains("did the source change"), "{e}");
        let e = join(&read, &lean, 11, "x").unwrap_err().to_string();
        assert!(e.contains("spilled row 10"), "{e}");
    }
}
