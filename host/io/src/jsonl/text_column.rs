//! The text column a JSONL read fills: values written in place by the scanner (or copied from
//! serde_json's decoding), one pending value at a time, committed or dropped once the line's
//! other fields are judged.

use arrow_array::StringArray;
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};

#[derive(Default)]
pub(super) struct TextColumn {
    values: Vec<u8>,
    /// Start of every committed value, then the end of the last one.
    offsets: Vec<i32>,
}

impl TextColumn {
    pub fn with_capacity(rows: usize, bytes: usize) -> TextColumn {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        TextColumn { values: Vec::with_capacity(bytes), offsets }
    }

    fn committed(&self) -> usize {
        self.offsets.last().map_or(0, |&o| o as usize)
    }

    /// The bytes of the value being written (after the committed ones): append to it.
    pub fn pending(&mut self) -> &mut Vec<u8> {
        &mut self.values
    }

    /// A mark to return to with [`TextColumn::truncate_pending`].
    pub fn pending_len(&self) -> usize {
        self.values.len()
    }

    pub fn truncate_pending(&mut self, mark: usize) {
        self.values.truncate(mark.max(self.committed()));
    }

    /// Drop the pending value.
    pub fn drop_pending(&mut self) {
        self.values.truncate(self.committed());
    }

    /// The pending value becomes the next row. `Err(bytes)` when the column would pass the
    /// 2 GiB a `Utf8` column can hold (the pending value is dropped).
    pub fn commit(&mut self) -> Result<(), usize> {
        match i32::try_from(self.values.len()) {
            Ok(end) => {
                if self.offsets.is_empty() {
                    self.offsets.push(0);
                }
                self.offsets.push(end);
                Ok(())
            }
            Err(_) => {
                let len = self.values.len();
                self.drop_pending();
                Err(len)
            }
        }
    }

    /// Append `text` as the next row.
    pub fn push(&mut self, text: &str) -> Result<(), usize> {
        self.drop_pending();
        self.values.extend_from_slice(text.as_bytes());
        self.commit()
    }

    /// The committed rows as a `Utf8` array.
    pub fn finish(mut self) -> StringArray {
        self.drop_pending();
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        debug_assert!(std::str::from_utf8(&self.values).is_ok());
        let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
        // SAFETY: every value is valid UTF-8: a value is either a `&str` pushed whole or the
        // scanner's decoding of a JSON string taken from a line already checked to be UTF-8,
        // in which runs between escapes are copied whole (they start and end at ASCII bytes)
        // and escapes are written as `char::encode_utf8` writes them. The offsets are
        // monotonic (each commit pushes the buffer's length, which only grows past the last
        // commit) and end at the buffer's length, and each lies on a value's boundary, which is
        // a character boundary.
        unsafe { StringArray::new_unchecked(offsets, Buffer::from_vec(self.values), None) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn pending_values_commit_or_drop() {
        let mut c = TextColumn::with_capacity(4, 16);
        c.push("one").unwrap();
        c.pending().extend_from_slice("dropped".as_bytes());
        c.drop_pending();
        c.pending().extend_from_slice("tw".as_bytes());
        let mark = c.pending_len();
        c.pending().extend_from_slice(b"xx");
        c.truncate_pending(mark);
        c.pending().push(b'o');
        c.commit().unwrap();
        c.pending().extend_from_slice(b"left pending");
        let a = c.finish();
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![Some("one"), Some("two")]);
        assert!(TextColumn::default().finish().is_empty());
    }
}
