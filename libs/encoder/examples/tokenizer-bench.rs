//! Our WordPiece against the `tokenizers` crate on one core, same texts, same truncation,
//! runs alternated; prints a table and checks the ids are identical.
//!
//!     tokenizer-bench TOKENIZER_JSON CORPUS.jsonl[.gz] [--docs N] [--max-tokens N] [--rounds R]
//!                     [--source PREFIX]
//!
//! The clock covers tokenizing alone: texts are read and decoded before it starts; each side
//! encodes every text on this thread (no rayon), special tokens added, padding off. `tokenizers`
//! runs `encode_fast` (no offsets), its quickest single-text path; ours reuses one `Scratch`.
//! `--source` keeps the documents whose `id` starts with PREFIX (the sample's ids name their
//! source and language).

use std::io::Read;
use std::time::Instant;

use comfy_table::Table;
use curator_heuristics::wordpiece::{Scratch, WordPiece};
use tokenizers::{Tokenizer as HfTokenizer, TruncationParams};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: tokenizer-bench TOKENIZER_JSON CORPUS.jsonl[.gz] [--docs N] [--max-tokens N] [--rounds R] [--source PREFIX]");
        std::process::exit(2);
    }
    let docs: usize = arg(&args, "--docs").map(|s| s.parse()).transpose()?.unwrap_or(usize::MAX);
    let max_tokens: Option<usize> = arg(&args, "--max-tokens").map(|s| s.parse()).transpose()?;
    let rounds: usize = arg(&args, "--rounds").map(|s| s.parse()).transpose()?.unwrap_or(3);
    let source = arg(&args, "--source").unwrap_or_default();
    let json = std::fs::read_to_string(&args[1])?;
    let mut raw = Vec::new();
    std::fs::File::open(&args[2])?.read_to_end(&mut raw)?;
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut s = String::new();
        flate2::read::GzDecoder::new(raw.as_slice()).read_to_string(&mut s)?;
        s
    } else {
        String::from_utf8(raw)?
    };
    let texts: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["id"].as_str().unwrap_or("").starts_with(&source))
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .take(docs)
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();

    let mut hf: HfTokenizer = json.parse()?;
    hf.with_padding(None);
    hf.with_truncation(max_tokens.map(|m| TruncationParams { max_length: m, ..Default::default() }))?;
    let ours = WordPiece::from_json(&json)?;

    let (mut hf_s, mut our_s) = (Vec::new(), Vec::new());
    let (mut tokens, mut mismatches) = (0usize, 0usize);
    let mut scratch = Scratch::default();
    let mut ids = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        let mut want = Vec::with_capacity(texts.len());
        for s in &texts {
            want.push(hf.encode_fast(s.as_str(), true)?);
        }
        hf_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut n = 0;
        for s in &texts {
            ours.encode(s, max_tokens, &mut scratch, &mut ids);
            n += ids.len();
        }
        our_s.push(t.elapsed().as_secs_f64());
        if round == 0 {
            tokens = n;
            for (s, w) in texts.iter().zip(&want) {
                ours.encode(s, max_tokens, &mut scratch, &mut ids);
                mismatches += usize::from(ids != w.get_ids());
            }
        }
    }
    let range = |v: &[f64]| (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(0.0, f64::max));
    let (hf_lo, hf_hi) = range(&hf_s);
    let (our_lo, our_hi) = range(&our_s);
    let mut table = Table::new();
    table.set_header(["one core", "seconds (best–worst)", "MB/s (best)", "docs/s (best)", "tokens/s (best)"]);
    for (name, lo, hi) in [("tokenizers crate", hf_lo, hf_hi), ("curator WordPiece", our_lo, our_hi)] {
        table.add_row([
            name.to_string(),
            format!("{lo:.3}–{hi:.3}"),
            format!("{:.1}", bytes as f64 / lo / 1e6),
            format!("{:.0}", texts.len() as f64 / lo),
            format!("{:.2} M", tokens as f64 / lo / 1e6),
        ]);
    }
    println!(
        "{} documents, {:.1} MB, {tokens} tokens, max_tokens {max_tokens:?}, {rounds} alternated rounds",
        texts.len(),
        bytes as f64 / 1e6
    );
    println!("{table}");
    let ratios: Vec<f64> = hf_s.iter().zip(&our_s).map(|(h, o)| h / o).collect();
    let (r_lo, r_hi) = range(&ratios);
    println!("speed-up per round: {r_lo:.1}×–{r_hi:.1}× (best against best: {:.1}×)", hf_lo / our_lo);
    println!("documents whose ids differ: {mismatches}");
    if mismatches > 0 {
        std::process::exit(1);
    }
    Ok(())
}
