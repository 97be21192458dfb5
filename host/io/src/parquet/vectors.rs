//! Parquet's embedding columns (`List`, `LargeList` or `FixedSizeList` of float16, float32,
//! float64 or integers) as [`crate::vectors`]' float32-vector columns.

use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::{Array, ArrayRef, OffsetSizeTrait};
use arrow_schema::{DataType, Field};

use crate::vectors::{Lifted, check_dim, vector_column};

/// A Parquet (Arrow) column as a float32-vector column, or `None` when no row holds a vector
/// (as [`VectorColumn::finish`]). `Err((row, message))` names the first bad row (counted
/// within `col`), or no row (`None`) when the column's type is wrong.
pub fn from_arrow(name: &str, col: &ArrayRef) -> Result<Option<Lifted>, (Option<usize>, String)> {
    let wrong = || (None, format!("expected a list of numbers (an embedding), found {}", col.data_type()));
    let (child, offsets): (&ArrayRef, Vec<(usize, usize)>) = match col.data_type() {
        DataType::FixedSizeList(_, d) => {
            let list = col.as_fixed_size_list();
            let d = *d as usize;
            if list.values().data_type() == &DataType::Float32 && list.values().null_count() == 0 && d > 0 {
                // Already the layout the steps read: shared, not copied.
                return Ok(Some((Field::new(name, col.data_type().clone(), true), col.clone())));
            }
            (list.values(), (0..list.len()).map(|r| (list.value_offset_at(r), list.value_offset_at(r) + d)).collect())
        }
        DataType::List(_) => list_offsets::<i32>(col),
        DataType::LargeList(_) => list_offsets::<i64>(col),
        _ => return Err(wrong()),
    };
    if !(child.data_type().is_floating() || child.data_type().is_integer()) {
        return Err(wrong());
    }
    let child = arrow_cast::cast(child, &DataType::Float32).map_err(|e| (None, e.to_string()))?;
    let child = child.as_primitive::<Float32Type>();
    let mut dim = None;
    let mut values = Vec::with_capacity(child.len());
    let mut pending_nulls = 0usize;
    for (r, &(a, b)) in offsets.iter().enumerate() {
        if col.is_null(r) {
            match dim {
                Some(d) => values.extend(std::iter::repeat_n(0.0, d)),
                None => pending_nulls += 1,
            }
            continue;
        }
        if child.null_count() > 0 && (a..b).any(|i| child.is_null(i)) {
            return Err((Some(r), "a null inside the vector".into()));
        }
        let first = dim.is_none();
        check_dim(&mut dim, b - a).map_err(|m| (Some(r), m))?;
        if first {
            values.extend(std::iter::repeat_n(0.0, pending_nulls * (b - a)));
        }
        values.extend_from_slice(&child.values()[a..b]);
    }
    // A column of nulls only: no dimension to give it, so no vectors.
    Ok(dim.map(|d| vector_column(name, d, values, col.nulls().cloned())))
}

fn list_offsets<O: OffsetSizeTrait>(col: &ArrayRef) -> (&ArrayRef, Vec<(usize, usize)>) {
    let list = col.as_list::<O>();
    let offsets = list.value_offsets().windows(2).map(|w| (w[0].as_usize(), w[1].as_usize())).collect();
    (list.values(), offsets)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::vectors::tests::rows;
    use arrow_array::builder::{FixedSizeListBuilder, Float64Builder, ListBuilder};
    use arrow_array::{Float32Array, ListArray};
    use arrow_buffer::{NullBuffer, OffsetBuffer};

    #[test]
    fn parquet_list_layouts_of_every_float_width_read_the_same() {
        let want = vec![Some(vec![0.5, 1.0]), None, Some(vec![-2.0, 4.0])];
        // List<Float64>
        let mut b = ListBuilder::new(Float64Builder::new());
        for r in &want {
            match r {
                Some(v) => {
                    v.iter().for_each(|x| b.values().append_value(*x as f64));
                    b.append(true)
                }
                None => b.append(false),
            }
        }
        let list: ArrayRef = Arc::new(b.finish());
        assert_eq!(rows(&from_arrow("e", &list).unwrap().unwrap().1), want);
        // LargeList<Float64>
        let large = arrow_cast::cast(&list, &DataType::new_large_list(DataType::Float64, true)).unwrap();
        assert_eq!(rows(&from_arrow("e", &large).unwrap().unwrap().1), want);
        // FixedSizeList<Float64> and FixedSizeList<Float32>
        let mut b = FixedSizeListBuilder::new(Float64Builder::new(), 2);
        for r in &want {
            let v = r.clone().unwrap_or(vec![0.0, 0.0]);
            v.iter().for_each(|x| b.values().append_value(*x as f64));
            b.append(r.is_some());
        }
        let fixed: ArrayRef = Arc::new(b.finish());
        assert_eq!(rows(&from_arrow("e", &fixed).unwrap().unwrap().1), want);
        let f32s = arrow_cast::cast(&fixed, &DataType::new_fixed_size_list(DataType::Float32, 2, true)).unwrap();
        assert_eq!(rows(&from_arrow("e", &f32s).unwrap().unwrap().1), want);
        // List<Float16>
        let halves = arrow_cast::cast(&Float32Array::from(vec![0.5, 1.0, -2.0, 4.0]), &DataType::Float16).unwrap();
        let item = Arc::new(Field::new("item", DataType::Float16, true));
        let f16s: ArrayRef =
            Arc::new(ListArray::new(item, OffsetBuffer::from_lengths([2, 0, 2]), halves, Some(NullBuffer::from(vec![true, false, true]))));
        assert_eq!(rows(&from_arrow("e", &f16s).unwrap().unwrap().1), want);
    }

    #[test]
    fn a_ragged_or_wrongly_typed_parquet_column_names_the_row() {
        let item = Arc::new(Field::new("item", DataType::Float32, true));
        let ragged: ArrayRef =
            Arc::new(ListArray::new(item, OffsetBuffer::from_lengths([2, 2, 3]), Arc::new(Float32Array::from(vec![0.0; 7])), None));
        let (row, message) = from_arrow("e", &ragged).unwrap_err();
        assert_eq!(row, Some(2));
        assert!(message.contains("3 numbers where earlier rows had 2"), "{message}");
        let strings: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["a"]));
        let (row, message) = from_arrow("e", &strings).unwrap_err();
        assert_eq!(row, None);
        assert!(message.contains("found Utf8"), "{message}");
        let nulls: ArrayRef = Arc::new(ListArray::new_null(Arc::new(Field::new("item", DataType::Float32, true)), 3));
        assert!(from_arrow("e", &nulls).unwrap().is_none(), "no vector, no column");
    }
}
