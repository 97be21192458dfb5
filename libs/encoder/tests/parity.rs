//! The encoder against PyTorch/transformers on the same inputs
//! (`tests/parity/encoder_reference.json`, made by `scripts/models/reference.py`): the
//! tokenizer's ids exactly, sentence embeddings to cosine ≥ 0.999, classifier logits to
//! |Δ| ≤ 1e-2 with the same argmax. Runs the CPU reference path; the GPU path is checked the
//! same way by `examples/encoder-check.rs` on a GPU machine.
//!
//! Needs the models: `python3 scripts/models/fetch.py` (the test command runs it).

mod common;

use std::path::{Path, PathBuf};

use common::{model, root};
use curator_encoder::{Device, Encoder, Options, Pooling};
use serde_json::Value;

/// `model(name)`, or return from the calling test when it is missing.
macro_rules! model_or_skip {
    ($name:literal) => {
        match model($name) {
            Some(dir) => dir,
            None => return,
        }
    };
}

fn reference() -> Value {
    let text = std::fs::read_to_string(root().join("tests/parity/encoder_reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// (text, token ids, embedding, classifier logits) per fixture document.
type Case = (String, Vec<u32>, Vec<f32>, Vec<f32>);

fn cases(r: &Value) -> Vec<Case> {
    let floats = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect::<Vec<_>>();
    r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["text"].as_str().unwrap().to_string(),
                c["ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect(),
                floats(&c["embedding"]),
                floats(&c["logits"]),
            )
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

fn cpu(max_tokens: usize, budget: usize) -> Options {
    Options { device: Device::Cpu, max_tokens: Some(max_tokens), token_budget: budget, ..Options::default() }
}

#[test]
fn tokenizer_ids_match_transformers() {
    let enc = Encoder::load(&model_or_skip!("all-MiniLM-L6-v2"), &cpu(256, 4096)).unwrap();
    for (text, ids, _, _) in cases(&reference()) {
        assert_eq!(enc.tokenize(&[text.as_str()], None).unwrap()[0], ids, "{text:?}");
    }
}

#[test]
fn embeddings_match_sentence_transformers() {
    let enc = Encoder::load(&model_or_skip!("all-MiniLM-L6-v2"), &Options { max_tokens: None, ..cpu(0, 512) }).unwrap();
    // sentence_bert_config.json's max_seq_length and 1_Pooling's mean pooling are picked up.
    assert_eq!(enc.max_tokens(), 256);
    assert_eq!(enc.config.pooling, Some(Pooling::Mean));
    let cases = cases(&reference());
    let texts: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    let got = enc.embed(&texts, None, Pooling::Mean, true).unwrap();
    let h = enc.config.hidden_size;
    for (i, (text, _, want, _)) in cases.iter().enumerate() {
        let c = cosine(&got[i * h..(i + 1) * h], want);
        assert!(c >= 0.999, "{text:?}: cosine {c}");
        let max_diff = got[i * h..(i + 1) * h].iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(max_diff < 1e-3, "{text:?}: max |Δ| {max_diff}");
    }
    let s = enc.stats();
    assert_eq!(s.docs, texts.len());
    assert!(s.batches >= 2, "a 512-token budget splits these texts: {s:?}");
}

#[test]
fn classifier_logits_match_transformers() {
    let enc = Encoder::load(&model_or_skip!("minilm-classifier"), &cpu(512, 8192)).unwrap();
    assert_eq!(enc.config.labels, vec!["Low", "Medium", "High"]);
    let cases = cases(&reference());
    let texts: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    let logits = enc.logits(&texts, None).unwrap();
    let argmax = |v: &[f32]| v.iter().enumerate().fold((0, f32::NEG_INFINITY), |a, (i, &x)| if x > a.1 { (i, x) } else { a }).0;
    let mut labels = std::collections::BTreeSet::new();
    for (i, (text, _, _, want)) in cases.iter().enumerate() {
        let got = &logits[i * 3..(i + 1) * 3];
        assert_eq!(argmax(got), argmax(want), "{text:?}: {got:?} vs {want:?}");
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() <= 1e-2, "{text:?}: {got:?} vs {want:?}");
        }
        labels.insert(argmax(got));
    }
    assert!(labels.len() >= 2, "the fixture's documents get different labels");
}

#[test]
fn results_do_not_depend_on_batching() {
    let cases = cases(&reference());
    let texts: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    let one = Encoder::load(&model_or_skip!("all-MiniLM-L6-v2"), &Options { max_docs: 1, chunk_docs: 1, ..cpu(256, 8) }).unwrap();
    let many = Encoder::load(&model_or_skip!("all-MiniLM-L6-v2"), &cpu(256, 1 << 20)).unwrap();
    let a = one.embed(&texts, None, Pooling::Mean, true).unwrap();
    let b = many.embed(&texts, None, Pooling::Mean, true).unwrap();
    assert_eq!(a, b);
    assert_eq!(one.stats().batches, texts.len());
    assert_eq!(many.stats().batches, 1);
}

#[test]
fn a_missing_or_foreign_model_is_named() {
    let err = Encoder::load(Path::new("/nonexistent/model"), &cpu(256, 4096)).err().unwrap().to_string();
    assert!(err.contains("/nonexistent/model/config.json"), "{err}");
    let dir = tempfile_dir();
    std::fs::write(dir.join("config.json"), r#"{"model_type":"deberta-v2","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8}"#).unwrap();
    let err = Encoder::load(&dir, &cpu(256, 4096)).err().unwrap().to_string();
    assert!(err.contains("deberta-v2") && err.contains("config.json"), "{err}");
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("curator-encoder-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `device: auto` on a machine without a usable GPU runs the CPU reference on the checkpoint's
/// own f32 values: the same vectors as `device: cpu`, bit for bit (the GPU read's fp16 copy,
/// widened back, would differ on this f32 checkpoint). Without CUDA's libraries (CI) the file
/// is read for the CPU at once; with them but no card, read again after the GPU fails. Says so
/// and returns where a GPU is found.
#[test]
fn auto_without_a_gpu_runs_the_f32_reference() {
    let dir = model_or_skip!("all-MiniLM-L6-v2");
    let auto = Encoder::load(&dir, &Options { device: Device::Auto, ..cpu(128, 4096) }).unwrap();
    if auto.device() == "gpu" {
        eprintln!("skipped: a GPU is here, so `auto` uses it");
        return;
    }
    let cpu = Encoder::load(&dir, &cpu(128, 4096)).unwrap();
    let texts: Vec<String> = cases(&reference()).into_iter().map(|c| c.0).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (a, c) = (auto.pooled(&texts, None, Pooling::Mean).unwrap(), cpu.pooled(&texts, None, Pooling::Mean).unwrap());
    assert_eq!(a, c);
}
