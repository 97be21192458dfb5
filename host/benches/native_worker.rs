//! What running a native stage in a worker process costs over calling it in-process.
//!
//!     cargo bench -p curator-host --bench native_worker
//!
//! Plugins: `c_passthrough` (C, zero copy, no work: the pure boundary) and `native_probe`
//! (Rust SDK, upper-cases text: a stage doing real work). Each gets a 10 MB batch and a
//! 1-row batch, in-process (C Data Interface only) and through a `curator-host worker`
//! process (batches through the worker's shared-memory arenas, control frames over pipes).
//! Prints a Markdown table; best of several runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

// The benches' shared timing (only `best_of` here).
#[allow(dead_code)]
#[path = "common/measure.rs"]
mod measure;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use curator_host::stage::StageCall;
use curator_host::worker::ffi::Library;
use curator_host::worker::{WorkerLimits, WorkerPlugin, WorkerProcess};

fn build_plugins(root: &Path) -> PathBuf {
    let target = root.join("target/native");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = Command::new(cargo)
        .current_dir(root)
        .args(["build", "--locked", "--release", "-p", "native_probe", "--target-dir"])
        .arg(&target)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "building native_probe failed");
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-I"])
        .arg(root.join("sdk/include"))
        .arg(root.join("tests/native/c/passthrough.c"))
        .arg("-o")
        .arg(target.join("libc_passthrough.so"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "compiling the C plugin failed");
    target
}

fn batch(rows: usize, doc_bytes: usize) -> RecordBatch {
    let doc: String = "lorem ipsum dolor sit amet é ".chars().cycle().take(doc_bytes).collect();
    let texts: Vec<&str> = (0..rows).map(|_| doc.as_str()).collect();
    let ids: Vec<String> = (0..rows).map(|i| format!("d{i}")).collect();
    RecordBatch::try_from_iter([
        ("id", Arc::new(StringArray::from(ids)) as ArrayRef),
        ("text", Arc::new(StringArray::from(texts)) as ArrayRef),
    ])
    .unwrap()
}

/// The best of `reps` runs of `f`, after one untimed warm-up run.
fn best(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    measure::best_of(reps, f)
}

fn fmt(d: Duration) -> String {
    if d.as_secs_f64() >= 1e-3 { format!("{:.2} ms", d.as_secs_f64() * 1e3) } else { format!("{:.1} µs", d.as_secs_f64() * 1e6) }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let dir = build_plugins(&root);
    curator_host::worker::set_worker_exe(env!("CARGO_BIN_EXE_curator-host").into());
    let big = batch(2500, 4000);
    let one = batch(1, 4000);
    let limits = WorkerLimits {
        memory_mb: 4096,
        timeout: Duration::from_secs(60),
        cpus: Vec::new(),
        cuda_visible_devices: None,
        gpu_memory_budget_bytes: None,
    };
    println!("| plugin | batch | in-process | worker process | overhead | overhead / in-process |\n|---|---|---|---|---|---|");
    for (file, params) in
        [("libc_passthrough.so", serde_json::json!({})), ("release/libnative_probe.so", serde_json::json!({"mode": "none"}))]
    {
        let path = dir.join(file);
        let lib = Library::load(&path).unwrap();
        let mut inst = lib.create(&params.to_string(), &Default::default()).unwrap();
        let mut worker =
            WorkerProcess::spawn(&lib.manifest.name, &path, WorkerPlugin::Native, &params, &Default::default(), &limits).unwrap();
        for (label, b, reps) in [("10 MB (2,500 docs)", &big, 15), ("1 row", &one, 2000)] {
            // Both sides do the same: call, then apply the checked answer to the batch.
            let inproc = best(reps, || {
                inst.call(b).unwrap().apply(b).unwrap();
            });
            let remote = best(reps, || {
                worker.call(b).unwrap().apply(b).unwrap();
            });
            let over = remote.saturating_sub(inproc);
            println!(
                "| {} | {label} | {} | {} | {} | {:.2}x |",
                lib.manifest.name,
                fmt(inproc),
                fmt(remote),
                fmt(over),
                over.as_secs_f64() / inproc.as_secs_f64().max(1e-9)
            );
        }
    }
}
