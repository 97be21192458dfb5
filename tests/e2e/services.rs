//! Served models (`services:` + `llm_generate`) against a real OpenAI-compatible server on
//! loopback: llama.cpp's, through llama-cpp-python, with a tiny random-weight model made by
//! gguf's writer (`scripts/models/tiny_gguf.py`). The host starts it, waits for it, restarts
//! it when it dies and stops it however the run ends.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::*;

fn plugins() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| native_plugins_dir("llm-plugins", &["llm_generate"]))
}

/// The tiny model, made once per test process.
pub(crate) fn model() -> &'static PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = root().join("target/e2e-llm");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("tiny-{}.gguf", std::process::id()));
        let ok = Command::new("python3").arg(root().join("scripts/models/tiny_gguf.py")).arg(&path).status().unwrap().success();
        assert!(ok, "tiny_gguf.py failed");
        path
    })
}

/// The tiny model where the shipped examples look for it (`target/models/tiny-llm.gguf`).
fn shipped_model() {
    let models = root().join("target/models");
    std::fs::create_dir_all(&models).unwrap();
    let tiny = models.join("tiny-llm.gguf");
    if !tiny.exists() {
        install_library(model(), &tiny);
    }
}

/// The documents of every `.jsonl` file directly in `dir`.
fn jsonl_docs_in(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        .flat_map(|e| read_jsonl(&e.path()))
        .collect()
}

/// A copy of the model under a name of this test's own, so `pgrep -f` finds only its server.
fn own_model(dir: &Path) -> PathBuf {
    let p = dir.join("model.gguf");
    std::fs::copy(model(), &p).unwrap();
    p
}

fn docs(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join("in.jsonl");
    let lines: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({"id": format!("d{i}"), "text": format!("Document number {i} says something about topic {}.", i % 7)})
                .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&p, lines.concat()).unwrap();
    p
}

fn pipeline(dir: &Path, model: &Path, input: &Path, max_tokens: u32, params: &str) -> PathBuf {
    write_pipeline(
        dir,
        &format!(
            r#"services:
  llm:
    command: python3 -m llama_cpp.server --model {} --port {{port}} --n_ctx 1024 --n_threads 1
    resources: {{cpus: 1}}
    startup_timeout_s: 120
source:
  path: {}
stages:
  - plugin: llm_generate
    service: llm
    params: {{prompt: "Rewrite this: {{text}}", max_tokens: {max_tokens}, temperature: 0.0, seed: 7, initial_in_flight: 4 {params}}}
sink:
  path: {}
  mode: overwrite
execution: {{ignore_failures: true}}
"#,
            model.display(),
            input.display(),
            dir.join("out").display()
        ),
    )
}

/// `llm_generate` on `input` with one service, `name`, whose entry is `entry` (YAML lines
/// indented by four spaces after the first).
fn one_service_pipeline(dir: &Path, input: &Path, name: &str, entry: &str) -> PathBuf {
    write_pipeline(
        dir,
        &format!(
            "services:\n  {name}:\n    {entry}\nsource: {{path: {}}}\nstages:\n  - {{plugin: llm_generate, service: {name}}}\nsink: {{path: {}, mode: overwrite}}\n",
            input.display(),
            dir.join("out").display()
        ),
    )
}

fn run(pipeline: &Path, cache: &Path) -> Run {
    host()
        .env("CURATOR_CACHE_DIR", cache)
        .args(["run"])
        .arg(pipeline)
        .arg("--plugins")
        .arg(plugins())
        .output()
        .expect("cannot start curator-host")
        .into()
}

/// Whether any process has `needle` in its command line.
pub(crate) fn running(needle: &str) -> bool {
    Command::new("pgrep").args(["-f", needle]).output().is_ok_and(|o| o.status.success())
}

/// Answers the server's log shows (both incarnations of a restarted one append to it).
fn answered(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().matches("\"POST /v1/chat/completions HTTP/1.1\" 200").count()
}

