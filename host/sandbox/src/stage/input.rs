//! What a stage is given: the columns its manifest's `input_columns` name, those missing
//! from the batch taken from the JSONL passthrough fields (`_meta`): arrays of numbers as
//! float32 vectors, numbers as int64 (all integers) or float64, other values as text — the
//! types a Parquet source gives the same columns.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};

use serde_json::value::RawValue;

use super::StageFailure;
use arrow_schema::{DataType, Field, Schema};

/// The batch a stage instance is called with: `batch` with the stage's missing input columns
/// added from `_meta`, projected to `wanted` (`*`: every column). No copy of existing columns.
pub fn stage_input(batch: &RecordBatch, wanted: &[String]) -> Result<RecordBatch, StageFailure> {
    Ok(project(with_meta_fields(batch, wanted)?.as_ref(), wanted))
}

/// `batch` with the names of its `text` column and of column `field` exchanged: what a stage
/// with a `text_field` is run on (and, applied again to its output, what comes back). Only the
/// schema changes; no value is copied. A `field` the batch lacks is taken from the JSONL
/// passthrough fields (`_meta`), as a stage's input columns are; it must hold text.
pub fn swap_text(batch: &RecordBatch, field: &str) -> Result<RecordBatch, StageFailure> {
    let had = batch.schema().index_of(field).is_ok();
    let batch = with_meta_fields(batch, &[field.to_string()])?;
    let schema = batch.schema();
    let missing = || {
        StageFailure::InvalidInput(format!(
            "text_field {field:?}: the documents have no such column (a field an earlier stage writes, or the source's)"
        ))
    };
    let at = schema.index_of(field).map_err(|_| missing())?;
    // Taken from the passthrough fields and absent from every document: a misspelt name.
    if !had && batch.num_rows() > 0 && batch.column(at).null_count() == batch.num_rows() {
        return Err(missing());
    }
    if schema.field(at).data_type() != &DataType::Utf8 {
        return Err(StageFailure::InvalidInput(format!("text_field {field:?}: the column is {}, not text", schema.field(at).data_type())));
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            n if n == field => f.as_ref().clone().with_name(crate::io::TEXT),
            crate::io::TEXT => f.as_ref().clone().with_name(field),
            _ => f.as_ref().clone(),
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())), batch.columns().to_vec())
        .map_err(|e| StageFailure::InvalidInput(format!("text_field {field:?}: {e}")))
}

/// `batch` with the input columns a stage names that the batch lacks, taken from the
/// passthrough `_meta` JSON of each row (JSONL fields other than id and text): arrays of
/// numbers as float32 vectors, numbers as int64 when every value is an integer that fits and
/// as float64 otherwise (as a Parquet source gives them), strings as they are, other values
/// (or a mix) as JSON text, absent fields as nulls. Borrowed when nothing is missing. A field whose values are all arrays but not
/// vectors of one length (a stored embedding cut short, say) is refused, naming its row.
pub fn with_meta_fields<'a>(batch: &'a RecordBatch, wanted: &[String]) -> Result<std::borrow::Cow<'a, RecordBatch>, StageFailure> {
    let schema = batch.schema();
    let missing: Vec<&String> = wanted.iter().filter(|w| *w != "*" && schema.index_of(w).is_err()).collect();
    let meta = batch.column_by_name(crate::io::META).and_then(|c| c.as_any().downcast_ref::<StringArray>());
    let (false, Some(meta)) = (missing.is_empty(), meta) else { return Ok(std::borrow::Cow::Borrowed(batch)) };
    // Each row's fields as raw JSON text (borrowed from `_meta`): a stored embedding is
    // parsed once, straight into the vector column.
    type Raw<'m> = std::collections::BTreeMap<String, &'m RawValue>;
    let rows: Vec<Raw<'_>> = (0..batch.num_rows())
        .map(|r| if meta.is_null(r) { Raw::new() } else { serde_json::from_str(meta.value(r)).unwrap_or_default() })
        .collect();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut arrays: Vec<ArrayRef> = batch.columns().to_vec();
    for name in missing {
        let raw: Vec<Option<&str>> = rows.iter().map(|m| m.get(name.as_str()).map(|v| v.get()).filter(|v| *v != "null")).collect();
        if let Some((field, array)) = as_vectors(name, &raw).map_err(|(r, why)| {
            // The row as the run's messages count it (`_row`: its row in the source part).
            let row = batch.column_by_name(crate::io::ROW).and_then(|c| c.as_primitive_opt::<Int64Type>()).map_or(r as i64, |c| c.value(r));
            StageFailure::InvalidInput(format!("field {name:?} of row {row}: {why}"))
        })? {
            fields.push(field);
            arrays.push(array);
            continue;
        }
        if let Some((field, array)) = as_numbers(name, &raw) {
            fields.push(field);
            arrays.push(array);
            continue;
        }
        // Strings as they are; other values as (compact) JSON text.
        let values: StringArray = raw
            .iter()
            .map(|v| {
                v.map(|v| match serde_json::from_str::<serde_json::Value>(v) {
                    Ok(serde_json::Value::String(s)) => s,
                    Ok(other) => other.to_string(),
                    Err(_) => v.to_string(),
                })
            })
            .collect();
        fields.push(Field::new(name.as_str(), DataType::Utf8, true));
        arrays.push(Arc::new(values));
    }
    match RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays) {
        Ok(b) => Ok(std::borrow::Cow::Owned(b)),
        Err(_) => Ok(std::borrow::Cow::Borrowed(batch)),
    }
}

