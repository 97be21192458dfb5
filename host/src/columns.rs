//! Arrow `RecordBatch` ⇄ WIT `batch` (Arrow-layout buffers). Everything coming back from a
//! guest is validated here: a hostile stage can send any bytes.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};

use crate::wasm::bindings::curator::stage::types as wit;

/// A guest's answer that does not make sense.
#[derive(Debug, thiserror::Error)]
#[error("stage returned an invalid batch: {0}")]
pub struct InvalidOutput(pub String);

fn bad(msg: impl Into<String>) -> InvalidOutput {
    InvalidOutput(msg.into())
}

fn validity_bits(nulls: Option<&NullBuffer>) -> Vec<u8> {
    match nulls {
        Some(n) if n.null_count() > 0 => bitmap_from(n.inner()),
        _ => Vec::new(),
    }
}

fn bitmap_from(bits: &BooleanBuffer) -> Vec<u8> {
    if bits.offset() == 0 {
        let bytes = bits.len().div_ceil(8);
        return bits.values()[..bytes].to_vec();
    }
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, b) in bits.iter().enumerate() {
        if b {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// `batch` with the input columns a stage names that the batch lacks, taken from the
/// passthrough `_meta` JSON of each row (JSONL fields other than id and text): strings as
/// they are, other values as JSON text, absent fields as nulls. Borrowed when nothing is
/// missing.
pub fn with_meta_fields<'a>(batch: &'a RecordBatch, wanted: &[String]) -> std::borrow::Cow<'a, RecordBatch> {
    let schema = batch.schema();
    let missing: Vec<&String> = wanted.iter().filter(|w| *w != "*" && schema.index_of(w).is_err()).collect();
    let meta = batch.column_by_name(crate::io::META).and_then(|c| c.as_any().downcast_ref::<StringArray>());
    let (false, Some(meta)) = (missing.is_empty(), meta) else { return std::borrow::Cow::Borrowed(batch) };
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = (0..batch.num_rows())
        .map(|r| if meta.is_null(r) { Default::default() } else { serde_json::from_str(meta.value(r)).unwrap_or_default() })
        .collect();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut arrays: Vec<ArrayRef> = batch.columns().to_vec();
    for name in missing {
        let values: StringArray = rows
            .iter()
            .map(|m| match m.get(name.as_str()) {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(v) => Some(v.to_string()),
            })
            .collect();
        fields.push(Field::new(name.as_str(), DataType::Utf8, true));
        arrays.push(Arc::new(values));
    }
    match RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays) {
        Ok(b) => std::borrow::Cow::Owned(b),
        Err(_) => std::borrow::Cow::Borrowed(batch),
    }
}

/// Encode the named columns of `batch` for a guest. Columns of other types are skipped.
pub fn to_wit(batch: &RecordBatch, wanted: &[String]) -> wit::Batch {
    let schema = batch.schema();
    let all = wanted.iter().any(|w| w == "*");
    let mut columns = Vec::new();
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        if !all && !wanted.iter().any(|w| w == field.name()) {
            continue;
        }
        if let Some(c) = column_to_wit(field.name(), array) {
            columns.push(c);
        }
    }
    wit::Batch { num_rows: batch.num_rows() as u32, columns }
}

/// The columns of `batch` a manifest's `input_columns` name (`*`: all), as an Arrow batch
/// (no copy: the arrays are shared).
pub fn project(batch: &RecordBatch, wanted: &[String]) -> RecordBatch {
    if wanted.iter().any(|w| w == "*") {
        return batch.clone();
    }
    let schema = batch.schema();
    let keep: Vec<usize> = (0..schema.fields().len()).filter(|i| wanted.iter().any(|w| w == schema.field(*i).name())).collect();
    batch.project(&keep).unwrap_or_else(|_| batch.clone())
}

