//! How a batch crosses between the host and a worker process through their shared-memory
//! arenas (`arena.rs`), and the descriptor that says where its buffers lie.
//!
//! Each worker has two arenas (memfd files, mapped by both processes):
//! - **input**: the host writes the batch's Arrow buffers here; the worker gets a read-only
//!   descriptor, maps it read-only and wraps the buffers as Arrow arrays in place (no copy),
//!   which the plugin receives through the C Data Interface.
//! - **output**: the worker writes the buffers of its answer here. The file is sealed
//!   against shrinking before the worker starts, so the host's mapping can never lose pages
//!   under it (a hostile worker cannot make the host fault). The host copies what it reads out
//!   before checking it: the worker could change shared bytes after a check.
//!
//! An output buffer that already lies in the input arena (a column passed through) is sent as
//! a reference to it, not copied; the host resolves it to its own buffer (or, for buffers it
//! computed while writing, copies it from the input arena, which the worker cannot write).
//!
//! The layout of one batch (the control frame's payload; the buffers stay in the arenas) is a
//! small binary descriptor: the Arrow schema (IPC flatbuffer), then each column's array tree
//! (length, offset, validity bitmap, buffers, children) with every buffer as a region of one
//! of the two arenas.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions, make_array};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow_data::{ArrayData, ArrayDataBuilder};

pub use super::arena::Arena;
use arrow_schema::{DataType, Schema, SchemaRef};

/// Alignment of every buffer in an arena (Arrow's recommendation; enough for any type).
const ALIGN: usize = 64;
/// Size an arena starts at; it grows to fit the largest batch and stays there.
pub const INITIAL_ARENA_BYTES: usize = 1 << 20;
/// First bytes of a descriptor: "CSHM" and its version.
const MAGIC: u32 = 0x4d48_5343;
const VERSION: u8 = 1;

/// Why a layout could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    #[error("shared memory: {0}")]
    Os(#[from] std::io::Error),
    #[error("invalid batch layout: {0}")]
    Layout(String),
    #[error("invalid batch: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("unsupported column type {0} (dictionary and view types cannot cross to a worker)")]
    Unsupported(DataType),
}

fn layout(msg: impl Into<String>) -> ShmError {
    ShmError::Layout(msg.into())
}

fn outside(off: usize, len: usize) -> ShmError {
    layout(format!("region of {len} bytes at {off} is outside its arena"))
}

/// Which arena a region is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Input = 0,
    Output = 1,
}

/// Writes buffers into an arena, 64-byte aligned, growing it as needed.
struct Placer<'a> {
    arena: &'a mut Arena,
    used: usize,
}

impl Placer<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(usize, usize), ShmError> {
        let off = self.used.next_multiple_of(ALIGN);
        let end = off + bytes.len();
        self.arena.grow_to(end)?;
        // SAFETY: [off, end) is inside the writable mapping (grown above); `bytes` is not in it
        // (it is the caller's memory or the other arena).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.arena.base_mut().add(off), bytes.len()) };
        self.used = end;
        Ok((off, bytes.len()))
    }

    fn put_offsets(&mut self, offsets: &[i32], base: i32) -> Result<(usize, usize), ShmError> {
        let len = std::mem::size_of_val(offsets);
        let off = self.used.next_multiple_of(ALIGN);
        self.arena.grow_to(off + len)?;
        // SAFETY: in range (grown above), 64-byte aligned, so aligned for i32.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.arena.base_mut().add(off).cast::<i32>(), offsets.len()) };
        for (d, o) in dst.iter_mut().zip(offsets) {
            *d = o - base;
        }
        self.used = off + len;
        Ok((off, len))
    }
}

/// Little-endian descriptor writer.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn region(&mut self, side: Side, (off, len): (usize, usize)) {
        self.u8(side as u8);
        self.u64(off as u64);
        self.u64(len as u64);
    }
}

/// Descriptor reader; every read is bounds-checked (the bytes may come from a hostile worker).
struct In<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ShmError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len()).ok_or_else(|| layout("descriptor ends early"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, ShmError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, ShmError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| layout("u32"))?))
    }
    fn u64(&mut self) -> Result<u64, ShmError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| layout("u64"))?))
    }
    fn usize(&mut self) -> Result<usize, ShmError> {
        usize::try_from(self.u64()?).map_err(|_| layout("size does not fit this machine"))
    }
    fn bytes(&mut self) -> Result<&'a [u8], ShmError> {
        let n = self.usize()?;
        self.take(n)
    }
    fn region(&mut self) -> Result<(Side, usize, usize), ShmError> {
        let side = match self.u8()? {
            0 => Side::Input,
            1 => Side::Output,
            other => return Err(layout(format!("unknown arena {other}"))),
        };
        Ok((side, self.usize()?, self.usize()?))
    }
}