/// A field's values as a float32-vector column when every value there is an array (stored
/// embeddings, as the reader lifts them for a dedup step), `Err((row, why))` when one of
/// them is not a vector of numbers of the others' length; `None` when not every value is an
/// array (the stage gets them as text).
fn as_vectors(name: &str, values: &[Option<&str>]) -> Result<Option<crate::io::vectors::Lifted>, (usize, String)> {
    if values.iter().all(Option::is_none) || !values.iter().flatten().all(|v| v.starts_with('[')) {
        return Ok(None);
    }
    let mut column = crate::io::vectors::VectorColumn::new(name);
    for (r, v) in values.iter().enumerate() {
        column.push_json(*v).map_err(|why| (r, why))?;
    }
    Ok(column.finish())
}

/// A field's values as an int64 column when every value there is an integer JSON number
/// that fits, a float64 column when every one is a number; `None` otherwise (or when the
/// field is absent everywhere).
fn as_numbers(name: &str, values: &[Option<&str>]) -> Option<crate::io::vectors::Lifted> {
    if values.iter().all(Option::is_none) {
        return None;
    }
    let numbers: Vec<Option<serde_json::Number>> = values
        .iter()
        .map(|v| match v.map(serde_json::from_str::<serde_json::Value>) {
            None => Some(None),
            Some(Ok(serde_json::Value::Number(n))) => Some(Some(n)),
            Some(_) => None,
        })
        .collect::<Option<_>>()?;
    if numbers.iter().flatten().all(|n| n.as_i64().is_some()) {
        let a: arrow_array::Int64Array = numbers.iter().map(|n| n.as_ref().and_then(serde_json::Number::as_i64)).collect();
        return Some((Field::new(name, DataType::Int64, true), Arc::new(a)));
    }
    let a: arrow_array::Float64Array = numbers.iter().map(|n| n.as_ref().and_then(serde_json::Number::as_f64)).collect();
    Some((Field::new(name, DataType::Float64, true), Arc::new(a)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_inputs_come_from_meta_fields() {
        let schema = Schema::new(vec![Field::new("text", DataType::Utf8, false), Field::new(crate::io::META, DataType::Utf8, true)]);
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let metas: ArrayRef = Arc::new(StringArray::from(vec![Some(r#"{"ext":"py","n":3}"#), Some("{}"), None]));
        let b = RecordBatch::try_new(Arc::new(schema), vec![texts, metas]).unwrap();
        let wanted = ["text".to_string(), "ext".to_string(), "n".to_string()];
        let with = with_meta_fields(&b, &wanted).unwrap();
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
        let n = with.column_by_name("n").unwrap().as_primitive::<Int64Type>();
        assert_eq!(n.iter().collect::<Vec<_>>(), [Some(3), None, None], "a number field reaches the stage as a number");
        assert!(matches!(with_meta_fields(&b, &["text".to_string()]).unwrap(), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn stored_embeddings_in_meta_reach_a_stage_as_vectors_and_bad_ones_are_named() {
        let schema =
            Schema::new(vec![Field::new(crate::io::META, DataType::Utf8, true), Field::new(crate::io::ROW, DataType::Int64, false)]);
        let metas: ArrayRef = Arc::new(StringArray::from(vec![
            Some(r#"{"e":[1,2.5],"r":[1],"m":[1,"x"],"t":"a"}"#),
            Some(r#"{"e":null,"r":[1,2],"m":[2,3],"t":[1]}"#),
            Some(r#"{"e":[3,4],"r":[3],"m":[4],"t":"c"}"#),
        ]));
        let rows: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![40, 41, 42]));
        let b = RecordBatch::try_new(Arc::new(schema), vec![metas, rows]).unwrap();
        let with = with_meta_fields(&b, &["e".to_string(), "t".to_string()]).unwrap();
        let e = with.column_by_name("e").unwrap();
        assert_eq!(e.data_type(), &DataType::new_fixed_size_list(DataType::Float32, 2, false));
        let e = e.as_any().downcast_ref::<arrow_array::FixedSizeListArray>().unwrap();
        assert!(e.is_valid(0) && e.is_null(1) && e.is_valid(2));
        let values = e.values().as_any().downcast_ref::<arrow_array::Float32Array>().unwrap();
        assert_eq!((values.value(0), values.value(1), values.value(4), values.value(5)), (1.0, 2.5, 3.0, 4.0));
        // Not every value an array: the stage gets text.
        assert_eq!(with.column_by_name("t").unwrap().data_type(), &DataType::Utf8);
        // Arrays that are not vectors of one length: refused, naming the field and the row.
        let err = |name: &str| with_meta_fields(&b, &[name.to_string()]).unwrap_err().to_string();
        assert!(err("r").contains(r#"field "r" of row 41"#) && err("r").contains("2 numbers where earlier rows had 1"), "{}", err("r"));
        assert!(err("m").contains(r#"field "m" of row 40"#), "{}", err("m"));
    }

    /// Numbers keep their kind, as from a Parquet source: integers as int64, any float (or an
    /// integer past i64) makes the column float64; a field that also holds a string stays text.
    #[test]
    fn number_fields_reach_a_stage_as_int64_or_float64() {
        let metas: ArrayRef = Arc::new(StringArray::from(vec![
            Some(r#"{"i":1,"f":1,"big":1,"mixed":1,"flag":true}"#),
            Some(r#"{"i":-7,"f":2.5,"big":18446744073709551615,"mixed":"x"}"#),
            Some(r#"{"i":null}"#),
        ]));
        let b = RecordBatch::try_from_iter([(crate::io::META, metas)]).unwrap();
        let names = ["i", "f", "big", "mixed", "flag"].map(String::from);
        let with = with_meta_fields(&b, &names).unwrap();
        let ty = |n: &str| with.column_by_name(n).unwrap().data_type().clone();
        assert_eq!(
            [ty("i"), ty("f"), ty("big"), ty("mixed"), ty("flag")],
            [DataType::Int64, DataType::Float64, DataType::Float64, DataType::Utf8, DataType::Utf8]
        );
        assert_eq!(with.column_by_name("i").unwrap().as_primitive::<Int64Type>().iter().collect::<Vec<_>>(), [Some(1), Some(-7), None]);
        let f = with.column_by_name("f").unwrap().as_primitive::<arrow_array::types::Float64Type>();
        assert_eq!(f.iter().collect::<Vec<_>>(), [Some(1.0), Some(2.5), None]);
    }

    #[test]
    fn projection_keeps_what_the_stage_names() {
        let b = RecordBatch::try_from_iter([
            ("id", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
            ("text", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
        ])
        .unwrap();
        assert_eq!(stage_input(&b, &["text".to_string()]).unwrap().num_columns(), 1);
        assert_eq!(stage_input(&b, &["*".to_string()]).unwrap().num_columns(), 2);
    }
}
