//! Tokenized sinks: `format: megatron` and `format: datatrove_tokens` byte for byte against
//! the tools' own writers (`scripts/parity/tokens_reference.py`: megatron-core's
//! `IndexedDatasetBuilder` as `preprocess_data.py --append-eod` drives it, its merge, its
//! `IndexedDataset` reading ours back; datatrove's `DocumentTokenizer`) on 13,500 real
//! documents in 14 languages, for a byte-level BPE and a SentencePiece-Unigram
//! `tokenizer.json`; resumption after `kill -9`; what planning refuses.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// The multilingual sample as two JSONL files (`a.jsonl`, `b.jsonl`) in `dir`: two
/// partitions, two datasets to merge.
fn two_inputs(dir: &Path) -> Vec<PathBuf> {
    let docs = read_jsonl(&root().join("tests/parity/tokenizer_sample.jsonl.gz"));
    assert!(docs.len() >= 10_000, "{} documents", docs.len());
    let half = docs.len() / 2;
    std::fs::create_dir_all(dir).unwrap();
    [("a.jsonl", &docs[..half]), ("b.jsonl", &docs[half..])]
        .into_iter()
        .map(|(name, part)| {
            let p = dir.join(name);
            let lines: Vec<String> = part.iter().map(|d| serde_json::json!({"text": d["text"]}).to_string() + "\n").collect();
            std::fs::write(&p, lines.concat()).unwrap();
            p
        })
        .collect()
}

fn sink_pipeline(dir: &Path, input: &Path, out: &Path, format: &str, tokens: &str) -> PathBuf {
    write_pipeline(
        dir,
        &format!(
            "source:\n  path: {}\nsink:\n  path: {}\n  format: {format}\n  mode: overwrite\n  tokens: {tokens}\n",
            input.display(),
            out.display()
        ),
    )
}

