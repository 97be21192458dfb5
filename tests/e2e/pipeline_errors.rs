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

#[test]
fn independent_mistakes_are_all_reported_and_nothing_is_created() {
    // A misspelled filter inside a chain's params (only its own setup can tell), a missing
    // source path and an unknown stage: three lines, each with its path, exit 2, no output.
    let tmp = tempfile::tempdir().unwrap();
    let yaml = "source:\n  path: no-such-dir/\nsink:\n  path: out\nstages:\n  - plugin: heuristic_chain\n    params:\n      filters:\n        - {filter: word_count_filter, min_words: 5}\n        - {filter: numbres_filter}\n        - {filter: word_count_filter, min_wrds: 5}\n  - plugin: nope\n";
    let p = write_pipeline(tmp.path(), yaml);
    let run = run_with_guests(&["run", p.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_line(&run, "pipeline.yaml: stages[1].plugin: unknown stage \"nope\"");
    assert_line(&run, "pipeline.yaml: source.path: ");
    assert_line(&run, "no-such-dir");
    let chain = run.stderr.lines().find(|l| l.contains("stages[0].params")).unwrap_or_else(|| panic!("no chain error:\n{}", run.stderr));
    assert!(chain.contains("filters[1]") && chain.contains("numbres_filter"), "{chain}");
    assert!(chain.contains("filters[2]") && chain.contains("min_wrds"), "both mistakes of the chain named: {chain}");
    assert!(!tmp.path().join("out").exists(), "output directory created");
}

#[test]
fn mode_error_refuses_a_directory_holding_another_runs_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    write_docs(&tmp.path().join("in/a.jsonl"), &["one two three".to_string()]);
    let first = write_pipeline(
        tmp.path(),
        "source:\n  path: in\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 1}\n",
    );
    run_with_guests(&["run", first.to_str().unwrap()]).ok();
    let before = std::fs::read(tmp.path().join("out/_manifest.json")).unwrap();
    // Another pipeline (other inputs) pointed at the same directory, default mode (error).
    std::fs::create_dir_all(tmp.path().join("other")).unwrap();
    write_docs(&tmp.path().join("other/b.jsonl"), &["four five".to_string()]);
    let second = tmp.path().join("second.yaml");
    std::fs::write(
        &second,
        "source:\n  path: other\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 1}\n",
    )
    .unwrap();
    let run = run_with_guests(&["run", second.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_line(&run, "second.yaml: sink.path: ");
    assert_line(&run, "already holds");
    assert!(!tmp.path().join("out/b.jsonl").exists());
    assert_eq!(std::fs::read(tmp.path().join("out/_manifest.json")).unwrap(), before, "the other run's manifest changed");
}

#[test]
fn partitions_that_produce_nothing_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    for name in ["a", "b", "c"] {
        write_docs(&tmp.path().join(format!("in/{name}.jsonl")), &["one two three".to_string(), "four five six".to_string()]);
    }
    // `limit` reads only the first file; the other partitions are never read.
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in\n  limit: 2\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 1}\n",
    );
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    assert_eq!(read_jsonl(&tmp.path().join("out/a.jsonl")).len(), 2);
    assert!(!tmp.path().join("out/b.jsonl").exists() && !tmp.path().join("out/c.jsonl").exists());
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(tmp.path().join("out/_manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["files"].as_array().unwrap().len(), 1, "{manifest}");
}
