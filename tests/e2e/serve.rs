//! `curator-host serve`: runs as requests over a Unix socket, the stage instances of one run
//! kept for the next (what curator-ray's warm workers rely on).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A `curator-host serve` for one test, stopped when dropped.
struct Server {
    child: Child,
    socket: PathBuf,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let socket = dir.join("serve.sock");
        let child = host().arg("serve").arg("--socket").arg(&socket).stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "curator-host serve did not listen on {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, socket }
    }

    /// Send one request line; the reply.
    fn send(&self, line: &str) -> serde_json::Value {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        s.write_all(b"\n").unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("not a reply ({e}): {reply:?}"))
    }

    fn request(&self, argv: &[&str], cwd: &Path) -> serde_json::Value {
        self.send(&serde_json::json!({"argv": argv, "cwd": cwd}).to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn code(r: &serde_json::Value) -> i64 {
    r["code"].as_i64().unwrap_or(-1)
}

#[test]
fn a_serving_host_keeps_a_native_stages_worker_between_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let plugins = native_plugins_dir("serve", &["native_probe"]);
    std::fs::create_dir_all(dir.join("in")).unwrap();
    for f in 0..3 {
        write_docs(&dir.join(format!("in/part-{f}.jsonl")), &(0..20).map(|i| format!("file {f} document {i}")).collect::<Vec<_>>());
    }
    // Two set-ups may start (planning's check and one worker); any other refuses after 2 s.
    let marker = dir.join("setup");
    let yaml = format!(
        "source:\n  path: in\nsink:\n  path: out\nbatch_size: 8\nstages:\n  - plugin: native_probe\n    params: {{mode: fail_init_late, marker: {}, starts: 2}}\n    num_workers: 1\n",
        marker.display()
    );
    write_pipeline(dir, &yaml);
    let server = Server::start(dir);
    let plugins = plugins.to_str().unwrap();
    for i in 0..3 {
        let shard = format!("{i}/3");
        let r = server.request(&["run", "pipeline.yaml", "--shard", &shard, "--plugins", plugins], dir);
        assert_eq!(code(&r), 0, "shard {shard} through the server: {r}");
        assert!(r["stdout"].as_str().unwrap().contains("read 20 documents in 1 partition(s)"), "{r}");
        assert_eq!(r["kept"], 1, "the worker is kept for the next run: {r}");
        let reused = if i == 0 { "0 stage instance(s) reused" } else { "1 stage instance(s) reused" };
        assert!(r["stderr"].as_str().unwrap().contains(reused), "{r}");
    }
    let setups = (1..=3).filter(|j| dir.join(format!("setup.{j}")).exists()).count();
    assert_eq!(setups, 2, "three runs, one worker and one setup check between them");
    let merged: Run = host().arg("merge").arg(dir.join("out")).output().unwrap().into();
    merged.ok();
    assert!(merged.stdout.contains("merged 3 shard(s)"), "{}", merged.stdout);
    let docs = output_docs(&dir.join("out"), ".jsonl");
    assert_eq!(docs.len(), 60);
    assert!(docs.iter().all(|d| d.contains(r#""text":"FILE "#)), "the probe's upper-casing: {docs:?}");

    // The same shard as a process of its own sets the stage up again, and the probe refuses:
    // the server's runs passed because they reused its worker.
    let cold: Run = host()
        .current_dir(dir)
        .args(["run", "pipeline.yaml", "--shard", "0/3", "--restart", "--plugins", plugins])
        .output()
        .unwrap()
        .into();
    assert_ne!(cold.code, 0, "a cold run starts the stage again: {}", cold.stderr);
    assert!(cold.stderr.contains("refusing to start, late, on purpose"), "{}", cold.stderr);

    // Other params are another stage: its instances start anew and the old worker is stopped.
    std::fs::remove_dir_all(dir.join("out")).unwrap();
    write_pipeline(dir, &yaml.replace("starts: 2", "starts: 4"));
    let r = server.request(&["run", "pipeline.yaml", "--plugins", plugins], dir);
    assert_eq!(code(&r), 0, "{r}");
    assert_eq!(r["kept"], 1, "{r}");
    assert!(dir.join("setup.4").exists() && !dir.join("setup.5").exists());
}

#[test]
fn a_serving_host_answers_what_it_cannot_run_and_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let texts: Vec<String> = (0..30).map(|i| format!("document {i} {}", "word ".repeat(i % 7))).collect();
    write_docs(&dir.join("in/a.jsonl"), &texts);
    let yaml = |out: &str| {
        format!(
            "source:\n  path: in\nsink:\n  path: {out}\nstages:\n  - plugin: word_count_filter\n    params: {{min_words: 4}}\n  - plugin: unicode_normalize\n"
        )
    };
    std::fs::write(dir.join("served.yaml"), yaml("served")).unwrap();
    std::fs::write(dir.join("alone.yaml"), yaml("alone")).unwrap();
    std::fs::write(
        dir.join("broken.yaml"),
        "source:\n  path: in\nsink:\n  path: x\nstages:\n  - plugin: word_count_filter\n    params: {min_words: many}\n",
    )
    .unwrap();
    let guests = guests_dir().to_str().unwrap();
    let server = Server::start(dir);

    let r = server.send("not json");
    assert_eq!(code(&r), 2, "{r}");
    assert!(r["stderr"].as_str().unwrap().contains("the request is not"), "{r}");
    let r = server.request(&["plan", "served.yaml"], dir);
    assert_eq!(code(&r), 2, "{r}");
    assert!(r["stderr"].as_str().unwrap().contains("runs `run` requests only"), "{r}");
    let r = server.request(&["run", "served.yaml", "--no-such-flag"], dir);
    assert_eq!(code(&r), 2, "{r}");
    let r = server.request(&["run", "broken.yaml", "--plugins", guests], dir);
    assert_eq!(code(&r), 2, "an invalid pipeline: {r}");
    assert!(r["stderr"].as_str().unwrap().contains("broken.yaml"), "the error names the file: {r}");

    // Still serving: the same output as the same run in a process of its own.
    for _ in 0..2 {
        let r = server.request(&["run", "served.yaml", "--plugins", guests], dir);
        assert_eq!(code(&r), 0, "{r}");
        assert_eq!(r["kept"], 2, "{r}");
        std::fs::remove_dir_all(dir.join("served")).ok();
    }
    let r = server.request(&["run", "served.yaml", "--plugins", guests], dir);
    assert_eq!(code(&r), 0, "{r}");
    host().current_dir(dir).args(["run", "alone.yaml", "--plugins", guests]).output().map(Run::from).unwrap().ok();
    let read = |d: &str| std::fs::read(dir.join(d).join("a.jsonl")).unwrap();
    assert_eq!(read("served"), read("alone"));
}

#[test]
fn a_serving_host_keeps_a_model_server_between_runs() {
    if !needs(Need::LlamaServer) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A model file of this test's own, so `pgrep -f` finds only its server.
    let model = dir.join("kept-server-model.gguf");
    std::fs::copy(crate::services::model(), &model).unwrap();
    let docs: Vec<String> = (0..5).map(|i| format!("Document {i} for the kept server.")).collect();
    write_docs(&dir.join("in.jsonl"), &docs);
    let llm = native_plugins_dir("llm-plugins", &["llm_generate"]);
    let pipeline = |out: &str| {
        format!(
            "services:\n  llm:\n    command: python3 -m llama_cpp.server --model kept-server-model.gguf --port {{port}} --n_ctx 512 --n_threads 1\n    resources: {{cpus: 1}}\n    startup_timeout_s: 120\n\
             source: {{path: in.jsonl}}\nstages:\n  - plugin: llm_generate\n    service: llm\n    params: {{max_tokens: 4, temperature: 0.0, seed: 1, cache: false}}\nsink: {{path: {out}}}\n"
        )
    };
    std::fs::write(dir.join("a.yaml"), pipeline("out-a")).unwrap();
    std::fs::write(dir.join("b.yaml"), pipeline("out-b")).unwrap();
    let server = Server::start(dir);
    let pid = || std::process::Command::new("pgrep").args(["-f", "kept-server-model.gguf"]).output().unwrap().stdout;
    let r = server.request(&["run", "a.yaml", "--plugins", llm.to_str().unwrap()], dir);
    assert_eq!(code(&r), 0, "{r}");
    let first = pid();
    assert!(!first.is_empty(), "the service runs on after the run, kept by the serving host");
    // The next run with the same service asks the same server (no cache: it really asks).
    let r = server.request(&["run", "b.yaml", "--plugins", llm.to_str().unwrap()], dir);
    assert_eq!(code(&r), 0, "{r}");
    assert_eq!(pid(), first, "the second run started a server of its own");
    let answers = |out: &str| read_jsonl(&dir.join(out).join("in.jsonl"));
    assert_eq!(answers("out-a").len(), 5);
    assert_eq!(answers("out-a"), answers("out-b"), "same server, same greedy answers");
    // A run without it stops it.
    std::fs::write(dir.join("c.yaml"), "source: {path: in.jsonl}\nsink: {path: out-c}\n").unwrap();
    let r = server.request(&["run", "c.yaml", "--plugins", guests_dir().to_str().unwrap()], dir);
    assert_eq!(code(&r), 0, "{r}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while crate::services::running("kept-server-model.gguf") {
        assert!(Instant::now() < deadline, "the kept service outlived a run that does not use it");
        std::thread::sleep(Duration::from_millis(100));
    }
}
