//! What a stage answers, whatever runs it, and the one place where that answer is checked and
//! applied to the batch it was given. Every output is untrusted: a guest or a worker process
//! can send anything, so [`StageOutput::apply`] checks shapes, ranges and order before a
//! single row moves.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema};

use super::StageFailure;

/// Which rows a stage keeps: ascending row indices (WIT `selection`, C ABI `selection`) or a
/// boolean flag per input row (C ABI `scored`'s `_keep` column).
#[derive(Debug, Clone)]
pub enum Keep {
    Indices(UInt32Array),
    Mask(BooleanArray),
}

/// A stage's answer to one batch, before it is checked.
#[derive(Debug, Clone)]
pub enum StageOutput {
    /// Keep these rows.
    Selection(Keep),
    /// Add (or replace, by name) columns: one value per input row.
    Columns(Vec<(Field, ArrayRef)>),
    /// Add columns, then keep some rows (NeMo's ScoreFilter in one call).
    Scored { columns: Vec<(Field, ArrayRef)>, keep: Keep },
    /// A whole new batch (any number of rows; it must have a utf8 `text` column).
    Batch(RecordBatch),
}

/// What kind of output this is, as the worker protocol and the C ABI name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Selection,
    Columns,
    Scored,
    Batch,
}

impl OutputKind {
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Selection => "selection",
            OutputKind::Columns => "columns",
            OutputKind::Scored => "scored",
            OutputKind::Batch => "batch",
        }
    }

    /// The C ABI's schema name of an output (`""` means columns, as in ABI 0.1).
    pub fn parse(name: &str) -> Result<OutputKind, StageFailure> {
        match name {
            "selection" => Ok(OutputKind::Selection),
            "" | "columns" => Ok(OutputKind::Columns),
            "scored" => Ok(OutputKind::Scored),
            "batch" => Ok(OutputKind::Batch),
            other => Err(invalid(format!("unknown output kind {other:?}"))),
        }
    }
}

fn invalid(msg: impl Into<String>) -> StageFailure {
    StageFailure::InvalidOutput(msg.into())
}

/// The first column of `batch` as a `T` array, or `what` as the complaint.
pub fn first_column<T: Array + Clone + 'static>(batch: &RecordBatch, what: &str) -> Result<T, StageFailure> {
    batch.columns().first().and_then(|c| c.as_any().downcast_ref::<T>()).cloned().ok_or_else(|| invalid(what))
}

/// The columns of a batch as (field, array) pairs.
pub fn columns_of(batch: &RecordBatch) -> Vec<(Field, ArrayRef)> {
    batch.schema().fields().iter().map(|f| f.as_ref().clone()).zip(batch.columns().iter().cloned()).collect()
}

impl StageOutput {
    pub fn kind(&self) -> OutputKind {
        match self {
            StageOutput::Selection(_) => OutputKind::Selection,
            StageOutput::Columns(_) => OutputKind::Columns,
            StageOutput::Scored { .. } => OutputKind::Scored,
            StageOutput::Batch(_) => OutputKind::Batch,
        }
    }

    /// Read a C ABI output: a struct array whose schema name says the kind (`selection`: one
    /// uint32 column; `scored`: columns plus a boolean `_keep`).
    pub fn from_abi(kind: OutputKind, out: RecordBatch) -> Result<StageOutput, StageFailure> {
        Ok(match kind {
            OutputKind::Selection => StageOutput::Selection(Keep::Indices(first_column(&out, "a selection must be one uint32 column")?)),
            OutputKind::Columns => StageOutput::Columns(columns_of(&out)),
            OutputKind::Scored => {
                let keep_name = curator_sdk::abi::SCORED_KEEP;
                let keep = out
                    .column_by_name(keep_name)
                    .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
                    .cloned()
                    .ok_or_else(|| invalid(format!("a scored output needs a boolean column {keep_name:?}")))?;
                let columns = columns_of(&out).into_iter().filter(|(f, _)| f.name() != keep_name).collect();
                StageOutput::Scored { columns, keep: Keep::Mask(keep) }
            }
            OutputKind::Batch => StageOutput::Batch(out),
        })
    }