fn column_to_wit(name: &str, array: &ArrayRef) -> Option<wit::Column> {
    let validity = validity_bits(array.nulls());
    let (ty, offsets, data) = match array.data_type() {
        DataType::Utf8 => {
            let a = array.as_any().downcast_ref::<StringArray>()?;
            let offs = a.value_offsets();
            let base = *offs.first()? as usize;
            let end = *offs.last()? as usize;
            let offsets = offs.iter().map(|o| (*o as usize - base) as u32).collect();
            (wit::ColumnType::Utf8, offsets, a.value_data()[base..end].to_vec())
        }
        DataType::Int64 => {
            let a = array.as_any().downcast_ref::<Int64Array>()?;
            (wit::ColumnType::Int64, Vec::new(), a.values().iter().flat_map(|v| v.to_le_bytes()).collect())
        }
        DataType::Float64 => {
            let a = array.as_any().downcast_ref::<Float64Array>()?;
            (wit::ColumnType::Float64, Vec::new(), a.values().iter().flat_map(|v| v.to_le_bytes()).collect())
        }
        DataType::Boolean => {
            let a = array.as_any().downcast_ref::<BooleanArray>()?;
            (wit::ColumnType::Boolean, Vec::new(), bitmap_from(a.values()))
        }
        _ => return None,
    };
    Some(wit::Column { name: name.to_string(), ty, validity, offsets, data })
}

fn null_buffer(validity: Vec<u8>, rows: usize, name: &str) -> Result<Option<NullBuffer>, InvalidOutput> {
    if validity.is_empty() {
        return Ok(None);
    }
    if validity.len() < rows.div_ceil(8) {
        return Err(bad(format!("column {name:?}: validity bitmap too short")));
    }
    Ok(Some(NullBuffer::new(BooleanBuffer::new(Buffer::from_vec(validity), 0, rows))))
}

/// Decode one guest column into an Arrow array with `rows` rows.
pub fn column_from_wit(c: wit::Column, rows: usize) -> Result<(Field, ArrayRef), InvalidOutput> {
    let name = c.name;
    let nulls = null_buffer(c.validity, rows, &name)?;
    let nullable = nulls.is_some();
    let array: ArrayRef = match c.ty {
        wit::ColumnType::Utf8 => {
            if c.offsets.len() != rows + 1 {
                return Err(bad(format!("column {name:?}: {} offsets for {rows} rows", c.offsets.len())));
            }
            if c.data.len() > i32::MAX as usize {
                return Err(bad(format!("column {name:?}: more than 2 GiB of text in one batch")));
            }
            let offsets: Vec<i32> = c.offsets.iter().map(|&o| o as i32).collect();
            let monotonic = offsets.first() == Some(&0) && offsets.windows(2).all(|w| w[0] <= w[1]);
            if !monotonic || offsets.iter().any(|&o| o < 0 || o as usize > c.data.len()) {
                return Err(bad(format!("column {name:?}: offsets out of order or out of range")));
            }
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            let array = StringArray::try_new(offsets, Buffer::from_vec(c.data), nulls).map_err(|e| bad(format!("column {name:?}: {e}")))?;
            Arc::new(array)
        }
        wit::ColumnType::Int64 | wit::ColumnType::Float64 => {
            if c.data.len() != rows * 8 {
                return Err(bad(format!("column {name:?}: {} bytes for {rows} rows of 8 bytes", c.data.len())));
            }
            let words = c.data.chunks_exact(8).map(|b| <[u8; 8]>::try_from(b).unwrap_or([0; 8]));
            if c.ty == wit::ColumnType::Int64 {
                Arc::new(Int64Array::new(ScalarBuffer::from(words.map(i64::from_le_bytes).collect::<Vec<_>>()), nulls))
            } else {
                Arc::new(Float64Array::new(ScalarBuffer::from(words.map(f64::from_le_bytes).collect::<Vec<_>>()), nulls))
            }
        }
        wit::ColumnType::Boolean => {
            if c.data.len() < rows.div_ceil(8) {
                return Err(bad(format!("column {name:?}: boolean bitmap too short")));
            }
            Arc::new(BooleanArray::new(BooleanBuffer::new(Buffer::from_vec(c.data), 0, rows), nulls))
        }
    };
    let field = Field::new(&name, array.data_type().clone(), nullable);
    Ok((field, array))
}

