//! Batches in Arrow layout, owned by the stage. Mirrors the WIT `batch` record field for
//! field, so crossing the boundary moves buffers instead of copying them.

use crate::doc::Doc;

/// Column types (Arrow-compatible).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Utf8,
    /// Bytes (Arrow `Binary`): offsets and data like utf8, any bytes.
    Binary,
    Int64,
    Float64,
    Boolean,
    /// One vector of f32 per row, all of the same dimension (Arrow `FixedSizeList<Float32>`):
    /// `offsets` holds one value, the dimension; `data` the rows' values back to back.
    Float32Vector,
}

/// One column in Arrow layout. See the WIT `column` record for the meaning of each buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    pub validity: Vec<u8>,
    pub offsets: Vec<u32>,
    pub data: Vec<u8>,
}

/// A batch of documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub num_rows: u32,
    pub columns: Vec<Column>,
}

/// What a stage returns for a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Ascending indices of the rows to keep.
    Selection(Vec<u32>),
    /// Columns replacing (same name) or added to the input's.
    Columns(Vec<Column>),
    /// A whole new batch.
    Batch(Batch),
    /// Columns added to every row (e.g. a score), then only the rows in `keep` kept.
    Scored { columns: Vec<Column>, keep: Vec<u32> },
}

/// A batch that does not have the shape a stage needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    MissingColumn(String),
    WrongType { column: String, expected: ColumnType, found: ColumnType },
    Malformed { column: String, reason: &'static str },
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchError::MissingColumn(c) => write!(f, "batch has no column {c:?}"),
            BatchError::WrongType { column, expected, found } => {
                write!(f, "column {column:?} has type {found:?}, expected {expected:?}")
            }
            BatchError::Malformed { column, reason } => {
                write!(f, "column {column:?} is malformed: {reason}")
            }
        }
    }
}

impl std::error::Error for BatchError {}

