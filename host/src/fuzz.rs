//! Fuzz harnesses: one function per input the host accepts from outside, each taking
//! arbitrary bytes and returning normally whatever they hold (an error is a fine answer; a
//! panic, abort, hang or unbounded allocation is a bug). `fuzz/` runs them under libFuzzer
//! (`scripts/fuzz.sh`); the test suite replays the committed corpora and mutations of them
//! through the same functions (`tests/e2e/fuzz_smoke.rs`).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};

use crate::io::jsonl::JsonlReader;
use crate::io::records::ReadOptions;
use crate::stage::StageOutput;
use crate::wasm::bindings::curator::stage::types as wit;

/// Set up a fuzzing process: panics that the host catches (a decoder's, turned into an error)
/// are answers, not crashes, so the panic hook only reports; a panic that escapes a harness
/// still ends the process (libFuzzer's wrapper aborts on it) and is saved as a crash.
pub fn init() {
    std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
}

/// A harness: arbitrary bytes in, nothing out.
pub type Harness = fn(&[u8]);

/// Every harness, by the name its fuzz target and corpus directory carry.
pub const TARGETS: &[(&str, Harness)] = &[
    ("jsonl_reader", jsonl_reader),
    #[cfg(feature = "parquet")]
    ("parquet_reader", parquet_reader),
    ("pipeline_yaml", pipeline_yaml),
    ("plugin_manifest", plugin_manifest),
    ("guest_output", guest_output),
    ("worker_output", worker_output),
];

/// The harness `CURATOR_FUZZ_TARGET` names (the process ends with the list if it names none).
pub fn by_name_from_env() -> Harness {
    static CHOSEN: std::sync::OnceLock<Harness> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let want = std::env::var("CURATOR_FUZZ_TARGET").unwrap_or_default();
        TARGETS.iter().find(|(name, _)| *name == want).map(|(_, h)| *h).unwrap_or_else(|| {
            let names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
            eprintln!("CURATOR_FUZZ_TARGET={want:?} names no harness; one of {}", names.join(", "));
            std::process::exit(2)
        })
    })
}

/// JSONL bytes (plain, gzip or zstd: the reader sniffs them) read to the end with a small
/// line limit, so long lines and compression bombs meet the bound.
pub fn jsonl_reader(data: &[u8]) {
    let opts = ReadOptions { max_line_bytes: 4096, ..ReadOptions::default() };
    let Ok(input) = crate::io::decoded(Box::new(std::io::Cursor::new(data.to_vec())), "fuzz.jsonl") else { return };
    let mut r = JsonlReader::from_reader(input, "fuzz.jsonl", opts);
    let mut rows = 0usize;
    while let Ok(Some(b)) = r.next_batch(64) {
        rows += b.num_rows();
        let _ = r.take_rejects();
    }
    std::hint::black_box(rows);
}

/// A Parquet file read in full into the reader's schema.
#[cfg(feature = "parquet")]
pub fn parquet_reader(data: &[u8]) {
    use crate::io::{InputFile, Loc};
    use curator_core::partition::Extent;
    use std::io::Write;
    let Ok(mut f) = tempfile::Builder::new().suffix(".parquet").tempfile() else { return };
    if f.write_all(data).is_err() {
        return;
    }
    let file = InputFile {
        loc: Loc::Local(f.path().to_path_buf()),
        rel: "fuzz.parquet".into(),
        size: data.len() as u64,
        format: crate::io::Source(&crate::io::parquet::PARQUET),
        compressed: false,
    };
    let Ok(mut r) = crate::io::parquet::ParquetReader::open(&file, Extent::Whole, ReadOptions::default(), 64) else { return };
    while let Ok(Some(b)) = r.next_batch() {
        std::hint::black_box(b.num_rows());
    }
}

/// A pipeline file: parsed, validated, and each stage's params checked against a schema.
pub fn pipeline_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = curator_core::PipelineSpec::from_yaml("fuzz.yaml", text) else { return };
    let _ = spec.validate("fuzz.yaml");
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"min_words": {"type": "integer", "minimum": 0}, "lang": {"type": "string", "enum": ["en", "de"]},
                       "weights": {"type": "array", "items": {"type": "number"}}},
        "additionalProperties": false
    });
    for (_, stage) in spec.plugin_stages() {
        let _ = curator_core::params::validate_params(&schema, &stage.params, "params");
    }
}

/// A plugin file's manifest: from a WASM custom section, and the same bytes as the JSON a
/// native plugin returns.
pub fn plugin_manifest(data: &[u8]) {
    let _ = crate::registry::manifest_from_bytes(std::path::Path::new("fuzz.wasm"), data);
    let _ = curator_core::Manifest::from_json(data);
}

/// A small input batch of `rows` rows, as stages receive it.
fn input_batch(rows: usize) -> RecordBatch {
    let ids: ArrayRef = Arc::new(StringArray::from((0..rows).map(|i| format!("d{i}")).collect::<Vec<_>>()));
    let text: ArrayRef = Arc::new(StringArray::from((0..rows).map(|i| "word ".repeat(i)).collect::<Vec<_>>()));
    RecordBatch::try_from_iter([("id", ids), ("text", text)])
        .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(arrow_schema::Schema::empty())))
}

