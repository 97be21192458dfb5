//! The Arrow C Data Interface on the plugin's side: input batches taken over from the host
//! (`Imported`, released exactly once) and output arrays exported with a `release` that frees
//! what the plugin allocated.

use std::ffi::{CStr, CString, c_void};
use std::ptr;

use super::{ArrowArray, ArrowSchema, OUTPUT_BATCH, OUTPUT_COLUMNS, OUTPUT_SCORED, OUTPUT_SELECTION, SCORED_KEEP};
use crate::batch::{Batch, Column, ColumnType, Output};

/// An input batch owned by the plugin until dropped (which calls `release`).
pub(super) struct Imported {
    array: ArrowArray,
    schema: ArrowSchema,
}

impl Imported {
    /// # Safety
    /// Valid, unreleased C Data Interface structs; they are moved out (the originals are
    /// marked released).
    pub(super) unsafe fn take(array: *mut ArrowArray, schema: *mut ArrowSchema) -> Imported {
        // SAFETY: per the contract above.
        unsafe {
            let a = ptr::replace(array, ArrowArray::empty());
            let s = ptr::replace(schema, ArrowSchema::empty());
            Imported { array: a, schema: s }
        }
    }

    /// Copy the columns into a [`Batch`] (stages own their batches). The C Data Interface
    /// carries no buffer sizes, so what can be checked is checked before any slice is built:
    /// counts not negative, pointers not null, offsets ascending from zero or more.
    pub(super) fn to_batch(&self) -> Result<Batch, String> {
        let (a, s) = (&self.array, &self.schema);
        if a.release.is_none() || s.release.is_none() {
            return Err("input batch was already released".into());
        }
        let rows = usize::try_from(a.length).map_err(|_| "negative length")?;
        let offset = usize::try_from(a.offset).map_err(|_| "negative offset")?;
        let n = usize::try_from(a.n_children).map_err(|_| "negative number of columns")?;
        if s.n_children != a.n_children {
            return Err("schema and array disagree on the number of columns".into());
        }
        let mut columns = Vec::with_capacity(n);
        for i in 0..n {
            let (ca, cs) = (child(a.children, i)?, child(s.children, i)?);
            columns.push(import_column(ca, cs, offset, rows)?);
        }
        Ok(Batch { num_rows: rows as u32, columns })
    }
}

impl Drop for Imported {
    fn drop(&mut self) {
        if let Some(r) = self.array.release {
            // SAFETY: the producer's release callback, on the array it made, called once (the
            // struct is ours: `take` moved it out).
            unsafe { r(&mut self.array) };
        }
        if let Some(r) = self.schema.release {
            // SAFETY: as above, for the schema.
            unsafe { r(&mut self.schema) };
        }
    }
}

/// Child `i` of a parent with at least `i + 1` children (its count checked by the caller), or
/// why it cannot be read.
fn child<'a, T>(children: *mut *mut T, i: usize) -> Result<&'a T, String> {
    if children.is_null() {
        return Err("columns without a children array".into());
    }
    // SAFETY: not null, and the parent's `n_children` (> i, checked by the caller) pointers
    // follow, as the C Data Interface lays them out.
    let c = unsafe { *children.add(i) };
    if c.is_null() {
        return Err(format!("column {i} is null"));
    }
    // SAFETY: not null; a child the parent owns, alive until the parent is released (after
    // this batch is copied).
    Ok(unsafe { &*c })
}

/// The C string `p` (a format or a name), or `None` when null.
fn c_str(p: *const std::ffi::c_char) -> Option<String> {
    // SAFETY: not null (checked); the C Data Interface makes it a NUL-terminated string the
    // schema owns until it is released.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Buffer `k` of `a`, null when it has no such buffer.
fn buffer(a: &ArrowArray, k: usize) -> *const u8 {
    if a.buffers.is_null() || (k as i64) >= a.n_buffers {
        return ptr::null();
    }
    // SAFETY: not null, and `n_buffers` (> k) pointers follow, as the C Data Interface lays
    // them out.
    unsafe { *a.buffers.add(k) as *const u8 }
}

/// `len` bytes from `p` (empty when `len` is 0), or why not.
///
/// # Safety
/// `p` is null or holds at least `len` readable bytes.
unsafe fn bytes_at<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8], String> {
    match (p.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(format!("{what}: no buffer")),
        // SAFETY: not null, and `len` readable bytes (the caller's promise).
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(p, len) }),
    }
}