#[test]
fn a_served_model_answers_every_document_and_stops_with_the_run() {
    if !needs(Need::LlamaServer) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = own_model(dir.path());
    let input = docs(dir.path(), 120);
    let p = pipeline(dir.path(), &model, &input, 6, ", output_field: rewritten");
    let cache = dir.path().join("cache");
    let plan: Run = host().args(["plan"]).arg(&p).arg("--plugins").arg(plugins()).output().unwrap().into();
    plan.ok();
    assert!(plan.stdout.contains("1 replica(s) of `python3 -m llama_cpp.server --model"), "{}", plan.stdout);
    assert!(!running(&model.display().to_string()), "planning starts no server");
    let r = run(&p, &cache);
    r.ok();
    let out = read_jsonl(&dir.path().join("out/in.jsonl"));
    assert_eq!(out.len(), 120, "{}", r.stderr);
    // The usage the server reported, per document and in the worker's totals, agree.
    let sum = |f: &str| out.iter().map(|d| d[f].as_i64().unwrap()).sum::<i64>();
    let totals = format!(
        "120 request(s) (0 retried, 0 throttled), 0 answer(s) from the cache; {} prompt and {} completion token(s) served",
        sum("llm_prompt_tokens"),
        sum("llm_completion_tokens")
    );
    assert!(r.stderr.contains(&totals), "{totals:?} not in:\n{}", r.stderr);
    assert!(r.stderr.contains("one in-flight limit with the service's other workers"), "{}", r.stderr);
    // And the run's summary totals them (the manifest's `sums`), in its table and its JSON.
    let line =
        format!("llm_generate: llm_completion_tokens {}, llm_prompt_tokens {}", sum("llm_completion_tokens"), sum("llm_prompt_tokens"));
    assert!(r.stdout.contains(&line), "{line:?} not in:\n{}", r.stdout);
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["stages"][0]["sums"]["llm_prompt_tokens"], sum("llm_prompt_tokens"), "{summary}");
    for d in &out {
        assert!(d["rewritten"].is_string(), "{d}");
        assert!(d["llm_completion_tokens"].as_i64().unwrap() > 0, "{d}");
        assert!(d["llm_prompt_tokens"].as_i64().unwrap() > 5, "{d}");
        assert!(d["text"].as_str().unwrap().starts_with("Document number"), "the text is kept: {d}");
    }
    let log = dir.path().join("out/_services/llm-0.log");
    assert_eq!(answered(&log), 120, "one request per document");
    assert!(!running(&model.display().to_string()), "the server was stopped with the run");

    // Again: every answer from the cache, the server asked nothing.
    let r = run(&p, &cache);
    r.ok();
    assert_eq!(answered(&log), 120, "a rerun sends no request: {}", r.stderr);
    let again = read_jsonl(&dir.path().join("out/in.jsonl"));
    assert_eq!(again, out, "the cached answers are the answers");
}

#[test]
fn a_server_killed_mid_run_is_restarted_and_every_document_answered_once() {
    if !needs(Need::LlamaServer) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = own_model(dir.path());
    let input = docs(dir.path(), 300);
    let p = pipeline(dir.path(), &model, &input, 24, ", output_field: text");
    let log = dir.path().join("out/_services/llm-0.log");
    let needle = model.display().to_string();
    let killer = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until && answered(&log) < 40 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let killed = Command::new("pkill").args(["-9", "-f", &needle]).status().is_ok_and(|s| s.success());
        (killed, answered(&log))
    });
    let r = run(&p, &dir.path().join("cache"));
    let (killed, before) = killer.join().unwrap();
    r.ok();
    assert!(killed, "the server was killed mid-run");
    assert!(before < 300, "killed before the end ({before} answered)");
    assert!(r.stderr.contains("restart 1 of 3"), "{}", r.stderr);
    let out = read_jsonl(&dir.path().join("out/in.jsonl"));
    assert_eq!(out.len(), 300, "every document, none dead-lettered: {}", r.stderr);
    assert!(!dir.path().join("out/_dead_letter").exists());
    let log = dir.path().join("out/_services/llm-0.log");
    assert_eq!(answered(&log), 300, "each document answered once by the two incarnations together");
    assert!(!running(&model.display().to_string()));
}

