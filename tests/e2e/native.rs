//! Native (C ABI) stages: worker processes, crash containment, the C header, zero copy.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};

use crate::support::*;

/// Native test plugins built from source: the Rust `native_probe` (cargo, its own target
/// dir) and the C `c_passthrough` (cc against sdk/include). Returns (plugins dir, a plugin
/// built for ABI 99).
fn native_plugins() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let root = root();
        let built = native_libraries(&["native_probe", "word_count_filter"]);
        let target = root.join("target/native");
        let plugins = target.join("plugins");
        let future = target.join("future");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::create_dir_all(&future).unwrap();
        install_library(&built.join("libnative_probe.so"), &plugins.join("libnative_probe.so"));
        // A WASM stage built natively (for `curator-host bench`), kept apart from the probes.
        let catalogue = target.join("catalogue");
        std::fs::create_dir_all(&catalogue).unwrap();
        install_library(&built.join("libword_count_filter.so"), &catalogue.join("libword_count_filter.so"));
        // Compiled beside and renamed over (as `install_library` does): other test processes
        // may be listing or running the directory's plugins meanwhile.
        let cc = |out: &Path, extra: &[&str]| {
            let part = out.with_extension(format!("so.{}", std::process::id()));
            let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
                .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I"])
                .arg(root.join("sdk/include"))
                .args(extra)
                .arg(root.join("tests/native/c/passthrough.c"))
                .arg("-o")
                .arg(&part)
                .status()
                .expect("cannot run cc (a C compiler is needed for the C plugin test)");
            assert!(status.success(), "compiling the C plugin failed");
            std::fs::rename(&part, out).unwrap();
        };
        cc(&plugins.join("libc_passthrough.so"), &[]);
        cc(&future.join("libc_future.so"), &["-DPROBE_ABI_MAJOR=99"]);
        (plugins, future)
    })
}

fn run_native(args: &[&str]) -> Run {
    host().args(args).arg("--plugins").arg(&native_plugins().0).output().expect("cannot start curator-host").into()
}

/// 50 documents in `in/a.jsonl`; document 15 says TRIGGER.
fn setup(tmp: &Path) {
    std::fs::create_dir_all(tmp.join("in")).unwrap();
    let texts: Vec<String> = (0..50).map(|i| if i == 15 { "TRIGGER here".into() } else { format!("doc {i} é") }).collect();
    write_docs(&tmp.join("in/a.jsonl"), &texts);
}

fn probe(tmp: &Path, mode: &str, execution: &str) -> Run {
    let execution = if execution.is_empty() { "  num_run_attempts: 1\n" } else { execution };
    let yaml = format!(
        "source:\n  path: in\nsink:\n  path: out\n  mode: overwrite\nbatch_size: 10\ntimeout_s: 10\nexecution:\n{execution}stages:\n  - plugin: native_probe\n    params: {{mode: {mode}}}\n"
    );
    let p = write_pipeline(tmp, &yaml);
    run_native(&["run", p.to_str().unwrap()])
}

#[test]
fn native_rust_and_c_stages_run_in_worker_processes() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let list = run_native(&["plugin", "list", "--json"]);
    list.ok();
    let plugins: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let kinds: Vec<(String, String)> =
        plugins.as_array().unwrap().iter().map(|p| (p["name"].as_str().unwrap().into(), p["kind"].as_str().unwrap().into())).collect();
    assert!(
        kinds.contains(&("native_probe".into(), "native".into())) && kinds.contains(&("c_passthrough".into(), "native".into())),
        "{kinds:?}"
    );

    probe(tmp.path(), "none", "").ok();
    let docs = read_jsonl(&tmp.path().join("out/a.jsonl"));
    assert_eq!(docs.len(), 50);
    assert_eq!(docs[0]["text"], "DOC 0 É");
    assert_eq!(docs[0]["text_len"], 8);

    let yaml = "source:\n  path: in\nsink:\n  path: out-c\nstages:\n  - plugin: c_passthrough\n  - plugin: native_probe\n    params: {mode: none}\n";
    let p = write_pipeline(tmp.path(), yaml);
    run_native(&["run", p.to_str().unwrap()]).ok();
    let docs = read_jsonl(&tmp.path().join("out-c/a.jsonl"));
    assert_eq!(docs.len(), 50);
    assert_eq!(docs[1]["text"], "DOC 1 É");
    assert!(docs[1]["seen_ptr"].as_i64().unwrap() != 0);
}

