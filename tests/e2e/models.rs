//! The GPU model stages end to end, on the CPU reference path (CI has no GPU): the real
//! binary runs the `embedder` and `classifier` native plugins in worker processes on real
//! models (`python3 scripts/models/fetch.py`), and their output is checked against
//! PyTorch/transformers' (`tests/parity/encoder_reference.json`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arrow_array::{Array, FixedSizeListArray, Float32Array, StringArray};
use arrow_schema::DataType;

use crate::support::*;

pub(crate) fn plugins() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| native_plugins_dir("model-plugins", &["embedder", "classifier"]))
}

pub(crate) fn models() -> PathBuf {
    let dir = root().join("target/models");
    assert!(dir.join("all-MiniLM-L6-v2/model.safetensors").exists(), "run `python3 scripts/models/fetch.py` first");
    dir
}

fn reference() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(root().join("tests/parity/encoder_reference.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    r["cases"].as_array().unwrap().clone()
}

fn run(dir: &Path, args: &[&str]) -> Run {
    host().current_dir(dir).args(args).arg("--plugins").arg(plugins()).output().expect("cannot start curator-host").into()
}

fn write_reference_docs(dir: &Path) -> Vec<serde_json::Value> {
    write_reference_docs_in(dir, "text")
}

/// The reference texts in `field` (any other than `text`: `text` holds a decoy).
fn write_reference_docs_in(dir: &Path, field: &str) -> Vec<serde_json::Value> {
    let cases = reference();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let lines: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut doc = serde_json::json!({"id": format!("d{i}"), "text": "not this text"});
            doc[field] = c["text"].clone();
            doc.to_string()
        })
        .collect();
    std::fs::write(dir.join("in/docs.jsonl"), lines.join("\n") + "\n").unwrap();
    cases
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    dot / (a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt())
}

#[test]
fn embedder_writes_an_embedding_vector_column_to_parquet() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The text in a field of its own: `text_field` (an `input_params` param) gets it to the stage.
    let cases = write_reference_docs_in(tmp.path(), "body");
    let yaml = format!(
        "source: {{path: in}}\nbatch_size: 5\nstages:\n  - plugin: embedder\n    params: {{model: /models/all-MiniLM-L6-v2, device: cpu, text_field: body}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\nsink: {{path: out, format: parquet}}\n",
        models().display()
    );
    write_pipeline(tmp.path(), &yaml);
    let r = run(tmp.path(), &["run", "pipeline.yaml"]);
    r.ok();
    // The worker's set-up line (a native stage's info log) reaches the run's log at info.
    assert!(
        r.stderr.lines().any(|l| l.contains(" INFO ") && l.contains("embedder: /models/all-MiniLM-L6-v2") && l.contains("set up in")),
        "{}",
        r.stderr
    );
    let file = std::fs::File::open(tmp.path().join("out/docs.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let mut seen = 0;
    for batch in reader {
        let batch = batch.unwrap();
        let ids = batch.column_by_name("id").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
        let col = batch.column_by_name("embedding").expect("an embedding column");
        assert!(
            matches!(col.data_type(), DataType::FixedSizeList(item, 384) if item.data_type() == &DataType::Float32),
            "{}",
            col.data_type()
        );
        let vectors = col.as_any().downcast_ref::<FixedSizeListArray>().unwrap();
        for r in 0..batch.num_rows() {
            let v = vectors.value(r);
            let got = v.as_any().downcast_ref::<Float32Array>().unwrap().values().to_vec();
            let i: usize = ids.value(r)[1..].parse().unwrap();
            let want: Vec<f32> = cases[i]["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            assert!(cosine(&got, &want) >= 0.999, "doc {i}: cosine {}", cosine(&got, &want));
            let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "normalised: {norm}");
            seen += 1;
        }
    }
    assert_eq!(seen, cases.len());
}

/// `examples/models/cpu.yaml` as shipped (the stages' GPU defaults: passes of 65,536 tokens),
/// on 5,000 documents and no GPU: each call gets 64 documents and 600 s, so no call outlives
/// its limit, and the run completes.
#[test]
fn the_cpu_example_runs_with_the_stages_gpu_defaults() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    let words = ["data", "curation", "quality", "filter", "language", "model", "the", "of", "text", "web", "page", "news"];
    let lines: Vec<String> = (0..5000)
        .map(|i: usize| {
            let text: Vec<&str> = (0..6 + i % 12).map(|k| words[(i * 7 + k * 3) % words.len()]).collect();
            serde_json::json!({"id": format!("d{i}"), "text": text.join(" ")}).to_string()
        })
        .collect();
    std::fs::write(tmp.path().join("in/docs.jsonl"), lines.join("\n") + "\n").unwrap();
    let shipped = std::fs::read_to_string(root().join("examples/models/cpu.yaml")).unwrap();
    let yaml = shipped.replace("path: ../quickstart/data", "path: in").replace("../../target/models", &models().display().to_string());
    assert!(!yaml.contains("max_batch_tokens") && !yaml.contains("timeout_s") && !yaml.contains("batch_size"), "{yaml}");
    write_pipeline(tmp.path(), &yaml);
    let r = run(tmp.path(), &["run", "pipeline.yaml"]);
    r.ok();
    for stage in ["embedder", "classifier"] {
        assert!(
            r.stderr
                .lines()
                .any(|l| l.contains(&format!("{stage:?} is written for a GPU and runs on the CPU: 64 document(s) a call, 600 s per call"))),
            "{stage}\n{}",
            r.stderr
        );
    }
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["docs_in"], 5000, "{summary}");
    assert_eq!(summary["failed"], 0, "{summary}");
}