#[test]
fn a_server_that_never_becomes_ready_fails_the_run_with_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let input = docs(dir.path(), 3);
    let p = one_service_pipeline(
        dir.path(),
        &input,
        "slow",
        r#"command: ["python3", "-c", "import sys, time; print('loading weights for port ' + sys.argv[1], flush=True); time.sleep(60)", "{port}"]
    startup_timeout_s: 1.5"#,
    );
    let started = Instant::now();
    let r = run(&p, &dir.path().join("cache"));
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("service \"slow\" (replica 0) was not ready after"), "{}", r.stderr);
    assert!(r.stderr.contains("loading weights for port"), "the log's tail: {}", r.stderr);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(!running("loading weights for port"), "the server was stopped");
    assert!(!dir.path().join("out/in.jsonl").exists());
}

#[test]
fn bad_services_entries_are_planning_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let input = docs(dir.path(), 3);
    let p = write_pipeline(
        dir.path(),
        &format!(
            r#"services:
  a: {{command: "vllm serve m --port 8000"}}
  b: {{command: "x {{port}}", endpoint: "http://127.0.0.1:1"}}
  c: {{endpoint: "ftp://nowhere"}}
source: {{path: {}}}
stages:
  - {{plugin: llm_generate, service: nope}}
sink: {{path: {}}}
"#,
            input.display(),
            dir.path().join("out").display()
        ),
    );
    let r: Run = host().args(["plan"]).arg(&p).arg("--plugins").arg(plugins()).output().unwrap().into();
    assert_ne!(r.code, 0);
    for want in [
        "services.a.command: must pass {port}",
        "services.b.endpoint: command and endpoint are both set",
        "services.c.endpoint: \"ftp://nowhere\" is not an http",
        "stages[0].service: \"nope\" is not a service of this pipeline (services: a, b, c)",
    ] {
        assert!(r.stderr.contains(want), "missing {want:?} in:\n{}", r.stderr);
    }
    // A stage that needs a service and names none: its own set-up says so.
    let p = write_pipeline(
        dir.path(),
        &format!(
            "source: {{path: {}}}\nstages:\n  - {{plugin: llm_generate}}\nsink: {{path: {}}}\n",
            input.display(),
            dir.path().join("o2").display()
        ),
    );
    let r = run(&p, &dir.path().join("cache"));
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("needs a model server: declare one under services:"), "{}", r.stderr);
}

#[test]
fn ctrl_c_stops_the_service() {
    if !needs(Need::LlamaServer) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = own_model(dir.path());
    let input = docs(dir.path(), 2000);
    let p = pipeline(dir.path(), &model, &input, 64, "");
    let mut child = host()
        .env("CURATOR_CACHE_DIR", dir.path().join("cache"))
        .args(["run"])
        .arg(&p)
        .arg("--plugins")
        .arg(plugins())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = dir.path().join("out/_services/llm-0.log");
    let until = Instant::now() + Duration::from_secs(120);
    while answered(&log) < 5 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(answered(&log) >= 5, "the run got going");
    let needle = model.display().to_string();
    assert!(running(&needle));
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let _ = child.wait();
    let until = Instant::now() + Duration::from_secs(15);
    while running(&needle) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!running(&needle), "no orphan server after Ctrl-C");
}