#[test]
fn crashing_native_stages_cost_a_worker_not_the_run() {
    for (mode, error, dead) in [
        ("segfault", "worker process died (killed by SIGSEGV (11))", 10),
        ("abort", "killed by SIGABRT (6); stderr: native probe aborting on purpose", 10),
        ("panic", "panicked: native probe panicked on purpose", 10),
        // Over its 256 MiB budget: stopped by the watchdog, split down to the one document.
        ("leak", "worker stopped by the watchdog: resident memory", 1),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        setup(tmp.path());
        let run = probe(tmp.path(), mode, "  ignore_failures: true\n  num_run_attempts: 2\n");
        run.ok();
        let kept = read_jsonl(&tmp.path().join("out/a.jsonl"));
        assert_eq!(kept.len(), 50 - dead, "{mode}: {}", run.stderr);
        let letters = read_jsonl(&tmp.path().join("out/_dead_letter/a.jsonl.jsonl"));
        assert_eq!(letters.len(), 1, "{mode}");
        let d = &letters[0];
        assert!(d["error"].as_str().unwrap().contains(error), "{mode}: {d}");
        assert_eq!(d["documents"], dead as u64);
        assert!(d["ids"].as_array().unwrap().contains(&serde_json::json!("d15")), "{mode}: {d}");
        if mode != "panic" {
            assert!(run.stderr.contains("a worker process was lost"), "{mode}: {}", run.stderr);
        }
    }
}

/// A native worker whose memory grows in every batch while its caches warm up (15 batches of
/// +2 MiB) and then stays is not a leak: the WASM linear-memory rule (growth in 8 of 10
/// batches) would have recycled it at its 10th batch, reloading its model each time.
#[test]
fn a_native_worker_warming_up_is_not_recycled() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    let texts: Vec<String> = (0..60).map(|i| format!("doc {i}")).collect();
    write_docs(&tmp.path().join("in/a.jsonl"), &texts);
    let yaml = "source:\n  path: in\nsink:\n  path: out\nbatch_size: 1\nstages:\n  - plugin: native_probe\n    params: {mode: warm}\n    num_workers: 1\n";
    let p = write_pipeline(tmp.path(), yaml);
    let run = run_native(&["run", p.to_str().unwrap()]);
    run.ok();
    assert!(!run.stderr.contains("recycling"), "{}", run.stderr);
    assert_eq!(read_jsonl(&tmp.path().join("out/a.jsonl")).len(), 60);
}

/// A native stage's CPU time counts every thread of its worker process, not only the one
/// that called it: the run summary's busy seconds for a stage that works on threads of its own.
#[test]
fn a_native_stage_working_on_its_own_threads_counts_their_cpu() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let marker = tmp.path().join("probe");
    probe(tmp.path(), &format!("threads, marker: {}", marker.display()), "").ok();
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(tmp.path().join("out/_summary.json")).unwrap()).unwrap();
    let stage = &summary["stages"][0];
    // What the two threads measured of themselves (CLOCK_THREAD_CPUTIME_ID), whatever the
    // processor's speed or the machine's load; the calling thread only waited.
    let threads: f64 = std::fs::read_to_string(marker.with_extension("cpu")).unwrap().parse().unwrap();
    let busy = stage["busy_s"].as_f64().unwrap();
    assert!(threads > 0.0, "{threads}");
    // All of it counted (the calling thread's time alone would be ~0), and once (the five
    // batches' other work is small beside it: not a second copy of the threads' time).
    assert!(busy >= 0.9 * threads, "busy {busy} s, the threads measured {threads} s: {stage}");
    assert!(busy <= 1.5 * threads + 0.25, "busy {busy} s, the threads measured {threads} s: {stage}");
}