fn check_supported(dt: &DataType) -> Result<(), ShmError> {
    match dt {
        DataType::Dictionary(..)
        | DataType::Utf8View
        | DataType::BinaryView
        | DataType::ListView(_)
        | DataType::LargeListView(_)
        | DataType::RunEndEncoded(..) => Err(ShmError::Unsupported(dt.clone())),
        _ => Ok(()),
    }
}

/// What the host wrote into the input arena for one call: its own buffers at their places,
/// so that an output that passes one through resolves to it without a copy.
#[derive(Default)]
pub struct Written {
    /// (offset in the input arena, the host's buffer, whether its bytes are one valid UTF-8 run)
    segments: Vec<(usize, Buffer, bool)>,
    /// Bytes of the arena the batch used.
    pub bytes: usize,
}

impl Written {
    fn find(&self, off: usize, len: usize) -> Option<(Buffer, bool)> {
        self.segments.iter().find_map(|(start, buf, utf8)| {
            let rel = off.checked_sub(*start)?;
            (rel.checked_add(len)? <= buf.len()).then(|| (buf.slice_with_length(rel, len), *utf8 && rel == 0 && len == buf.len()))
        })
    }
}

/// Encodes batches into arenas. Caches the schema's flatbuffer between calls.
#[derive(Default)]
pub struct Encoder {
    schema: Option<(SchemaRef, Vec<u8>)>,
}

