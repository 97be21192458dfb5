//! What a stage is given: the columns its manifest's `input_columns` name, those missing
//! from the batch taken from the JSONL passthrough fields (`_meta`).

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

/// The batch a stage instance is called with: `batch` with the stage's missing input columns
/// added from `_meta`, projected to `wanted` (`*`: every column). No copy of existing columns.
pub fn stage_input(batch: &RecordBatch, wanted: &[String]) -> RecordBatch {
    project(&with_meta_fields(batch, wanted), wanted)
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
    fn projection_keeps_what_the_stage_names() {
        let b = RecordBatch::try_from_iter([
            ("id", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
            ("text", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
        ])
        .unwrap();
        assert_eq!(stage_input(&b, &["text".to_string()]).num_columns(), 1);
        assert_eq!(stage_input(&b, &["*".to_string()]).num_columns(), 2);
    }
}
