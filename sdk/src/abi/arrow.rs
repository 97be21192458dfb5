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

    /// Copy the columns into a [`Batch`] (stages own their batches).
    pub(super) fn to_batch(&self) -> Result<Batch, String> {
        let (a, s) = (&self.array, &self.schema);
        if a.release.is_none() || s.release.is_none() {
            return Err("input batch was already released".into());
        }
        let rows = usize::try_from(a.length).map_err(|_| "negative length")?;
        let n = a.n_children.max(0) as usize;
        if s.n_children.max(0) as usize != n {
            return Err("schema and array disagree on the number of columns".into());
        }
        let mut columns = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: n_children valid child pointers on both sides.
            let (ca, cs) = unsafe { (&**a.children.add(i), &**s.children.add(i)) };
            columns.push(import_column(ca, cs, a.offset.max(0) as usize, rows)?);
        }
        Ok(Batch { num_rows: rows as u32, columns })
    }
}

impl Drop for Imported {
    fn drop(&mut self) {
        if let Some(r) = self.array.release {
            // SAFETY: releasing what we own, once.
            unsafe { r(&mut self.array) };
        }
        if let Some(r) = self.schema.release {
            unsafe { r(&mut self.schema) };
        }
    }
}

/// Bits `[start, start + len)` of a bitmap, re-based to 0.
fn bits(src: *const u8, start: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.div_ceil(8)];
    for i in 0..len {
        let j = start + i;
        // SAFETY: the bitmap covers offset + length bits.
        if unsafe { *src.add(j / 8) } & (1 << (j % 8)) != 0 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

fn import_column(a: &ArrowArray, s: &ArrowSchema, parent_offset: usize, rows: usize) -> Result<Column, String> {
    // SAFETY: C strings of a valid schema.
    let format = unsafe { CStr::from_ptr(s.format) }.to_str().map_err(|_| "bad format string")?;
    let name = if s.name.is_null() { String::new() } else { unsafe { CStr::from_ptr(s.name) }.to_string_lossy().into_owned() };
    let off = parent_offset + a.offset.max(0) as usize;
    // SAFETY: buffers has n_buffers entries as the format requires.
    let buf = |k: usize| -> *const u8 { if (k as i64) < a.n_buffers { unsafe { *a.buffers.add(k) as *const u8 } } else { ptr::null() } };
    let validity = if a.null_count != 0 && !buf(0).is_null() { bits(buf(0), off, rows) } else { Vec::new() };
    if let Some(dim) = format.strip_prefix("+w:") {
        return import_vectors(a, s, &name, dim, off, rows, validity);
    }
    let ty = match format {
        "u" => ColumnType::Utf8,
        "z" => ColumnType::Binary,
        "l" => ColumnType::Int64,
        "g" => ColumnType::Float64,
        "b" => ColumnType::Boolean,
        other => return Err(format!("column {name:?}: unsupported Arrow format {other:?}")),
    };
    let (offsets, data) = match ty {
        ColumnType::Utf8 | ColumnType::Binary => {
            // SAFETY: rows + 1 i32 offsets from `off`, data covering them.
            let o = unsafe { std::slice::from_raw_parts((buf(1) as *const i32).add(off), rows + 1) };
            let (first, last) = (o[0] as usize, o[rows] as usize);
            let data =
                if last > first { unsafe { std::slice::from_raw_parts(buf(2).add(first), last - first) }.to_vec() } else { Vec::new() };
            (o.iter().map(|x| (*x as usize - first) as u32).collect(), data)
        }
        ColumnType::Int64 | ColumnType::Float64 => {
            // SAFETY: 8 bytes per row from `off`.
            (Vec::new(), unsafe { std::slice::from_raw_parts(buf(1).add(off * 8), rows * 8) }.to_vec())
        }
        ColumnType::Boolean => (Vec::new(), bits(buf(1), off, rows)),
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
    // SAFETY: one valid child on both sides (checked above).
    let (ca, cs) = unsafe { (&**a.children, &**s.children) };
    let child_format = unsafe { CStr::from_ptr(cs.format) }.to_str().map_err(|_| "bad format string")?;
    if child_format != "f" {
        return Err(format!("column {name:?}: vectors of {child_format:?} are not supported (float32 \"f\" only)"));
    }
    let start = (ca.offset.max(0) as usize + off * dim) * 4;
    // SAFETY: the child's values buffer holds (offset + length) f32; rows × dim of them from here.
    let values = if ca.n_buffers < 2 { ptr::null() } else { unsafe { *ca.buffers.add(1) as *const u8 } };
    let data = if rows * dim == 0 || values.is_null() {
        Vec::new()
    } else {
        unsafe { std::slice::from_raw_parts(values.add(start), rows * dim * 4) }.to_vec()
    };
    Ok(Column { name: name.to_string(), ty: ColumnType::Float32Vector, validity, offsets: vec![dim as u32], data })
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
}
