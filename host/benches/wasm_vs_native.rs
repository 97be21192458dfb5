//! WASM vs native: the same stage source compiled both ways, on the same data.
//!
//! `cargo bench -p curator-host --bench wasm_vs_native` prints a table. Not a timed test:
//! numbers are medians of repeated runs in one process, reported as ratios to the native
//! baseline measured in the same run.

#[allow(dead_code)]
#[path = "../../tests/e2e/support.rs"]
mod support;

mod common;
use common::corpus;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use curator_host::wasm::columns;

fn apply(input: &RecordBatch, out: curator_host::wasm::bindings::curator::stage::types::Output) -> RecordBatch {
    columns::output_from_wit(out, input.num_rows()).and_then(|o| o.apply(input)).expect("output")
}
use curator_host::registry::read_manifest;
use curator_host::wasm::{InstanceLimits, WasmRuntime};
use curator_sdk::native::NativeStage;
use curator_sdk::{Batch, Column};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<F: FnMut()>(iters: usize, mut f: F) -> Duration {
    median(
        (0..iters)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn record_batch(docs: &[String]) -> RecordBatch {
    let schema = Schema::new(vec![Field::new("text", DataType::Utf8, false)]);
    let texts: ArrayRef = Arc::new(StringArray::from_iter_values(docs.iter()));
    RecordBatch::try_new(Arc::new(schema), vec![texts]).expect("batch")
}

fn sdk_batch(docs: &[String]) -> Batch {
    Batch { num_rows: docs.len() as u32, columns: vec![Column::utf8("text", docs.iter().map(String::as_str))] }
}

fn row(name: &str, value: String, note: &str) {
    println!("| {name:<46} | {value:>14} | {note:<34} |");
}

fn main() {
    let guests = support::guests_dir();
    let plugin = guests.join("word_count_filter.wasm");
    let cache = tempfile::tempdir().expect("tempdir");
    let params = serde_json::json!({"min_words": 50, "max_words": 100000});
    let docs = corpus(10 << 20);
    let bytes: usize = docs.iter().map(String::len).sum();
    let mb = bytes as f64 / (1 << 20) as f64;
    let rb = record_batch(&docs);
    let one = record_batch(&docs[..1]);
    let iters = 15;

    // Start-up: cold (compile) and cached (deserialize) to the first processed batch.
    let start = |cache_dir: &Path| {
        let t = Instant::now();
        let rt = WasmRuntime::new(Some(cache_dir.to_path_buf())).expect("runtime");
        let compiled = rt.load(&plugin, read_manifest(&plugin).expect("manifest")).expect("load");
        let limits = InstanceLimits { memory_mb: 512, timeout: Duration::from_secs(60), grants: vec![] };
        let mut inst = compiled.instantiate("bench", &params, &limits).expect("instantiate");
        let out = inst.process(&columns::to_wit(&one, &["text".into()])).expect("process");
        apply(&one, out);
        (t.elapsed(), compiled.from_cache)
    };
    let (cold, c0) = start(cache.path());
    let (warm, c1) = start(cache.path());
    assert!(!c0 && c1, "cache not used as expected");

    let rt = WasmRuntime::new(None).expect("runtime");
    let compiled = rt.load(&plugin, read_manifest(&plugin).expect("manifest")).expect("load");
    let limits = InstanceLimits { memory_mb: 512, timeout: Duration::from_secs(60), grants: vec![] };
    let mut inst = compiled.instantiate("bench", &params, &limits).expect("instantiate");
    let mut native = NativeStage::new::<word_count_filter::WordCountFilter>(&params.to_string()).expect("native");

    // Both sides must agree before we time anything.
    let wasm_kept = apply(&rb, inst.process(&columns::to_wit(&rb, &["text".into()])).expect("wasm")).num_rows();
    let native_kept = match native.process(sdk_batch(&docs)).expect("native") {
        curator_sdk::Output::Selection(s) => s.len(),
        _ => unreachable!("a filter returns a selection"),
    };
    assert_eq!(wasm_kept, native_kept, "WASM and native disagree");

    let native_10mb = median(
        (0..iters)
            .map(|_| {
                let b = sdk_batch(&docs);
                let t = Instant::now();
                std::hint::black_box(native.process(b).expect("native"));
                t.elapsed()
            })
            .collect(),
    );
    let wit = columns::to_wit(&rb, &["text".into()]);
    let wasm_call_10mb = time(iters, || {
        std::hint::black_box(inst.process(&wit).expect("wasm"));
    });
    let wasm_e2e_10mb = time(iters, || {
        let w = columns::to_wit(&rb, &["text".into()]);
        let out = inst.process(&w).expect("wasm");
        std::hint::black_box(apply(&rb, out));
    });

    let calls = 20_000;
    let one_sdk = sdk_batch(&docs[..1]);
    let t = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(native.process(one_sdk.clone()).expect("native"));
    }
    let native_one = t.elapsed() / calls;
    let one_wit = columns::to_wit(&one, &["text".into()]);
    let t = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(inst.process(&one_wit).expect("wasm"));
    }
    let wasm_one = t.elapsed() / calls;
    let t = Instant::now();
    for _ in 0..calls {
        let w = columns::to_wit(&one, &["text".into()]);
        let out = inst.process(&w).expect("wasm");
        std::hint::black_box(apply(&one, out));
    }
    let wasm_one_e2e = t.elapsed() / calls;

    let rate = |d: Duration| format!("{:.0} MB/s", mb / d.as_secs_f64());
    let ratio = |d: Duration| format!("{:.2}x native", d.as_secs_f64() / native_10mb.as_secs_f64());
    println!("word_count_filter, {} docs, {:.1} MB of text, median of {iters} runs", docs.len(), mb);
    println!("| {:<46} | {:>14} | {:<34} |", "measurement", "value", "vs baseline");
    println!("|{:-<48}|{:-<16}|{:-<36}|", "", "", "");
    row("native filter, 10 MB batch (baseline)", rate(native_10mb), &format!("{:.2} ms", native_10mb.as_secs_f64() * 1e3));
    row("WASM filter call, 10 MB batch", rate(wasm_call_10mb), &ratio(wasm_call_10mb));
    row("WASM incl. host Arrow<->WIT copies, 10 MB", rate(wasm_e2e_10mb), &ratio(wasm_e2e_10mb));
    row("native call, 1-document batch", format!("{:.2} µs", native_one.as_secs_f64() * 1e6), "");
    row(
        "WASM call, 1-document batch",
        format!("{:.2} µs", wasm_one.as_secs_f64() * 1e6),
        &format!("+{:.2} µs over native", (wasm_one.as_secs_f64() - native_one.as_secs_f64()) * 1e6),
    );
    row("WASM call incl. host copies, 1 document", format!("{:.2} µs", wasm_one_e2e.as_secs_f64() * 1e6), "");
    row("start to first batch, cold (compile)", format!("{:.1} ms", cold.as_secs_f64() * 1e3), "");
    row(
        "start to first batch, cached artifact",
        format!("{:.1} ms", warm.as_secs_f64() * 1e3),
        &format!("{:.1}x faster than cold", cold.as_secs_f64() / warm.as_secs_f64()),
    );
}