fn bitmap(bits: impl Iterator<Item = bool>, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.div_ceil(8)];
    for (i, b) in bits.enumerate() {
        if b {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

impl Column {
    /// A UTF-8 column from strings.
    pub fn utf8<'a>(name: &str, values: impl IntoIterator<Item = &'a str>) -> Column {
        let mut offsets = vec![0u32];
        let mut data = Vec::new();
        for v in values {
            data.extend_from_slice(v.as_bytes());
            offsets.push(data.len() as u32);
        }
        Column { name: name.into(), ty: ColumnType::Utf8, validity: Vec::new(), offsets, data }
    }

    /// The `_error` column ([`crate::ROW_ERROR_COLUMN`]) of a batch some of whose rows failed:
    /// each failed row's reason, valid only there; `None` when every row succeeded.
    pub fn row_errors(errors: &[Option<String>]) -> Option<Column> {
        if errors.iter().all(Option::is_none) {
            return None;
        }
        let mut col = Column::utf8(crate::ROW_ERROR_COLUMN, errors.iter().map(|e| e.as_deref().unwrap_or("")));
        col.validity = bitmap(errors.iter().map(Option::is_some), errors.len());
        Some(col)
    }

    /// A binary column from byte strings.
    pub fn binary<'a>(name: &str, values: impl IntoIterator<Item = &'a [u8]>) -> Column {
        let mut offsets = vec![0u32];
        let mut data = Vec::new();
        for v in values {
            data.extend_from_slice(v);
            offsets.push(data.len() as u32);
        }
        Column { name: name.into(), ty: ColumnType::Binary, validity: Vec::new(), offsets, data }
    }

    /// A binary column of `rows` values of `width` bytes each, laid out back to back in
    /// `data` (e.g. a fixed number of u32 per row).
    pub fn binary_fixed(name: &str, width: usize, data: Vec<u8>) -> Column {
        let rows = data.len().checked_div(width).unwrap_or(0);
        let offsets = (0..=rows).map(|r| (r * width) as u32).collect();
        Column { name: name.into(), ty: ColumnType::Binary, validity: Vec::new(), offsets, data }
    }

    /// The bytes of row `i` of a binary (or utf8) column.
    pub fn bytes_at(&self, i: usize) -> Option<&[u8]> {
        if !matches!(self.ty, ColumnType::Binary | ColumnType::Utf8) {
            return None;
        }
        let (a, b) = (*self.offsets.get(i)? as usize, *self.offsets.get(i + 1)? as usize);
        self.data.get(a..b)
    }

    /// An int64 column.
    pub fn int64(name: &str, values: &[i64]) -> Column {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Column { name: name.into(), ty: ColumnType::Int64, validity: Vec::new(), offsets: Vec::new(), data }
    }

    /// A float64 column.
    pub fn float64(name: &str, values: &[f64]) -> Column {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Column { name: name.into(), ty: ColumnType::Float64, validity: Vec::new(), offsets: Vec::new(), data }
    }

    /// A boolean column.
    pub fn boolean(name: &str, values: &[bool]) -> Column {
        let data = bitmap(values.iter().copied(), values.len());
        Column { name: name.into(), ty: ColumnType::Boolean, validity: Vec::new(), offsets: Vec::new(), data }
    }

    /// A column of `values.len() / dim` vectors of `dim` f32 each (e.g. embeddings).
    pub fn f32_vectors(name: &str, dim: usize, values: &[f32]) -> Column {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Column { name: name.into(), ty: ColumnType::Float32Vector, validity: Vec::new(), offsets: vec![dim as u32], data }
    }

    /// The dimension and values of a float32-vector column.
    pub fn f32_vector_values(&self) -> Result<(usize, Vec<f32>), BatchError> {
        self.expect(ColumnType::Float32Vector)?;
        let dim =
            *self.offsets.first().ok_or_else(|| BatchError::Malformed { column: self.name.clone(), reason: "no dimension" })? as usize;
        let values = self.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok((dim, values))
    }

    fn expect(&self, ty: ColumnType) -> Result<(), BatchError> {
        if self.ty == ty { Ok(()) } else { Err(BatchError::WrongType { column: self.name.clone(), expected: ty, found: self.ty }) }
    }

    /// Whether row `i` holds a value (not null).
    pub fn is_valid(&self, i: usize) -> bool {
        self.validity.is_empty() || self.validity.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// View a UTF-8 column as strings, validating it once.
    pub fn strings(&self) -> Result<StrColumn<'_>, BatchError> {
        self.expect(ColumnType::Utf8)?;
        let malformed = |reason| BatchError::Malformed { column: self.name.clone(), reason };
        let data = std::str::from_utf8(&self.data).map_err(|_| malformed("invalid UTF-8"))?;
        if self.offsets.is_empty() {
            return Err(malformed("no offsets"));
        }
        if self.offsets.windows(2).any(|w| w[0] > w[1]) || *self.offsets.last().unwrap_or(&0) as usize > data.len() {
            return Err(malformed("offsets out of order or out of range"));
        }
        Ok(StrColumn { column: self, data })
    }

    /// The rows `rows` of this column, in that order (a row may repeat): what a stage that
    /// splits or joins documents carries its other columns through with.
    pub fn take(&self, rows: &[u32]) -> Result<Column, BatchError> {
        let malformed = |reason| BatchError::Malformed { column: self.name.clone(), reason };
        let validity =
            if self.validity.is_empty() { Vec::new() } else { bitmap(rows.iter().map(|&r| self.is_valid(r as usize)), rows.len()) };
        let fixed = |width: usize| -> Result<Vec<u8>, BatchError> {
            let mut data = Vec::with_capacity(rows.len() * width);
            for &r in rows {
                let at = r as usize * width;
                data.extend_from_slice(self.data.get(at..at + width).ok_or_else(|| malformed("row out of range"))?);
            }
            Ok(data)
        };
        let (offsets, data) = match self.ty {
            ColumnType::Utf8 | ColumnType::Binary => {
                let mut offsets = Vec::with_capacity(rows.len() + 1);
                offsets.push(0u32);
                let mut data = Vec::new();
                for &r in rows {
                    data.extend_from_slice(self.bytes_at(r as usize).ok_or_else(|| malformed("row out of range"))?);
                    offsets.push(u32::try_from(data.len()).map_err(|_| malformed("more than 4 GiB of values"))?);
                }
                (offsets, data)
            }
            ColumnType::Int64 | ColumnType::Float64 => (Vec::new(), fixed(8)?),
            ColumnType::Float32Vector => {
                let dim = *self.offsets.first().ok_or_else(|| malformed("no dimension"))? as usize;
                (self.offsets.clone(), fixed(dim * 4)?)
            }
            ColumnType::Boolean => {
                let bit = |r: usize| self.data.get(r / 8).map(|b| b & (1 << (r % 8)) != 0);
                let bits: Option<Vec<bool>> = rows.iter().map(|&r| bit(r as usize)).collect();
                (Vec::new(), bitmap(bits.ok_or_else(|| malformed("row out of range"))?.into_iter(), rows.len()))
            }
        };
        Ok(Column { name: self.name.clone(), ty: self.ty, validity, offsets, data })
    }

    /// View an int64 column.
    pub fn i64_values(&self) -> Result<Vec<i64>, BatchError> {
        self.expect(ColumnType::Int64)?;
        Ok(self.data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect())
    }

    /// View a float64 column.
    pub fn f64_values(&self) -> Result<Vec<f64>, BatchError> {
        self.expect(ColumnType::Float64)?;
        Ok(self.data.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect())
    }
}

/// A validated UTF-8 column.
#[derive(Debug, Clone, Copy)]
pub struct StrColumn<'a> {
    column: &'a Column,
    data: &'a str,
}