/// Workers are started from the host's running image, not from its path: a binary replaced
/// on disk during a run (an upgrade, a rebuild) never stops the run's later workers.
#[test]
fn a_run_finishes_when_its_binary_is_replaced_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let bin = tmp.path().join("bin/curator-host");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_curator-host"), &bin).unwrap();
    let marker = tmp.path().join("gate");
    // Every batch in a new worker, the first one held until the binary has been replaced.
    let yaml = format!(
        "source:\n  path: in\nsink:\n  path: out\nbatch_size: 10\nexecution:\n  max_batches_per_worker: 1\nstages:\n  - plugin: native_probe\n    params: {{mode: gate, marker: {}}}\n    num_workers: 1\n",
        marker.display()
    );
    let p = write_pipeline(tmp.path(), &yaml);
    let mut child = host_at(&bin)
        .args(["run", p.to_str().unwrap(), "--plugins"])
        .arg(&native_plugins().0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = marker.with_extension("waiting");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !waiting.exists() {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its first batch was held");
        assert!(std::time::Instant::now() < deadline, "the first batch never reached the stage");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Replaced as an upgrade replaces it: a new file renamed over the old one.
    let new = tmp.path().join("bin/curator-host.new");
    std::fs::write(&new, b"#!/bin/sh\necho 'not the binary the run started with' >&2\nexit 3\n").unwrap();
    std::fs::rename(&new, &bin).unwrap();
    std::fs::write(marker.with_extension("go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("recycling a worker after 1 batches"), "later batches ran in new workers: {stderr}");
    assert_eq!(read_jsonl(&tmp.path().join("out/a.jsonl")).len(), 50);
}

#[test]
fn native_failure_without_ignore_fails_naming_the_batch() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let run = probe(tmp.path(), "segfault", "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("a.jsonl rows 10..20") && run.stderr.contains("SIGSEGV"), "{}", run.stderr);
}

#[test]
fn native_out_of_memory_batches_are_split() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let run = probe(tmp.path(), "oom", "");
    run.ok();
    assert!(run.stderr.contains("a batch of 10 documents ran out of memory; retrying it as two halves"), "{}", run.stderr);
    assert_eq!(read_jsonl(&tmp.path().join("out/a.jsonl")).len(), 50);
}

#[test]
fn native_timeouts_stop_the_worker() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let yaml = "source:\n  path: in\nsink:\n  path: out\nbatch_size: 10\nexecution:\n  ignore_failures: true\nstages:\n  - plugin: native_probe\n    params: {mode: slow}\n    timeout_s: 0.5\n";
    let p = write_pipeline(tmp.path(), yaml);
    run_native(&["run", p.to_str().unwrap()]).ok();
    let letters = read_jsonl(&tmp.path().join("out/_dead_letter/a.jsonl.jsonl"));
    assert!(letters[0]["error"].as_str().unwrap().contains("exceeded its time limit of 500ms per call"), "{letters:?}");
}

#[test]
fn abi_major_mismatch_is_refused() {
    let future = native_plugins().1.join("libc_future.so");
    let run: Run = host().args(["plugin", "inspect"]).arg(&future).output().unwrap().into();
    assert_ne!(run.code, 0);
    let (major, minor) = (curator_core::ABI_MAJOR, curator_core::ABI_MINOR);
    let expected = format!("built for ABI 99.{minor}, host supports {major}.{minor}");
    assert!(run.stderr.contains(&expected), "{}", run.stderr);
    let err = curator_host::worker::ffi::Library::load(&future).err().unwrap();
    assert!(err.to_string().contains(&expected), "{err}");
}

#[test]
fn c_abi_round_trip_is_zero_copy() {
    let path = native_plugins().0.join("libc_passthrough.so");
    let lib = curator_host::worker::ffi::Library::load(&path).unwrap();
    assert_eq!(lib.manifest.name, "c_passthrough");
    let mut inst = lib.create("{}", &Default::default()).unwrap();
    let text = StringArray::from(vec!["alpha", "beta", "gamma"]);
    let host_ptr = text.values().as_ptr() as i64;
    let batch = RecordBatch::try_from_iter([("text", Arc::new(text) as ArrayRef)]).unwrap();
    let (kind, out) = inst.process(&batch).unwrap();
    assert_eq!(kind, curator_host::stage::OutputKind::Columns);
    let seen = out.column_by_name("seen_ptr").unwrap().as_any().downcast_ref::<Int64Array>().unwrap().value(0);
    assert_eq!(seen, host_ptr, "the plugin saw a copy of the host's text");
    let back = out.column_by_name("text").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
    assert_eq!(back.values().as_ptr() as i64, host_ptr, "the host got a copy of the plugin's output");
    assert_eq!(back.value(2), "gamma");
    drop(out);
    // The input's buffers are still valid after the plugin released its references.
    assert_eq!(back.len(), 3);

    // Through a worker process: the plugin reads the text in the shared input arena (not the
    // host's own buffer, but not a copy made for it either), and the column it passes back is
    // resolved to the host's buffer, not copied.
    use curator_host::stage::{StageCall, StageOutput};
    let limits = curator_host::worker::WorkerLimits {
        memory_mb: 1024,
        timeout: std::time::Duration::from_secs(30),
        cpus: Vec::new(),
        cuda_visible_devices: None,
        gpu_memory_budget_bytes: None,
    };
    let plugin = curator_host::worker::WorkerPlugin::Native;
    curator_host::worker::set_worker_exe(env!("CARGO_BIN_EXE_curator-host").into());
    let mut worker =
        curator_host::worker::WorkerProcess::spawn("c", &path, plugin, &serde_json::json!({}), &Default::default(), &limits).unwrap();
    for _ in 0..3 {
        let StageOutput::Columns(cols) = worker.call(&batch).unwrap() else { panic!("not columns") };
        let text = cols.iter().find(|(f, _)| f.name() == "text").unwrap().1.as_any().downcast_ref::<StringArray>().unwrap().clone();
        assert_eq!(text.values().as_ptr() as i64, host_ptr, "the pass-through text was copied on its way back");
        assert_eq!(text.value(1), "beta");
        let seen = cols.iter().find(|(f, _)| f.name() == "seen_ptr").unwrap().1.as_any().downcast_ref::<Int64Array>().unwrap().value(0);
        assert_ne!(seen, host_ptr);
    }
}

#[test]
fn a_native_stage_cannot_run_in_process() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let yaml =
        "source:\n  path: in\nsink:\n  path: out\nstages:\n  - plugin: native_probe\n    isolation: in_process\n    params: {mode: none}\n";
    let p = write_pipeline(tmp.path(), yaml);
    let run = run_native(&["run", p.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("isolation") && run.stderr.contains("always runs in a worker process"), "{}", run.stderr);
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn gpu_stage_without_a_gpu_stops_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let yaml = "source:\n  path: in\nsink:\n  path: out\nstages:\n  - plugin: native_probe\n    params: {mode: none}\n    resources: {gpu_memory_gb: 8}\n";
    let p = write_pipeline(tmp.path(), yaml);
    // Every GPU hidden, so the test means the same on a GPU machine.
    let run: Run = host()
        .args(["run", p.to_str().unwrap(), "--plugins"])
        .arg(&native_plugins().0)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .expect("cannot start curator-host")
        .into();
    // Exit 2 (an impossible plan), at planning: nothing read, no output directory.
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("stages[0].resources: stage \"native_probe\" needs a GPU (gpu_memory_gb: 8) but none was found"),
        "{}",
        run.stderr
    );
    assert!(!tmp.path().join("out").exists());
}

