//! Hostile guests are contained: each failure names the stage, plugin, input file and row
//! range, exits 1, and leaves nothing under the final output name.

use std::path::Path;

use crate::support::*;

/// 25 documents in `in/data.jsonl`; document 15 says "TRIGGER".
fn setup(tmp: &Path) {
    std::fs::create_dir_all(tmp.join("in")).unwrap();
    let texts: Vec<String> = (0..25).map(|i| if i == 15 { "TRIGGER here".to_string() } else { format!("doc number {i}") }).collect();
    write_docs(&tmp.join("in/data.jsonl"), &texts);
}

fn pipeline(tmp: &Path, stage_yaml: &str) -> String {
    let yaml = format!("source:\n  path: in\nsink:\n  path: out\nbatch_size: 10\ntimeout_s: 1\nstages:\n{stage_yaml}");
    write_pipeline(tmp, &yaml).display().to_string()
}

fn run_hostile(mode: &str, extra: &str) -> (Run, tempfile::TempDir) {
    run_hostile_in(mode, extra, "in_process")
}

/// The hostile stage with `isolation` (`in_process` or `process`).
fn run_hostile_in(mode: &str, extra: &str, isolation: &str) -> (Run, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let stage = format!("  - plugin: hostile\n    isolation: {isolation}\n    params: {{mode: {mode}, trigger: TRIGGER{extra}}}\n");
    let p = pipeline(tmp.path(), &stage);
    (run_with_guests(&["run", &p]), tmp)
}

fn assert_contained(run: &Run, tmp: &Path, reason: &str) {
    assert_contained_rows(run, tmp, reason, "10..20");
}

fn assert_contained_rows(run: &Run, tmp: &Path, reason: &str, rows: &str) {
    assert_eq!(run.code, 1, "expected exit 1\nstderr:\n{}", run.stderr);
    let plugin = guests_dir().join("hostile.wasm");
    let want = format!("stage \"hostile\" (plugin {}) failed on {} rows {rows}: ", plugin.display(), tmp.join("in/data.jsonl").display());
    assert!(run.stderr.contains(&want), "stderr lacks {want:?}:\n{}", run.stderr);
    assert!(run.stderr.contains(reason), "stderr lacks {reason:?}:\n{}", run.stderr);
    assert!(!tmp.join("out/data.jsonl").exists(), "a partial output was left under the final name");
    assert!(temp_leftovers(&tmp.join("out")).is_empty(), "temp files left: {:?}", temp_leftovers(&tmp.join("out")));
}

#[test]
fn infinite_loop_stops_at_deadline() {
    let (run, tmp) = run_hostile("loop", "");
    assert_contained(&run, tmp.path(), "exceeded its time limit of 1s per call");
}

#[test]
fn memory_bomb_stops_at_cap() {
    let (run, tmp) = run_hostile("bomb", "");
    // The batch (rows 10..20) is split in halves down to the one document that explodes.
    assert_contained_rows(&run, tmp.path(), "exceeded its memory cap of 64 MiB", "15..16");
    assert!(run.stderr.contains("a batch of 10 documents ran out of memory; retrying it as two halves stage=hostile"), "{}", run.stderr);
}

#[test]
fn memory_cap_follows_pipeline_override() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let p = pipeline(tmp.path(), "  - plugin: hostile\n    params: {mode: bomb, trigger: TRIGGER}\n    resources: {memory_mb: 32}\n");
    let run = run_with_guests(&["run", &p]);
    assert_contained_rows(&run, tmp.path(), "exceeded its memory cap of 32 MiB", "15..16");
}

#[test]
fn reading_etc_passwd_fails() {
    let (run, tmp) = run_hostile("open", ", path: /etc/passwd");
    assert_contained(&run, tmp.path(), "returned an error: cannot open /etc/passwd");
    assert!(!run.stderr.contains("root:"), "file content leaked");
}

#[test]
fn relative_escape_without_grants_fails() {
    let (run, tmp) = run_hostile("open", ", path: ../../../../etc/passwd");
    assert_contained(&run, tmp.path(), "returned an error: cannot open ../../../../etc/passwd");
}

#[test]
fn panic_is_a_trap_with_guest_message() {
    let (run, tmp) = run_hostile("panic", "");
    assert_contained(&run, tmp.path(), "trapped: wasm trap");
    assert!(run.stderr.contains("hostile stage panicked on purpose"), "guest stderr not captured:\n{}", run.stderr);
}

#[test]
fn stage_error_is_reported() {
    let (run, tmp) = run_hostile("fail", "");
    assert_contained(&run, tmp.path(), "returned an error: refusing this batch on purpose");
}

#[test]
fn invalid_output_is_refused() {
    let (run, tmp) = run_hostile("bad_output", "");
    assert_contained(&run, tmp.path(), "stage returned an invalid batch: selection index 4294967295 is out of range");
}

/// A guest claiming a batch of 2^32 - 1 rows and 4 GiB of text: refused by its sizes before
/// anything is allocated for them.
#[test]
fn output_claiming_huge_sizes_is_refused() {
    let (run, tmp) = run_hostile("huge_output", "");
    assert_contained(&run, tmp.path(), "column \"text\": 2 offsets for 4294967295 rows");
}

#[test]
fn harmless_mode_passes_everything() {
    let (run, tmp) = run_hostile("none", "");
    run.ok();
    assert_eq!(read_jsonl(&tmp.path().join("out/data.jsonl")).len(), 25);
}

