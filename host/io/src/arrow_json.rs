//! Arrow cells as JSON values and back, for columns of any type: how a Parquet source's
//! columns travel in a document's `_meta`, and how a Parquet sink rebuilds them in the
//! source's own types.
//!
//! As JSON: numbers, strings and bools as themselves (a float32 by its shortest decimal
//! text, so 0.1f32 reads 0.1; NaN and infinities, which JSON lacks, as null); lists as
//! arrays; structs, and maps with string keys, as objects (other maps as `[key, value]`
//! pairs); timestamps, dates and times as ISO 8601 text; decimals as their exact decimal
//! text (a JSON number would round them through f64); binary as lowercase hex. Every form
//! but the pairs reads back into its type with arrow-json's decoder ([`typed_column`]).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Field, FieldRef, Schema};
use serde_json::{Map, Value};

use super::json_str::push_json_str;

/// A string column of any Arrow string layout (`Utf8`, `LargeUtf8`, `Utf8View`, or a
/// dictionary of them) as `Utf8`; `None` for anything else.
pub fn text_column(a: &ArrayRef) -> Option<StringArray> {
    let is_text = |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    let castable = match a.data_type() {
        DataType::Utf8 => return a.as_any().downcast_ref::<StringArray>().cloned(),
        DataType::Dictionary(_, v) => is_text(v),
        t => is_text(t),
    };
    if !castable {
        return None;
    }
    arrow_cast::cast(a, &DataType::Utf8).ok().and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
}

/// Reads the cells of one column as JSON values (set up once per batch).
pub struct CellJson<'a> {
    how: How<'a>,
}

enum How<'a> {
    /// Numbers, bools and strings, read directly.
    Scalar(&'a dyn Array),
    /// A string column of another layout, as `Utf8`.
    Text(StringArray),
    /// Exact decimal text.
    Decimal(ArrayFormatter<'a>, &'a dyn Array),
    /// Everything else: arrow-json's encoder, its output parsed.
    Encoded(arrow_json::writer::NullableEncoder<'a>, Vec<u8>),
}

/// Encoder options shared by every [`CellJson`] (the encoders borrow them).
pub fn encoder_options() -> arrow_json::writer::EncoderOptions {
    arrow_json::writer::EncoderOptions::default()
}

impl<'a> CellJson<'a> {
    pub fn new(field: &'a FieldRef, col: &'a ArrayRef, options: &'a arrow_json::writer::EncoderOptions) -> CellJson<'a> {
        let how = match col.data_type() {
            DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
            | DataType::Utf8View
            | DataType::Null => How::Scalar(col.as_ref()),
            DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
                match ArrayFormatter::try_new(col.as_ref(), &FormatOptions::default()) {
                    Ok(f) => How::Decimal(f, col.as_ref()),
                    Err(_) => How::Scalar(col.as_ref()),
                }
            }
            _ => match text_column(col) {
                Some(s) => How::Text(s),
                None => match arrow_json::writer::make_encoder(field, col.as_ref(), options) {
                    Ok(e) => How::Encoded(e, Vec::new()),
                    Err(_) => How::Scalar(col.as_ref()),
                },
            },
        };
        CellJson { how }
    }

    /// The cell at `row` (null cells are `Value::Null`).
    pub fn value(&mut self, row: usize) -> Value {
        match &mut self.how {
            How::Scalar(a) => scalar(*a, row),
            How::Text(s) if s.is_valid(row) => Value::String(s.value(row).to_string()),
            How::Text(_) => Value::Null,
            How::Decimal(f, a) if a.is_valid(row) => Value::String(f.value(row).to_string()),
            How::Decimal(..) => Value::Null,
            How::Encoded(e, buf) => {
                if e.is_null(row) {
                    return Value::Null;
                }
                buf.clear();
                e.encode(row, buf);
                serde_json::from_slice(buf).unwrap_or(Value::Null)
            }
        }
    }
}

impl CellJson<'_> {
    /// Write the cell at `row` as JSON text to `out` (what [`CellJson::value`] would give,
    /// without building it); false, writing nothing, for a null cell.
    pub fn write(&mut self, row: usize, out: &mut Vec<u8>) -> bool {
        let text = |s: &str, out: &mut Vec<u8>| {
            push_json_str(out, s);
            true
        };
        match &mut self.how {
            How::Scalar(a) if a.is_null(row) => false,
            How::Scalar(a) => match a.data_type() {
                DataType::Utf8 => text(a.as_string::<i32>().value(row), out),
                DataType::Utf8View => text(a.as_string_view().value(row), out),
                DataType::Int64 => serde_json::to_writer(out, &a.as_primitive::<Int64Type>().value(row)).is_ok(),
                _ => serde_json::to_writer(out, &scalar(*a, row)).is_ok(),
            },
            How::Text(s) if s.is_valid(row) => text(s.value(row), out),
            How::Text(_) => false,
            How::Decimal(f, a) if a.is_valid(row) => text(&f.value(row).to_string(), out),
            How::Decimal(..) => false,
            How::Encoded(e, _) if e.is_null(row) => false,
            How::Encoded(e, _) => {
                e.encode(row, out);
                true
            }
        }
    }
}

