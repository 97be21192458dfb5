//! Failure policy, out-of-memory splitting and resumption after `kill -9`.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;

/// `n` documents in `in/data.jsonl`; document 15 says "TRIGGER".
fn setup(tmp: &Path, n: usize) {
    std::fs::create_dir_all(tmp.join("in")).unwrap();
    let texts: Vec<String> = (0..n).map(|i| if i == 15 { "TRIGGER here".to_string() } else { format!("doc number {i}") }).collect();
    write_docs(&tmp.join("in/data.jsonl"), &texts);
}

fn hostile(tmp: &Path, mode: &str, trigger: &str, execution: &str) -> Run {
    let yaml = format!(
        "source:\n  path: in\nsink:\n  path: out\nbatch_size: 10\ntimeout_s: 1\nexecution:\n{execution}stages:\n  - plugin: hostile\n    params: {{mode: {mode}, trigger: {trigger:?}}}\n"
    );
    let p = write_pipeline(tmp, &yaml);
    run_with_guests(&["run", p.to_str().unwrap()])
}

fn ids(path: &Path) -> Vec<String> {
    read_jsonl(path).iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn failing_batch_is_dead_lettered_when_failures_are_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path(), 25);
    let run = hostile(tmp.path(), "fail", "TRIGGER", "  ignore_failures: true\n  num_run_attempts: 2\n");
    run.ok();
    assert!(run.stderr.contains("attempt 1 of 2 failed"), "{}", run.stderr);
    let kept = ids(&tmp.path().join("out/data.jsonl"));
    let want: Vec<String> = (0..10).chain(20..25).map(|i| format!("d{i}")).collect();
    assert_eq!(kept, want);
    let dead = read_jsonl(&tmp.path().join("out/_dead_letter/data.jsonl.jsonl"));
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["stage"], "hostile");
    assert!(dead[0]["plugin"].as_str().unwrap().ends_with("hostile.wasm"));
    assert!(dead[0]["source"].as_str().unwrap().ends_with("in/data.jsonl"));
    assert_eq!(dead[0]["rows"], serde_json::json!([10, 20]));
    assert_eq!(dead[0]["documents"], 10);
    assert_eq!(dead[0]["error"], "returned an error: refusing this batch on purpose");
    assert_eq!(dead[0]["ids"].as_array().unwrap().len(), 10);
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["failed"], 10);
}

#[test]
fn out_of_memory_batch_is_split_and_the_good_half_survives() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path(), 25);
    let run = hostile(tmp.path(), "bomb", "TRIGGER", "  ignore_failures: true\n");
    run.ok();
    assert!(run.stderr.contains("a batch of 10 documents ran out of memory; retrying it as two halves stage=hostile"), "{}", run.stderr);
    let kept = ids(&tmp.path().join("out/data.jsonl"));
    assert_eq!(kept.len(), 24);
    assert!(!kept.contains(&"d15".to_string()));
    let dead = read_jsonl(&tmp.path().join("out/_dead_letter/data.jsonl.jsonl"));
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["rows"], serde_json::json!([15, 16]));
    assert_eq!(dead[0]["ids"], serde_json::json!(["d15"]));
    assert!(dead[0]["error"].as_str().unwrap().contains("exceeded its memory cap of 64 MiB"));
}

#[test]
fn run_that_fails_everywhere_stops() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path(), 3000);
    let run = hostile(tmp.path(), "fail", "", "  ignore_failures: true\n  max_failed_fraction: 0.5\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("documents failed, more than max_failed_fraction (0.5)"), "{}", run.stderr);
    assert!(!tmp.path().join("out/data.jsonl").exists());
}

fn all_docs(out: &Path) -> Vec<String> {
    output_docs(out, ".jsonl.zst")
}

/// 200 input partitions; the run is killed with SIGKILL at ten different moments and run
/// again each time: the final output always equals a clean run's, as a multiset of documents.
#[test]
fn killed_runs_resume_without_loss_or_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    for f in 0..200 {
        let texts: Vec<String> = (0..500).map(|i| format!("file {f} document {i} {}", "word ".repeat((i * 7 + f) % 60))).collect();
        write_docs(&input.join(format!("part-{f:03}.jsonl")), &texts);
    }
    let yaml = |out: &str| {
        format!(
            "source:\n  path: in\nsink:\n  path: {out}\n  compression: zstd\nbatch_size: 16\nstages:\n  - plugin: unicode_normalize\n  - plugin: word_count_filter\n    params: {{min_words: 20}}\n"
        )
    };
    let clean = write_pipeline(tmp.path(), &yaml("clean"));
    let started = Instant::now();
    run_with_guests(&["run", clean.to_str().unwrap()]).ok();
    let clean_time = started.elapsed();
    let expected = all_docs(&tmp.path().join("clean"));
    assert!(expected.len() > 50_000, "{}", expected.len());
    eprintln!("clean run of 200 partitions: {clean_time:?}, {} documents kept", expected.len());

    let p = tmp.path().join("killed.yaml");
    std::fs::write(&p, yaml("killed")).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut resumed = 0;
    for round in 0..10 {
        let out = tmp.path().join("killed");
        let _ = std::fs::remove_dir_all(&out);
        // Kill at a pseudo-random moment: once a random number of partitions are journaled
        // (so the moment does not depend on how loaded the machine is), plus a random delay.
        let mut finished = false;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let target = 1 + (seed % 190) as usize;
        let extra = Duration::from_micros(seed % 3000);
        let mut child =
            host().arg("run").arg(&p).arg("--plugins").arg(guests_dir()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let journal = out.join("_journal.jsonl");
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                // Finished before the moment came: nothing to resume this round.
                assert!(status.success(), "round {round}: run failed before it was killed");
                finished = true;
                break;
            }
            let done = std::fs::read_to_string(&journal).map(|t| t.lines().count()).unwrap_or(0);
            if done >= target {
                std::thread::sleep(extra);
                let _ = child.kill(); // SIGKILL
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if !finished {
            let run = run_with_guests(&["run", p.to_str().unwrap()]);
            run.ok();
            resumed += 1;
        }
        assert_eq!(all_docs(&out), expected, "round {round}: output differs from a clean run");
        assert!(!out.join("_journal.jsonl").exists(), "journal left after a finished run");
        assert!(temp_leftovers(&out).is_empty(), "round {round}: temp files left: {:?}", temp_leftovers(&out));
    }
    eprintln!("{resumed} of 10 rounds were killed mid-run and resumed");
    assert!(resumed >= 7, "only {resumed} of 10 rounds were killed mid-run");
}

