//! DeBERTa-v2/v3 against PyTorch/transformers on the same inputs
//! (`tests/parity/deberta_reference.json`, made by `scripts/models/deberta_reference.py` from
//! the random-weight models of `scripts/models/deberta_models.py`): the tokenizer's ids
//! exactly, transformers' log buckets exactly, and per head layout the CPU path's logits to
//! |Δ| ≤ 1e-4 with the same argmax, NeMo's multi-head results as NeMo rounds them. The GPU
//! path is checked against the same file by `examples/encoder-check.rs --deberta` on a GPU
//! machine.
//!
//! Needs the models: `python3 scripts/models/fetch.py` (the test command runs it).

mod common;

use std::path::Path;

use common::{model, root};
use curator_encoder::config::{Arch, log_bucket};
use curator_encoder::{Device, Encoder, Options};
use serde_json::Value;

fn reference() -> Value {
    let text = std::fs::read_to_string(root().join("tests/parity/deberta_reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn rows(v: &Value) -> Vec<Vec<f32>> {
    v.as_array().unwrap().iter().map(floats).collect()
}

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |a, (i, &x)| if x > a.1 { (i, x) } else { a }).0
}

fn load(dir: &Path, max_tokens: usize) -> Encoder {
    let opts = Options { device: Device::Cpu, max_tokens: Some(max_tokens), token_budget: 8192, ..Options::default() };
    Encoder::load(dir, &opts).unwrap()
}