#[test]
fn classifier_labels_scores_and_keeps_like_transformers() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cases = write_reference_docs(tmp.path());
    let labels = ["Low", "Medium", "High"];
    let argmax = |c: &serde_json::Value| {
        let l: Vec<f64> = c["logits"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        (0..3).fold(0, |b, i| if l[i] > l[b] { i } else { b })
    };
    let yaml = format!(
        "source: {{path: in}}\nstages:\n  - plugin: classifier\n    params: {{model: /models/minilm-classifier, device: cpu, keep_labels: [High, Low], probabilities: true}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\nsink: {{path: out}}\n",
        models().display()
    );
    write_pipeline(tmp.path(), &yaml);
    run(tmp.path(), &["run", "pipeline.yaml"]).ok();
    let docs = read_jsonl(&tmp.path().join("out/docs.jsonl"));
    let expected: Vec<usize> = (0..cases.len()).filter(|&i| labels[argmax(&cases[i])] != "Medium").collect();
    let got: Vec<usize> = docs.iter().map(|d| d["id"].as_str().unwrap()[1..].parse().unwrap()).collect();
    assert_eq!(got, expected, "kept documents");
    assert!(!expected.is_empty() && expected.len() < cases.len());
    for d in &docs {
        let i: usize = d["id"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(d["label"], labels[argmax(&cases[i])]);
        let probs: Vec<f64> = d["label_probs"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(probs.len(), 3);
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-4);
        assert!((d["score"].as_f64().unwrap() - probs.iter().cloned().fold(0.0, f64::max)).abs() < 1e-6);
    }
}

#[test]
fn a_model_that_is_not_there_stops_the_run_before_reading() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    write_reference_docs(tmp.path());
    let yaml = format!(
        "source: {{path: in}}\nstages:\n  - plugin: embedder\n    params: {{model: /models/no-such-model, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\nsink: {{path: out}}\n",
        models().display()
    );
    write_pipeline(tmp.path(), &yaml);
    let r = run(tmp.path(), &["run", "pipeline.yaml"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no-such-model/config.json"), "{}", r.stderr);
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn tune_without_a_gpu_says_so_and_changes_nothing() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    write_reference_docs(tmp.path());
    let yaml = format!(
        "# keep this comment\nsource: {{path: in}}\nstages:\n  - plugin: embedder\n    params: {{model: /models/all-MiniLM-L6-v2}}\n    grants: {{models: {}}}\nsink: {{path: out}}\n",
        models().display()
    );
    let path = write_pipeline(tmp.path(), &yaml);
    // Every GPU hidden, so the test means the same on a GPU machine (where
    // scripts/models/gpu-models.sh tunes for real).
    let r: Run = host()
        .current_dir(tmp.path())
        .args(["tune", "pipeline.yaml", "--apply", "--plugins"])
        .arg(plugins())
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .expect("cannot start curator-host")
        .into();
    assert!(r.stdout.contains("no GPU"), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("nothing tuned"), "{}", r.stdout);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), yaml);
    assert!(!tmp.path().join("pipeline.yaml.backup").exists());
}

