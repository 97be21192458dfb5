//! The control protocol between the host and a worker process: length-prefixed frames on the
//! worker's stdin/stdout. Batches do not travel here: a frame carries the descriptor of a
//! batch written into the shared-memory arenas (`arena.rs`, `layout/`).
//!
//! ```text
//! host → worker   BATCH(descriptor of the input)            SHUTDOWN
//! worker → host   READY  OUTPUT(descriptor of the answer)   ERROR(msg)  OOM(msg)
//!                 FATAL(msg, worker ends)  INVALID_PARAMS(msg, at start)  MANIFEST(json)
//! ```

use std::io::{Read, Write};

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

use crate::stage::{Keep, StageFailure, StageOutput, columns_of, first_column};

pub const TAG_BATCH: u8 = 1;
pub const TAG_SHUTDOWN: u8 = 2;
pub const TAG_READY: u8 = 0x10;
pub const TAG_OUTPUT: u8 = 0x11;
pub const TAG_ERROR: u8 = 0x12;
pub const TAG_OOM: u8 = 0x13;
pub const TAG_FATAL: u8 = 0x14;
pub const TAG_MANIFEST: u8 = 0x15;
pub const TAG_INVALID_PARAMS: u8 = 0x16;

/// Kind byte of an input batch's descriptor.
pub const KIND_INPUT: u8 = 0;
const KIND_SELECTION: u8 = 1;
const KIND_COLUMNS: u8 = 2;
const KIND_SCORED: u8 = 3;
const KIND_BATCH: u8 = 4;
const KIND_MASK: u8 = 5;

/// Column name of the keep flags in a scored answer.
const KEEP: &str = "_keep";

pub fn write_frame(w: &mut impl Write, tag: u8, payload: &[u8]) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(9 + payload.len());
    frame.push(tag);
    frame.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    frame.extend_from_slice(payload);
    w.write_all(&frame)?;
    w.flush()
}

/// Largest control frame accepted (a descriptor is a few KB; a manifest or message less).
const MAX_FRAME: u64 = 64 << 20;

pub fn read_frame(r: &mut impl Read) -> std::io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    r.read_exact(&mut head)?;
    let mut len = [0u8; 8];
    len.copy_from_slice(&head[1..]);
    let len = u64::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("control frame of {len} bytes")));
    }
    let mut payload = Vec::with_capacity(len as usize);
    r.take(len).read_to_end(&mut payload)?;
    if payload.len() as u64 != len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok((head[0], payload))
}

/// An OUTPUT frame's payload: the CPU time the call took in the worker (ns), then the
/// descriptor of the answer.
pub fn join_cpu(cpu: std::time::Duration, descriptor: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + descriptor.len());
    v.extend_from_slice(&(cpu.as_nanos() as u64).to_le_bytes());
    v.extend_from_slice(descriptor);
    v
}

/// The inverse of [`join_cpu`].
pub fn split_cpu(payload: &[u8]) -> Result<(std::time::Duration, &[u8]), StageFailure> {
    let (head, rest) = payload.split_at_checked(8).ok_or_else(|| StageFailure::Protocol("short output frame".into()))?;
    let mut ns = [0u8; 8];
    ns.copy_from_slice(head);
    Ok((std::time::Duration::from_nanos(u64::from_le_bytes(ns)), rest))
}

