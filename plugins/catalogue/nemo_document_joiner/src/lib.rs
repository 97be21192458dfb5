//! NeMo Curator's `DocumentJoiner` as a stage: the segments of a document (rows sharing
//! `document_id_field`, ordered by `segment_id_field`) joined back with `separator`, the
//! other columns taken from the first segment. With `max_length` and `length_field`,
//! adjacent segments are joined only while their lengths (plus one per join) stay within
//! `max_length`, as NeMo's Nemotron-CC pre-processing packs short lines into model inputs.
//!
//! Segments are joined within the batch the stage is given, as NeMo joins within a
//! partition: `document_splitter` emits a document's segments together, and this stage has
//! no batch size of its own, so it sees them together unless `batch_size` cuts them apart.
//! Documents come out in the order of their first segment (NeMo's `groupby` sorts them by id).

use std::collections::HashMap;

use curator_sdk::prelude::*;

/// Joins a document's segments back into one row (or into rows of at most `max_length`).
#[stage(
    name = "document_joiner",
    cpus = 1.0,
    memory_mb = 256,
    inputs = ["*"],
    input_params = ["segment_id_field", "document_id_field", "length_field"],
    outputs = ["text"]
)]
pub struct DocumentJoiner {
    /// What goes between joined segments.
    pub separator: String,
    /// The column ordering a document's segments.
    #[param(default = "segment_id")]
    pub segment_id_field: String,
    /// The column the segments of one document share.
    #[param(default = "id")]
    pub document_id_field: String,
    /// Drop `segment_id_field` from the output.
    #[param(default = true)]
    pub drop_segment_id_field: bool,
    /// Longest joined segment, in `length_field`'s units (with `length_field`; none: join
    /// every segment of a document).
    pub max_length: Option<f64>,
    /// The column holding each segment's length (a token count, say), summed (plus one per
    /// join) into the joined row's (with `max_length`; empty: none).
    #[param(default = "")]
    pub length_field: String,
}

/// A column's values as numbers (int64 or float64), or its values as keys (utf8 or int64).
fn numbers(batch: &Batch, name: &str) -> Result<Vec<f64>, StageError> {
    let c = batch.column(name)?;
    match c.ty {
        ColumnType::Int64 => Ok(c.i64_values()?.into_iter().map(|v| v as f64).collect()),
        ColumnType::Float64 => Ok(c.f64_values()?),
        other => Err(StageError::Failed(format!("column {name:?} is {other:?}, not a number"))),
    }
}

fn keys(batch: &Batch, name: &str) -> Result<Vec<String>, StageError> {
    let c = batch.column(name)?;
    match c.ty {
        ColumnType::Utf8 => {
            let s = c.strings()?;
            Ok((0..s.len()).map(|i| s.get(i).unwrap_or_default().to_string()).collect())
        }
        ColumnType::Int64 => Ok(c.i64_values()?.into_iter().map(|v| v.to_string()).collect()),
        other => Err(StageError::Failed(format!("column {name:?} is {other:?}, not an id"))),
    }
}

/// One output row: the input row its other columns come from, its text, length and number.
struct Joined {
    first: u32,
    text: String,
    length: f64,
    segment: i64,
}

impl DocumentJoiner {
    /// Segments (row indices, in segment order) of one document, joined.
    fn join(&self, rows: &[u32], text: &curator_sdk::StrColumn<'_>, lengths: Option<&[f64]>, out: &mut Vec<Joined>) {
        let text_of = |r: u32| text.get(r as usize).unwrap_or_default();
        let (Some(max), Some(lengths)) = (self.max_length, lengths) else {
            let joined: Vec<&str> = rows.iter().map(|&r| text_of(r)).collect();
            out.push(Joined { first: rows[0], text: joined.join(&self.separator), length: 0.0, segment: 0 });
            return;
        };
        let mut acc: Option<Joined> = None;
        let mut segment = 0;
        for &r in rows {
            let len = lengths[r as usize];
            match &mut acc {
                Some(a) if a.length + len + 1.0 <= max => {
                    a.text.push_str(&self.separator);
                    a.text.push_str(text_of(r));
                    a.length += len + 1.0;
                }
                _ => {
                    if let Some(done) = acc.take() {
                        out.push(done);
                        segment += 1;
                    }
                    acc = Some(Joined { first: r, text: text_of(r).to_string(), length: len, segment });
                }
            }
        }
        out.extend(acc);
    }
}