/// The DeBERTa reference texts (`tests/parity/deberta_reference.json`) as `in/docs.jsonl`, with
/// the reference file.
fn write_deberta_docs(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("tests/parity/deberta_reference.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let lines: Vec<String> = r["texts"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": format!("d{i}"), "text": t}).to_string())
        .collect();
    std::fs::write(dir.join("in/docs.jsonl"), lines.join("\n") + "\n").unwrap();
    r
}

#[test]
fn a_nemo_deberta_classifier_labels_and_filters_by_its_labels() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = write_deberta_docs(tmp.path());
    let labels = ["Adult", "Arts_and_Entertainment", "Business_and_Industrial", "Computers_and_Electronics", "Health"];
    let want: Vec<usize> = r["models"]["deberta-tiny-nemo"]["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let l: Vec<f64> = row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
            (0..l.len()).fold(0, |b, i| if l[i] > l[b] { i } else { b })
        })
        .collect();
    // Keep the two most frequent labels of the reference, so the filter keeps some and drops some.
    let mut counts = [0usize; 5];
    want.iter().for_each(|&i| counts[i] += 1);
    let mut order: Vec<usize> = (0..5).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(counts[i]));
    let keep = [labels[order[0]], labels[order[1]]];
    // NeMo's names: filter_by, max_seq_length, model_inference_batch_size, label_field.
    let yaml = format!(
        "source: {{path: in}}\nstages:\n  - plugin: classifier\n    params: {{model: /models/deberta-tiny-nemo, device: cpu, max_chars: 6000, max_seq_length: 1024, model_inference_batch_size: 4, label_field: domain_pred, filter_by: [{}, {}]}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\nsink: {{path: out}}\n",
        keep[0],
        keep[1],
        models().display()
    );
    write_pipeline(tmp.path(), &yaml);
    // The stage's set-up line (worker output, logged at debug) names the layout it found.
    let run: Run = host()
        .current_dir(tmp.path())
        .args(["run", "pipeline.yaml", "--plugins"])
        .arg(plugins())
        .env("CURATOR_LOG", "warn,curator_sandbox=debug")
        .output()
        .expect("cannot start curator-host")
        .into();
    run.ok();
    assert!(run.stderr.contains("model-hub checkpoint (NeMo's `fc` on the first token)"), "{}", run.stderr);
    let docs = read_jsonl(&tmp.path().join("out/docs.jsonl"));
    let expected: Vec<usize> = (0..want.len()).filter(|&i| keep.contains(&labels[want[i]])).collect();
    let got: Vec<usize> = docs.iter().map(|d| d["id"].as_str().unwrap()[1..].parse().unwrap()).collect();
    assert_eq!(got, expected, "kept documents");
    assert!(!expected.is_empty() && expected.len() < want.len());
    for d in &docs {
        let i: usize = d["id"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(d["domain_pred"], labels[want[i]]);
    }
}

