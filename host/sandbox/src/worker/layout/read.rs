//! Reading a batch back from the arenas: in place for the worker (the host's own, trusted
//! encoding), copied out and checked for the host (anything a worker sends).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, make_array};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow_data::{ArrayData, ArrayDataBuilder};
use arrow_schema::{DataType, Schema, SchemaRef};

use super::{Arena, In, MAGIC, ShmError, Side, VERSION, Written, check_supported, layout, outside};

/// A decoded descriptor: the kind byte and the batch.
pub struct Decoded {
    pub kind: u8,
    pub batch: RecordBatch,
}

/// Decodes descriptors. Caches the last schema between calls.
#[derive(Default)]
pub struct Decoder {
    schema: Option<(Vec<u8>, SchemaRef)>,
}

/// Where a decoder finds buffers.
pub enum Source<'a> {
    /// The worker reading the host's input: trusted (the host built and validated it), wrapped
    /// in place.
    Worker(&'a Arena),
    /// The host reading a worker's answer: untrusted. Output-arena bytes are copied out, then
    /// checked; input-arena references resolve to the host's own buffers.
    Host { input: &'a Arena, output: &'a Arena, written: &'a Written },
}

impl Decoder {
    fn schema(&mut self, bytes: &[u8]) -> Result<SchemaRef, ShmError> {
        if let Some((b, s)) = &self.schema
            && b == bytes
        {
            return Ok(s.clone());
        }
        let fb = arrow_ipc::root_as_schema(bytes).map_err(|e| layout(format!("schema: {e}")))?;
        let schema: Schema = arrow_ipc::convert::try_fb_to_schema(fb)?;
        let schema = Arc::new(schema);
        self.schema = Some((bytes.to_vec(), schema.clone()));
        Ok(schema)
    }

    pub fn read(&mut self, descriptor: &[u8], src: &Source<'_>) -> Result<Decoded, ShmError> {
        let mut r = In { b: descriptor, at: 0 };
        if r.u32()? != MAGIC || r.u8()? != VERSION {
            return Err(layout("not a batch descriptor of this version"));
        }
        let kind = r.u8()?;
        let rows = r.usize()?;
        let schema = self.schema(r.bytes()?)?;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let data = read_array(&mut r, f.data_type(), src, 0)?;
            columns.push(make_array(data));
        }
        if r.at != descriptor.len() {
            return Err(layout("trailing bytes after the last column"));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let batch = RecordBatch::try_new_with_options(schema, columns, &options)?;
        Ok(Decoded { kind, batch })
    }
}

/// An untrusted buffer's bytes in memory the host owns.
/// Arrays nest at most this deep.
const MAX_DEPTH: usize = 64;

fn read_array(r: &mut In<'_>, dt: &DataType, src: &Source<'_>, depth: usize) -> Result<ArrayData, ShmError> {
    if depth > MAX_DEPTH {
        return Err(layout("arrays nested too deep"));
    }
    check_supported(dt)?;
    let len = r.usize()?;
    // Arrow's own checks multiply lengths (and panic on overflow): keep them in i32 range.
    if len > i32::MAX as usize {
        return Err(layout(format!("array of {len} values")));
    }
    // (buffer, whether it is the host's own valid UTF-8 run)
    let fetch = |r: &mut In<'_>| -> Result<(Buffer, bool), ShmError> {
        let (side, off, n) = r.region()?;
        Ok(match (src, side) {
            (Source::Worker(input), Side::Input) => (input.buffer(off, n).ok_or_else(|| outside(off, n))?, false),
            (Source::Worker(_), Side::Output) => return Err(layout("an input batch refers to the output arena")),
            (Source::Host { written, input, .. }, Side::Input) => match written.find(off, n) {
                Some(found) => found,
                // Bytes the host computed (rebased offsets): the worker cannot write the input
                // arena, so a copy from it is what the host wrote.
                None => (Buffer::from_vec(input.copy_region(off, n).ok_or_else(|| outside(off, n))?), false),
            },
            (Source::Host { output, .. }, Side::Output) => {
                (Buffer::from_vec(output.copy_region(off, n).ok_or_else(|| outside(off, n))?), false)
            }
        })
    };
    let nulls = match r.u8()? {
        0 => None,
        1 => {
            let bit_offset = r.usize()?;
            let (buf, _) = fetch(r)?;
            let needed = bit_offset.checked_add(len).map(|b| b.div_ceil(8)).ok_or_else(|| layout("validity overflows"))?;
            if buf.len() < needed {
                return Err(layout(format!("validity bitmap of {} bytes for {len} rows at bit {bit_offset}", buf.len())));
            }
            Some(NullBuffer::new(BooleanBuffer::new(buf, bit_offset, len)))
        }
        other => return Err(layout(format!("unknown validity flag {other}"))),
    };
    let offset = r.usize()?;
    if offset > i32::MAX as usize {
        return Err(layout(format!("array offset {offset}")));
    }
    let nbuf = r.u32()? as usize;
    if nbuf > 3 {
        return Err(layout(format!("{nbuf} buffers in one array")));
    }
    let mut buffers = Vec::with_capacity(nbuf);
    let mut utf8_run = false;
    for k in 0..nbuf {
        let (b, utf8) = fetch(r)?;
        if k == 1 {
            utf8_run = utf8;
        }
        buffers.push(b);
    }
    let child_types: Vec<DataType> = match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::Map(f, _) => vec![f.data_type().clone()],
        DataType::Struct(fs) => fs.iter().map(|f| f.data_type().clone()).collect(),
        DataType::Union(fs, _) => fs.iter().map(|(_, f)| f.data_type().clone()).collect(),
        _ => Vec::new(),
    };
    let nchild = r.u32()? as usize;
    if nchild != child_types.len() {
        return Err(layout(format!("{nchild} children for a {dt} array")));
    }
    let mut children = Vec::with_capacity(nchild);
    for t in &child_types {
        children.push(read_array(r, t, src, depth + 1)?);
    }
    if matches!(src, Source::Host { .. }) {
        // Arrow's checks view fixed-width buffers whole as typed slices: a length that is not
        // a whole number of elements must be refused before they run.
        let spec = arrow_data::layout(dt);
        if buffers.len() != spec.buffers.len() {
            return Err(layout(format!("{} buffers for a {dt} array, expected {}", buffers.len(), spec.buffers.len())));
        }
        for (b, s) in buffers.iter().zip(&spec.buffers) {
            if let arrow_data::BufferSpec::FixedWidth { byte_width, .. } = s
                && !b.len().is_multiple_of(*byte_width)
            {
                return Err(layout(format!("a {dt} buffer of {} bytes is not a whole number of {byte_width}-byte values", b.len())));
            }
        }
    }
    let builder = ArrayDataBuilder::new(dt.clone()).len(len).offset(offset).nulls(nulls).buffers(buffers).child_data(children);
    // A worker may point at any byte: buffers not aligned for their type are copied.
    let builder = builder.align_buffers(matches!(src, Source::Host { .. }));
    match src {
        // SAFETY: the host's own encoding of arrays it validated; the buffers are in range.
        Source::Worker(_) => Ok(unsafe { builder.build_unchecked() }),
        Source::Host { .. } if utf8_run && *dt == DataType::Utf8 => {
            // The text is one of the host's own UTF-8 runs: checking that the offsets are
            // ascending, in range and on character boundaries is enough (no UTF-8 scan).
            // SAFETY: skipping the builder's validation is made good on the next two lines
            // (`validate` checks the layout, `check_utf8_offsets` the UTF-8) before `data` is used.
            let data = unsafe { builder.skip_validation(true) }.build()?;
            data.validate()?;
            check_utf8_offsets(&data)?;
            Ok(data)
        }
        Source::Host { .. } => Ok(builder.build()?),
    }
}

/// Offsets of a utf8 array whose bytes are known valid UTF-8: ascending, within the bytes, and
/// each at a character boundary (so every value is valid UTF-8 too).
fn check_utf8_offsets(data: &ArrayData) -> Result<(), ShmError> {
    let values = data.buffers()[1].as_slice();
    let raw = data.buffers()[0].as_slice();
    if !raw.len().is_multiple_of(4) || raw.len() / 4 < data.offset() + data.len() + 1 {
        return Err(layout("utf8 offsets buffer too short"));
    }
    let offsets = &data.buffers()[0].typed_data::<i32>()[data.offset()..data.offset() + data.len() + 1];
    let boundary = |o: i32| o >= 0 && (o as usize == values.len() || (o as usize) < values.len() && (values[o as usize] as i8) >= -0x40);
    let mut prev = offsets[0];
    if !boundary(prev) {
        return Err(layout("utf8 offset out of range or inside a character"));
    }
    for &o in &offsets[1..] {
        if o < prev || !boundary(o) {
            return Err(layout("utf8 offsets not ascending, out of range or inside a character"));
        }
        prev = o;
    }
    Ok(())
}
