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
    let cases = reference();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let lines: Vec<String> =
        cases.iter().enumerate().map(|(i, c)| serde_json::json!({"id": format!("d{i}"), "text": c["text"]}).to_string()).collect();
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
    let cases = write_reference_docs(tmp.path());
    let yaml = format!(
        "source: {{path: in}}\nbatch_size: 5\nstages:\n  - plugin: embedder\n    params: {{model: /models/all-MiniLM-L6-v2, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\nsink: {{path: out, format: parquet}}\n",
        models().display()
    );
    write_pipeline(tmp.path(), &yaml);
    run(tmp.path(), &["run", "pipeline.yaml"]).ok();
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
