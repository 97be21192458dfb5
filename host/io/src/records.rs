//! The batch every source reader produces and every sink consumes: its schema (`id`, `text`,
//! `_meta`, then vector columns), what the readers are asked for ([`ReadOptions`]), and the
//! cell helpers sinks share. Every format's folder builds on this module; it names none of them.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::{ID, META, ROW, SAMPLE, TEXT};

/// Schema of the batches the readers produce (followed by a float32-vector column per
/// [`ReadOptions::vectors`] field that the batch's rows hold).
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
    /// An image source's batch is cut when its images reach this many bytes.
    pub image_batch_bytes: usize,
    /// Turn the first rejected line into an error.
    pub strict: bool,
    /// Fields read as float32 vectors (stored embeddings a step reads): lifted out of
    /// `_meta` into their own columns ([`crate::vectors`]).
    pub vectors: Vec<String>,
    /// Fields the stages read: where the format has types (Parquet), such a column of
    /// numbers in lists (an embedding) or of bytes (an image) stays a column of its own,
    /// as a float32 vector or binary column, instead of JSON text in `_meta`.
    pub typed: Vec<String>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            text_field: TEXT.into(),
            id_field: ID.into(),
            fields: None,
            max_line_bytes: curator_core::pipeline::DEFAULT_MAX_LINE_BYTES,
            image_batch_bytes: curator_core::pipeline::DEFAULT_IMAGE_BATCH_BYTES as usize,
            strict: false,
            vectors: Vec::new(),
            typed: Vec::new(),
        }
    }
}

/// Columns of `batch` other than id, text, `_meta`, `_row` and a WebDataset sample's packed
/// members (`_sample`). The id is written from `_meta` (the input's
/// own field); a batch a stage built itself (no `_meta`, e.g. one row per clip) keeps its `id`
/// column as a field.
pub fn extra_columns(batch: &RecordBatch) -> Vec<(&str, &ArrayRef)> {
    let own_ids = batch.column_by_name(META).is_none();
    batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(f, _)| {
            let name = f.name().as_str();
            (own_ids && name == ID) || ![ID, TEXT, META, ROW, SAMPLE].contains(&name)
        })
        .map(|(f, a)| (f.name().as_str(), a))
        .collect()
}

/// The column `name` of `batch`, when it is UTF-8 text.
pub fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a StringArray> {
    batch.column_by_name(name)?.as_any().downcast_ref::<StringArray>()
}

/// One cell as a JSON value: what a JSONL sink writes for a column a stage added.
pub fn cell_json(array: &ArrayRef, row: usize) -> serde_json::Value {
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
        serde_json::Number::from_f64(a.value(row)).map(Value::Number).unwrap_or(Value::Null)
    } else if let Some(a) = any.downcast_ref::<BooleanArray>() {
        Value::Bool(a.value(row))
    } else if let Some(a) = any.downcast_ref::<arrow_array::BinaryArray>() {
        // JSON has no bytes: binary values are written as lowercase hex.
        Value::String(a.value(row).iter().map(|b| format!("{b:02x}")).collect())
    } else if let Some(a) = any.downcast_ref::<arrow_array::FixedSizeListArray>() {
        // Vectors (embeddings) as arrays of numbers.
        let v = a.value(row);
        match v.as_any().downcast_ref::<arrow_array::Float32Array>() {
            Some(f) => Value::Array(
                f.iter().map(|x| x.and_then(|x| serde_json::Number::from_f64(f64::from(x))).map_or(Value::Null, Value::Number)).collect(),
            ),
            None => Value::Null,
        }
    } else {
        Value::Null
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_stage_built_batch_keeps_its_ids_and_a_read_one_takes_them_from_meta() {
        let col = |v: &str| Arc::new(StringArray::from(vec![v])) as ArrayRef;
        let built = RecordBatch::try_from_iter([("id", col("v.mp4:0")), ("text", col("v.mp4")), ("video_id", col("v.mp4"))]).unwrap();
        let names: Vec<&str> = extra_columns(&built).iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["id", "video_id"]);
        let read = RecordBatch::try_from_iter([("id", col("a")), ("text", col("t")), (META, col(r#"{"id":"a"}"#))]).unwrap();
        assert!(extra_columns(&read).is_empty());
    }
}
