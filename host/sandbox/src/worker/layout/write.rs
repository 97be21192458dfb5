//! Writing a batch into an arena: buffers placed 64-byte aligned, the descriptor built.

use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_schema::{DataType, SchemaRef};

use super::{ALIGN, Arena, MAGIC, Out, ShmError, Side, VERSION, Written, check_supported};

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