/// Reading starts once each stage has one worker set up; a worker whose set-up fails after
/// that (here two of three, two seconds late) still fails the run.
#[test]
fn the_run_starts_with_one_worker_up_and_a_late_setup_failure_fails_it() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let marker = tmp.path().join("elected");
    let yaml = format!(
        "source:\n  path: in\nsink:\n  path: out\nbatch_size: 10\nstages:\n  - plugin: native_probe\n    params: {{mode: fail_init_late, marker: {}, starts: 2}}\n    num_workers: 3\n",
        marker.display()
    );
    let p = write_pipeline(tmp.path(), &yaml);
    let run = run_native(&["run", p.to_str().unwrap()]);
    // Planning's check took the first election, one of the run's three workers the second.
    assert!(marker.with_extension("2").exists(), "{}", run.stderr);
    assert!(run.stderr.contains("first batch at the sink"), "reading waited for every worker:\n{}", run.stderr);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("refusing to start, late, on purpose"), "{}", run.stderr);
}

#[test]
fn a_native_stage_that_cannot_start_fails_the_run_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let yaml = "source:\n  path: in\nsink:\n  path: out\nstages:\n  - plugin: c_passthrough\n  - plugin: native_probe\n    params: {mode: fail_init}\n";
    let p = write_pipeline(tmp.path(), yaml);
    let mut child = host()
        .args(["run", p.to_str().unwrap(), "--plugins"])
        .arg(&native_plugins().0)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("the run hung after a stage failed to start");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    // Found at planning, in a throw-away worker: exit 2, nothing read or created.
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("stages[1].plugin") && stderr.contains("refusing to start on purpose"), "{stderr}");
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn bench_feeds_the_stage_after_a_native_one_its_output() {
    let (plugins, _) = native_plugins();
    let tmp = tempfile::tempdir().unwrap();
    let texts: Vec<String> = (0..300).map(|i| "word ".repeat(i % 10)).collect();
    write_docs(&tmp.path().join("in.jsonl"), &texts);
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in.jsonl\nsink:\n  path: out\nstages:\n  - plugin: native_probe\n    params: {mode: fail}\n  - plugin: word_count_filter\n    params: {min_words: 5}\n",
    );
    let run = run_with_guests(&["bench", p.to_str().unwrap(), "--json", "--repeat", "1", "--plugins", plugins.to_str().unwrap()]);
    run.ok();
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    // The native stage ran (in its worker) and passed every document on: the WASM stage after
    // it gets them all, not none.
    assert_eq!(
        (rows[0]["label"].as_str(), rows[0]["docs_in"].as_u64(), rows[0]["docs_out"].as_u64()),
        (Some("native_probe"), Some(300), Some(300)),
        "{rows}"
    );
    assert!(rows[0]["native_s"].as_f64().unwrap() > 0.0 && rows[0]["wasm_s"].is_null(), "{rows}");
    assert_eq!((rows[1]["docs_in"].as_u64(), rows[1]["docs_out"].as_u64()), (Some(300), Some(150)), "{rows}");
}