fn reference(args: &[&str]) -> String {
    let out = Command::new("python3").arg(root().join("scripts/parity/tokens_reference.py")).args(args).output().expect("python3 runs");
    assert!(out.status.success(), "tokens_reference.py {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn same_bytes(ours: &Path, theirs: &Path) {
    let (a, b) = (std::fs::read(ours).unwrap(), std::fs::read(theirs).unwrap());
    let first = a.iter().zip(&b).position(|(x, y)| x != y);
    assert!(
        a == b,
        "{} ({} bytes) differs from {} ({} bytes), first at byte {first:?}",
        ours.display(),
        a.len(),
        theirs.display(),
        b.len()
    );
}

#[test]
fn megatron_and_datatrove_files_equal_the_tools_own() {
    if !needs(Need::TokenTools) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let inputs_dir = tmp.path().join("in");
    let inputs = two_inputs(&inputs_dir);
    let tokenizers = root().join("tests/parity/tokenizers");
    for (name, file, eos) in [("bpe", "bpe.json", "<|endoftext|>"), ("unigram", "deberta-v3-unigram.json", "[SEP]")] {
        let tok = tokenizers.join(file);
        let tok_s = tok.to_str().unwrap();
        let tokens = format!("{{tokenizer: {tok_s}, eos_token: \"{eos}\"}}");
        let work = tmp.path().join(name);
        std::fs::create_dir_all(&work).unwrap();

        // Megatron: each partition's .bin/.idx, megatron-core reading ours back, the merge.
        let out = work.join("megatron");
        let run: Run = host().arg("run").arg(sink_pipeline(&work, &inputs_dir, &out, "megatron", &tokens)).output().unwrap().into();
        run.ok();
        assert!(run.stdout.contains("tokens: "), "{}", run.stdout);
        for input in &inputs {
            let stem = input.file_stem().unwrap().to_str().unwrap();
            let theirs = work.join(format!("ref-{stem}"));
            reference(&["megatron", "--tokenizer", tok_s, "--eos", eos, "--out", theirs.to_str().unwrap(), input.to_str().unwrap()]);
            for ext in ["bin", "idx"] {
                same_bytes(&out.join(format!("{stem}.{ext}")), &theirs.with_extension(ext));
            }
            let read = reference(&["read", "--tokenizer", tok_s, "--eos", eos, out.join(stem).to_str().unwrap(), input.to_str().unwrap()]);
            assert!(read.contains("\"documents\": 6750"), "{read}");
        }
        let merged = work.join("merged");
        host().args(["megatron-merge", "--input"]).arg(&out).arg("--output-prefix").arg(&merged).output().map(Run::from).unwrap().ok();
        let prefixes: Vec<String> = ["a", "b"].iter().map(|s| out.join(s).to_str().unwrap().to_string()).collect();
        let theirs = work.join("ref-merged");
        reference(&["merge", "--out", theirs.to_str().unwrap(), &prefixes[0], &prefixes[1]]);
        for ext in ["bin", "idx"] {
            same_bytes(&merged.with_extension(ext), &theirs.with_extension(ext));
        }

        // datatrove: .ds, .ds.index and .ds.metadata of DocumentTokenizer(shuffle_documents=False),
        // of DocumentTokenizer(seed=1234) (documents shuffled by numpy's default_rng), and of
        // the same cut into files of about 50,000 tokens (max_tokens_per_file).
        // Then chunks of 2,048 tokens shuffled after the documents, or instead of them, cut
        // into files or not (shuffle_chunk_size, shuffle_documents).
        let cases: [(Option<&str>, Option<&str>, &str); 6] = [
            (None, None, ""),
            (Some("1234"), None, ""),
            (Some("1234"), Some("50000"), ""),
            (Some("7"), None, "2048"),
            (Some("7"), Some("50000"), "2048"),
            (Some("7"), None, "2048 only"),
        ];
        for (seed, max, chunk) in cases {
            let tag = format!("{}-{}-{}", seed.unwrap_or("none"), max.unwrap_or("whole"), chunk.replace(' ', "_"));
            let out = work.join(format!("datatrove-{tag}"));
            let mut settings = format!("tokenizer: {tok_s}, eos_token: \"{eos}\"");
            if let Some(s) = seed {
                settings += &format!(", seed: {s}");
            }
            if let Some(m) = max {
                settings += &format!(", max_tokens_per_file: {m}");
            }
            if let Some(size) = chunk.split(' ').next().filter(|c| !c.is_empty()) {
                settings += &format!(", shuffle_chunk_size: {size}");
            }
            if chunk.ends_with("only") {
                settings += ", shuffle_documents: false";
            }
            let tokens = format!("{{{settings}}}");
            host()
                .arg("run")
                .arg(sink_pipeline(&work, &inputs_dir, &out, "datatrove_tokens", &tokens))
                .output()
                .map(Run::from)
                .unwrap()
                .ok();
            for input in &inputs {
                let stem = input.file_stem().unwrap().to_str().unwrap();
                let theirs = work.join(format!("ref-dt-{stem}-{tag}"));
                let mut args = vec!["datatrove", "--tokenizer", tok_s, "--eos", eos, "--out", theirs.to_str().unwrap()];
                if let Some(s) = seed {
                    args.extend(["--seed", s]);
                }
                if let Some(m) = max {
                    args.extend(["--max-tokens-per-file", m]);
                }
                if let Some(size) = chunk.split(' ').next().filter(|c| !c.is_empty()) {
                    args.extend(["--shuffle-chunk-size", size]);
                }
                if chunk.ends_with("only") {
                    args.push("--no-shuffle-documents");
                }
                args.push(input.to_str().unwrap());
                reference(&args);
                // Their files, each beside ours of the same split number.
                let mut files: Vec<String> =
                    std::fs::read_dir(&theirs).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
                files.sort();
                let splits = files.iter().filter(|n| n.ends_with(".ds")).count();
                assert_eq!(splits > 1, max.is_some(), "{tag}: {files:?}");
                for name in &files {
                    same_bytes(&out.join(name.replacen("out", stem, 1)), &theirs.join(name));
                }
                let ours = std::fs::read_dir(&out).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with(stem)).count();
                assert_eq!(ours, files.len(), "{tag}: {stem}: no file of ours beyond theirs");
            }
            assert!(temp_leftovers(&out).is_empty(), "{:?}", temp_leftovers(&out));
        }
    }
}

