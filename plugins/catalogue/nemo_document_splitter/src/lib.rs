//! NeMo Curator's `DocumentSplitter` as a stage: each document's text split on `separator`,
//! one row per segment (the document's other columns repeated), numbered from 0 in
//! `segment_id_field`. `document_joiner` puts the segments back together.

use curator_sdk::prelude::*;

/// Splits each document into segments, one row each.
#[stage(name = "document_splitter", cpus = 1.0, memory_mb = 256, inputs = ["*"], outputs = ["text", "segment_id"])]
pub struct DocumentSplitter {
    /// What the text is split on (Python's `str.split(separator)`: every occurrence, empty
    /// segments kept).
    pub separator: String,
    /// The column numbering a document's segments.
    #[param(default = "segment_id")]
    pub segment_id_field: String,
}

impl Stage for DocumentSplitter {
    fn init(&mut self) -> Result<(), StageError> {
        if self.separator.is_empty() {
            return Err(StageError::InvalidParams("separator: empty (Python's str.split refuses an empty separator too)".into()));
        }
        if matches!(self.segment_id_field.as_str(), "" | "text" | "id") || self.segment_id_field.starts_with('_') {
            return Err(StageError::InvalidParams(format!(
                "segment_id_field: {:?} is not a column a stage may write",
                self.segment_id_field
            )));
        }
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let column = batch.column("text")?;
        let text = column.strings()?;
        let (mut rows, mut segments, mut numbers) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..batch.len() {
            let t = if column.is_valid(i) { text.get(i).unwrap_or_default() } else { "" };
            for (k, segment) in t.split(self.separator.as_str()).enumerate() {
                rows.push(i as u32);
                segments.push(segment);
                numbers.push(k as i64);
            }
        }
        let mut out = batch.take(&rows)?;
        out.columns.retain(|c| c.name != "text" && c.name != self.segment_id_field);
        out.columns.push(Column::utf8("text", segments));
        out.columns.push(Column::int64(&self.segment_id_field, &numbers));
        Ok(Output::Batch(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_rows_numbered_per_document() {
        let mut s = DocumentSplitter { separator: "\n".into(), segment_id_field: "segment_id".into() };
        Stage::init(&mut s).unwrap();
        let batch = Batch {
            num_rows: 2,
            columns: vec![Column::utf8("id", ["a", "b"]), Column::utf8("text", ["one\ntwo\n", "three"]), Column::int64("n", &[1, 2])],
        };
        let Output::Batch(out) = s.process(batch).unwrap() else { panic!("expected a batch") };
        assert_eq!(out.num_rows, 4);
        let strings = |name: &str| {
            let c = out.column(name).unwrap().strings().unwrap();
            (0..c.len()).map(|i| c.get(i).unwrap().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(strings("id"), ["a", "a", "a", "b"]);
        assert_eq!(strings("text"), ["one", "two", "", "three"]);
        assert_eq!(out.column("segment_id").unwrap().i64_values().unwrap(), [0, 1, 2, 0]);
        assert_eq!(out.column("n").unwrap().i64_values().unwrap(), [1, 1, 1, 2]);
    }

    #[test]
    fn an_empty_separator_is_refused() {
        let mut s = DocumentSplitter { separator: String::new(), segment_id_field: "segment_id".into() };
        assert!(Stage::init(&mut s).is_err());
    }
}