fn batch(fields: Vec<Field>, arrays: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch, StageFailure> {
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
        .map_err(|e| StageFailure::InvalidOutput(e.to_string()))
}

/// A stage's answer as a kind byte and one batch, for the output arena. `rows`: the input's
/// row count. A scored answer's selection travels as flags (checked here, in the worker; the
/// host checks the flags again).
pub fn output_to_wire(out: StageOutput, rows: usize) -> Result<(u8, RecordBatch), StageFailure> {
    Ok(match out {
        StageOutput::Selection(Keep::Indices(sel)) => {
            let n = sel.len();
            (KIND_SELECTION, batch(vec![Field::new("selection", DataType::UInt32, true)], vec![Arc::new(sel)], n)?)
        }
        StageOutput::Selection(Keep::Mask(mask)) => {
            (KIND_MASK, batch(vec![Field::new(KEEP, DataType::Boolean, true)], vec![Arc::new(mask)], rows)?)
        }
        StageOutput::Columns(cols) => {
            let (fields, arrays) = cols.into_iter().unzip();
            (KIND_COLUMNS, batch(fields, arrays, rows)?)
        }
        StageOutput::Scored { columns, keep } => {
            let mask = keep.mask(rows)?;
            let (mut fields, mut arrays): (Vec<Field>, Vec<ArrayRef>) = columns.into_iter().unzip();
            fields.push(Field::new(KEEP, DataType::Boolean, true));
            arrays.push(Arc::new(mask));
            (KIND_SCORED, batch(fields, arrays, rows)?)
        }
        StageOutput::Batch(b) => (KIND_BATCH, b),
    })
}

/// The inverse of [`output_to_wire`] (on the host: the batch is decoded and its arrays
/// checked; the answer as a whole is checked when applied).
pub fn output_from_wire(kind: u8, b: RecordBatch) -> Result<StageOutput, StageFailure> {
    let bad = |m: &str| StageFailure::InvalidOutput(m.to_string());
    Ok(match kind {
        KIND_SELECTION => StageOutput::Selection(Keep::Indices(first_column(&b, "a selection must be one uint32 column")?)),
        KIND_MASK => StageOutput::Selection(Keep::Mask(first_column(&b, "a mask must be one boolean column")?)),
        KIND_COLUMNS => StageOutput::Columns(columns_of(&b)),
        KIND_SCORED => {
            let mut cols = columns_of(&b);
            let (f, keep) = cols.pop().ok_or_else(|| bad("a scored answer without keep flags"))?;
            let keep = keep
                .as_any()
                .downcast_ref::<BooleanArray>()
                .filter(|_| f.name() == KEEP)
                .ok_or_else(|| bad("a scored answer must end with boolean keep flags"))?;
            StageOutput::Scored { columns: cols, keep: Keep::Mask(keep.clone()) }
        }
        KIND_BATCH => StageOutput::Batch(b),
        other => return Err(StageFailure::Protocol(format!("unknown output kind {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, UInt32Array};

    #[test]
    fn frames_round_trip_and_huge_lengths_are_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, TAG_BATCH, b"hello").unwrap();
        assert_eq!(read_frame(&mut std::io::Cursor::new(&buf)).unwrap(), (TAG_BATCH, b"hello".to_vec()));
        assert!(read_frame(&mut std::io::Cursor::new(&buf[..7])).is_err());
        let mut huge = vec![TAG_OUTPUT];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(read_frame(&mut std::io::Cursor::new(huge)).is_err());
    }

    #[test]
    fn every_output_kind_crosses() {
        let n: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        let cols = vec![(Field::new("n", DataType::Int64, false), n)];
        let outputs = [
            StageOutput::Selection(Keep::Indices(UInt32Array::from(vec![0, 2]))),
            StageOutput::Selection(Keep::Mask(BooleanArray::from(vec![true, false, true]))),
            StageOutput::Columns(cols.clone()),
            StageOutput::Scored { columns: cols.clone(), keep: Keep::Indices(UInt32Array::from(vec![1])) },
        ];
        for out in outputs {
            let kind = out.kind();
            let (k, b) = output_to_wire(out, 3).unwrap();
            let back = output_from_wire(k, b).unwrap();
            assert_eq!(back.kind(), kind);
        }
        // Out-of-range indices of a scored answer are caught in the worker already.
        let bad = StageOutput::Scored { columns: cols, keep: Keep::Indices(UInt32Array::from(vec![7])) };
        assert!(output_to_wire(bad, 3).is_err());
        assert!(output_from_wire(99, RecordBatch::new_empty(Arc::new(Schema::empty()))).is_err());
    }
}