/// `save_loss_metadata`: every `.ds.loss` (and the `.ds` its ranges cut) byte-identical to
/// `DocumentTokenizer(save_loss_metadata=True)`'s on real multilingual documents, a third of
/// them with `no_loss_ranges` (character positions in CJK and Cyrillic text too, ranges that
/// reach the end and cut the document's tail, two ranges), unshuffled, shuffled, and shuffled
/// in chunks cut into files.
#[test]
fn datatrove_loss_masks_equal_document_tokenizers() {
    if !needs(Need::TokenTools) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let docs = read_jsonl(&root().join("tests/parity/tokenizer_sample.jsonl.gz"));
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    let input = tmp.path().join("in/docs.jsonl");
    let lines: Vec<String> = docs
        .iter()
        .take(3000)
        .enumerate()
        .map(|(i, d)| {
            let text = d["text"].as_str().unwrap();
            let n = text.chars().count();
            let ranges = match i % 6 {
                0 => serde_json::json!([[0, n.min(20)]]),
                1 => serde_json::json!([[n / 3, n / 2]]),
                2 => serde_json::json!([[n / 2, n]]),
                3 => serde_json::json!([[1, n / 4], [n / 2, n / 2 + 7]]),
                _ => serde_json::Value::Null,
            };
            let mut doc = serde_json::json!({"text": text, "url": format!("https://x/{i}")});
            if !ranges.is_null() {
                doc["no_loss_ranges"] = ranges;
            }
            doc.to_string() + "\n"
        })
        .collect();
    std::fs::write(&input, lines.concat()).unwrap();
    let tok = root().join("tests/parity/tokenizers/bpe.json");
    let tok_s = tok.to_str().unwrap();
    for (tag, extra, args) in [
        ("unshuffled", "", vec![]),
        ("shuffled", ", seed: 3", vec!["--seed", "3"]),
        (
            "chunks",
            ", seed: 3, shuffle_chunk_size: 2048, max_tokens_per_file: 200000",
            vec!["--seed", "3", "--shuffle-chunk-size", "2048", "--max-tokens-per-file", "200000"],
        ),
    ] {
        let out = tmp.path().join(format!("ours-{tag}"));
        let tokens = format!("{{tokenizer: {tok_s}, eos_token: \"<|endoftext|>\", save_loss_metadata: true{extra}}}");
        host()
            .arg("run")
            .arg(sink_pipeline(tmp.path(), &tmp.path().join("in"), &out, "datatrove_tokens", &tokens))
            .output()
            .map(Run::from)
            .unwrap()
            .ok();
        let theirs = tmp.path().join(format!("theirs-{tag}"));
        let mut a = vec!["datatrove", "--tokenizer", tok_s, "--eos", "<|endoftext|>", "--save-loss", "--out", theirs.to_str().unwrap()];
        a.extend(args);
        a.push(input.to_str().unwrap());
        reference(&a);
        let mut files: Vec<String> =
            std::fs::read_dir(&theirs).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        files.sort();
        assert!(files.iter().any(|f| f.ends_with(".ds.loss")), "{tag}: {files:?}");
        for name in &files {
            same_bytes(&out.join(name.replacen("out", "docs", 1)), &theirs.join(name));
        }
        let zeros = std::fs::read(out.join("docs.ds.loss")).unwrap().iter().filter(|&&b| b == 0).count();
        assert!(zeros > 10_000, "{tag}: {zeros} tokens without loss");
        assert!(temp_leftovers(&out).is_empty(), "{:?}", temp_leftovers(&out));
    }
    // The same documents through a Parquet file, where `no_loss_ranges` is a column of its own
    // (lists of pairs): the same files.
    let to_parquet = tmp.path().join("to-parquet.yaml");
    std::fs::write(
        &to_parquet,
        format!(
            "source: {{path: {}}}\nsink: {{path: {}, format: parquet}}\n",
            tmp.path().join("in").display(),
            tmp.path().join("pq").display()
        ),
    )
    .unwrap();
    host().arg("run").arg(&to_parquet).output().map(Run::from).unwrap().ok();
    let out = tmp.path().join("ours-parquet");
    let tokens = format!("{{tokenizer: {tok_s}, eos_token: \"<|endoftext|>\", save_loss_metadata: true}}");
    host()
        .arg("run")
        .arg(sink_pipeline(tmp.path(), &tmp.path().join("pq"), &out, "datatrove_tokens", &tokens))
        .output()
        .map(Run::from)
        .unwrap()
        .ok();
    for ext in ["", ".index", ".loss"] {
        same_bytes(&out.join(format!("docs.ds{ext}")), &tmp.path().join(format!("ours-unshuffled/docs.ds{ext}")));
    }
}