    /// Whether applying this output leaves the source's columns (`id`, `text`, `_meta`,
    /// `_row`) as they were on the kept rows: a selection, or added columns of other names.
    /// A new batch, or a column replacing one of them, does not.
    pub fn keeps_source_columns(&self) -> bool {
        let other = |cols: &[(Field, ArrayRef)]| {
            cols.iter().all(|(f, _)| ![crate::io::ID, crate::io::TEXT, crate::io::META, crate::io::ROW].contains(&f.name().as_str()))
        };
        match self {
            StageOutput::Selection(_) => true,
            StageOutput::Columns(cols) | StageOutput::Scored { columns: cols, .. } => other(cols),
            StageOutput::Batch(_) => false,
        }
    }

    /// Check this output against the batch it answers and produce the next batch. The one set
    /// of rules for every back-end: selections ascending and in range, one value per input
    /// row for added columns, a `text` column in a new batch.
    pub fn apply(self, input: &RecordBatch) -> Result<RecordBatch, StageFailure> {
        let rows = input.num_rows();
        match self {
            StageOutput::Selection(keep) => {
                let mask = keep.mask(rows)?;
                if mask.true_count() == rows {
                    return Ok(input.clone());
                }
                arrow_select::filter::filter_record_batch(input, &mask).map_err(|e| invalid(e.to_string()))
            }
            StageOutput::Columns(cols) => with_columns(input, cols),
            StageOutput::Scored { columns, keep } => {
                let mask = keep.mask(rows)?;
                let with = with_columns(input, columns)?;
                if mask.true_count() == rows {
                    return Ok(with);
                }
                arrow_select::filter::filter_record_batch(&with, &mask).map_err(|e| invalid(e.to_string()))
            }
            StageOutput::Batch(b) => match b.schema().field_with_name(crate::io::TEXT).map(|f| f.data_type().clone()) {
                Ok(DataType::Utf8) => Ok(b),
                Ok(other) => Err(invalid(format!("the \"text\" column of a returned batch must be utf8, not {other}"))),
                Err(_) => Err(invalid("a returned batch must have a \"text\" column")),
            },
        }
    }
}

impl Keep {
    /// The kept rows of a batch of `rows` rows as a mask, checked.
    pub fn mask(&self, rows: usize) -> Result<BooleanArray, StageFailure> {
        match self {
            Keep::Mask(m) => {
                if m.len() != rows {
                    return Err(invalid(format!("{} keep flags for a batch of {rows}", m.len())));
                }
                // A null flag is "not kept".
                Ok(match m.nulls() {
                    Some(n) if n.null_count() > 0 => BooleanArray::new(m.values() & n.inner(), None),
                    _ => m.clone(),
                })
            }
            Keep::Indices(sel) => {
                if sel.null_count() > 0 {
                    return Err(invalid("a selection has null indices"));
                }
                let mut mask = vec![false; rows];
                let mut prev: Option<u32> = None;
                for &k in sel.values().iter() {
                    if k as usize >= rows || prev.is_some_and(|p| k <= p) {
                        return Err(invalid(format!("selection index {k} is out of range or not ascending ({rows} rows)")));
                    }
                    mask[k as usize] = true;
                    prev = Some(k);
                }
                Ok(BooleanArray::from(mask))
            }
        }
    }
}

