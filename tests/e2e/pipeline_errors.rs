//! Bad pipeline files are refused before any data is read, with the path in the file named.

use crate::support::*;

const BASE: &str = "source:\n  path: in\nsink:\n  path: out\nstages:\n";

/// Run `stages` against an input that is not JSON at all: reading it would fail differently,
/// so the expected error proves nothing was read.
fn refused(stages: &str) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/x.jsonl"), "this is not json\n").unwrap();
    let p = write_pipeline(tmp.path(), &format!("{BASE}{stages}"));
    let run = run_with_guests(&["run", p.to_str().unwrap()]);
    assert_eq!(run.code, 2, "expected exit 2 (invalid pipeline)\n{}", run.stderr);
    assert!(!run.stderr.contains("not a JSON object"), "data was read:\n{}", run.stderr);
    assert!(!tmp.path().join("out").exists(), "output directory created");
    run
}

fn assert_line(run: &Run, want: &str) {
    assert!(run.stderr.lines().any(|l| l.contains(want)), "stderr lacks {want:?}:\n{}", run.stderr);
}

#[test]
fn unknown_stage() {
    let run = refused("  - plugin: word_count\n");
    assert_line(&run, "pipeline.yaml: stages[0].plugin: unknown stage \"word_count\" (installed: ");
    assert_line(&run, "word_count_filter");
}

#[test]
fn unknown_field() {
    let run = refused("  - plugin: word_count_filter\n    parameters: {min_words: 3}\n");
    assert_line(&run, "pipeline.yaml: stages[0].parameters: unknown field `parameters`");
}

#[test]
fn unknown_param() {
    let run = refused("  - plugin: word_count_filter\n    params: {min_word: 3}\n");
    assert_line(&run, "pipeline.yaml: stages[0].params.min_word: unknown parameter (known: max_words, min_words)");
}

#[test]
fn wrong_param_type() {
    let run = refused("  - plugin: unicode_normalize\n  - plugin: word_count_filter\n    params: {min_words: ten}\n");
    assert_line(&run, "pipeline.yaml: stages[1].params.min_words: expected an integer, found \"ten\"");
}

#[test]
fn both_gpu_kinds() {
    let run = refused("  - plugin: word_count_filter\n    resources: {gpus: 1, gpu_memory_gb: 8}\n");
    assert_line(&run, "pipeline.yaml: stages[0].resources: gpus and gpu_memory_gb are both set (1 and 8); set only one");
}

#[test]
fn gpu_request_for_wasm_stage() {
    let run = refused("  - plugin: word_count_filter\n    resources: {gpus: 1}\n");
    assert_line(&run, "stages[0].resources: \"word_count_filter\" is a WASM stage and runs on CPU");
}

#[test]
fn bad_resources_and_values() {
    let run = refused("  - plugin: word_count_filter\n    resources: {cpus: 0}\n");
    assert_line(&run, "pipeline.yaml: stages[0].resources: cpus: must be > 0, found 0");
    let run = refused("  - plugin: unicode_normalize\n    params: {form: nfx}\n");
    assert_line(&run, "pipeline.yaml: stages[0].params.form: expected one of \"nfc\", \"nfkc\", \"nfd\", \"nfkd\", found \"nfx\"");
}

#[test]
fn all_errors_reported_at_once() {
    let run = refused("  - plugin: nope\n  - plugin: word_count_filter\n    params: {min_words: -1}\n");
    assert_line(&run, "stages[0].plugin: unknown stage \"nope\"");
    assert_line(&run, "stages[1].params.min_words: must be at least 0, found -1");
}

#[test]
fn dry_run_checks_without_reading() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/x.jsonl"), "not json\n").unwrap();
    let p = write_pipeline(tmp.path(), &format!("{BASE}  - plugin: word_count_filter\n"));
    let run = run_with_guests(&["run", p.to_str().unwrap(), "--dry-run"]);
    run.ok();
    assert!(run.stdout.contains("is valid: 1 input file(s) in 1 partition(s), 1 stage(s)"), "{}", run.stdout);
}