fn scrape(url: &str) -> Option<String> {
    ureq::get(url).call().ok()?.body_mut().read_to_string().ok()
}

fn metric(text: &str, line_start: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(line_start)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Scrape `--metrics` with an HTTP client during a run and watch the counters move.
#[test]
fn metrics_endpoint_counters_move_during_a_run() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path(), 3000);
    // 300 batches of 10 at 20 ms each: a few seconds on two workers.
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in\nsink:\n  path: out\nbatch_size: 10\nexecution:\n  logging_interval_s: 0.5\nstages:\n  - plugin: hostile\n    params: {mode: slow}\n",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let child = host()
        .arg("run")
        .arg(&p)
        .arg("--plugins")
        .arg(guests_dir())
        .arg("--metrics")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let docs = "curator_stage_documents_in_total{stage=\"hostile\"}";
    let mut seen: Vec<f64> = Vec::new();
    let mut first_text = String::new();
    while Instant::now() < deadline && seen.len() < 3 {
        if let Some(text) = scrape(&url)
            && let Some(v) = metric(&text, docs)
            && seen.last().is_none_or(|last| v > *last)
            && v > 0.0
        {
            seen.push(v);
            if first_text.is_empty() {
                first_text = text;
            }
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(seen.len() >= 2, "counter did not move between scrapes: {seen:?}\n{first_text}");
    for name in [
        "curator_stage_documents_out_total{stage=\"hostile\"}",
        "curator_stage_bytes_in_total{stage=\"hostile\"}",
        "curator_stage_batches_total{stage=\"hostile\"}",
        "curator_stage_documents_failed_total{stage=\"hostile\"}",
        "curator_stage_busy_seconds_total{stage=\"hostile\"}",
        "curator_queue_depth",
        "curator_workers",
        "curator_documents_read_total",
        "curator_process_resident_memory_bytes",
    ] {
        assert!(metric(&first_text, name).is_some(), "{name} missing:\n{first_text}");
    }
    assert!(stderr.contains("batches queued; hostile"), "no status lines in the log:\n{stderr}");
}

/// A stage that leaks 1 MiB a batch would hit its 64 MiB cap after ~60 batches; the worker
/// sees its memory grow batch after batch and recycles the instance, so 150 batches pass.
#[test]
fn leaking_instance_is_recycled_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path(), 1500);
    let run = hostile(tmp.path(), "leak", "", "  logging_interval_s: 60\n");
    run.ok();
    assert!(run.stderr.contains("recycling the instance (leak?) stage=hostile"), "{}", run.stderr);
    assert_eq!(ids(&tmp.path().join("out/data.jsonl")).len(), 1500);
}

#[test]
fn workers_are_recycled_after_max_batches() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path(), 100);
    let run = hostile(tmp.path(), "none", "", "  max_batches_per_worker: 3\n");
    run.ok();
    assert!(run.stderr.contains("recycling a worker after 3 batches"), "{}", run.stderr);
    assert_eq!(ids(&tmp.path().join("out/data.jsonl")).len(), 100);
}

#[test]
fn busy_time_is_cpu_time_not_time_spent_waiting() {
    // Every call sleeps 20 ms: a worker waiting (for a core, or here for a timer) is not busy.
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path(), 80);
    let run = hostile(tmp.path(), "slow", "doc", "  cpu_allocation_percentage: 1.0\n");
    run.ok();
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/_summary.json")).unwrap()).unwrap();
    let stage = &s["stages"][0];
    let (busy, wall) = (stage["busy_s"].as_f64().unwrap(), stage["wall_busy_s"].as_f64().unwrap());
    assert!(wall >= 0.15, "8 calls of 20 ms: {stage}");
    assert!(busy < wall / 4.0, "busy time counted the sleeps: {stage}");
    assert!(s["peak_rss_mb"].as_f64().unwrap() > 0.0);
}
