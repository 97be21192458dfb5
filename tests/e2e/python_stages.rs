//! Stages written in Python (python/curator-sdk): scaffolded by `curator-host new stage
//! --lang python`, built into WASM components by `curator-sdk build` (componentize-py from
//! PyPI, pinned; scripts/test.sh installs it), run in pipelines like any WASM stage. Their
//! decisions equal the same class run in native CPython on real documents; the sandbox holds
//! (no ungranted path, no socket, the memory cap); signing and `trust: signed` apply; the
//! Python `Pipeline` API runs the same file the CLI does; the SDK's and the examples' own
//! unit tests pass.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

fn sdk_dir() -> PathBuf {
    root().join("python/curator-sdk")
}

/// Whether componentize-py (at the SDK's pin) and PyYAML are importable.
fn have_python_sdk() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import yaml; from importlib.metadata import version; assert version('componentize-py') == '0.25.1'"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    curator_test_support::require(ok, "needs componentize-py==0.25.1 and PyYAML (scripts/test.sh installs them)")
}

/// A folder with `curator-sdk` (this checkout's SDK) and this build's `curator-host`, for PATH.
fn tools(tmp: &Path) -> String {
    let bin = tmp.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let shim = bin.join("curator-sdk");
    std::fs::write(&shim, "#!/bin/sh\nexec python3 -m curator_sdk \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let host = Path::new(env!("CARGO_BIN_EXE_curator-host")).parent().unwrap();
    format!("{}:{}:{}", bin.display(), host.display(), std::env::var("PATH").unwrap_or_default())
}

/// `bash -c COMMAND` in `dir` with the SDK importable and the tools on PATH.
fn shell(dir: &Path, tmp: &Path, command: &str) -> Run {
    Command::new("bash")
        .args(["-c", command])
        .current_dir(dir)
        .env("PATH", tools(tmp))
        .env("PYTHONPATH", format!("{}:{}", sdk_dir().display(), dir.display()))
        .env("CURATOR_CACHE_DIR", root().join("target/e2e-cache"))
        .env("CURATOR_HOST", env!("CARGO_BIN_EXE_curator-host"))
        .env_remove("CURATOR_PLUGINS")
        .env("NO_COLOR", "1")
        .output()
        .expect("bash")
        .into()
}

/// At least `n` real documents: the paragraphs of CPython's documentation sources (Debian's
/// python3-doc, which scripts/test.sh installs) and the multilingual language-ID test set.
fn real_documents(n: usize) -> Vec<String> {
    let mut docs: Vec<String> =
        read_jsonl(&root().join("tests/langid/testset.jsonl")).iter().map(|d| d["text"].as_str().unwrap().to_string()).collect();
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::from("/usr/share/doc/python3.11/html/_sources")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".rst.txt") {
                files.push(p);
            }
        }
    }
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        docs.extend(text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()).map(str::to_string));
        if docs.len() >= n {
            break;
        }
    }
    assert!(docs.len() >= n, "{} documents (is python3-doc installed? scripts/test.sh installs it)", docs.len());
    docs.truncate(n);
    docs
}

#[test]
fn the_python_sdk_and_the_ported_nemo_filters_pass_their_unit_tests() {
    if !have_python_sdk() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = shell(&sdk_dir(), tmp.path(), "python3 -m unittest discover -v -s tests -t .");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("OK"), "{}", r.stderr);
    let examples = root().join("examples/python-stages");
    let r = shell(&examples, tmp.path(), "python3 -m unittest -v");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("Ran 3 tests") && r.stderr.contains("OK"), "{}", r.stderr);
}

