//! A DeBERTa classifier on a device, for a GPU machine: parity against the transformers
//! references and against the CPU path on real text, then the forward pass's speed. Prints
//! one JSON object.
//!
//!     deberta-check MODEL_DIR [--device gpu|cpu] [--reference deberta_reference.json --name NAME]
//!                   [--corpus FILE.jsonl] [--docs N] [--max-chars C] [--cpu-docs N]
//!                   [--budget TOKENS] [--max-docs N] [--rounds R] [--dump-ids FILE]
//!
//! Parity: the reference file's texts (logits from transformers in f32), and the corpus's first
//! `--cpu-docs` texts on the CPU path (f32, itself checked against transformers by
//! `tests/deberta.rs`): max |Δ| of the logits and how often the argmax agrees.
//! Speed: the corpus's first N texts (cut to C characters, as NeMo's `max_chars`) tokenized
//! (timed alone), then the forward pass alone, R rounds: length-sorted token-budget batches,
//! the clock including building them, uploading ids and copying the logits back.
//! `--dump-ids` writes the token ids and our batches (one JSON object) so that
//! `scripts/models/deberta_bench.py` runs PyTorch on exactly the same work.

use std::path::PathBuf;
use std::time::Instant;

use curator_encoder::{Device, Encoder, Options, batching};
use serde_json::{Value, json};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |a, (i, &x)| if x > a.1 { (i, x) } else { a }).0
}

/// (max |Δ|, rows with the same argmax) of `got` against `want`, `n` logits per row.
fn compare(got: &[f32], want: &[f32], n: usize) -> (f32, usize) {
    let rows = want.len() / n;
    let delta = got[..rows * n].iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    let same = (0..rows).filter(|&i| argmax(&got[i * n..(i + 1) * n]) == argmax(&want[i * n..(i + 1) * n])).count();
    (delta, same)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1).filter(|a| !a.starts_with("--")).map(PathBuf::from) else {
        eprintln!("usage: deberta-check MODEL_DIR [--device gpu|cpu] [--reference F --name NAME] [--corpus F] [--docs N] ...");
        std::process::exit(2);
    };
    let num = |name: &str, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(arg(&args, name).map(|v| v.parse()).transpose()?.unwrap_or(default))
    };
    let device: Device = arg(&args, "--device").unwrap_or_else(|| "gpu".into()).parse()?;
    let (budget, max_docs, rounds) = (num("--budget", 65536)?, num("--max-docs", 1024)?, num("--rounds", 3)?);
    let max_chars = arg(&args, "--max-chars").map(|v| v.parse::<usize>()).transpose()?;
    let opts = Options { device, token_budget: budget, max_docs, ..Options::default() };
    let t = Instant::now();
    let enc = Encoder::load(&dir, &opts)?;
    let n = enc.outputs();
    let mut report = json!({"model": dir.display().to_string(), "layout": enc.config.layout, "device": enc.device(),
        "load_s": t.elapsed().as_secs_f64(), "budget": budget, "max_docs": max_docs, "max_tokens": enc.max_tokens(), "tokenizer": enc.tokenizer()});

    if let (Some(file), Some(name)) = (arg(&args, "--reference"), arg(&args, "--name")) {
        let r: Value = serde_json::from_str(&std::fs::read_to_string(file)?)?;
        let texts: Vec<&str> = r["texts"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let want: Vec<f32> = r["models"][&name]["logits"]
            .as_array()
            .map(|rows| {
                rows.iter().flat_map(|row| row.as_array().into_iter().flatten().filter_map(Value::as_f64).map(|x| x as f32)).collect()
            })
            .unwrap_or_default();
        let got = enc.logits(&texts, None)?;
        let (delta, same) = compare(&got, &want, n);
        report["reference"] = json!({"texts": texts.len(), "max_logit_delta": delta, "same_argmax": format!("{same}/{}", texts.len())});
    }

    let Some(corpus) = arg(&args, "--corpus") else {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    };
    let docs = num("--docs", 20000)?;
    let owned: Vec<String> = std::fs::read_to_string(corpus)?
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?.get("text")?.as_str().map(str::to_string))
        .take(docs)
        .collect();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let t = Instant::now();
    let ids = enc.tokenize(&texts, max_chars)?;
    let tokenize_s = t.elapsed().as_secs_f64();
    let tokens: usize = ids.iter().map(Vec::len).sum();
    report["corpus"] = json!({"docs": texts.len(), "tokens": tokens, "mean_tokens": tokens as f64 / texts.len().max(1) as f64,
        "tokenize_s": tokenize_s, "tokenize_docs_per_s": texts.len() as f64 / tokenize_s});

    let cpu_docs = num("--cpu-docs", 0)?.min(ids.len());
    let mut logits = Vec::new();
    let mut forward = Vec::new();
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        logits = enc.logits_ids(&ids)?;
        forward.push(t.elapsed().as_secs_f64());
    }
    let best = forward.iter().copied().fold(f64::INFINITY, f64::min);
    let s = enc.stats();
    report["forward"] = json!({"rounds_s": forward, "docs_per_s": ids.len() as f64 / best, "tokens_per_s": tokens as f64 / best,
        "batches": s.batches, "padded_tokens": s.padded_tokens});
    // Device milliseconds per step over all rounds (CURATOR_ENCODER_PROFILE set).
    let profile = enc.gpu_profile();
    if !profile.is_empty() {
        report["profile_ms"] = Value::Object(profile.into_iter().map(|(k, v)| (k, json!(v))).collect());
    }
    if cpu_docs > 0 {
        let cpu = Encoder::load(&dir, &Options { device: Device::Cpu, ..opts.clone() })?;
        let t = Instant::now();
        let want = cpu.logits_ids(&ids[..cpu_docs])?;
        let (delta, same) = compare(&logits, &want, n);
        report["vs_cpu_f32"] = json!({"docs": cpu_docs, "max_logit_delta": delta, "same_argmax": same,
            "same_argmax_share": same as f64 / cpu_docs as f64, "cpu_s": t.elapsed().as_secs_f64()});
    }
    if let Some(file) = arg(&args, "--dump-ids") {
        let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
        let batches = batching::by_token_budget(&lengths, budget, max_docs);
        std::fs::write(file, serde_json::to_vec(&json!({"ids": ids, "batches": batches, "logits": logits, "outputs": n}))?)?;
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