/// Every file of a run's output directory but its run records, by name.
fn dataset_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(['_', '.']))
        .map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn a_killed_megatron_run_resumes_to_the_same_files() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs_dir = tmp.path().join("in");
    // Four partitions of real text.
    let docs = read_jsonl(&root().join("tests/parity/tokenizer_sample.jsonl.gz"));
    std::fs::create_dir_all(&inputs_dir).unwrap();
    for (k, chunk) in docs.chunks(docs.len().div_ceil(4)).enumerate() {
        let lines: Vec<String> = chunk.iter().map(|d| serde_json::json!({"text": d["text"]}).to_string() + "\n").collect();
        std::fs::write(inputs_dir.join(format!("p{k}.jsonl")), lines.concat()).unwrap();
    }
    let tok = root().join("tests/parity/tokenizers/bpe.json");
    let tokens = format!("{{tokenizer: {}, eos_token: \"<|endoftext|>\"}}", tok.display());
    let whole = tmp.path().join("whole");
    std::fs::create_dir_all(&whole).unwrap();
    let clean = whole.join("out");
    let pipeline = sink_pipeline(&whole, &inputs_dir, &clean, "megatron", &tokens);
    let plan: Run = host().arg("plan").arg(&pipeline).arg("--json").output().unwrap().into();
    let estimate: serde_json::Value = serde_json::from_str(&plan.ok().stdout).unwrap();
    let run: Run = host().arg("run").arg(&pipeline).output().unwrap().into();
    let tokens_line = run.ok().stdout.lines().find(|l| l.starts_with("tokens:")).map(str::to_string).unwrap_or_default();
    let want = dataset_files(&clean);
    assert_eq!(want.len(), 8, "{:?}", want.iter().map(|f| &f.0).collect::<Vec<_>>());
    // `plan` estimates the output from a sample: within 25 % of what the run wrote.
    let written: u64 = want.iter().map(|f| f.1.len() as u64).sum();
    let run_tokens: u64 = tokens_line.split_whitespace().nth(1).and_then(|t| t.parse().ok()).unwrap_or(0);
    let near = |est: &serde_json::Value, real: u64| est.as_f64().is_some_and(|e| (e - real as f64).abs() <= 0.25 * real as f64);
    assert!(
        near(&estimate["output_estimate"]["bytes"], written),
        "estimate {} against {written} bytes written",
        estimate["output_estimate"]
    );
    assert!(near(&estimate["output_estimate"]["tokens"], run_tokens), "estimate {} against {tokens_line:?}", estimate["output_estimate"]);

    // Killed after a partition's .bin is in place and before its .idx is, then after a
    // partition's journal line: each time the resumed run ends with the same files.
    for at in ["megatron-bin-committed", "output-partition"] {
        let dir = tmp.path().join(at);
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out");
        let p = write_pipeline(
            &dir,
            &format!(
                "source:\n  path: {}\nsink:\n  path: {}\n  format: megatron\n  tokens: {tokens}\n",
                inputs_dir.display(),
                out.display()
            ),
        );
        let killed: Run = host().arg("run").arg(&p).env("CURATOR_DEDUP_CRASH_AT", at).output().unwrap().into();
        assert_ne!(killed.code, 0, "the run at {at} was not killed: {}", killed.stderr);
        let resumed: Run = host().arg("run").arg(&p).output().unwrap().into();
        resumed.ok();
        if at == "output-partition" {
            assert!(!resumed.stdout.contains(" 0 resumed)"), "the killed run's committed partition was run again: {}", resumed.stdout);
        }
        assert_eq!(dataset_files(&out), want, "after a kill at {at}");
        assert!(temp_leftovers(&out).is_empty(), "{:?}", temp_leftovers(&out));
    }
}

