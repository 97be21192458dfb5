//! Arrow `RecordBatch` ⇄ WIT `batch` (Arrow-layout buffers). Every column coming back from a
//! guest is validated here (offsets, UTF-8, lengths): a hostile stage can send any bytes.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, Float32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    UInt32Array,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};

use super::bindings::curator::stage::types as wit;
use crate::stage::{Keep, StageFailure, StageOutput};

fn bad(msg: impl Into<String>) -> StageFailure {
    StageFailure::InvalidOutput(msg.into())
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

/// Offsets rebased to 0 and the bytes they cover (a sliced array sends only its own rows).
fn bytes_to_wit(offs: &[i32], values: &[u8]) -> Option<(Vec<u32>, Vec<u8>)> {
    let base = *offs.first()? as usize;
    let end = *offs.last()? as usize;
    Some((offs.iter().map(|o| (*o as usize - base) as u32).collect(), values.get(base..end)?.to_vec()))
}

fn column_to_wit(name: &str, array: &ArrayRef) -> Option<wit::Column> {
    let validity = validity_bits(array.nulls());
    let (ty, offsets, data) = match array.data_type() {
        DataType::Utf8 => {
            let a = array.as_any().downcast_ref::<StringArray>()?;
            let (offsets, data) = bytes_to_wit(a.value_offsets(), a.value_data())?;
            (wit::ColumnType::Utf8, offsets, data)
        }
        DataType::Binary => {
            let a = array.as_any().downcast_ref::<BinaryArray>()?;
            let (offsets, data) = bytes_to_wit(a.value_offsets(), a.value_data())?;
            (wit::ColumnType::Binary, offsets, data)
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
        DataType::FixedSizeList(item, dim) if item.data_type() == &DataType::Float32 => {
            let a = array.as_any().downcast_ref::<FixedSizeListArray>()?;
            let values = a.values().as_any().downcast_ref::<Float32Array>()?;
            let dim = usize::try_from(*dim).ok()?;
            let start = a.offset() * dim;
            let data = values.values().get(start..start + a.len() * dim)?.iter().flat_map(|v| v.to_le_bytes()).collect();
            (wit::ColumnType::Float32Vector, vec![dim as u32], data)
        }
        _ => return None,
    };
    Some(wit::Column { name: name.to_string(), ty, validity, offsets, data })
}

fn null_buffer(validity: Vec<u8>, rows: usize, name: &str) -> Result<Option<NullBuffer>, StageFailure> {
    if validity.is_empty() {
        return Ok(None);
    }
    if validity.len() < rows.div_ceil(8) {
        return Err(bad(format!("column {name:?}: validity bitmap too short")));
    }
    Ok(Some(NullBuffer::new(BooleanBuffer::new(Buffer::from_vec(validity), 0, rows))))
}

/// Decode one guest column into an Arrow array with `rows` rows.
pub fn column_from_wit(c: wit::Column, rows: usize) -> Result<(Field, ArrayRef), StageFailure> {
    let name = c.name;
    let nulls = null_buffer(c.validity, rows, &name)?;
    let nullable = nulls.is_some();
    let array: ArrayRef = match c.ty {
        wit::ColumnType::Utf8 | wit::ColumnType::Binary => {
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
            if c.ty == wit::ColumnType::Binary {
                Arc::new(BinaryArray::try_new(offsets, Buffer::from_vec(c.data), nulls).map_err(|e| bad(format!("column {name:?}: {e}")))?)
            } else {
                Arc::new(StringArray::try_new(offsets, Buffer::from_vec(c.data), nulls).map_err(|e| bad(format!("column {name:?}: {e}")))?)
            }
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
        wit::ColumnType::Float32Vector => {
            let dim = match c.offsets.as_slice() {
                [d] if *d > 0 && *d <= 1 << 20 => *d as usize,
                _ => {
                    return Err(bad(format!(
                        "column {name:?}: a float32-vector column carries its dimension (1 to 2^20) as its one offset"
                    )));
                }
            };
            if c.data.len() != rows * dim * 4 {
                return Err(bad(format!("column {name:?}: {} bytes for {rows} vectors of {dim} float32", c.data.len())));
            }
            let values: Vec<f32> = c.data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            let item = Arc::new(Field::new("item", DataType::Float32, true));
            Arc::new(
                FixedSizeListArray::try_new(item, dim as i32, Arc::new(Float32Array::from(values)), nulls)
                    .map_err(|e| bad(format!("column {name:?}: {e}")))?,
            )
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

/// A guest's answer as a [`StageOutput`] (its columns decoded and checked; the output as a
/// whole is checked when applied). `rows`: the input's row count.
pub fn output_from_wit(out: wit::Output, rows: usize) -> Result<StageOutput, StageFailure> {
    let columns = |cols: Vec<wit::Column>, n: usize| -> Result<Vec<(Field, ArrayRef)>, StageFailure> {
        cols.into_iter().map(|c| column_from_wit(c, n)).collect()
    };
    Ok(match out {
        wit::Output::Selection(keep) => StageOutput::Selection(Keep::Indices(UInt32Array::from(keep))),
        wit::Output::Columns(cols) => StageOutput::Columns(columns(cols, rows)?),
        wit::Output::Scored(s) => {
            StageOutput::Scored { columns: columns(s.columns, rows)?, keep: Keep::Indices(UInt32Array::from(s.keep)) }
        }
        wit::Output::Batch(b) => {
            let n = b.num_rows as usize;
            let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns(b.columns, n)?.into_iter().unzip();
            let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(n));
            let batch =
                RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options).map_err(|e| bad(e.to_string()))?;
            StageOutput::Batch(batch)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_output(input: &RecordBatch, out: wit::Output) -> Result<RecordBatch, StageFailure> {
        output_from_wit(out, input.num_rows())?.apply(input)
    }

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![Field::new("id", DataType::Utf8, false), Field::new("text", DataType::Utf8, false)]);
        let ids: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["héllo", "", "wörld"]));
        RecordBatch::try_new(Arc::new(schema), vec![ids, texts]).unwrap()
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

    #[test]
    fn binary_columns_cross_both_ways() {
        let c = wit::Column {
            name: "sig".into(),
            ty: wit::ColumnType::Binary,
            validity: vec![],
            offsets: vec![0, 2, 2, 5],
            data: vec![0, 255, 1, 2, 3],
        };
        let (field, array) = column_from_wit(c.clone(), 3).unwrap();
        assert_eq!(field.data_type(), &DataType::Binary);
        let a = array.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!((a.value(0), a.value(1), a.value(2)), (&[0u8, 255][..], &[][..], &[1u8, 2, 3][..]));
        let back = column_to_wit("sig", &array).unwrap();
        assert_eq!((back.ty == wit::ColumnType::Binary, back.offsets, back.data), (true, c.offsets, c.data));
        let bad = wit::Column { name: "sig".into(), ty: wit::ColumnType::Binary, validity: vec![], offsets: vec![0, 9], data: vec![1] };
        assert!(column_from_wit(bad, 1).is_err());
    }

    #[test]
    fn vector_columns_cross_both_ways_and_lies_are_refused() {
        let values: Vec<f32> = vec![0.5, -1.0, 2.0, 0.0, 1.5, 3.25];
        let c = wit::Column {
            name: "embedding".into(),
            ty: wit::ColumnType::Float32Vector,
            validity: vec![],
            offsets: vec![2],
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let (field, array) = column_from_wit(c.clone(), 3).unwrap();
        assert!(matches!(field.data_type(), DataType::FixedSizeList(_, 2)));
        let a = array.as_any().downcast_ref::<FixedSizeListArray>().unwrap();
        let row1 = a.value(1);
        assert_eq!(row1.as_any().downcast_ref::<Float32Array>().unwrap().values(), &[2.0, 0.0]);
        // A slice sends only its own rows.
        let back = column_to_wit("embedding", &array.slice(1, 2)).unwrap();
        assert_eq!((back.offsets, back.data), (vec![2], c.data[8..].to_vec()));
        for (offsets, rows) in [(vec![], 3), (vec![0], 3), (vec![2, 2], 3), (vec![2], 4), (vec![u32::MAX], 3)] {
            let lie = wit::Column { offsets, ..c.clone() };
            assert!(column_from_wit(lie, rows).is_err());
        }
    }
}