/// How an encoder places buffers.
enum Place<'a> {
    /// The host: copy every buffer into the input arena; string columns are cut to the bytes
    /// their rows use (offsets rebased), so a slice of a big batch sends only its own text.
    Host(&'a mut Written),
    /// The worker: refer to buffers that already lie in the input arena, copy the rest.
    Worker(&'a Arena),
}

impl Encoder {
    fn schema_bytes(&mut self, schema: &SchemaRef) -> Vec<u8> {
        if let Some((s, b)) = &self.schema
            && (Arc::ptr_eq(s, schema) || s == schema)
        {
            return b.clone();
        }
        let bytes = arrow_ipc::convert::IpcSchemaEncoder::new().schema_to_fb(schema).finished_data().to_vec();
        self.schema = Some((schema.clone(), bytes.clone()));
        bytes
    }

    /// The host writes `batch` into `arena` (from its start): the descriptor to send, and
    /// what was written where.
    pub fn write_input(&mut self, batch: &RecordBatch, arena: &mut Arena, kind: u8) -> Result<(Vec<u8>, Written), ShmError> {
        let mut written = Written::default();
        let d = self.write(batch, arena, kind, &mut Place::Host(&mut written))?;
        Ok((d, written))
    }

    /// The worker writes its answer into `out`, referring to buffers in `input` where it can.
    pub fn write_output(&mut self, batch: &RecordBatch, out: &mut Arena, input: &Arena, kind: u8) -> Result<Vec<u8>, ShmError> {
        self.write(batch, out, kind, &mut Place::Worker(input))
    }

    fn write(&mut self, batch: &RecordBatch, arena: &mut Arena, kind: u8, place: &mut Place<'_>) -> Result<Vec<u8>, ShmError> {
        let (d, used) = self.write_counted(batch, arena, kind, place)?;
        if let Place::Host(w) = place {
            w.bytes = used;
        }
        Ok(d)
    }

    fn write_counted(
        &mut self,
        batch: &RecordBatch,
        arena: &mut Arena,
        kind: u8,
        place: &mut Place<'_>,
    ) -> Result<(Vec<u8>, usize), ShmError> {
        let mut d = Out::default();
        d.u32(MAGIC);
        d.u8(VERSION);
        d.u8(kind);
        d.u64(batch.num_rows() as u64);
        d.bytes(&self.schema_bytes(&batch.schema()));
        let mut placer = Placer { arena, used: 0 };
        for col in batch.columns() {
            write_array(&col.to_data(), &mut d, &mut placer, place)?;
        }
        Ok((d.0, placer.used))
    }
}

/// Place one buffer and describe it. `utf8`: the host's buffer of a whole text column.
fn put(bytes: &[u8], d: &mut Out, placer: &mut Placer<'_>, place: &mut Place<'_>, utf8: Option<&Buffer>) -> Result<(), ShmError> {
    match place {
        Place::Worker(input) => match input.offset_of(bytes.as_ptr(), bytes.len()) {
            Some(off) => d.region(Side::Input, (off, bytes.len())),
            None => d.region(Side::Output, placer.put(bytes)?),
        },
        Place::Host(written) => {
            let at = placer.put(bytes)?;
            if let Some(buf) = utf8 {
                written.segments.push((at.0, buf.clone(), true));
            }
            d.region(Side::Input, at);
        }
    }
    Ok(())
}

fn write_array(data: &ArrayData, d: &mut Out, placer: &mut Placer<'_>, place: &mut Place<'_>) -> Result<(), ShmError> {
    check_supported(data.data_type())?;
    d.u64(data.len() as u64);
    // Validity: bit offset, then the bitmap bytes.
    match data.nulls().filter(|n| n.null_count() > 0) {
        Some(n) => {
            d.u8(1);
            d.u64(n.offset() as u64);
            put(n.buffer().as_slice(), d, placer, place, None)?;
        }
        None => d.u8(0),
    }
    let host = matches!(place, Place::Host(_));
    if host && matches!(data.data_type(), DataType::Utf8 | DataType::Binary) && data.buffers().len() == 2 {
        // Rebased offsets and only the bytes the rows use.
        let offsets: &[i32] = &data.buffers()[0].typed_data::<i32>()[data.offset()..data.offset() + data.len() + 1];
        let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
        let values = data.buffers()[1].slice_with_length(first as usize, (last - first) as usize);
        d.u64(0); // array offset
        d.u32(2);
        d.region(Side::Input, placer.put_offsets(offsets, first)?);
        let utf8 = (*data.data_type() == DataType::Utf8).then_some(&values);
        put(values.as_slice(), d, placer, place, utf8)?;
    } else {
        d.u64(data.offset() as u64);
        d.u32(data.buffers().len() as u32);
        for b in data.buffers() {
            put(b.as_slice(), d, placer, place, None)?;
        }
    }
    d.u32(data.child_data().len() as u32);
    for c in data.child_data() {
        write_array(c, d, placer, place)?;
    }
    Ok(())
}

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
fn owned(bytes: &[u8]) -> Buffer {
    Buffer::from(bytes)
}

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
                None => (owned(input.region(off, n).ok_or_else(|| outside(off, n))?), false),
            },
            (Source::Host { output, .. }, Side::Output) => (owned(output.region(off, n).ok_or_else(|| outside(off, n))?), false),
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{FixedSizeListBuilder, UInt64Builder};
    use arrow_array::{BooleanArray, Int64Array, StringArray, UInt64Array};

    fn sample() -> RecordBatch {
        let mut sig = FixedSizeListBuilder::new(UInt64Builder::new(), 3);
        for i in 0..4u64 {
            sig.values().append_slice(&[i, i + 1, i + 2]);
            sig.append(true);
        }
        RecordBatch::try_from_iter([
            ("id", Arc::new(StringArray::from(vec!["a", "b", "c", "d"])) as ArrayRef),
            ("text", Arc::new(StringArray::from(vec![Some("héllo"), None, Some(""), Some("wörld")])) as ArrayRef),
            ("n", Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4)])) as ArrayRef),
            ("b", Arc::new(BooleanArray::from(vec![true, false, true, true])) as ArrayRef),
            ("sig", Arc::new(sig.finish()) as ArrayRef),
        ])
        .unwrap()
    }

    fn arenas() -> (Arena, Arena) {
        (Arena::create("t-in", 4096, false).unwrap(), Arena::create("t-out", 4096, true).unwrap())
    }

    #[test]
    fn a_batch_round_trips_through_both_arenas() {
        let (mut input, mut output) = arenas();
        let worker_in = Arena::open(input.read_only_fd().unwrap(), false).unwrap();
        for batch in [sample(), sample().slice(1, 3), sample().slice(0, 0)] {
            let (desc, written) = Encoder::default().write_input(&batch, &mut input, 7).unwrap();
            let mut worker_in = Arena::open(input.read_only_fd().unwrap(), false).unwrap();
            worker_in.follow().unwrap();
            let seen = Decoder::default().read(&desc, &Source::Worker(&worker_in)).unwrap();
            assert_eq!(seen.kind, 7);
            assert_eq!(seen.batch, batch);
            // The worker answers with what it got (everything lies in the input arena) plus a
            // new column (copied into the output arena).
            let mut answer = seen.batch.clone();
            let extra: ArrayRef = Arc::new(UInt64Array::from((0..batch.num_rows() as u64).collect::<Vec<_>>()));
            answer = RecordBatch::try_from_iter(
                answer
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .zip(answer.columns().iter().cloned())
                    .chain([("extra".to_string(), extra)]),
            )
            .unwrap();
            let out_desc = Encoder::default().write_output(&answer, &mut output, &worker_in, 2).unwrap();
            let back = Decoder::default().read(&out_desc, &Source::Host { input: &input, output: &output, written: &written }).unwrap();
            assert_eq!(back.kind, 2);
            assert_eq!(back.batch, answer);
        }
        drop(worker_in);
    }

    /// `batch` written by the host and read by the worker: (host input arena, output arena,
    /// what the host wrote, the worker's view of the input, the batch as the worker sees it).
    fn sent(batch: &RecordBatch) -> (Arena, Arena, Written, Arena, RecordBatch) {
        let (mut input, output) = arenas();
        let (desc, written) = Encoder::default().write_input(batch, &mut input, 0).unwrap();
        let worker_in = Arena::open(input.read_only_fd().unwrap(), false).unwrap();
        let seen = Decoder::default().read(&desc, &Source::Worker(&worker_in)).unwrap().batch;
        (input, output, written, worker_in, seen)
    }

    #[test]
    fn passed_through_text_comes_back_as_the_hosts_own_buffer() {
        let batch = sample();
        let (input, mut output, written, worker_in, seen) = sent(&batch);
        let out_desc = Encoder::default().write_output(&seen.project(&[1]).unwrap(), &mut output, &worker_in, 0).unwrap();
        let back = Decoder::default().read(&out_desc, &Source::Host { input: &input, output: &output, written: &written }).unwrap().batch;
        let host_text = batch.column(1).to_data();
        let back_text = back.column(0).to_data();
        assert_eq!(back_text.buffers()[1].as_ptr(), host_text.buffers()[1].as_ptr(), "the text bytes were copied");
    }

    #[test]
    fn hostile_descriptors_are_refused() {
        let (input, mut output, written, worker_in, seen) = sent(&sample());
        let good = Encoder::default().write_output(&seen, &mut output, &worker_in, 0).unwrap();
        let host = Source::Host { input: &input, output: &output, written: &written };
        // Every truncation and many single-byte changes fail cleanly (no panic, no fault).
        for cut in 0..good.len() {
            assert!(Decoder::default().read(&good[..cut], &host).is_err(), "truncated at {cut}");
        }
        for i in 0..good.len() {
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[i] = v;
                let _ = Decoder::default().read(&bad, &host);
            }
        }
        // Invalid UTF-8 written into the output arena is caught.
        let text: ArrayRef = Arc::new(StringArray::from(vec!["ab"]));
        let one = RecordBatch::try_from_iter([("text", text)]).unwrap();
        let d = Encoder::default().write_output(&one, &mut output, &worker_in, 0).unwrap();
        // The values region is the second region of the column: find "ab" in the arena and break it.
        let bytes = output.bytes().to_vec();
        let at = bytes.windows(2).position(|w| w == b"ab").unwrap();
        // SAFETY: test-only write into our own writable mapping.
        unsafe { *output.base_mut().add(at) = 0xff };
        let err = Decoder::default().read(&d, &Source::Host { input: &input, output: &output, written: &written }).err().unwrap();
        assert!(err.to_string().contains("utf") || err.to_string().contains("UTF"), "{err}");
    }

    #[test]
    fn an_arena_shrinks_and_still_carries_batches() {
        let (mut input, _) = arenas();
        let reader = Arena::open(input.read_only_fd().unwrap(), false).unwrap();
        let big: ArrayRef = Arc::new(StringArray::from(vec!["x".repeat(3 << 20)]));
        Encoder::default().write_input(&RecordBatch::try_from_iter([("text", big)]).unwrap(), &mut input, 0).unwrap();
        input.shrink_to(INITIAL_ARENA_BYTES).unwrap();
        assert_eq!(input.len(), INITIAL_ARENA_BYTES);
        let batch = sample();
        let (desc, _) = Encoder::default().write_input(&batch, &mut input, 0).unwrap();
        // The reader still maps the old size; it only touches what descriptors name.
        assert_eq!(Decoder::default().read(&desc, &Source::Worker(&reader)).unwrap().batch, batch);
    }

    #[test]
    fn arenas_grow_and_the_reader_follows() {
        let (mut input, _) = arenas();
        let mut reader = Arena::open(input.read_only_fd().unwrap(), false).unwrap();
        let big: ArrayRef = Arc::new(StringArray::from(vec!["x".repeat(100_000)]));
        let batch = RecordBatch::try_from_iter([("text", big)]).unwrap();
        let (desc, _) = Encoder::default().write_input(&batch, &mut input, 0).unwrap();
        assert!(input.len() >= 100_000);
        reader.follow().unwrap();
        assert_eq!(Decoder::default().read(&desc, &Source::Worker(&reader)).unwrap().batch, batch);
    }
}