fn float(v: f64) -> Value {
    serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null)
}

/// A number, bool or string cell (anything else is null).
fn scalar(a: &dyn Array, row: usize) -> Value {
    if a.is_null(row) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Boolean => Value::Bool(a.as_boolean().value(row)),
        DataType::Int8 => Value::from(a.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => Value::from(a.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => Value::from(a.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => Value::from(a.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => Value::from(a.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => Value::from(a.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => Value::from(a.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => Value::from(a.as_primitive::<UInt64Type>().value(row)),
        // The shortest text that reads back as the same float32, not its f64 widening.
        DataType::Float16 => shortest(a.as_primitive::<Float16Type>().value(row).to_f32()),
        DataType::Float32 => shortest(a.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => float(a.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Value::String(a.as_string::<i32>().value(row).to_string()),
        DataType::Utf8View => Value::String(a.as_string_view().value(row).to_string()),
        _ => Value::Null,
    }
}

fn shortest(v: f32) -> Value {
    if !v.is_finite() {
        return Value::Null;
    }
    float(v.to_string().parse::<f64>().unwrap_or(f64::from(v)))
}

/// Whether a column of type `t` needs its own type in a Parquet sink: the sink's inferred
/// columns (bool, int64, float64, utf8) already hold these exactly.
pub fn needs_own_type(t: &DataType) -> bool {
    !matches!(t, DataType::Boolean | DataType::Int64 | DataType::Float64 | DataType::Utf8 | DataType::Null)
}

/// An Arrow type for a field whose values (JSON arrays, or JSON objects) a Parquet sink
/// should store as a nested column: lists and structs as arrow-json infers them. `None` for
/// scalars, mixed arrays and objects, and types holding `Null` (no values to type them by).
pub fn nested_type(name: &str, values: &[&Value]) -> Option<DataType> {
    let arrays = values.iter().all(|v| v.is_array());
    let objects = values.iter().all(|v| v.is_object());
    if values.is_empty() || !(arrays || objects) {
        return None;
    }
    let rows = values.iter().map(|v| Ok(Value::Object(Map::from_iter([(name.to_string(), (*v).clone())]))));
    let schema = arrow_json::reader::infer_json_schema_from_iterator(rows).ok()?;
    let ty = schema.field_with_name(name).ok()?.data_type().clone();
    (!holds_null(&ty)).then_some(ty)
}

fn holds_null(t: &DataType) -> bool {
    match t {
        DataType::Null => true,
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => holds_null(f.data_type()),
        DataType::Struct(fs) => fs.is_empty() || fs.iter().any(|f| holds_null(f.data_type())),
        _ => false,
    }
}

/// Build a column of type `ty` from one JSON value per row (`None`: absent, null), and say
/// which rows it holds: a value that does not fit the type, or does not read back as the
/// same JSON ([`same_json`]), is left null there for the caller to keep another way.
pub fn typed_column(name: &str, ty: &DataType, values: &[Option<&Value>]) -> (ArrayRef, Vec<bool>) {
    let col = decode(name, ty, values).unwrap_or_else(|| {
        // Some value does not fit: decode row by row, the misfits as nulls.
        let rows: Vec<ArrayRef> = values
            .iter()
            .map(|v| decode(name, ty, std::slice::from_ref(v)).unwrap_or_else(|| arrow_array::new_null_array(ty, 1)))
            .collect();
        let refs: Vec<&dyn Array> = rows.iter().map(|a| a.as_ref()).collect();
        arrow_select::concat::concat(&refs).unwrap_or_else(|_| arrow_array::new_null_array(ty, values.len()))
    });
    let field: FieldRef = Arc::new(Field::new(name, ty.clone(), true));
    let options = encoder_options();
    let kept: Vec<bool> = {
        let mut back = CellJson::new(&field, &col, &options);
        values.iter().enumerate().map(|(r, v)| v.is_some_and(|v| same_json(v, &back.value(r)))).collect()
    };
    let misfits = arrow_array::BooleanArray::from(values.iter().zip(&kept).map(|(v, k)| v.is_some() && !k).collect::<Vec<bool>>());
    let col = if misfits.true_count() == 0 { col } else { arrow_select::nullif::nullif(col.as_ref(), &misfits).unwrap_or(col) };
    (col, kept)
}

fn decode(name: &str, ty: &DataType, values: &[Option<&Value>]) -> Option<ArrayRef> {
    let schema = Arc::new(Schema::new(vec![Field::new(name, ty.clone(), true)]));
    let mut decoder =
        arrow_json::ReaderBuilder::new(schema.clone()).with_batch_size(values.len().max(1)).with_strict_mode(true).build_decoder().ok()?;
    let rows: Vec<Map<String, Value>> =
        values.iter().map(|v| v.map(|v| Map::from_iter([(name.to_string(), v.clone())])).unwrap_or_default()).collect();
    decoder.serialize(&rows).ok()?;
    let batch = decoder.flush().ok()?.unwrap_or_else(|| RecordBatch::new_empty(schema));
    (batch.num_rows() == values.len()).then(|| batch.column(0).clone())
}

/// Whether two JSON values hold the same data: numbers by value (1 and 1.0 alike), and an
/// object key whose value is null the same as an absent key.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            let present = |m: &Map<String, Value>| m.iter().filter(|(_, v)| !v.is_null()).count();
            present(x) == present(y) && x.iter().filter(|(_, v)| !v.is_null()).all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{ListBuilder, StringBuilder, StringDictionaryBuilder};
    use arrow_array::{Decimal128Array, Float32Array, StringViewArray, StructArray, TimestampMicrosecondArray};

    fn cells(col: ArrayRef) -> Vec<Value> {
        let field: FieldRef = Arc::new(Field::new("c", col.data_type().clone(), true));
        let opts = encoder_options();
        let mut c = CellJson::new(&field, &col, &opts);
        (0..col.len()).map(|r| c.value(r)).collect()
    }

    #[test]
    fn every_string_layout_is_text() {
        let view: ArrayRef = Arc::new(StringViewArray::from(vec![Some("a long enough string to be out of line"), None]));
        assert_eq!(text_column(&view).unwrap().value(0), "a long enough string to be out of line");
        let mut d = StringDictionaryBuilder::<Int32Type>::new();
        d.append_value("x");
        d.append_value("y");
        d.append_value("x");
        let dict: ArrayRef = Arc::new(d.finish());
        let t = text_column(&dict).unwrap();
        assert_eq!((t.value(0), t.value(1), t.value(2)), ("x", "y", "x"));
        let ints: ArrayRef = Arc::new(arrow_array::Int32Array::from(vec![1]));
        assert!(text_column(&ints).is_none());
    }

    #[test]
    fn cells_read_as_faithful_json_and_back_into_their_types() {
        let mut lb = ListBuilder::new(StringBuilder::new());
        lb.values().append_value("a");
        lb.values().append_value("b");
        lb.append(true);
        lb.append(false);
        lb.append(true);
        let ts = TimestampMicrosecondArray::from(vec![Some(1_700_000_000_123_456), None, Some(0)]).with_timezone("UTC");
        let dec =
            Decimal128Array::from(vec![Some(12345678901234567890123456789i128), Some(-5), None]).with_precision_and_scale(38, 4).unwrap();
        let st = StructArray::from(vec![
            (Arc::new(Field::new("k", DataType::Int32, true)), Arc::new(arrow_array::Int32Array::from(vec![1, 2, 3])) as ArrayRef),
            (Arc::new(Field::new("f", DataType::Float32, true)), Arc::new(Float32Array::from(vec![0.1, f32::NAN, 2.5])) as ArrayRef),
        ]);
        let columns: Vec<ArrayRef> = vec![Arc::new(lb.finish()), Arc::new(ts), Arc::new(dec), Arc::new(st)];
        let json: Vec<Vec<Value>> = columns.iter().map(|c| cells(c.clone())).collect();
        assert_eq!(json[0], vec![serde_json::json!(["a", "b"]), Value::Null, serde_json::json!([])]);
        assert_eq!(json[1][0], Value::String("2023-11-14T22:13:20.123456Z".into()));
        assert_eq!(json[2][0], Value::String("1234567890123456789012345.6789".into()));
        assert_eq!(json[2][1], Value::String("-0.0005".into()));
        assert_eq!(json[3][0], serde_json::json!({"k": 1, "f": 0.1}));
        for (col, vals) in columns.iter().zip(&json) {
            let refs: Vec<Option<&Value>> = vals.iter().map(|v| (!v.is_null()).then_some(v)).collect();
            let (back, kept) = typed_column("c", col.data_type(), &refs);
            let want: Vec<bool> = refs.iter().map(|v| v.is_some()).collect();
            assert_eq!(kept, want, "{}", col.data_type());
            if matches!(col.data_type(), DataType::Struct(_)) {
                // NaN has no JSON form: it comes back null, the rest exactly.
                let s = back.as_struct();
                assert_eq!(s.column(0).as_ref(), col.as_struct().column(0).as_ref());
                let f = s.column(1).as_primitive::<Float32Type>();
                assert_eq!((f.value(0), f.is_null(1), f.value(2)), (0.1, true, 2.5));
            } else {
                assert_eq!(back.as_ref(), col.as_ref(), "{}", col.data_type());
            }
        }
    }

    #[test]
    fn values_that_do_not_fit_or_do_not_read_back_are_left_out() {
        let v = [serde_json::json!(5), serde_json::json!("x"), serde_json::json!(3_000_000_000i64), serde_json::json!(7.0)];
        let refs: Vec<Option<&Value>> = v.iter().map(Some).chain([None]).collect();
        let (col, kept) = typed_column("c", &DataType::Int32, &refs);
        assert_eq!(kept, vec![true, false, false, true, false]);
        let ints = col.as_primitive::<Int32Type>();
        assert_eq!((ints.value(0), ints.is_null(1), ints.is_null(2), ints.value(3), ints.is_null(4)), (5, true, true, 7, true));
    }

    #[test]
    fn nested_json_gets_a_nested_type_and_scalars_do_not() {
        let lists = [serde_json::json!(["a"]), serde_json::json!([])];
        let refs: Vec<&Value> = lists.iter().collect();
        assert_eq!(nested_type("t", &refs), Some(DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))));
        let objs = [serde_json::json!({"a": 1}), serde_json::json!({"b": "x"})];
        let t = nested_type("o", &objs.iter().collect::<Vec<_>>()).unwrap();
        assert!(matches!(&t, DataType::Struct(fs) if fs.len() == 2), "{t}");
        let mixed = [serde_json::json!([1]), serde_json::json!({"a": 1})];
        assert_eq!(nested_type("m", &mixed.iter().collect::<Vec<_>>()), None);
        let unknown = [serde_json::json!({"k": null})];
        assert_eq!(nested_type("u", &unknown.iter().collect::<Vec<_>>()), None);
        assert!(same_json(&serde_json::json!({"a": 1, "b": null}), &serde_json::json!({"a": 1.0})));
        assert!(!same_json(&serde_json::json!({"a": 1}), &serde_json::json!({"a": 1, "c": 2})));
    }
}