impl Stage for DocumentJoiner {
    fn init(&mut self) -> Result<(), StageError> {
        match (&self.max_length, self.length_field.is_empty()) {
            (Some(_), true) => Err(StageError::InvalidParams("max_length is set but length_field is not".into())),
            (None, false) => Err(StageError::InvalidParams("length_field is set but max_length is not".into())),
            _ => Ok(()),
        }
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let text = batch.column("text")?.strings()?;
        let ids = keys(&batch, &self.document_id_field)?;
        let order = numbers(&batch, &self.segment_id_field)?;
        let lengths = match self.length_field.as_str() {
            "" => None,
            f => Some(numbers(&batch, f)?),
        };
        // Documents in the order of their first segment; each one's rows in segment order
        // (a stable sort).
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut at: HashMap<&str, usize> = HashMap::new();
        for (r, id) in ids.iter().enumerate() {
            let g = *at.entry(id.as_str()).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(r as u32);
        }
        let mut joined = Vec::with_capacity(groups.len());
        for g in &mut groups {
            g.sort_by(|a, b| order[*a as usize].total_cmp(&order[*b as usize]));
            self.join(g, &text, lengths.as_deref(), &mut joined);
        }
        let firsts: Vec<u32> = joined.iter().map(|j| j.first).collect();
        let mut out = batch.take(&firsts)?;
        let seg_type = batch.column(&self.segment_id_field)?.ty;
        out.columns.retain(|c| c.name != "text" && c.name != self.segment_id_field && c.name != self.length_field);
        out.columns.push(Column::utf8("text", joined.iter().map(|j| j.text.as_str())));
        if !self.length_field.is_empty() {
            let f = &self.length_field;
            let column = match batch.column(f)?.ty {
                ColumnType::Int64 => Column::int64(f, &joined.iter().map(|j| j.length as i64).collect::<Vec<_>>()),
                _ => Column::float64(f, &joined.iter().map(|j| j.length).collect::<Vec<_>>()),
            };
            out.columns.push(column);
        }
        if !self.drop_segment_id_field {
            // NeMo numbers the packed rows anew; without packing it keeps the first segment's.
            let numbers: Vec<i64> =
                joined.iter().map(|j| if self.max_length.is_some() { j.segment } else { order[j.first as usize] as i64 }).collect();
            out.columns.push(match seg_type {
                ColumnType::Float64 => Column::float64(&self.segment_id_field, &numbers.iter().map(|&n| n as f64).collect::<Vec<_>>()),
                _ => Column::int64(&self.segment_id_field, &numbers),
            });
        }
        Ok(Output::Batch(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joiner(max_length: Option<f64>, length_field: Option<&str>, drop: bool) -> DocumentJoiner {
        let mut j = DocumentJoiner {
            separator: "\n".into(),
            segment_id_field: "segment_id".into(),
            document_id_field: "id".into(),
            drop_segment_id_field: drop,
            max_length,
            length_field: length_field.unwrap_or_default().to_string(),
        };
        Stage::init(&mut j).unwrap();
        j
    }

    fn segments() -> Batch {
        // Document a's segments arrive out of order, b's between them.
        Batch {
            num_rows: 5,
            columns: vec![
                Column::utf8("id", ["a", "b", "a", "a", "b"]),
                Column::utf8("text", ["two", "x", "one", "three", "y"]),
                Column::int64("segment_id", &[1, 0, 0, 2, 1]),
                Column::float64("len", &[3.0, 1.0, 3.0, 5.0, 1.0]),
                Column::utf8("url", ["u1", "u2", "u0", "u3", "u4"]),
            ],
        }
    }

    fn strings(b: &Batch, name: &str) -> Vec<String> {
        let c = b.column(name).unwrap().strings().unwrap();
        (0..c.len()).map(|i| c.get(i).unwrap().to_string()).collect()
    }

    #[test]
    fn segments_join_back_in_order_with_the_first_segments_fields() {
        let Output::Batch(out) = joiner(None, None, true).process(segments()).unwrap() else { panic!() };
        assert_eq!(strings(&out, "id"), ["a", "b"]);
        assert_eq!(strings(&out, "text"), ["one\ntwo\nthree", "x\ny"]);
        assert_eq!(strings(&out, "url"), ["u0", "u2"]);
        assert!(out.column("segment_id").is_err());
    }

    #[test]
    fn with_max_length_segments_are_packed_as_nemo_packs_them() {
        // a: 3 + 3 + 1 = 7 ≤ 7 joins "one" and "two"; + 5 + 1 > 7 starts a new row.
        let Output::Batch(out) = joiner(Some(7.0), Some("len"), false).process(segments()).unwrap() else { panic!() };
        assert_eq!(strings(&out, "text"), ["one\ntwo", "three", "x\ny"]);
        assert_eq!(strings(&out, "id"), ["a", "a", "b"]);
        assert_eq!(out.column("len").unwrap().f64_values().unwrap(), [7.0, 5.0, 3.0]);
        assert_eq!(out.column("segment_id").unwrap().i64_values().unwrap(), [0, 1, 0]);
        assert_eq!(strings(&out, "url"), ["u0", "u3", "u2"]);
    }

    #[test]
    fn max_length_needs_length_field() {
        let mut j = joiner(None, None, true);
        j.max_length = Some(3.0);
        assert!(Stage::init(&mut j).is_err());
    }
}