/// Apply a guest's output to the batch it was given.
pub fn apply_output(input: &RecordBatch, out: wit::Output) -> Result<RecordBatch, InvalidOutput> {
    let rows = input.num_rows();
    match out {
        wit::Output::Selection(keep) => {
            if keep.len() == rows && keep.iter().enumerate().all(|(i, &k)| k as usize == i) {
                return Ok(input.clone());
            }
            let mut mask = vec![false; rows];
            let mut prev: Option<u32> = None;
            for &k in &keep {
                if (k as usize) >= rows || prev.is_some_and(|p| k <= p) {
                    return Err(bad(format!("selection index {k} is out of range or not ascending ({rows} rows)")));
                }
                mask[k as usize] = true;
                prev = Some(k);
            }
            arrow_select::filter::filter_record_batch(input, &BooleanArray::from(mask)).map_err(|e| bad(e.to_string()))
        }
        wit::Output::Columns(cols) => {
            let schema = input.schema();
            let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            let mut arrays: Vec<ArrayRef> = input.columns().to_vec();
            for c in cols {
                let (field, array) = column_from_wit(c, rows)?;
                match fields.iter().position(|f| f.name() == field.name()) {
                    Some(i) => {
                        fields[i] = field;
                        arrays[i] = array;
                    }
                    None => {
                        fields.push(field);
                        arrays.push(array);
                    }
                }
            }
            RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| bad(e.to_string()))
        }
        wit::Output::Scored(scored) => {
            // Columns first (they have one value per input row), then the selection.
            let with = apply_output(input, wit::Output::Columns(scored.columns))?;
            apply_output(&with, wit::Output::Selection(scored.keep))
        }
        wit::Output::Batch(b) => {
            let n = b.num_rows as usize;
            let mut fields = Vec::new();
            let mut arrays = Vec::new();
            for c in b.columns {
                let (field, array) = column_from_wit(c, n)?;
                fields.push(field);
                arrays.push(array);
            }
            if !fields.iter().any(|f| f.name() == "text") {
                return Err(bad("a returned batch must have a \"text\" column"));
            }
            let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(n));
            RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options).map_err(|e| bad(e.to_string()))
        }
    }
}