/// Every kind the scaffold offers passes its own unit tests in native CPython; the `score`
/// one, built and run as its README says and then on 12,000 real documents, keeps and scores
/// exactly what the same class does in native CPython.
#[test]
fn a_scaffolded_python_stage_decides_as_native_cpython_on_real_documents() {
    if !have_python_sdk() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for kind in ["filter", "map", "score", "stage"] {
        let name = format!("py_{kind}");
        let made: Run =
            host().args(["new", "stage", &name, "--lang", "python", "--kind", kind, "--dir"]).arg(tmp.path()).output().unwrap().into();
        assert!(made.ok().stdout.contains("created"), "{}", made.stdout);
        let r = shell(&tmp.path().join(&name), tmp.path(), "python3 -m unittest -v");
        assert_eq!(r.code, 0, "{kind}: {}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("Ran 2 tests") && r.stderr.contains("OK"), "{kind}: {}", r.stderr);
    }

    // The README's commands, as written.
    let dir = tmp.path().join("py_score");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let command = readme.lines().find(|l| l.starts_with("curator-sdk build")).expect("a build command in README.md");
    let r = shell(&dir, tmp.path(), command);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = read_jsonl(&dir.join("out/sample.jsonl"));
    let ids: Vec<&str> = out.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    assert!(out.iter().all(|d| d["upper_ratio"].as_f64().is_some_and(|r| (0.0..=0.3).contains(&r))), "{out:?}");

    // 12,000 real documents (English prose and reStructuredText, and 900 in 30 languages).
    let docs = real_documents(12_000);
    write_docs(&dir.join("data/sample.jsonl"), &docs);
    let yaml = "source: {path: data}\nbatch_size: 500\nstages:\n  - plugin: py_score\n    params: {max_ratio: 0.05, score_field: upper_ratio}\nsink: {path: out, mode: overwrite}\n";
    std::fs::write(dir.join("pipeline.yaml"), yaml).unwrap();
    let r = shell(&dir, tmp.path(), "curator-host run pipeline.yaml --plugins plugins");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let got: Vec<(String, f64)> = read_jsonl(&dir.join("out/sample.jsonl"))
        .iter()
        .map(|d| (d["id"].as_str().unwrap().to_string(), d["upper_ratio"].as_f64().unwrap()))
        .collect();
    let native = shell(
        &dir,
        tmp.path(),
        "python3 -c 'import json, sys\nfrom py_score import PyScore\ns = PyScore(max_ratio=0.05)\nfor line in open(\"data/sample.jsonl\"):\n    d = json.loads(line)\n    r = s.score(d[\"text\"])\n    if s.keep(r):\n        print(json.dumps([d[\"id\"], r]))'",
    );
    assert_eq!(native.code, 0, "{}", native.stderr);
    let want: Vec<(String, f64)> = native.stdout.lines().map(|l| serde_json::from_str::<(String, f64)>(l).unwrap()).collect();
    assert!(want.len() > 1000 && want.len() < docs.len() - 1000, "a filter that decides: {} of {} kept", want.len(), docs.len());
    assert_eq!(got.len(), want.len(), "kept documents differ in number");
    assert_eq!(got, want, "the component and native CPython differ");
}

const HOSTILE: &str = r#"import socket

from curator_sdk import Directory, Filter, log


class Hostile(Filter):
    """Tries, on documents starting with a trigger word, what the sandbox must refuse."""

    name = "py_hostile"
    memory_mb = 64
    directories = [Directory("lexicon")]

    def keep(self, text):
        if text == "ok first":
            log.info("a line from the Python stage")
        if text.startswith("GRANTED"):
            return open("/lexicon/words.txt").read().strip() == "granted words"
        if text.startswith("READ"):
            return bool(open(text.split()[1]).read())
        if text.startswith("SOCKET"):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.connect(("127.0.0.1", 9))
        if text.startswith("MEMORY"):
            hoard = bytearray(256 * 1024 * 1024)
            return len(hoard) > 0
        return True
"#;

/// A Python stage cannot read a path it was not granted, open a socket or pass its memory
/// cap: each is refused with a clear error and the run goes on (`ignore_failures`); a granted
/// directory reads. Unsigned, it is refused under `trust: signed`; built with `--key`, it runs.
#[test]
fn a_python_stage_is_sandboxed_and_signed_like_any_plugin() {
    if !have_python_sdk() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("hostile.py"), HOSTILE).unwrap();
    std::fs::create_dir_all(dir.join("lexicon")).unwrap();
    std::fs::write(dir.join("lexicon/words.txt"), "granted words\n").unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "not for stages").unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let texts = [
        "ok first".to_string(),
        "GRANTED lexicon".to_string(),
        format!("READ {}", secret.display()),
        "SOCKET out".to_string(),
        "MEMORY hoard".to_string(),
        "ok last".to_string(),
    ];
    write_docs(&dir.join("data/docs.jsonl"), &texts);
    let pipeline = |trust: &str| {
        format!(
            "source: {{path: data}}\nbatch_size: 1\nexecution: {{ignore_failures: true, max_failed_fraction: 0.9}}\nstages:\n  - plugin: py_hostile\n    grants: {{lexicon: ./lexicon}}\nsink: {{path: out, mode: overwrite}}\n{trust}"
        )
    };
    std::fs::write(dir.join("pipeline.yaml"), pipeline("")).unwrap();
    let r = shell(dir, dir, "curator-sdk build hostile.py -o plugins && curator-host run pipeline.yaml --plugins plugins");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("py_hostile.wasm is not signed"), "{}", r.stderr);
    assert!(r.stderr.contains("a line from the Python stage"), "its log line reaches the host's log: {}", r.stderr);
    let kept: Vec<String> = read_jsonl(&dir.join("out/docs.jsonl")).iter().map(|d| d["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(kept, ["d0", "d1", "d5"], "the granted read works, the run goes on past the refusals");
    let dead: Vec<serde_json::Value> = read_jsonl(&dir.join("out/_dead_letter/docs.jsonl.jsonl"));
    let error = |id: &str| {
        dead.iter()
            .find(|d| d["ids"][0] == id)
            .map(|d| d["error"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{id} not dead-lettered: {dead:?}"))
    };
    let read = error("d2");
    assert!(read.contains("FileNotFoundError") && read.contains("secret.txt") && read.contains("hostile.py:"), "{read}");
    let socket = error("d3");
    // The socket module is there (WASI sockets); the host grants no address.
    assert!(socket.contains("PermissionError") && socket.contains("socket.py"), "{socket}");
    let memory = error("d4");
    assert!(memory.contains("exceeded its memory cap of 64 MiB"), "{memory}");

    // Signing: refused unsigned under `trust: signed`; built with --key, it runs.
    std::fs::write(dir.join("pipeline.yaml"), pipeline("trust: signed\n")).unwrap();
    let r = shell(dir, dir, "curator-host run pipeline.yaml --plugins plugins --trust-dir trust");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("py_hostile.wasm") && r.stderr.contains("is not signed"), "{}", r.stderr);
    let r = shell(
        dir,
        dir,
        "curator-host plugin keygen keys/me && mkdir -p trust && cp keys/me.pub trust/ && curator-sdk build hostile.py -o plugins --key keys/me.key && curator-host run pipeline.yaml --plugins plugins --trust-dir trust",
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("not signed"), "{}", r.stderr);
    assert_eq!(read_jsonl(&dir.join("out/docs.jsonl")).len(), 3);
}

/// The two NeMo filters ported to Python (examples/python-stages) build and run as the
/// example's pipeline says; `Pipeline(...).run()` from Python writes the same file a CLI user
/// would (round trip) and its run equals the CLI's run of that file.
#[test]
fn the_python_examples_run_and_the_pipeline_api_equals_the_cli() {
    if !have_python_sdk() || !needs(Need::DataFrameTools) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("python-stages");
    std::fs::create_dir_all(&dir).unwrap();
    let examples = root().join("examples/python-stages");
    for f in ["word_count.py", "repeating_top_ngrams.py", "pipeline.yaml"] {
        std::fs::copy(examples.join(f), dir.join(f)).unwrap();
    }
    let yaml = std::fs::read_to_string(dir.join("pipeline.yaml")).unwrap();
    let data = root().join("examples/quickstart/data");
    std::fs::write(dir.join("pipeline.yaml"), yaml.replace("path: ../quickstart/data", &format!("path: {}", data.display()))).unwrap();
    let commands: Vec<&str> = yaml.lines().filter_map(|l| l.strip_prefix("#   ")).collect();
    assert_eq!(commands.len(), 3, "{yaml}");
    let r = shell(&dir, tmp.path(), &commands.join(" && "));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = output_docs(&dir.join("out"), ".jsonl");
    assert!(!out.is_empty());
    for d in &out {
        let d: serde_json::Value = serde_json::from_str(d).unwrap();
        let words = d["word_count"].as_f64().unwrap();
        let top = d["repeating_top_2grams"].as_f64().unwrap();
        assert!((50.0..=100_000.0).contains(&words) && top <= 0.2, "{d}");
    }

    let script = format!(
        r#"
import json, sys
from curator import Pipeline, PipelineError

p = Pipeline(name="api", source={data:?}, sink="api-out", batch_size=128)
p.stage("py_word_count", min_words=50, score_field="word_count")
p.stage("py_repeating_top_ngrams", n=2, max_repeating_ngram_ratio=0.2, score_field="repeating_top_2grams", options={{"name": "top-2grams"}})
assert Pipeline.from_yaml(p.to_yaml()) == p
report = p.run(plugins=["plugins"], quiet=True)
p.save("api.yaml")
assert Pipeline.from_yaml("api.yaml") == p
table = report.to_arrow()
frame = report.to_polars()
assert table.num_rows == frame.height == report.docs_out
try:
    Pipeline(source="x", sink="y").stage("py_word_count", min_word=5).validate(plugins=["plugins"])
    sys.exit("a misspelt param was accepted")
except PipelineError as e:
    assert "min_word" in str(e) and e.code == 2, e
print(json.dumps({{"in": report.docs_in, "out": report.docs_out, "stages": [s["label"] for s in report.stages]}}))
"#,
        data = data.display().to_string()
    );
    let r = shell(&dir, tmp.path(), &format!("python3 -c '{}'", script.replace('\'', "'\\''")));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let summary: serde_json::Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["stages"], serde_json::json!(["py_word_count", "top-2grams"]), "{summary}");

    // The file it saved, run by the CLI into another folder: the same documents.
    let saved = std::fs::read_to_string(dir.join("api.yaml")).unwrap();
    std::fs::write(dir.join("cli.yaml"), saved.replace("path: api-out", "path: cli-out")).unwrap();
    let r = shell(&dir, tmp.path(), "curator-host run cli.yaml --plugins plugins");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let api = output_docs(&dir.join("api-out"), ".jsonl");
    assert_eq!(api.len() as u64, summary["out"].as_u64().unwrap());
    assert_eq!(api, output_docs(&dir.join("cli-out"), ".jsonl"));
    assert_eq!(api, out, "the API's pipeline is the example's");
}
