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

mod read;
mod write;

use arrow_buffer::Buffer;
use arrow_schema::DataType;

pub use super::arena::Arena;
pub use read::{Decoded, Decoder, Source};
pub use write::Encoder;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::builder::{FixedSizeListBuilder, UInt64Builder};
    use arrow_array::{ArrayRef, RecordBatch};
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
        let bytes = output.copy_all();
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
