//! The encoder on a device, for a GPU machine: parity against the PyTorch references, then
//! speed on a corpus. Prints one JSON object.
//!
//!     encoder-check MODEL_DIR REFERENCE_JSON [--classifier DIR] [--device gpu|cpu]
//!                   [--corpus FILE.jsonl] [--docs N] [--budget TOKENS] [--max-docs N]
//!                   [--dump-ids FILE] [--rounds R]
//!
//! Speed: the corpus's first N texts tokenized (all threads, timed alone), then the forward
//! pass alone on the tokenized texts (length-sorted, token-budget batches; R rounds each of
//! one wait per group of passes and a copy back after every pass, alternated; the clock
//! includes building the batches on the host, uploading ids and copying vectors back), then
//! both together as a stage runs them (tokenization overlapped with the device).

use std::path::PathBuf;
use std::time::Instant;

use curator_encoder::{Device, Encoder, Options, Pooling};
use serde_json::{Value, json};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    dot / (a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt())
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).map(|x| x as f32).collect()).unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!(
            "usage: encoder-check MODEL_DIR REFERENCE_JSON [--classifier DIR] [--device gpu|cpu] [--corpus F] [--docs N] [--budget T]"
        );
        std::process::exit(2);
    }
    let device: Device = arg(&args, "--device").unwrap_or_else(|| "gpu".into()).parse()?;
    let budget: usize = arg(&args, "--budget").map(|b| b.parse()).transpose()?.unwrap_or(65536);
    let max_docs: usize = arg(&args, "--max-docs").map(|b| b.parse()).transpose()?.unwrap_or(1024);
    let opts = Options { device, token_budget: budget, max_docs, ..Options::default() };
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(&args[2])?)?;
    let cases = reference["cases"].as_array().cloned().unwrap_or_default();
    let texts: Vec<&str> = cases.iter().filter_map(|c| c["text"].as_str()).collect();
    let mut report = json!({"device": format!("{device:?}"), "budget": budget});

    let t = Instant::now();
    let enc = Encoder::load(&PathBuf::from(&args[1]), &opts)?;
    report["load_s"] = json!(t.elapsed().as_secs_f64());
    report["ran_on"] = json!(enc.device());
    report["kernels"] = json!(enc.kernels_from());
    report["tokenizer"] = json!(enc.tokenizer());
    let h = enc.config.hidden_size;
    let got = enc.embed(&texts, None, Pooling::Mean, true)?;
    let min_cos = cases.iter().enumerate().map(|(i, c)| cosine(&got[i * h..(i + 1) * h], &floats(&c["embedding"]))).fold(1f32, f32::min);
    report["embedding_min_cosine"] = json!(min_cos);

    let mut classifier = None;
    if let Some(dir) = arg(&args, "--classifier") {
        let clf = Encoder::load(&PathBuf::from(dir), &Options { max_tokens: Some(512), ..opts.clone() })?;
        let logits = clf.logits(&texts, None)?;
        let n = clf.config.labels.len();
        let argmax = |v: &[f32]| v.iter().enumerate().fold((0, f32::NEG_INFINITY), |a, (i, &x)| if x > a.1 { (i, x) } else { a }).0;
        let mut max_delta = 0f32;
        let mut same = 0;
        for (i, c) in cases.iter().enumerate() {
            let want = floats(&c["logits"]);
            let row = &logits[i * n..(i + 1) * n];
            max_delta = row.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(max_delta, f32::max);
            same += usize::from(argmax(row) == argmax(&want));
        }
        report["classifier_max_logit_delta"] = json!(max_delta);
        report["classifier_same_argmax"] = json!(format!("{same}/{}", cases.len()));
        classifier = Some(clf);
    }

    if let Some(corpus) = arg(&args, "--corpus") {
        let n: usize = arg(&args, "--docs").map(|d| d.parse()).transpose()?.unwrap_or(100_000);
        let mut docs = Vec::with_capacity(n);
        for line in std::fs::read_to_string(&corpus)?.lines() {
            if docs.len() >= n {
                break;
            }
            let v: Value = serde_json::from_str(line)?;
            docs.push(v["text"].as_str().unwrap_or_default().to_string());
        }
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        // Warm up (kernels, allocator, cuBLAS heuristics).
        enc.embed(&refs[..refs.len().min(2048)], None, Pooling::Mean, true)?;
        let t = Instant::now();
        let ids = enc.tokenize(&refs, None)?;
        let tok_s = t.elapsed().as_secs_f64();
        let tokens: usize = ids.iter().map(Vec::len).sum();
        if let Some(path) = arg(&args, "--dump-ids") {
            // [count u32] then per sequence [len u32][ids u32...], little-endian: the same
            // token ids for the PyTorch baseline.
            let mut out = Vec::with_capacity(4 * (tokens + ids.len() + 1));
            out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            for seq in &ids {
                out.extend_from_slice(&(seq.len() as u32).to_le_bytes());
                seq.iter().for_each(|id| out.extend_from_slice(&id.to_le_bytes()));
            }
            std::fs::write(path, out)?;
        }
        // The forward pass alone, `--rounds` times each way, alternated: one wait per group of
        // passes (as the stage runs), and a wait with a copy back after every pass.
        let rounds: usize = arg(&args, "--rounds").map(|r| r.parse()).transpose()?.unwrap_or(3);
        let (mut grouped, mut per_pass) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            for (times, group) in [(&mut grouped, usize::MAX), (&mut per_pass, 0)] {
                enc.set_group_tokens(group);
                let t = Instant::now();
                enc.pooled_ids(&ids, Pooling::Mean)?;
                times.push(t.elapsed().as_secs_f64());
            }
        }
        enc.set_group_tokens(0);
        let best = |v: &[f64]| v.iter().cloned().fold(f64::MAX, f64::min);
        if let Some(clf) = &classifier {
            // The classifier's forward pass alone on the same ids (CLS pooling, then the
            // head on the host, as the stage runs it), one wait per pass.
            clf.logits_ids(&ids[..ids.len().min(2048)])?;
            let mut times = Vec::new();
            for _ in 0..rounds {
                let t = Instant::now();
                clf.logits_ids(&ids)?;
                times.push(t.elapsed().as_secs_f64());
            }
            report["classifier_forward_seconds"] = json!(times);
            report["classifier_forward_docs_per_s"] = json!(ids.len() as f64 / best(&times));
        }
        let fwd_s = best(&grouped);
        report["forward_grouped_seconds"] = json!(grouped);
        report["forward_per_pass_seconds"] = json!(per_pass);
        report["forward_per_pass_tokens_per_s"] = json!(tokens as f64 / best(&per_pass));
        let fwd = enc.stats();
        let t = Instant::now();
        enc.embed(&refs, None, Pooling::Mean, true)?;
        let e2e_s = t.elapsed().as_secs_f64();
        let s = enc.stats();
        let profile = enc.gpu_profile();
        if !profile.is_empty() {
            report["profile_ms"] = json!(profile.into_iter().collect::<std::collections::BTreeMap<_, _>>());
        }
        report["docs"] = json!(refs.len());
        report["mean_tokens"] = json!(tokens as f64 / refs.len().max(1) as f64);
        report["tokenize_docs_per_s"] = json!(refs.len() as f64 / tok_s);
        report["forward_docs_per_s"] = json!(refs.len() as f64 / fwd_s);
        report["forward_tokens_per_s"] = json!(tokens as f64 / fwd_s);
        report["forward_padding"] = json!(fwd.padded_tokens as f64 / fwd.tokens.max(1) as f64);
        report["forward_batches"] = json!(fwd.batches);
        report["forward_oom_retries"] = json!(fwd.oom_retries);
        report["budget_after"] = json!(enc.token_budget());
        report["embed_docs_per_s"] = json!(refs.len() as f64 / e2e_s);
        report["embed_waiting_s"] = json!(s.waiting.as_secs_f64());
        report["embed_compute_s"] = json!(s.compute.as_secs_f64());
        report["oom_retries"] = json!(s.oom_retries);
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