impl<'a> StrColumn<'a> {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.column.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The string in row `i` (`""` for null); `None` if `i` is out of range or the
    /// offsets do not fall on character boundaries.
    pub fn get(&self, i: usize) -> Option<&'a str> {
        let start = *self.column.offsets.get(i)? as usize;
        let end = *self.column.offsets.get(i + 1)? as usize;
        self.data.get(start..end)
    }
}

impl Batch {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Result<&Column, BatchError> {
        self.columns.iter().find(|c| c.name == name).ok_or_else(|| BatchError::MissingColumn(name.into()))
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.num_rows as usize
    }

    pub fn is_empty(&self) -> bool {
        self.num_rows == 0
    }

    /// The rows `rows` of every column, in that order (a row may repeat).
    pub fn take(&self, rows: &[u32]) -> Result<Batch, BatchError> {
        let columns = self.columns.iter().map(|c| c.take(rows)).collect::<Result<_, _>>()?;
        Ok(Batch { num_rows: rows.len() as u32, columns })
    }

    /// Visit every document (`id` and `text` columns) in order.
    pub fn for_each_doc<E>(&self, mut f: impl FnMut(&Doc<'_>) -> Result<(), E>) -> Result<(), E>
    where
        E: From<BatchError>,
    {
        let text = self.column("text")?.strings()?;
        let ids = match self.column("id") {
            Ok(c) => Some(c.strings()?),
            Err(_) => None,
        };
        for i in 0..self.len() {
            let malformed = |column: &str| BatchError::Malformed { column: column.into(), reason: "row offsets off a character boundary" };
            let t = text.get(i).ok_or_else(|| malformed("text"))?;
            let id = match &ids {
                Some(ids) => ids.get(i).ok_or_else(|| malformed("id"))?,
                None => "",
            };
            f(&Doc::new(i, id, t))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_roundtrip_and_validation() {
        let c = Column::utf8("text", ["héllo", "", "wörld"]);
        let s = c.strings().unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(0), Some("héllo"));
        assert_eq!(s.get(1), Some(""));
        assert_eq!(s.get(2), Some("wörld"));
        assert_eq!(s.get(3), None);
        let mut bad = c.clone();
        bad.offsets[1] = 2; // inside 'é'
        assert_eq!(bad.strings().unwrap().get(0), None);
        bad.offsets[3] = 100;
        assert!(bad.strings().is_err());
    }

    #[test]
    fn row_errors_are_valid_only_on_the_failed_rows() {
        assert_eq!(Column::row_errors(&[None, None]), None);
        let c = Column::row_errors(&[None, Some("refused".into()), None]).unwrap();
        assert_eq!(c.name, crate::ROW_ERROR_COLUMN);
        assert_eq!(c.validity, vec![0b010]);
        assert!(!c.is_valid(0) && c.is_valid(1) && !c.is_valid(2));
        assert_eq!(c.strings().unwrap().get(1), Some("refused"));
    }

    #[test]
    fn take_gathers_rows_of_every_type_with_their_nulls() {
        let mut text = Column::utf8("text", ["a", "bb", "ccc"]);
        text.validity = vec![0b101];
        let batch = Batch {
            num_rows: 3,
            columns: vec![
                text,
                Column::int64("n", &[1, 2, 3]),
                Column::float64("f", &[0.5, 1.5, 2.5]),
                Column::boolean("b", &[true, false, true]),
                Column::f32_vectors("v", 2, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            ],
        };
        let t = batch.take(&[2, 0, 0, 1]).unwrap();
        assert_eq!(t.num_rows, 4);
        let s = t.column("text").unwrap();
        assert_eq!((0..4).map(|i| s.strings().unwrap().get(i).unwrap()).collect::<Vec<_>>(), ["ccc", "a", "a", "bb"]);
        assert_eq!((0..4).map(|i| s.is_valid(i)).collect::<Vec<_>>(), [true, true, true, false]);
        assert_eq!(t.column("n").unwrap().i64_values().unwrap(), [3, 1, 1, 2]);
        assert_eq!(t.column("f").unwrap().f64_values().unwrap(), [2.5, 0.5, 0.5, 1.5]);
        assert_eq!(t.column("b").unwrap().data, vec![0b0111]);
        assert_eq!(t.column("v").unwrap().f32_vector_values().unwrap(), (2, vec![5.0, 6.0, 1.0, 2.0, 1.0, 2.0, 3.0, 4.0]));
        assert_eq!(batch.take(&[]).unwrap().num_rows, 0);
        assert!(batch.take(&[3]).is_err());
    }

    #[test]
    fn numeric_and_bool_columns() {
        assert_eq!(Column::int64("n", &[1, -2]).i64_values().unwrap(), vec![1, -2]);
        assert_eq!(Column::float64("f", &[0.5]).f64_values().unwrap(), vec![0.5]);
        let b = Column::boolean("b", &[true, false, true]);
        assert_eq!(b.data, vec![0b101]);
        assert!(Column::int64("n", &[1]).strings().is_err());
    }
}