/// Bits `[start, start + len)` of a bitmap, re-based to 0.
fn bits(bitmap: &[u8], start: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.div_ceil(8)];
    for i in 0..len {
        let j = start + i;
        if bitmap[j / 8] & (1 << (j % 8)) != 0 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// The bitmap buffer `k` of `a`, covering bits `[0, off + rows)`.
fn bitmap<'a>(a: &'a ArrowArray, k: usize, off: usize, rows: usize, what: &str) -> Result<&'a [u8], String> {
    // SAFETY: a bitmap buffer of the C Data Interface holds (offset + length) bits.
    unsafe { bytes_at(buffer(a, k), (off + rows).div_ceil(8), what) }
}

fn import_column(a: &ArrowArray, s: &ArrowSchema, parent_offset: usize, rows: usize) -> Result<Column, String> {
    let format = c_str(s.format).ok_or("a column without a format string")?;
    let name = c_str(s.name).unwrap_or_default();
    let off = parent_offset + usize::try_from(a.offset).map_err(|_| format!("column {name:?}: negative offset"))?;
    let validity = if a.null_count != 0 && !buffer(a, 0).is_null() { bits(bitmap(a, 0, off, rows, &name)?, off, rows) } else { Vec::new() };
    if let Some(dim) = format.strip_prefix("+w:") {
        return import_vectors(a, s, &name, dim, off, rows, validity);
    }
    let ty = match format.as_str() {
        "u" => ColumnType::Utf8,
        "z" => ColumnType::Binary,
        "l" => ColumnType::Int64,
        "g" => ColumnType::Float64,
        "b" => ColumnType::Boolean,
        other => return Err(format!("column {name:?}: unsupported Arrow format {other:?}")),
    };
    let (offsets, data) = match ty {
        ColumnType::Utf8 | ColumnType::Binary => {
            let what = format!("column {name:?}'s offsets");
            // SAFETY: an offsets buffer of the C Data Interface holds offset + length + 1 i32.
            let raw = unsafe { bytes_at(buffer(a, 1), (off + rows + 1) * 4, &what) }?;
            let o: Vec<i32> = raw[off * 4..].chunks_exact(4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect();
            if let Some(i) = (0..=rows).find(|&i| o[i] < 0 || (i > 0 && o[i] < o[i - 1])) {
                return Err(format!("{what} are not ascending from zero or more at row {i}"));
            }
            let (first, last) = (o[0] as usize, o[rows] as usize);
            let what = format!("column {name:?}'s values");
            // SAFETY: a values buffer covers every offset of its column: `last` bytes at least.
            let values = unsafe { bytes_at(buffer(a, 2), last, &what) }?;
            (o.iter().map(|x| (*x as usize - first) as u32).collect(), values[first..].to_vec())
        }
        ColumnType::Int64 | ColumnType::Float64 => {
            // SAFETY: a fixed-width values buffer holds (offset + length) values of 8 bytes.
            let all = unsafe { bytes_at(buffer(a, 1), (off + rows) * 8, &format!("column {name:?}'s values")) }?;
            (Vec::new(), all[off * 8..].to_vec())
        }
        ColumnType::Boolean => (Vec::new(), bits(bitmap(a, 1, off, rows, &name)?, off, rows)),
        ColumnType::Float32Vector => return Err(format!("column {name:?}: vectors come as \"+w:N\"")),
    };
    Ok(Column { name, ty, validity, offsets, data })
}

/// A `FixedSizeList<Float32>` ("+w:N" with one "f" child).
fn import_vectors(
    a: &ArrowArray,
    s: &ArrowSchema,
    name: &str,
    dim: &str,
    off: usize,
    rows: usize,
    validity: Vec<u8>,
) -> Result<Column, String> {
    let dim: usize = dim.parse().map_err(|_| format!("column {name:?}: bad vector size {dim:?}"))?;
    if a.n_children != 1 || s.n_children != 1 {
        return Err(format!("column {name:?}: a fixed-size list has one child"));
    }
    let (ca, cs) = (child(a.children, 0)?, child(s.children, 0)?);
    let child_format = c_str(cs.format).ok_or("a column without a format string")?;
    if child_format != "f" {
        return Err(format!("column {name:?}: vectors of {child_format:?} are not supported (float32 \"f\" only)"));
    }
    let first = usize::try_from(ca.offset).map_err(|_| format!("column {name:?}: negative offset"))? + off * dim;
    // SAFETY: the child's values buffer holds (its offset + its length) f32, and its length is
    // the parent's (offset + length) × dim.
    let all = unsafe { bytes_at(buffer(ca, 1), (first + rows * dim) * 4, &format!("column {name:?}'s values")) }?;
    Ok(Column {
        name: name.to_string(),
        ty: ColumnType::Float32Vector,
        validity,
        offsets: vec![dim as u32],
        data: all[first * 4..].to_vec(),
    })
}

/// Memory behind an exported array: its buffers and children.
struct ArrayPrivate {
    _owned: Vec<Vec<u8>>,
    buffers: Vec<*const c_void>,
    children: Vec<*mut ArrowArray>,
}

unsafe extern "C" fn release_array(a: *mut ArrowArray) {
    // SAFETY: called once by the consumer on an array we exported.
    unsafe {
        let a = &mut *a;
        if a.private_data.is_null() {
            a.release = None;
            return;
        }
        let p = Box::from_raw(a.private_data as *mut ArrayPrivate);
        for &c in &p.children {
            let mut child = Box::from_raw(c);
            if let Some(r) = child.release {
                r(&mut *child);
            }
        }
        drop(p);
        a.private_data = ptr::null_mut();
        a.release = None;
    }
}

struct SchemaPrivate {
    _format: CString,
    _name: CString,
    children: Vec<*mut ArrowSchema>,
}

unsafe extern "C" fn release_schema(s: *mut ArrowSchema) {
    // SAFETY: called once by the consumer on a schema we exported.
    unsafe {
        let s = &mut *s;
        if !s.private_data.is_null() {
            let p = Box::from_raw(s.private_data as *mut SchemaPrivate);
            for &c in &p.children {
                let mut child = Box::from_raw(c);
                if let Some(r) = child.release {
                    r(&mut *child);
                }
            }
            drop(p);
        }
        s.private_data = ptr::null_mut();
        s.release = None;
    }
}

fn export_array(length: usize, null_count: i64, owned: Vec<Vec<u8>>, buffers: Vec<*const c_void>, children: Vec<ArrowArray>) -> ArrowArray {
    let children: Vec<*mut ArrowArray> = children.into_iter().map(|c| Box::into_raw(Box::new(c))).collect();
    let mut p = Box::new(ArrayPrivate { _owned: owned, buffers, children });
    ArrowArray {
        length: length as i64,
        null_count,
        offset: 0,
        n_buffers: p.buffers.len() as i64,
        n_children: p.children.len() as i64,
        buffers: p.buffers.as_mut_ptr(),
        children: p.children.as_mut_ptr(),
        dictionary: ptr::null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(p) as *mut c_void,
    }
}

fn export_schema(format: &str, name: &str, children: Vec<ArrowSchema>) -> ArrowSchema {
    let children: Vec<*mut ArrowSchema> = children.into_iter().map(|c| Box::into_raw(Box::new(c))).collect();
    let format = CString::new(format).unwrap_or_default();
    let name = CString::new(name.replace('\0', " ")).unwrap_or_default();
    let mut p = Box::new(SchemaPrivate { _format: format, _name: name, children });
    ArrowSchema {
        format: p._format.as_ptr(),
        name: p._name.as_ptr(),
        metadata: ptr::null(),
        flags: 2, // nullable
        n_children: p.children.len() as i64,
        children: p.children.as_mut_ptr(),
        dictionary: ptr::null_mut(),
        release: Some(release_schema),
        private_data: Box::into_raw(p) as *mut c_void,
    }
}

/// A float32-vector column as a `FixedSizeList<Float32>` ("+w:N", one "f" child).
fn export_vectors(c: Column, rows: usize) -> (ArrowArray, ArrowSchema) {
    let dim = c.offsets.first().copied().unwrap_or(0) as usize;
    let schema = export_schema(&format!("+w:{dim}"), &c.name, vec![export_schema("f", "item", Vec::new())]);
    let values = vec![Vec::new(), c.data];
    let buffers = vec![ptr::null(), values[1].as_ptr() as *const c_void];
    let child = export_array(rows * dim, 0, values, buffers, Vec::new());
    let null_count = if c.validity.is_empty() { 0 } else { -1 };
    let owned = vec![c.validity];
    let buffers = vec![if owned[0].is_empty() { ptr::null() } else { owned[0].as_ptr() as *const c_void }];
    (export_array(rows, null_count, owned, buffers, vec![child]), schema)
}

fn export_column(c: Column, rows: usize) -> (ArrowArray, ArrowSchema) {
    let schema = export_schema(
        match c.ty {
            ColumnType::Utf8 => "u",
            ColumnType::Binary => "z",
            ColumnType::Int64 => "l",
            ColumnType::Float64 => "g",
            ColumnType::Boolean => "b",
            ColumnType::Float32Vector => return export_vectors(c, rows),
        },
        &c.name,
        Vec::new(),
    );
    let null_count = if c.validity.is_empty() { 0 } else { -1 };
    let mut owned = vec![c.validity];
    if matches!(c.ty, ColumnType::Utf8 | ColumnType::Binary) {
        owned.push(c.offsets.iter().flat_map(|o| o.to_le_bytes()).collect());
    }
    owned.push(c.data);
    let buffers =
        owned.iter().enumerate().map(|(k, b)| if k == 0 && b.is_empty() { ptr::null() } else { b.as_ptr() as *const c_void }).collect();
    (export_array(rows, null_count, owned, buffers, Vec::new()), schema)
}

/// Export a stage's output as a struct array named "selection", "columns" or "batch".
pub(super) fn export_output(out: Output, input_rows: usize) -> (ArrowArray, ArrowSchema) {
    let (kind, rows, columns) = match out {
        Output::Selection(keep) => {
            let n = keep.len();
            let owned = vec![keep.iter().flat_map(|k| k.to_le_bytes()).collect::<Vec<u8>>()];
            let buffers = vec![ptr::null(), owned[0].as_ptr() as *const c_void];
            let child = export_array(n, 0, owned, buffers, Vec::new());
            let parent = export_array(n, 0, Vec::new(), vec![ptr::null()], vec![child]);
            return (parent, export_schema("+s", OUTPUT_SELECTION, vec![export_schema("I", OUTPUT_SELECTION, Vec::new())]));
        }
        Output::Columns(cols) => (OUTPUT_COLUMNS, input_rows, cols),
        Output::Scored { mut columns, keep } => {
            // The kept rows travel as a boolean column `_keep` beside the added columns.
            let mut mask = vec![false; input_rows];
            for k in keep {
                if let Some(m) = mask.get_mut(k as usize) {
                    *m = true;
                }
            }
            columns.push(Column::boolean(SCORED_KEEP, &mask));
            (OUTPUT_SCORED, input_rows, columns)
        }
        Output::Batch(b) => (OUTPUT_BATCH, b.num_rows as usize, b.columns),
    };
    let (arrays, schemas): (Vec<ArrowArray>, Vec<ArrowSchema>) = columns.into_iter().map(|c| export_column(c, rows)).unzip();
    (export_array(rows, 0, Vec::new(), vec![ptr::null()], arrays), export_schema("+s", kind, schemas))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_columns_cross_the_c_boundary_both_ways() {
        let vectors = Column::f32_vectors("embedding", 2, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let text = Column::utf8("text", ["a", "bc", ""]);
        let (mut array, mut schema) = export_output(Output::Columns(vec![vectors.clone(), text.clone()]), 3);
        // SAFETY: freshly exported, unreleased structs.
        let imported = unsafe { Imported::take(&mut array, &mut schema) };
        let batch = imported.to_batch().unwrap();
        assert_eq!(batch.columns, vec![vectors.clone(), text]);
        assert_eq!(batch.columns[0].f32_vector_values().unwrap(), (2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    }

    /// What the host hands over is checked before a slice is built over it: offsets that go
    /// down, and a missing values buffer, are errors naming the column, not reads out of bounds.
    #[test]
    fn offsets_that_go_down_or_missing_buffers_are_refused_not_read() {
        let bad: Vec<i32> = vec![0, 3, 1, 6];
        for (k, replacement, want) in [
            (1, bad.as_ptr() as *const c_void, "column \"text\"'s offsets are not ascending from zero or more at row 2"),
            (2, ptr::null(), "column \"text\"'s values: no buffer"),
            (1, ptr::null(), "column \"text\"'s offsets: no buffer"),
        ] {
            let text = Column::utf8("text", ["a", "bc", "def"]);
            let (mut array, mut schema) = export_output(Output::Columns(vec![text]), 3);
            // SAFETY: the exported array's one child has three buffers (validity, offsets,
            // values); `bad` outlives the import below.
            unsafe { *(**array.children).buffers.add(k) = replacement };
            // SAFETY: freshly exported, unreleased structs.
            let imported = unsafe { Imported::take(&mut array, &mut schema) };
            assert_eq!(imported.to_batch().unwrap_err(), want);
        }
    }
}