/// Our logits for the reference texts, checked against `want` (|Δ| ≤ 1e-4, same argmax).
fn check_logits(name: &str, enc: &Encoder, r: &Value, want: &[Vec<f32>]) -> Vec<f32> {
    let texts: Vec<&str> = r["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let got = enc.logits(&texts, None).unwrap();
    let n = enc.outputs();
    assert_eq!(got.len(), texts.len() * n);
    let mut worst = 0f32;
    for (i, want) in want.iter().enumerate() {
        let row = &got[i * n..(i + 1) * n];
        assert_eq!(argmax(row), argmax(want), "{name}: text {i}: {row:?} vs {want:?}");
        for (a, b) in row.iter().zip(want) {
            worst = worst.max((a - b).abs());
        }
    }
    assert!(worst <= 1e-4, "{name}: max |Δ| {worst}");
    eprintln!("{name}: {} texts, max |Δ| {worst:.2e}", texts.len());
    got
}

#[test]
fn log_buckets_equal_transformers() {
    let r = reference();
    let b = &r["log_buckets"];
    let (size, max, from) =
        (b["bucket_size"].as_u64().unwrap() as usize, b["max_position"].as_u64().unwrap() as usize, b["from"].as_i64().unwrap());
    for (k, want) in b["buckets"].as_array().unwrap().iter().enumerate() {
        let rel = from + k as i64;
        assert_eq!(log_bucket(rel, size, max), want.as_i64().unwrap(), "relative position {rel}");
    }
}

#[test]
fn deberta_v3_tokenizer_ids_equal_transformers() {
    let r = reference();
    let texts: Vec<&str> = r["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for name in ["deberta-tiny-hf", "deberta-tiny-nemo"] {
        let Some(dir) = model(name) else { return };
        let m = &r["models"][name];
        let enc = load(&dir, m["max_tokens"].as_u64().unwrap() as usize);
        let ids = enc.tokenize(&texts, None).unwrap();
        for (i, want) in m["ids"].as_array().unwrap().iter().enumerate() {
            let want: Vec<u32> = want.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
            assert_eq!(ids[i], want, "{name}: {:?}", texts[i]);
        }
    }
}

#[test]
fn transformers_layout_context_pooler_logits() {
    let Some(dir) = model("deberta-tiny-hf") else { return };
    let r = reference();
    let enc = load(&dir, 512);
    // The branches the v3 models do not take: no buckets, own position projections, absolute
    // positions and token types.
    let Arch::Deberta(d) = &enc.config.arch else { panic!("{:?}", enc.config.arch) };
    assert_eq!((d.span, d.buckets, d.share_att_key, d.norm_rel_ebd, d.position_biased_input), (64, None, false, false, true));
    assert_eq!(enc.max_tokens(), 512, "absolute positions cap the length");
    check_logits("deberta-tiny-hf", &enc, &r, &rows(&r["models"]["deberta-tiny-hf"]["logits"]));
}

#[test]
fn nemo_model_hub_layout_fc_logits() {
    let Some(dir) = model("deberta-tiny-nemo") else { return };
    let r = reference();
    // No max_tokens: the checkpoint's max_len (1,024) applies, past DeBERTa-v3's 512 buckets.
    let enc = Encoder::load(&dir, &Options { device: Device::Cpu, ..Options::default() }).unwrap();
    assert_eq!(enc.max_tokens(), 1024);
    assert!(enc.config.layout.contains("model-hub") && enc.config.layout.contains("2 heads"), "{}", enc.config.layout);
    let got = check_logits("deberta-tiny-nemo", &enc, &r, &rows(&r["models"]["deberta-tiny-nemo"]["logits"]));
    // NeMo writes softmax probabilities; ours from the same logits.
    let n = enc.outputs();
    for (i, want) in rows(&r["models"]["deberta-tiny-nemo"]["probs"]).iter().enumerate() {
        let p = curator_encoder::head::softmax(&got[i * n..(i + 1) * n]);
        assert!(p.iter().zip(want).all(|(a, b)| (a - b).abs() <= 1e-5), "{p:?} vs {want:?}");
    }
}

#[test]
fn nemo_multi_head_complexity_results() {
    let Some(dir) = model("deberta-tiny-complexity") else { return };
    let r = reference();
    let enc = load(&dir, 512);
    let m = &r["models"]["deberta-tiny-complexity"];
    let got = check_logits("deberta-tiny-complexity", &enc, &r, &rows(&m["logits"]));
    let n = enc.outputs();
    let nemo = &m["nemo"];
    for i in 0..got.len() / n {
        let c = curator_encoder::head::complexity(&enc.config.targets, &got[i * n..(i + 1) * n]);
        assert_eq!(c.task_type_1, nemo["task_type_1"][i].as_str().unwrap(), "text {i}");
        assert_eq!(c.task_type_2, nemo["task_type_2"][i].as_str().unwrap(), "text {i}");
        // One rounding step apart at most (our logits differ from PyTorch's by ~1e-6).
        let close = |a: f64, key: &str, step: f64| {
            let b = nemo[key][i].as_f64().unwrap();
            assert!((a - b).abs() <= step * 1.01, "text {i}: {key} {a} vs {b}");
        };
        close(c.task_type_prob, "task_type_prob", 1e-3);
        close(c.prompt_complexity_score, "prompt_complexity_score", 1e-5 + 1e-4);
        for (name, score) in &c.scores {
            close(*score, name, 1e-4);
        }
    }
}

/// Planning's set-up check (`check_only`): each layout loads from the weights file's header
/// alone with the same config, head and outputs as a full load, and refuses to run; a file
/// the full load refuses (a tensor missing, the file cut short) it refuses too.
#[test]
fn the_set_up_check_reads_the_header_alone_and_refuses_what_a_load_refuses() {
    let names = ["deberta-tiny-hf", "deberta-tiny-nemo", "deberta-tiny-complexity"];
    let Some(dirs) = names.iter().map(|n| model(n)).collect::<Option<Vec<_>>>() else { return };
    let check = Options { device: Device::Cpu, check_only: true, ..Options::default() };
    for dir in &dirs {
        let full = load(dir, 512);
        let hollow = Encoder::load(dir, &Options { max_tokens: Some(512), ..check.clone() }).unwrap();
        assert_eq!(hollow.outputs(), full.outputs(), "{}", dir.display());
        assert_eq!(hollow.config.labels, full.config.labels);
        assert_eq!(hollow.config.layout, full.config.layout);
        assert_eq!(hollow.max_tokens(), full.max_tokens());
        assert!(matches!(hollow.logits(&["a text"], None), Err(curator_encoder::EncoderError::CheckOnly)));
    }
    // Broken copies of the NeMo layout's weights: a tensor renamed, the file cut short.
    let tmp = tempfile::tempdir().unwrap();
    let src = &dirs[1];
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + len]).unwrap().to_string();
    let edit = |from: &str, to: &str| -> Vec<u8> {
        assert!(header.contains(from), "{from}");
        // Same length, so every offset stays right.
        assert_eq!(from.len(), to.len());
        let mut out = bytes.clone();
        out[8..8 + len].copy_from_slice(header.replacen(from, to, 1).as_bytes());
        out
    };
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "renamed",
            edit("layer.1.attention.output.LayerNorm.bias\"", "layer.1.attention.output.LayerNorm.biaX\""),
            "LayerNorm.bias\" is missing",
        ),
        ("cut", bytes[..bytes.len() - 16].to_vec(), ""),
        ("empty", bytes[..4].to_vec(), ""),
    ];
    for (what, data, says) in cases {
        let dir = tmp.path().join(what);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["config.json", "tokenizer.json"] {
            std::fs::copy(src.join(f), dir.join(f)).unwrap();
        }
        std::fs::write(dir.join("model.safetensors"), data).unwrap();
        let full = Encoder::load(&dir, &Options { device: Device::Cpu, ..Options::default() }).err().map(|e| e.to_string());
        let hollow = Encoder::load(&dir, &check).err().map(|e| e.to_string());
        assert!(full.is_some() && hollow.is_some(), "{what}: full {full:?}, check {hollow:?}");
        assert!(hollow.as_deref().unwrap_or("").contains(says), "{what}: {hollow:?}");
        assert!(full.as_deref().unwrap_or("").contains(says), "{what}: {full:?}");
    }
}