#[test]
fn a_document_the_server_refuses_is_dead_lettered_alone() {
    if !needs(Need::LlamaServer) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = own_model(dir.path());
    let mut lines: Vec<String> =
        (0..20).map(|i| serde_json::json!({"id": format!("d{i}"), "text": format!("short {i}")}).to_string()).collect();
    // Longer than the server's context window (--n_ctx 1024): it answers 400.
    lines[7] = serde_json::json!({"id": "d7", "text": "word ".repeat(3000)}).to_string();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let p = pipeline(dir.path(), &model, &input, 4, "");
    let r = run(&p, &dir.path().join("cache"));
    r.ok();
    let out = read_jsonl(&dir.path().join("out/in.jsonl"));
    assert_eq!(out.len(), 19);
    assert!(out.iter().all(|d| d["id"] != "d7" && d.get("_error").is_none()), "no error column in the output");
    let dead = std::fs::read_to_string(dir.path().join("out/_dead_letter/in.jsonl.jsonl")).unwrap();
    assert!(dead.contains("\"d7\"") && dead.contains("the server refused the request (400)") && dead.contains("context"), "{dead}");
    assert!(r.stdout.contains("dead-lettered 1"), "{}", r.stdout);

    // Without ignore_failures the refusal stops the run, naming the document's row.
    let strict = std::fs::read_to_string(&p).unwrap().replace("execution: {ignore_failures: true}", "");
    std::fs::write(&p, strict).unwrap();
    let r = run(&p, &dir.path().join("cache"));
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("the server refused the request (400)"), "{}", r.stderr);
}

#[test]
fn the_shipped_rewrite_example_runs() {
    if !needs(Need::LlamaServer) {
        return;
    }
    shipped_model();
    let example = root().join("examples/served/rewrite.yaml");
    let dir = tempfile::tempdir().unwrap();
    // The example as shipped, but writing to a directory of this test's own.
    let text =
        std::fs::read_to_string(&example).unwrap().replace("  path: out\n", &format!("  path: {}\n", dir.path().join("out").display()));
    let p = root().join("examples/served").join(format!(".test-{}.yaml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    let r = run(&p, &dir.path().join("cache"));
    std::fs::remove_file(&p).unwrap();
    r.ok();
    let out = jsonl_docs_in(&dir.path().join("out"));
    assert_eq!(out.len(), 200, "{}", r.stderr);
    assert!(out.iter().all(|d| d["rewritten"].is_string() && d["llm_completion_tokens"].as_i64() > Some(0)));
}

#[test]
fn a_server_past_its_restarts_fails_the_documents_at_once_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let input = docs(dir.path(), 5);
    // A "server" that starts an engine process of its own (as vLLM does), answers its
    // readiness probe and exits: dead at once, every time.
    let marker = format!("engine-of-flaky-{}", std::process::id());
    let entry = format!(
        r#"command: ["python3", "-c", "import http.server as h, subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[2]]); h.HTTPServer(('127.0.0.1', int(sys.argv[1])), h.SimpleHTTPRequestHandler).handle_request()", "{{port}}", "{marker}"]
    ready_path: /
    model: m
    max_restarts: 0"#
    );
    let p = one_service_pipeline(dir.path(), &input, "flaky", &entry);
    let started = Instant::now();
    let r = run(&p, &dir.path().join("cache"));
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("service \"flaky\" replica 0 exited"), "{}", r.stderr);
    assert!(r.stderr.contains("the server refused the request (410)") && r.stderr.contains("it is not started again"), "{}", r.stderr);
    assert!(started.elapsed() < Duration::from_secs(60), "failed at once, not after wait_for_server_s");
    assert!(!running(&marker), "the server's engine process was stopped with it");
}

/// NeMo's Wikipedia prompts, as its `prompts.py` has them: what `preset: wikipedia_paraphrase`
/// must send.
const NEMO_WIKIPEDIA_SYSTEM: &str = "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the questions.";
const NEMO_WIKIPEDIA_USER: &str = "For the following paragraph give me a diverse paraphrase of the same in high quality English language as in sentences on Wikipedia. Begin your answer on a separate line with \"Here is a paraphrased version:\".\n\nText: {text}";

