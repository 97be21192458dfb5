//! Scheduling: per-stage pools and autoscaling, batch mode equal to streaming, branch sinks.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::*;

/// Three input files of `n` documents: word counts 1..=6 in turn; every 37th says TRIGGER.
fn corpus(tmp: &Path, n: usize) {
    std::fs::create_dir_all(tmp.join("in")).unwrap();
    for f in 0..3 {
        let texts: Vec<String> = (0..n)
            .map(|i| {
                let words = 1 + (i + f) % 6;
                let mut t: Vec<String> = (0..words).map(|w| format!("w{f}x{i}y{w}")).collect();
                if (i + 11 * f) % 37 == 0 {
                    t[0] = "TRIGGER".into();
                }
                t.join(" ")
            })
            .collect();
        write_docs(&tmp.join(format!("in/f{f}.jsonl")), &texts);
    }
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("_summary.json")).unwrap()).unwrap()
}

/// Every file under `dir` (relative path → bytes), without the run summary (it has timings).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() != "_summary.json" {
                out.insert(p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A failing stage (dead letters), a filter with `rejected:` and `tee:` branches, then NFC.
fn chain_pipeline(tmp: &Path, mode: &str, out: &str) -> std::path::PathBuf {
    let yaml = format!(
        "source:\n  path: in\nsink:\n  path: {out}/main\nbatch_size: 7\nexecution:\n  execution_mode: {mode}\n  ignore_failures: true\n  max_failed_fraction: 1.0\nstages:\n  - plugin: hostile\n    params: {{mode: fail, trigger: TRIGGER}}\n    batch_size: 1\n  - plugin: word_count_filter\n    params: {{min_words: 3}}\n    rejected: {{path: {out}/rejected}}\n    tee: {{path: {out}/tee, format: parquet}}\n  - plugin: unicode_normalize\n"
    );
    let p = tmp.join(format!("{mode}.yaml"));
    std::fs::write(&p, yaml).unwrap();
    p
}

#[test]
fn batch_mode_output_equals_streaming_mode_output() {
    let tmp = tempfile::tempdir().unwrap();
    corpus(tmp.path(), 120);
    for mode in ["streaming", "batch"] {
        let p = chain_pipeline(tmp.path(), mode, &format!("out-{mode}"));
        let run = run_with_guests(&["run", p.to_str().unwrap(), "--workers", "3"]);
        run.ok();
        assert!(!tmp.path().join(format!("out-{mode}/main/_spill")).exists(), "spill directory left behind");
    }
    let (s, b) = (tree(&tmp.path().join("out-streaming")), tree(&tmp.path().join("out-batch")));
    assert_eq!(s.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in &s {
        assert!(v == &b[k], "{k} differs between streaming and batch mode");
    }
    // And the run did what it says: dead letters, three sinks.
    assert!(s.contains_key("main/_dead_letter/f0.jsonl.jsonl"), "{:?}", s.keys());
    assert!(s.contains_key("tee/f1.parquet") && s.contains_key("rejected/f2.jsonl") && s.contains_key("tee/_manifest.json"));
    let sum = summary(&tmp.path().join("out-batch/main"));
    assert_eq!(sum["execution_mode"], "batch");
    assert_eq!(sum["docs_in"], 360);
}

#[test]
fn rejected_and_tee_branches_get_the_right_documents() {
    let tmp = tempfile::tempdir().unwrap();
    corpus(tmp.path(), 60);
    let p = chain_pipeline(tmp.path(), "streaming", "out");
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let words = |d: &serde_json::Value| d["text"].as_str().unwrap().split_whitespace().count();
    let dead: Vec<serde_json::Value> = read_jsonl(&tmp.path().join("out/main/_dead_letter/f0.jsonl.jsonl"));
    let dead_ids: Vec<String> =
        dead.iter().flat_map(|d| d["ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string())).collect();
    assert!(!dead_ids.is_empty());
    let main = read_jsonl(&tmp.path().join("out/main/f0.jsonl"));
    let rejected = read_jsonl(&tmp.path().join("out/rejected/f0.jsonl"));
    assert!(main.iter().all(|d| words(d) >= 3) && rejected.iter().all(|d| words(d) < 3));
    // Every input document is in exactly one place: kept, rejected or dead-lettered.
    let mut all: Vec<String> = main.iter().chain(&rejected).map(|d| d["id"].as_str().unwrap().to_string()).chain(dead_ids).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 60);
    assert_eq!(main.len() + rejected.len() + dead.iter().map(|d| d["documents"].as_u64().unwrap() as usize).sum::<usize>(), 60);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/rejected/_manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["files"].as_array().unwrap().len(), 3);
    let sum = summary(&tmp.path().join("out/main"));
    assert_eq!(sum["branch_outputs"][0][0]["documents"].as_u64().unwrap() as usize, rejected.len());
    // The tee holds what the filter kept (before NFC; the texts are ASCII, so equal).
    let tee_docs = sum["branch_outputs"][1].as_array().unwrap().iter().map(|f| f["documents"].as_u64().unwrap()).sum::<u64>();
    assert_eq!(tee_docs, sum["docs_out"].as_u64().unwrap());
}

#[test]
fn slow_stage_gains_workers_under_autoscaling() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    let texts: Vec<String> = (0..400).map(|i| format!("document {i} with some words")).collect();
    write_docs(&tmp.path().join("in/a.jsonl"), &texts);
    // The hostile stage sleeps 20 ms a batch: it is the bottleneck.
    let yaml = "source:\n  path: in\nsink:\n  path: out\nbatch_size: 5\nexecution:\n  autoscale_interval_s: 0.3\nstages:\n  - plugin: hostile\n    params: {mode: slow}\n  - plugin: word_count_filter\n    params: {min_words: 1}\n";
    let p = write_pipeline(tmp.path(), yaml);
    let run = run_with_guests(&["run", p.to_str().unwrap(), "--workers", "4"]);
    run.ok();
    assert!(run.stderr.contains("workers (autoscaler): hostile 4, word_count_filter 1"), "{}", run.stderr);
    let sum = summary(&tmp.path().join("out"));
    let scaling = sum["scaling"].as_array().unwrap();
    assert_eq!(scaling[0]["workers"], serde_json::json!([2, 2]), "initial allocation is even");
    assert!(scaling.len() >= 2, "{scaling:?}");
    assert_eq!(sum["stages"][0]["max_workers"], 4);
    assert_eq!(sum["stages"][1]["workers"], 1);
    assert_eq!(sum["docs_out"], 400);
}

#[test]
fn fixed_num_workers_wins() {
    let tmp = tempfile::tempdir().unwrap();
    corpus(tmp.path(), 30);
    let yaml = "source:\n  path: in\nsink:\n  path: out\nexecution:\n  autoscale_interval_s: 0.1\nstages:\n  - plugin: word_count_filter\n    num_workers: 3\n  - plugin: unicode_normalize\n    num_workers: 1\n";
    let p = write_pipeline(tmp.path(), yaml);
    let dry = run_with_guests(&["run", p.to_str().unwrap(), "--workers", "2", "--dry-run"]);
    dry.ok();
    assert!(dry.stdout.contains("3 worker(s) to start") && dry.stdout.contains("1 worker(s) to start"), "{}", dry.stdout);
    run_with_guests(&["run", p.to_str().unwrap(), "--workers", "2"]).ok();
    let sum = summary(&tmp.path().join("out"));
    assert_eq!(sum["scaling"].as_array().unwrap().len(), 1, "no autoscaling of fixed stages");
    assert_eq!(sum["stages"][0]["max_workers"], 3);
}