#[test]
fn completed_files_survive_a_later_failure() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    write_docs(&tmp.path().join("in/a.jsonl"), &["fine".to_string(), "also fine".to_string()]);
    write_docs(&tmp.path().join("in/b.jsonl"), &["TRIGGER".to_string()]);
    let p = pipeline(tmp.path(), "  - plugin: hostile\n    params: {mode: fail, trigger: TRIGGER}\n");
    let run = run_with_guests(&["run", &p, "--workers", "1"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("b.jsonl rows 0..1"), "{}", run.stderr);
    assert_eq!(read_jsonl(&tmp.path().join("out/a.jsonl")).len(), 2, "finished output lost");
    assert!(!tmp.path().join("out/b.jsonl").exists());
    assert!(temp_leftovers(&tmp.path().join("out")).is_empty());
}

/// `isolation: process`: the same guests in worker processes, compiled without deadline
/// checks. The host's watchdog stops an endless loop; the memory cap, the grants and the
/// output checks hold as in the host; each failure is reported the same way.
#[test]
fn process_isolation_contains_the_same_guests() {
    let cases = [
        ("loop", "", "exceeded its time limit of 1s per call (worker stopped)", "10..20"),
        ("bomb", "", "ran out of memory: exceeded its memory cap of 64 MiB", "15..16"),
        ("panic", "", "returned an error: trapped: wasm trap", "10..20"),
        ("fail", "", "returned an error: refusing this batch on purpose", "10..20"),
        ("bad_output", "", "selection index 4294967295 is out of range", "10..20"),
        ("huge_output", "", "2 offsets for 4294967295 rows", "10..20"),
        ("open", ", path: /etc/passwd", "returned an error: cannot open /etc/passwd", "10..20"),
    ];
    for (mode, extra, reason, rows) in cases {
        let (run, tmp) = run_hostile_in(mode, extra, "process");
        assert_contained_rows(&run, tmp.path(), reason, rows);
        assert!(!run.stderr.contains("root:"), "file content leaked");
    }
    let (run, tmp) = run_hostile_in("none", "", "process");
    run.ok();
    assert_eq!(read_jsonl(&tmp.path().join("out/data.jsonl")), {
        let (run, tmp) = run_hostile_in("none", "", "in_process");
        run.ok();
        read_jsonl(&tmp.path().join("out/data.jsonl"))
    });
    // grants reach the worker: readable, and no way out of them
    let tmp = tempfile::tempdir().unwrap();
    grant_tree(tmp.path());
    let isolated = format!("    isolation: process\n{GRANT}");
    run_reader(tmp.path(), "/data/ok.txt", false, &isolated).ok();
    assert_eq!(read_jsonl(&tmp.path().join("out/data.jsonl"))[0]["content"], "granted content");
    let tmp = tempfile::tempdir().unwrap();
    grant_tree(tmp.path());
    let run = run_reader(tmp.path(), "/data/../secret.txt", false, &isolated);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("cannot open /data/../secret.txt"), "{}", run.stderr);
}

/// A tree with a granted directory `grant/` (holding ok.txt) and a secret beside it.
fn grant_tree(tmp: &Path) {
    setup(tmp);
    std::fs::create_dir_all(tmp.join("grant")).unwrap();
    std::fs::write(tmp.join("grant/ok.txt"), "granted content").unwrap();
    std::fs::write(tmp.join("secret.txt"), "do not read").unwrap();
}

fn run_reader(tmp: &Path, file: &str, write: bool, grant: &str) -> Run {
    let stage = format!("  - plugin: dir_reader\n    params: {{file: {file:?}, write: {write}}}\n{grant}");
    let p = pipeline(tmp, &stage);
    run_with_guests(&["run", &p])
}

const GRANT: &str = "    grants:\n      data: grant\n";

#[test]
fn granted_directory_is_readable() {
    let tmp = tempfile::tempdir().unwrap();
    grant_tree(tmp.path());
    run_reader(tmp.path(), "/data/ok.txt", false, GRANT).ok();
    let docs = read_jsonl(&tmp.path().join("out/data.jsonl"));
    assert_eq!(docs.len(), 25);
    assert_eq!(docs[0]["content"], "granted content");
}

#[test]
fn escapes_from_a_grant_fail() {
    for file in ["/data/../secret.txt", "/data/../../etc/passwd", "/etc/passwd", "secret.txt"] {
        let tmp = tempfile::tempdir().unwrap();
        grant_tree(tmp.path());
        let run = run_reader(tmp.path(), file, false, GRANT);
        assert_eq!(run.code, 1, "{file}: {}", run.stderr);
        assert!(run.stderr.contains(&format!("returned an error: cannot open {file}")), "{file}: {}", run.stderr);
        assert!(!tmp.path().join("out/data.jsonl").exists());
    }
}

#[test]
fn read_only_grant_refuses_writes() {
    let tmp = tempfile::tempdir().unwrap();
    grant_tree(tmp.path());
    let run = run_reader(tmp.path(), "/data/ok.txt", true, GRANT);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("cannot write /data/ok.txt"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(tmp.path().join("grant/ok.txt")).unwrap(), "granted content");
}

#[test]
fn requested_directory_must_be_granted() {
    let tmp = tempfile::tempdir().unwrap();
    grant_tree(tmp.path());
    let run = run_reader(tmp.path(), "/data/ok.txt", false, "");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("stages[0].grants: plugin \"dir_reader\" requests directory \"data\""), "{}", run.stderr);
    let run = run_reader(tmp.path(), "/data/ok.txt", false, "    grants:\n      data: {path: grant, writable: true}\n");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("stages[0].grants.data: plugin asks for read-only access"), "{}", run.stderr);
}