/// Bytes consumed front to back; reads past the end give zeros (so every input decodes).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map(|(b, r)| (*b, r)).unwrap_or((0, &[]));
        self.0 = rest;
        b
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// A length: mostly small, sometimes huge (what a hostile guest would claim).
    fn len(&mut self) -> usize {
        match self.u8() {
            0xff => self.u32() as usize,
            n => (n % 32) as usize,
        }
    }
    fn take(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a.to_vec()
    }
    fn u32s(&mut self) -> Vec<u32> {
        let n = self.len().min(self.0.len() / 4 + 1);
        (0..n).map(|_| self.u32()).collect()
    }
    fn column(&mut self) -> wit::Column {
        let name = match self.u8() % 4 {
            0 => "text".to_string(),
            1 => "id".to_string(),
            2 => "score".to_string(),
            _ => String::from_utf8_lossy(&self.take(3)).into_owned(),
        };
        let ty = match self.u8() % 6 {
            0 => wit::ColumnType::Utf8,
            1 => wit::ColumnType::Binary,
            2 => wit::ColumnType::Int64,
            3 => wit::ColumnType::Float64,
            4 => wit::ColumnType::Boolean,
            _ => wit::ColumnType::Float32Vector,
        };
        let validity = {
            let n = self.len();
            self.take(n)
        };
        let offsets = self.u32s();
        let data = {
            let n = self.len();
            self.take(n)
        };
        wit::Column { name, ty, validity, offsets, data }
    }
    fn columns(&mut self) -> Vec<wit::Column> {
        let n = self.u8() % 4;
        (0..n).map(|_| self.column()).collect()
    }
}

/// A WASM guest's answer (the WIT `output` variant, built from the bytes), decoded and applied
/// to the batch it answers, as the host does with every guest answer.
pub fn guest_output(data: &[u8]) {
    let mut b = Bytes(data);
    let rows = (b.u8() % 8) as usize;
    let out = match b.u8() % 4 {
        0 => wit::Output::Selection(b.u32s()),
        1 => wit::Output::Columns(b.columns()),
        2 => {
            let num_rows = b.u32();
            wit::Output::Batch(wit::Batch { num_rows, columns: b.columns() })
        }
        _ => {
            let columns = b.columns();
            wit::Output::Scored(wit::Scored { columns, keep: b.u32s() })
        }
    };
    if let Ok(decoded) = crate::wasm::columns::output_from_wit(out, rows) {
        let _ = StageOutput::apply(decoded, &input_batch(rows));
    }
}

/// A native worker's answer: a batch descriptor (the control frame's payload; its length in
/// the first two bytes, little-endian) over an output arena holding the rest of the bytes, decoded as the host decodes worker answers.
pub fn worker_output(data: &[u8]) {
    use crate::worker::layout::{Arena, Decoder, Encoder, Source};
    let Some((len, rest)) = data.split_at_checked(2) else { return };
    let (descriptor, arena_bytes) = rest.split_at((u16::from_le_bytes([len[0], len[1]]) as usize).min(rest.len()));
    let batch = input_batch(3);
    let Ok(mut input) = Arena::create("fuzz-in", 4096, false) else { return };
    let Ok((_, written)) = Encoder::default().write_input(&batch, &mut input, 0) else { return };
    let Ok(mut output) = Arena::create("fuzz-out", arena_bytes.len().max(64), true) else { return };
    // SAFETY: our own writable mapping of at least `arena_bytes.len()` bytes.
    unsafe { std::ptr::copy_nonoverlapping(arena_bytes.as_ptr(), output.base_mut(), arena_bytes.len()) };
    let _ = Decoder::default().read(descriptor, &Source::Host { input: &input, output: &output, written: &written });
}

/// A valid worker answer (descriptor length, descriptor, output arena bytes): the seed
/// that shows the fuzzer the format.
pub fn worker_output_seed() -> Vec<u8> {
    use crate::worker::layout::{Arena, Decoder, Encoder, Source};
    let batch = input_batch(3);
    let (Ok(mut input), Ok(mut output)) = (Arena::create("seed-in", 4096, false), Arena::create("seed-out", 4096, true)) else {
        return Vec::new();
    };
    let Ok(read_only) = input.read_only_fd() else { return Vec::new() };
    let Ok(worker_in) = Arena::open(read_only, false) else { return Vec::new() };
    let Ok((desc, _)) = Encoder::default().write_input(&batch, &mut input, 0) else { return Vec::new() };
    let Ok(seen) = Decoder::default().read(&desc, &Source::Worker(&worker_in)) else { return Vec::new() };
    let score: ArrayRef = Arc::new(arrow_array::Float64Array::from(vec![0.5, 1.5, 2.5]));
    let Ok(answer) = RecordBatch::try_from_iter([("score", score), ("text", seen.batch.column(1).clone())]) else { return Vec::new() };
    let Ok(d) = Encoder::default().write_output(&answer, &mut output, &worker_in, 2) else { return Vec::new() };
    let mut seed = (d.len() as u16).to_le_bytes().to_vec();
    seed.extend_from_slice(&d);
    seed.extend_from_slice(&output.copy_region(0, 512.min(output.len())).unwrap_or_default());
    seed
}