/// `input` with `cols` added, or replacing the columns of the same name.
fn with_columns(input: &RecordBatch, cols: Vec<(Field, ArrayRef)>) -> Result<RecordBatch, StageFailure> {
    let rows = input.num_rows();
    let schema = input.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut arrays: Vec<ArrayRef> = input.columns().to_vec();
    for (field, array) in cols {
        if array.len() != rows {
            return Err(invalid(format!("column {:?}: {} rows of columns for a batch of {rows}", field.name(), array.len())));
        }
        if field.name() == crate::io::TEXT && array.as_any().downcast_ref::<StringArray>().is_none() {
            return Err(invalid(format!("column \"text\" must be utf8, not {}", array.data_type())));
        }
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
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options).map_err(|e| invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;

    fn batch() -> RecordBatch {
        RecordBatch::try_from_iter([
            ("id", Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef),
            ("text", Arc::new(StringArray::from(vec!["x", "y", "z"])) as ArrayRef),
        ])
        .unwrap()
    }

    fn sel(v: Vec<u32>) -> StageOutput {
        StageOutput::Selection(Keep::Indices(UInt32Array::from(v)))
    }

    #[test]
    fn selections_are_checked_then_applied() {
        assert_eq!(sel(vec![0, 2]).apply(&batch()).unwrap().num_rows(), 2);
        assert_eq!(sel(vec![]).apply(&batch()).unwrap().num_rows(), 0);
        assert_eq!(sel(vec![0, 1, 2]).apply(&batch()).unwrap(), batch());
        assert!(sel(vec![2, 1]).apply(&batch()).unwrap_err().to_string().contains("not ascending"));
        assert!(sel(vec![3]).apply(&batch()).unwrap_err().to_string().contains("out of range"));
        assert!(sel(vec![1, 1]).apply(&batch()).is_err());
    }

    #[test]
    fn columns_need_one_value_per_row() {
        let ok =
            StageOutput::Columns(vec![(Field::new("n", DataType::Int64, false), Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef)]);
        let out = ok.apply(&batch()).unwrap();
        assert_eq!(out.num_columns(), 3);
        let short =
            StageOutput::Columns(vec![(Field::new("n", DataType::Int64, false), Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)]);
        assert!(short.apply(&batch()).unwrap_err().to_string().contains("2 rows of columns for a batch of 3"));
        let bad_text =
            StageOutput::Columns(vec![(Field::new("text", DataType::Int64, false), Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef)]);
        assert!(bad_text.apply(&batch()).unwrap_err().to_string().contains("utf8"));
    }

    #[test]
    fn scored_adds_then_filters_and_mask_length_is_checked() {
        let cols = vec![(Field::new("s", DataType::Int64, false), Arc::new(Int64Array::from(vec![5, 6, 7])) as ArrayRef)];
        let out = StageOutput::Scored { columns: cols.clone(), keep: Keep::Mask(BooleanArray::from(vec![true, false, true])) }
            .apply(&batch())
            .unwrap();
        assert_eq!(out.num_rows(), 2);
        assert_eq!(out.column_by_name("s").unwrap().as_any().downcast_ref::<Int64Array>().unwrap().values(), &[5, 7]);
        let nulls = BooleanArray::from(vec![Some(true), None, Some(true)]);
        assert_eq!(StageOutput::Scored { columns: cols.clone(), keep: Keep::Mask(nulls) }.apply(&batch()).unwrap().num_rows(), 2);
        let short = StageOutput::Scored { columns: cols, keep: Keep::Mask(BooleanArray::from(vec![true])) };
        assert!(short.apply(&batch()).unwrap_err().to_string().contains("1 keep flags"));
    }

    #[test]
    fn a_new_batch_needs_text_whichever_back_end_sent_it() {
        let no_text = RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["a"])) as ArrayRef)]).unwrap();
        assert!(StageOutput::Batch(no_text).apply(&batch()).unwrap_err().to_string().contains("\"text\" column"));
        let fine = RecordBatch::try_from_iter([("text", Arc::new(StringArray::from(vec!["a"])) as ArrayRef)]).unwrap();
        assert_eq!(StageOutput::Batch(fine).apply(&batch()).unwrap().num_rows(), 1);
    }
}