#[test]
fn nemo_prompt_complexity_writes_nemos_columns() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = write_deberta_docs(tmp.path());
    let nemo = &r["models"]["deberta-tiny-complexity"]["nemo"];
    let yaml = format!(
        "source: {{path: in}}\nstages:\n  - plugin: classifier\n    params: {{model: /models/deberta-tiny-complexity, device: cpu, max_seq_length: 512}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\nsink: {{path: out}}\n",
        models().display()
    );
    write_pipeline(tmp.path(), &yaml);
    run(tmp.path(), &["run", "pipeline.yaml"]).ok();
    let docs = read_jsonl(&tmp.path().join("out/docs.jsonl"));
    assert_eq!(docs.len(), r["texts"].as_array().unwrap().len());
    for d in &docs {
        let i: usize = d["id"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(d["task_type_1"], nemo["task_type_1"][i], "doc {i}");
        assert_eq!(d["task_type_2"], nemo["task_type_2"][i], "doc {i}");
        for (key, step) in
            [("prompt_complexity_score", 1.1e-4), ("creativity_scope", 1.1e-4), ("reasoning", 1.1e-4), ("task_type_prob", 1.1e-3)]
        {
            let (a, b) = (d[key].as_f64().unwrap(), nemo[key][i].as_f64().unwrap());
            assert!((a - b).abs() <= step, "doc {i}: {key} {a} vs NeMo's {b}");
        }
    }
    // NeMo refuses filter_by for this model; so do we, at planning.
    let yaml = yaml.replace("max_seq_length: 512", "max_seq_length: 512, filter_by: [QA]").replace("path: out", "path: out2");
    write_pipeline(tmp.path(), &yaml);
    let refused = run(tmp.path(), &["run", "pipeline.yaml", "--dry-run"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("multi-head"), "{}", refused.stderr);
}

#[test]
fn an_unsupported_architecture_is_refused_at_planning_by_its_model_type() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    write_reference_docs(tmp.path());
    // A copy of the tiny DeBERTa whose config.json names another architecture.
    let dir = tmp.path().join("models/gpt");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["model.safetensors", "tokenizer.json"] {
        std::fs::copy(models().join("deberta-tiny-hf").join(f), dir.join(f)).unwrap();
    }
    let config = std::fs::read_to_string(models().join("deberta-tiny-hf/config.json")).unwrap().replace("\"deberta-v2\"", "\"gpt2\"");
    std::fs::write(dir.join("config.json"), config).unwrap();
    let yaml = "source: {path: in}\nstages:\n  - plugin: classifier\n    params: {model: /models/gpt, device: cpu}\n    resources: {gpu_memory_gb: 0}\n    grants: {models: models}\nsink: {path: out}\n";
    write_pipeline(tmp.path(), yaml);
    let r = run(tmp.path(), &["run", "pipeline.yaml", "--dry-run"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("model_type \"gpt2\" is not supported"), "{}", r.stderr);
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn the_nemo_example_pipelines_run_with_a_stand_in_model() {
    if !needs(Need::EncoderModels) {
        return;
    }
    // The shipped examples, with the random-weight NeMo-layout model standing in for the
    // user's download (labels renamed for the quality one), on the CPU.
    let tmp = tempfile::tempdir().unwrap();
    for (example, folder, labels) in [
        ("nemo-domain", "domain-classifier", None),
        ("nemo-quality", "quality-classifier-deberta", Some(["High", "Low", "Medium", "Other", "Unknown"])),
    ] {
        let dir = tmp.path().join("models").join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["model.safetensors", "tokenizer.json", "config.json"] {
            std::fs::copy(models().join("deberta-tiny-nemo").join(f), dir.join(f)).unwrap();
        }
        if let Some(labels) = labels {
            let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
            config["id2label"] = labels.iter().enumerate().map(|(i, l)| (i.to_string(), serde_json::json!(l))).collect();
            std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        }
        let shipped = std::fs::read_to_string(root().join(format!("examples/models/{example}.yaml"))).unwrap();
        assert!(shipped.contains("grants: {models: ~/models}") && shipped.contains("device: gpu"), "{example}");
        let yaml = shipped
            .replace("grants: {models: ~/models}", &format!("grants: {{models: {}}}", tmp.path().join("models").display()))
            .replace("device: gpu", "device: cpu")
            .replace("gpu_memory_gb: 8", "gpu_memory_gb: 0")
            .replace("../quickstart/data", &root().join("examples/quickstart/data").display().to_string());
        let path = tmp.path().join(format!("{example}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        run(tmp.path(), &["run", path.to_str().unwrap()]).ok();
        let out = tmp.path().join(if example == "nemo-domain" { "out-domain" } else { "out-quality" });
        let files: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "parquet"))
            .collect();
        assert!(!files.is_empty(), "{example}: no Parquet output in {}", out.display());
        let field = if example == "nemo-domain" { "domain_pred" } else { "quality_pred" };
        let mut rows = 0;
        for f in files {
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(f.path()).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                let col = batch.column_by_name(field).unwrap_or_else(|| panic!("{example}: no {field} column"));
                let labels = col.as_any().downcast_ref::<StringArray>().unwrap();
                if example == "nemo-quality" {
                    assert!(
                        (0..labels.len()).all(|r| ["High", "Medium"].contains(&labels.value(r))),
                        "filter_by keeps High and Medium only"
                    );
                }
                rows += batch.num_rows();
            }
        }
        assert!(rows > 0, "{example}");
    }
}