/// [`pipeline`] without its prompt: `params` brings the preset (and a prompt of its own, if any).
fn preset_pipeline(dir: &Path, model: &Path, input: &Path, max_tokens: u32, params: &str) -> PathBuf {
    let p = pipeline(dir, model, input, max_tokens, params);
    let text = std::fs::read_to_string(&p).unwrap().replace("prompt: \"Rewrite this: {text}\", ", "");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn presets_send_nemo_curators_prompts() {
    if !needs(Need::LlamaServer) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = own_model(dir.path());
    let input = docs(dir.path(), 10);
    let cache = dir.path().join("cache");
    let r = run(&preset_pipeline(dir.path(), &model, &input, 4, ", preset: wikipedia_paraphrase"), &cache);
    r.ok();
    let out = read_jsonl(&dir.path().join("out/in.jsonl"));
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|d| d["rephrased"].is_string()), "NeMo's output field: {:?}", out[0]);
    assert!(r.stderr.contains("10 request(s)"), "{}", r.stderr);
    // The same requests written out by hand: every one is found in the cache, whose key is
    // the request's body, so the preset sent exactly NeMo's system and user messages.
    let by_hand = serde_json::json!({"system": NEMO_WIKIPEDIA_SYSTEM, "prompt": NEMO_WIKIPEDIA_USER, "output_field": "rephrased"});
    let params = format!(", system: {}, prompt: {}, output_field: rephrased", by_hand["system"], by_hand["prompt"]);
    let r = run(&preset_pipeline(dir.path(), &model, &input, 4, &params), &cache);
    r.ok();
    assert!(r.stderr.contains("0 request(s) (0 retried, 0 throttled), 10 answer(s) from the cache"), "{}", r.stderr);
    assert_eq!(read_jsonl(&dir.path().join("out/in.jsonl")), out);

    // multilingual_qa: `{language}` drawn per document from `languages` (required), the
    // answer replacing the text, its stars dropped.
    let r = run(&preset_pipeline(dir.path(), &model, &input, 4, ", preset: multilingual_qa"), &cache);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("languages"), "{}", r.stderr);
    let r = run(&preset_pipeline(dir.path(), &model, &input, 8, ", preset: multilingual_qa, languages: [English, French, German]"), &cache);
    r.ok();
    assert!(dir.path().join("out/in.jsonl").exists(), "{}", r.stderr);
    let out = read_jsonl(&dir.path().join("out/in.jsonl"));
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|d| !d["text"].as_str().unwrap().starts_with("Document number") && !d["text"].as_str().unwrap().contains('*')));
}

#[test]
fn the_shipped_nemotron_cc_example_runs() {
    if !needs(Need::LlamaServer) {
        return;
    }
    shipped_model();
    let dir = tempfile::tempdir().unwrap();
    let (out, answers) = (dir.path().join("out"), dir.path().join("answers"));
    let text = std::fs::read_to_string(root().join("examples/served/nemotron-cc.yaml"))
        .unwrap()
        .replace("  path: out\n", &format!("  path: {}\n", out.display()))
        .replace("path: out-answers,", &format!("path: {},", answers.display()));
    let p = root().join("examples/served").join(format!(".test-nemotron-{}.yaml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    // Run from the example's directory, named bare, as a user runs it: the service starts
    // in "." (a bare name's parent is "", which no process can start in).
    let r: Run = host()
        .env("CURATOR_CACHE_DIR", dir.path().join("cache"))
        .current_dir(root().join("examples/served"))
        .arg("run")
        .arg(p.file_name().unwrap())
        .arg("--plugins")
        .arg(guests_dir())
        .arg("--plugins")
        .arg(plugins())
        .output()
        .unwrap()
        .into();
    std::fs::remove_file(&p).unwrap();
    r.ok();
    // Every packed segment got an answer, numbered within its document.
    let got = jsonl_docs_in(&answers);
    assert!(got.len() >= 10, "{} answers: {}", got.len(), r.stderr);
    assert!(got.iter().all(|d| d["rephrased"].is_string() && d["segment_id"].is_i64() && d["llm_prompt_tokens"].as_i64() > Some(60)));
    // Noise never starts with NeMo's prefix: the post-processing keeps nothing, as it should.
    assert!(r.stdout.contains("substring_filter"), "{}", r.stdout);
}