#[test]
fn bench_gives_a_stage_its_text_field_as_a_run_does() {
    let tmp = tempfile::tempdir().unwrap();
    // The text always has 9 words; the summary has 0-9: a filter on the summary keeps half.
    let lines: Vec<String> = (0..300)
        .map(|i| serde_json::json!({"id": format!("d{i}"), "text": "word ".repeat(9), "summary": "word ".repeat(i % 10)}).to_string())
        .collect();
    std::fs::write(tmp.path().join("in.jsonl"), lines.join("\n") + "\n").unwrap();
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in.jsonl\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    text_field: summary\n    params: {min_words: 5}\n",
    );
    let run = run_with_guests(&["bench", p.to_str().unwrap(), "--json", "--repeat", "1"]);
    run.ok();
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!((rows[0]["docs_in"].as_u64(), rows[0]["docs_out"].as_u64()), (Some(300), Some(150)), "{rows}");
}

#[test]
fn bench_times_a_stage_as_wasm_and_as_its_native_build() {
    let (plugins, _) = native_plugins();
    let catalogue = plugins.parent().unwrap().join("catalogue");
    let tmp = tempfile::tempdir().unwrap();
    let texts: Vec<String> = (0..300).map(|i| "word ".repeat(i % 10)).collect();
    write_docs(&tmp.path().join("in.jsonl"), &texts);
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in.jsonl\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 5}\n",
    );
    let run = run_with_guests(&["bench", p.to_str().unwrap(), "--native-plugins", catalogue.to_str().unwrap(), "--json", "--repeat", "1"]);
    run.ok();
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let row = &rows[0];
    assert_eq!(row["label"], "word_count_filter");
    assert_eq!(row["docs_in"], 300);
    assert_eq!(row["docs_out"], 150, "{row}");
    assert!(row["wasm_s"].as_f64().unwrap() > 0.0 && row["native_s"].as_f64().unwrap() > 0.0, "{row}");
    assert_eq!(row["outputs_differ"], false);
    // Nothing is written.
    assert!(!tmp.path().join("out").exists());
    // The table form.
    let run = run_with_guests(&["bench", p.to_str().unwrap(), "--native-plugins", catalogue.to_str().unwrap(), "--repeat", "1"]);
    assert!(run.ok().stdout.contains("| word_count_filter | 300 |"), "{}", run.stdout);
}