/// A guest's output in the native worker protocol's form ([`crate::native::OutputKind`] and
/// its batch), for a WASM stage served by a worker process: the host applies it to the whole
/// batch as it does a native stage's. `rows`: the input's row count.
pub fn to_native_output(out: wit::Output, rows: usize) -> Result<(crate::native::OutputKind, RecordBatch), InvalidOutput> {
    use crate::native::OutputKind;
    let batch = |fields: Vec<Field>, arrays: Vec<ArrayRef>, n: usize| {
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(n));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options).map_err(|e| bad(e.to_string()))
    };
    let columns = |cols: Vec<wit::Column>| -> Result<(Vec<Field>, Vec<ArrayRef>), InvalidOutput> {
        let (mut fields, mut arrays) = (Vec::new(), Vec::new());
        for c in cols {
            let (f, a) = column_from_wit(c, rows)?;
            fields.push(f);
            arrays.push(a);
        }
        Ok((fields, arrays))
    };
    let selection = |keep: Vec<u32>| -> ArrayRef { Arc::new(arrow_array::UInt32Array::from(keep)) };
    Ok(match out {
        wit::Output::Selection(keep) => {
            let n = keep.len();
            (OutputKind::Selection, batch(vec![Field::new("keep", DataType::UInt32, false)], vec![selection(keep)], n)?)
        }
        wit::Output::Columns(cols) => {
            let (fields, arrays) = columns(cols)?;
            (OutputKind::Columns, batch(fields, arrays, rows)?)
        }
        wit::Output::Scored(scored) => {
            let (mut fields, mut arrays) = columns(scored.columns)?;
            let mut mask = vec![false; rows];
            for k in scored.keep {
                *mask.get_mut(k as usize).ok_or_else(|| bad(format!("selection index {k} is out of range ({rows} rows)")))? = true;
            }
            fields.push(Field::new(curator_sdk::abi::SCORED_KEEP, DataType::Boolean, false));
            arrays.push(Arc::new(BooleanArray::from(mask)));
            (OutputKind::Scored, batch(fields, arrays, rows)?)
        }
        wit::Output::Batch(b) => {
            let n = b.num_rows as usize;
            let (mut fields, mut arrays) = (Vec::new(), Vec::new());
            for c in b.columns {
                let (f, a) = column_from_wit(c, n)?;
                fields.push(f);
                arrays.push(a);
            }
            (OutputKind::Batch, batch(fields, arrays, n)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![Field::new("id", DataType::Utf8, false), Field::new("text", DataType::Utf8, false)]);
        let ids: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["héllo", "", "wörld"]));
        RecordBatch::try_new(Arc::new(schema), vec![ids, texts]).unwrap()
    }

    #[test]
    fn stage_inputs_come_from_meta_fields() {
        let schema = Schema::new(vec![Field::new("text", DataType::Utf8, false), Field::new(crate::io::META, DataType::Utf8, true)]);
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let metas: ArrayRef = Arc::new(StringArray::from(vec![Some(r#"{"ext":"py","n":3}"#), Some("{}"), None]));
        let b = RecordBatch::try_new(Arc::new(schema), vec![texts, metas]).unwrap();
        let wanted = ["text".to_string(), "ext".to_string(), "n".to_string()];
        let with = with_meta_fields(&b, &wanted);
        let col = |n: &str| {
            with.column_by_name(n)
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .iter()
                .map(|v| v.map(str::to_string))
                .collect::<Vec<_>>()
        };
        assert_eq!(col("ext"), [Some("py".into()), None, None]);
        assert_eq!(col("n"), [Some("3".into()), None, None]);
        assert!(matches!(with_meta_fields(&b, &["text".to_string()]), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn roundtrip_sliced_utf8() {
        let b = batch().slice(1, 2);
        let w = to_wit(&b, &["text".to_string()]);
        assert_eq!(w.num_rows, 2);
        assert_eq!(w.columns.len(), 1);
        assert_eq!(w.columns[0].offsets, vec![0, 0, 6]);
        assert_eq!(w.columns[0].data, "wörld".as_bytes());
        let out = apply_output(&b, wit::Output::Columns(w.columns)).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn selection_filters_and_checks() {
        let b = batch();
        let out = apply_output(&b, wit::Output::Selection(vec![0, 2])).unwrap();
        assert_eq!(out.num_rows(), 2);
        assert!(apply_output(&b, wit::Output::Selection(vec![2, 1])).is_err());
        assert!(apply_output(&b, wit::Output::Selection(vec![3])).is_err());
        assert_eq!(apply_output(&b, wit::Output::Selection(vec![])).unwrap().num_rows(), 0);
    }

    #[test]
    fn hostile_columns_refused() {
        let b = batch();
        let bad_offsets = wit::Column {
            name: "text".into(),
            ty: wit::ColumnType::Utf8,
            validity: vec![],
            offsets: vec![0, 5, 2, 3],
            data: b"abc".to_vec(),
        };
        assert!(apply_output(&b, wit::Output::Columns(vec![bad_offsets])).is_err());
        let split_char = wit::Column {
            name: "text".into(),
            ty: wit::ColumnType::Utf8,
            validity: vec![],
            offsets: vec![0, 1, 2, 2],
            data: "é".as_bytes().to_vec(),
        };
        assert!(apply_output(&b, wit::Output::Columns(vec![split_char])).is_err());
        let short = wit::Column { name: "n".into(), ty: wit::ColumnType::Int64, validity: vec![], offsets: vec![], data: vec![0; 8] };
        assert!(apply_output(&b, wit::Output::Columns(vec![short])).is_err());
    }

    #[test]
    fn added_numeric_column() {
        let b = batch();
        let n = wit::Column {
            name: "n".into(),
            ty: wit::ColumnType::Int64,
            validity: vec![0b101],
            offsets: vec![],
            data: [1i64, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let out = apply_output(&b, wit::Output::Columns(vec![n])).unwrap();
        let col = out.column_by_name("n").unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(col.value(2), 3);
        assert!(col.is_null(1));
    }
}
