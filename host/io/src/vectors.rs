//! Stored embeddings. A field that a step reads as vectors (a semantic dedup step's
//! `embedding_field`) is lifted out of `_meta` by the readers into a float32-vector column,
//! `FixedSizeList<Float32>`: the layout the `embedder` stage writes, so a step finds stored
//! vectors and computed ones the same way.
//!
//! Read: JSONL arrays of numbers; Parquet `List`, `LargeList` and `FixedSizeList` of
//! float16, float32, float64 or integers (values become float32: `parquet/vectors.rs`). A row without the field
//! (or with `null`) is a null vector, for the step to refuse or skip; a value that is not an
//! array of numbers, or whose length differs from the rows before it, is an error naming the
//! file, the line or row, and the field.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Schema};
use serde::de::{DeserializeSeed, SeqAccess, Visitor};

use crate::records::reader_schema;

/// A vector column and its field, as a reader adds it to a batch.
pub type Lifted = (Field, ArrayRef);

/// A vector column being filled row by row (the JSONL reader).
pub struct VectorColumn {
    name: String,
    dim: Option<usize>,
    values: Vec<f32>,
    valid: Vec<bool>,
}

impl VectorColumn {
    pub fn new(name: &str) -> VectorColumn {
        VectorColumn { name: name.to_string(), dim: None, values: Vec::new(), valid: Vec::new() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// One row's raw JSON value (`None`: the field is missing). On error nothing is added.
    pub fn push_json(&mut self, raw: Option<&str>) -> Result<(), String> {
        let Some(raw) = raw.filter(|r| r.trim() != "null") else {
            self.push_null();
            return Ok(());
        };
        let start = self.values.len();
        let mut de = serde_json::Deserializer::from_str(raw);
        let parsed = ExtendF32(&mut self.values).deserialize(&mut de).and_then(|()| de.end());
        if let Err(e) = parsed {
            self.values.truncate(start);
            return Err(format!("expected an array of numbers: {e}"));
        }
        let n = self.values.len() - start;
        if let Err(message) = check_dim(&mut self.dim, n) {
            self.values.truncate(start);
            return Err(message);
        }
        self.valid.push(true);
        Ok(())
    }

    pub fn push_null(&mut self) {
        if let Some(d) = self.dim {
            self.values.extend(std::iter::repeat_n(0.0, d));
        }
        self.valid.push(false);
    }

    /// The column, or `None` when no row held a vector (the field is not there to lift).
    pub fn finish(self) -> Option<Lifted> {
        let dim = self.dim?;
        // Nulls pushed before the first vector fixed the dimension took no room yet.
        let missing_before = self.valid.iter().take_while(|v| !**v).count();
        let mut values = vec![0.0; missing_before * dim];
        values.extend(self.values);
        Some(vector_column(&self.name, dim, values, Some(NullBuffer::from(self.valid))))
    }
}

/// The dimension of the first vector, or the message for one that differs from it.
pub(crate) fn check_dim(dim: &mut Option<usize>, n: usize) -> Result<(), String> {
    if n == 0 {
        return Err("an empty array (a vector needs at least one number)".into());
    }
    match *dim {
        None => *dim = Some(n),
        Some(d) if d != n => return Err(format!("{n} numbers where earlier rows had {d}")),
        _ => {}
    }
    Ok(())
}

/// A reader batch: the reader schema's columns (`id`, `text`, `_meta`), then the columns kept
/// in their own type (vectors the batch's rows hold; a Parquet source's bytes a stage reads).
pub fn reader_batch(base: [ArrayRef; 3], vectors: Vec<Lifted>) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut fields: Vec<Field> = reader_schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns: Vec<ArrayRef> = base.into();
    for (field, column) in vectors {
        fields.push(field);
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

pub(crate) fn vector_column(name: &str, dim: usize, values: Vec<f32>, nulls: Option<NullBuffer>) -> Lifted {
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let nulls = nulls.filter(|n| n.null_count() > 0);
    let array = FixedSizeListArray::new(item, dim as i32, Arc::new(Float32Array::from(values)), nulls);
    (Field::new(name, array.data_type().clone(), true), Arc::new(array))
}

/// Appends a JSON array's numbers to a buffer without a vector per row.
struct ExtendF32<'a>(&'a mut Vec<f32>);

impl<'de> DeserializeSeed<'de> for ExtendF32<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ExtendF32<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of numbers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(x) = seq.next_element::<f32>()? {
            self.0.push(x);
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float32Type;

    /// A float32-vector column's rows (`None` for a null vector), for the tests of its readers.
    pub(crate) fn rows(a: &ArrayRef) -> Vec<Option<Vec<f32>>> {
        let l = a.as_fixed_size_list();
        (0..l.len()).map(|r| l.is_valid(r).then(|| l.value(r).as_primitive::<Float32Type>().values().to_vec())).collect()
    }

    #[test]
    fn json_arrays_become_a_vector_column_with_nulls_for_missing_rows() {
        let mut c = VectorColumn::new("embedding");
        c.push_json(None).unwrap();
        c.push_json(Some("[1, 2.5, -3e-1]")).unwrap();
        c.push_json(Some("null")).unwrap();
        c.push_json(Some(" [0,0,1] ")).unwrap();
        let (field, col) = c.finish().unwrap();
        assert_eq!(field.name(), "embedding");
        assert_eq!(rows(&col), vec![None, Some(vec![1.0, 2.5, -0.3]), None, Some(vec![0.0, 0.0, 1.0])]);
    }

    #[test]
    fn bad_json_vectors_are_refused_and_add_nothing() {
        let mut c = VectorColumn::new("e");
        c.push_json(Some("[1, 2]")).unwrap();
        let ragged = c.push_json(Some("[1, 2, 3]")).unwrap_err();
        assert!(ragged.contains("3 numbers where earlier rows had 2"), "{ragged}");
        let text = c.push_json(Some("[1, \"x\"]")).unwrap_err();
        assert!(text.contains("expected an array of numbers"), "{text}");
        assert!(c.push_json(Some("{\"a\": 1}")).is_err());
        assert!(c.push_json(Some("[]")).unwrap_err().contains("empty"));
        c.push_json(Some("[3, 4]")).unwrap();
        assert_eq!(rows(&c.finish().unwrap().1), vec![Some(vec![1.0, 2.0]), Some(vec![3.0, 4.0])]);
        assert!(VectorColumn::new("e").finish().is_none(), "no vector, no column");
    }
}