#[test]
fn tokenized_sinks_refuse_bad_settings_at_planning() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    write_docs(&input, &["one two three".to_string()]);
    // A word-level tokenizer of 70,000 tokens: past uint16.
    let big = tmp.path().join("big");
    std::fs::create_dir_all(&big).unwrap();
    let vocab: serde_json::Map<String, serde_json::Value> = (0..70_000).map(|i| (format!("w{i}"), serde_json::json!(i))).collect();
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "w0"}
    });
    std::fs::write(big.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    std::fs::write(big.join("tokenizer_config.json"), r#"{"eos_token": "w1"}"#).unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let bpe = root().join("tests/parity/tokenizers/bpe.json");
    let cases: Vec<(&str, String, &str)> = vec![
        ("megatron", format!("{{tokenizer: {}}}", empty.display()), "sink.tokens.tokenizer: "),
        ("megatron", format!("{{tokenizer: {}, dtype: uint16}}", big.display()), "has 70000 tokens: their ids do not fit uint16"),
        ("megatron", format!("{{tokenizer: {}}}", bpe.display()), "sink.tokens.eos_token: append_eod is on"),
        ("megatron", format!("{{tokenizer: {}, eos_token: \"</s>\"}}", bpe.display()), "\"</s>\" is not a token of"),
        (
            "datatrove_tokens",
            format!("{{tokenizer: {}, append_eod: true}}", bpe.display()),
            "sink.tokens.append_eod: datatrove appends eos_token",
        ),
        ("jsonl", format!("{{tokenizer: {}}}", bpe.display()), "sink.tokens: format jsonl writes no token ids"),
        (
            "megatron",
            format!("{{tokenizer: {}, eos_token: \"<|endoftext|>\", seed: 1}}", bpe.display()),
            "sink.tokens.seed: Megatron shuffles at training time",
        ),
        (
            "megatron",
            format!("{{tokenizer: {}, eos_token: \"<|endoftext|>\", max_tokens_per_file: 1000}}", bpe.display()),
            "sink.tokens.max_tokens_per_file: datatrove_tokens only: a megatron sink writes one .bin/.idx per partition",
        ),
        (
            "datatrove_tokens",
            format!("{{tokenizer: {}, max_tokens_per_file: 1000}}", bpe.display()),
            "sink.tokens.max_tokens_per_file: applies to the shuffled output",
        ),
        (
            "datatrove_tokens",
            format!("{{tokenizer: {}, seed: 1, max_tokens_per_file: 0}}", bpe.display()),
            "sink.tokens.max_tokens_per_file: must be at least 1",
        ),
        (
            "datatrove_tokens",
            format!("{{tokenizer: {}, seed: 1, shuffle_documents: false}}", bpe.display()),
            "sink.tokens.shuffle_documents: false with no shuffle_chunk_size shuffles nothing",
        ),
        (
            "datatrove_tokens",
            format!("{{tokenizer: {}, shuffle_chunk_size: 2048}}", bpe.display()),
            "sink.tokens.shuffle_chunk_size: applies to the shuffled output",
        ),
    ];
    for (format, tokens, want) in cases {
        let p = sink_pipeline(tmp.path(), &input, &tmp.path().join("out"), format, &tokens);
        let run: Run = host().arg("run").arg(&p).output().unwrap().into();
        assert_eq!(run.code, 2, "{format} {tokens}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{format} {tokens}: want {want:?} in\n{}", run.stderr);
        assert!(!tmp.path().join("out").exists(), "a refused plan wrote its output directory");
    }
    // Without dtype, Megatron's own pick for 70,000 tokens: int32 (dtype code 4).
    let out = tmp.path().join("wide");
    let p = sink_pipeline(tmp.path(), &input, &out, "megatron", &format!("{{tokenizer: {}}}", big.display()));
    host().arg("run").arg(&p).output().map(Run::from).unwrap().ok();
    let idx = std::fs::read(out.join("in.idx")).unwrap();
    assert_eq!(idx[17], 4);
    assert_eq!(
        std::fs::read(out.join("in.bin")).unwrap(),
        [0u32, 0, 0, 1].iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>(),
        "three unknown words and the eod"
    );

    // A tokenizer path relative to the pipeline file, the pipeline named by a relative path
    // from another directory.
    let rel = tmp.path().join("rel");
    std::fs::create_dir_all(rel.join("tok")).unwrap();
    std::fs::copy(big.join("tokenizer.json"), rel.join("tok/tokenizer.json")).unwrap();
    std::fs::copy(big.join("tokenizer_config.json"), rel.join("tok/tokenizer_config.json")).unwrap();
    write_pipeline(
        &rel,
        &format!("source:\n  path: {}\nsink:\n  path: out\n  format: megatron\n  tokens: {{tokenizer: tok}}\n", input.display()),
    );
    host().current_dir(tmp.path()).args(["run", "rel/pipeline.yaml"]).output().map(Run::from).unwrap().ok();
    assert_eq!(std::fs::read(rel.join("out/in.bin")).unwrap(), std::fs::read(out.join("in.bin")).unwrap());
}
