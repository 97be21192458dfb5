//! Inputs and outputs through the real binary: compression, write modes, bad lines.

use crate::support::*;

fn docs() -> Vec<String> {
    (0..40).map(|i| format!("{} ünïcödé end", "word ".repeat(i % 8))).collect()
}

fn jsonl_bytes(texts: &[String]) -> Vec<u8> {
    texts.iter().enumerate().map(|(i, t)| format!("{}\n", serde_json::json!({"id": i, "text": t, "n": i}))).collect::<String>().into_bytes()
}

#[test]
fn compressed_inputs_read_like_plain_and_outputs_compress() {
    let tmp = tempfile::tempdir().unwrap();
    let raw = jsonl_bytes(&docs());
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plain.jsonl"), &raw).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    std::fs::write(dir.join("gz.jsonl.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(dir.join("zs.jsonl.zst"), zstd::encode_all(&raw[..], 3).unwrap()).unwrap();

    let yaml = "source:\n  path: in\nsink:\n  path: out\n  compression: zstd\nbatch_size: 7\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 4}\n";
    let p = write_pipeline(tmp.path(), yaml);
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let out = tmp.path().join("out");
    let plain = read_jsonl(&out.join("plain.jsonl.zst"));
    assert_eq!(read_jsonl(&out.join("gz.jsonl.zst")), plain);
    assert_eq!(read_jsonl(&out.join("zs.jsonl.zst")), plain);
    // Python: len(("word " * (i % 8) + " ünïcödé end").split()) >= 4  <=>  i % 8 >= 2
    let want: Vec<u64> = (0..40).filter(|i| i % 8 >= 2).collect();
    let got: Vec<u64> = plain.iter().map(|d| d["id"].as_u64().unwrap()).collect();
    assert_eq!(got, want, "order or selection wrong");
    assert_eq!(plain[0]["n"], plain[0]["id"], "extra field lost");
}

#[test]
fn write_mode_error_refuses_existing_output() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/a.jsonl"), jsonl_bytes(&docs())).unwrap();
    let p = write_pipeline(tmp.path(), "source:\n  path: in\nsink:\n  path: out\n");
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let again = run_with_guests(&["run", p.to_str().unwrap()]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("sink.path: ") && again.stderr.contains("already holds"), "{}", again.stderr);
}

#[test]
fn strict_mode_names_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/a.jsonl"), jsonl_bytes(&docs())).unwrap();
    std::fs::write(tmp.path().join("in/b.jsonl"), "{\"text\": \"ok\"}\n{\"text\": 42}\n").unwrap();
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 0}\n",
    );
    let run = run_with_guests(&["run", p.to_str().unwrap(), "--workers", "1", "--strict"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("b.jsonl:2: field \"text\": expected a string, found a number"), "{}", run.stderr);
    assert_eq!(read_jsonl(&tmp.path().join("out/a.jsonl")).len(), 40, "file finished before the bad one was lost");
    assert!(!tmp.path().join("out/b.jsonl").exists());
    assert!(temp_leftovers(&tmp.path().join("out")).is_empty());
}

#[test]
fn empty_input_writes_nothing_and_limit_applies() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/empty.jsonl"), "").unwrap();
    std::fs::write(tmp.path().join("in/full.jsonl"), jsonl_bytes(&docs())).unwrap();
    let p = write_pipeline(tmp.path(), "source:\n  path: in\n  limit: 5\nsink:\n  path: out\nbatch_size: 2\n");
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    // A partition that produces nothing writes nothing (and the manifest lists no file for it).
    assert!(!tmp.path().join("out/empty.jsonl").exists());
    assert_eq!(read_jsonl(&tmp.path().join("out/full.jsonl")).len(), 5);
    let manifest = std::fs::read_to_string(tmp.path().join("out/_manifest.json")).unwrap();
    assert!(!manifest.contains("empty.jsonl"), "{manifest}");
}

fn summary(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("_summary.json")).unwrap()).unwrap()
}

fn sorted_docs(paths: &[std::path::PathBuf]) -> Vec<serde_json::Value> {
    let mut all: Vec<serde_json::Value> = paths.iter().flat_map(|p| read_jsonl(p)).collect();
    all.sort_by_key(|d| d["id"].to_string());
    all
}

#[test]
fn jsonl_to_parquet_to_jsonl_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    let lines = [
        r#"{"id": "u1", "text": "Ünïcödé — 日本語 🚀", "lang": "mixed", "score": 0.25, "n": 3, "flag": true, "tags": ["a", "b"], "meta": {"k": [1, {"z": null}]}}"#,
        r#"{"id": "u2", "text": "", "lang": "", "score": 1.0, "n": -7, "flag": false, "tags": [], "meta": {}}"#,
        r#"{"id": "u3", "text": "plain", "n": "three", "only_here": null}"#,
    ];
    std::fs::write(tmp.path().join("in/docs.jsonl"), lines.join("\n") + "\n").unwrap();
    let want: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    // The default codec (zstd) and Parquet's own (snappy, pyarrow's default).
    for (codec, want_codec) in [("", "ZSTD"), ("  compression: snappy\n", "SNAPPY")] {
        let to_pq = write_pipeline(
            tmp.path(),
            &format!(
                "source:\n  path: in\nbatch_size: 2\nsink:\n  path: pq\n  mode: overwrite\n  format: parquet\n  row_group_size: 2\n{codec}"
            ),
        );
        run_with_guests(&["run", to_pq.to_str().unwrap()]).ok();
        let file = std::fs::File::open(tmp.path().join("pq/docs.parquet")).unwrap();
        let meta = parquet::file::reader::SerializedFileReader::new(file)
            .map(|r| parquet::file::reader::FileReader::metadata(&r).clone())
            .unwrap();
        let text = meta.row_group(0).columns().iter().find(|c| c.column_path().string() == "text").unwrap();
        assert!(text.compression().to_string().starts_with(want_codec), "{}", text.compression());
        let back = tmp.path().join("back.yaml");
        std::fs::write(&back, "source:\n  path: pq\nsink:\n  path: back\n  mode: overwrite\n").unwrap();
        run_with_guests(&["run", back.to_str().unwrap()]).ok();
        assert_eq!(read_jsonl(&tmp.path().join("back/docs.jsonl")), want, "{codec}");
    }
    // Snappy is a Parquet codec: a JSONL sink refuses it at planning, naming the field.
    let bad = write_pipeline(tmp.path(), "source:\n  path: in\nsink:\n  path: never\n  compression: snappy\n");
    let run = run_with_guests(&["run", bad.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("sink.compression: format jsonl writes none, gzip, zstd (not snappy)"), "{}", run.stderr);
    assert!(!tmp.path().join("never").exists());
}

#[test]
fn files_per_partition_and_blocksize_partitioning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    for f in 0..5 {
        let texts: Vec<String> = (0..10).map(|i| format!("file {f} doc {i}")).collect();
        std::fs::write(
            dir.join(format!("f{f}.jsonl")),
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| format!("{}\n", serde_json::json!({"id": format!("{f}-{i}"), "text": t})))
                .collect::<String>(),
        )
        .unwrap();
    }
    let p = write_pipeline(tmp.path(), "source:\n  path: in\n  files_per_partition: 2\nsink:\n  path: out\n");
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let out = tmp.path().join("out");
    let s = summary(&out);
    assert_eq!(s["partitions"], 3);
    let files: Vec<std::path::PathBuf> = s["outputs"].as_array().unwrap().iter().map(|o| out.join(o["path"].as_str().unwrap())).collect();
    assert_eq!(files.len(), 3);
    // Groups of files are named part-<task>-<hash of sources>; a lone file keeps its name.
    let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert!(names[0].starts_with("part-00000-") && names[1].starts_with("part-00001-"), "{names:?}");
    assert_eq!(names[2], "f4.jsonl");
    assert_eq!(sorted_docs(&files).len(), 50);

    // One ~2 MB file, 256 KiB blocks: one byte range per block, every line exactly once.
    let big = tmp.path().join("big");
    std::fs::create_dir_all(&big).unwrap();
    let mut content = String::new();
    let mut i = 0;
    while content.len() < 2 << 20 {
        content.push_str(&format!("{}\n", serde_json::json!({"id": i, "text": format!("line {i} {}", "x".repeat(i % 300))})));
        i += 1;
    }
    std::fs::write(big.join("big.jsonl"), &content).unwrap();
    let p = tmp.path().join("blocks.yaml");
    std::fs::write(&p, "source:\n  path: big\n  blocksize: 256KiB\nsink:\n  path: blocks\n").unwrap();
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let out = tmp.path().join("blocks");
    let s = summary(&out);
    let blocks = content.len().div_ceil(256 << 10);
    assert_eq!(s["partitions"].as_u64(), Some(blocks as u64));
    let files: Vec<std::path::PathBuf> = (0..blocks).map(|k| out.join(format!("big.{k:05}.jsonl"))).collect();
    let ids: Vec<u64> = files.iter().flat_map(|f| read_jsonl(f)).map(|d| d["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (0..i as u64).collect::<Vec<_>>(), "documents lost, duplicated or reordered across blocks");
}

#[test]
fn bad_input_is_quarantined_and_valid_documents_arrive() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let mut bad = Vec::new();
    bad.extend_from_slice(b"{\"id\": \"v1\", \"text\": \"valid one\"}\n");
    bad.extend_from_slice(b"{\"id\": \"x1\", \"text\": \"a\xff\xfeb\"}\n"); // line 2: invalid UTF-8
    bad.extend_from_slice(b"this is not json\n"); // line 3
    bad.extend_from_slice(b"{\"id\": \"x2\", \"body\": \"no text\"}\n"); // line 4: missing text
    bad.extend_from_slice(b"{\"id\": \"x3\", \"text\": [\"wrong\", \"type\"]}\n"); // line 5
    bad.extend_from_slice(format!("{{\"id\": \"x4\", \"text\": \"{}\"}}\n", "long ".repeat(400)).as_bytes()); // line 6
    bad.extend_from_slice(b"{\"id\": \"v2\", \"text\": \"valid two\"}\n");
    std::fs::write(dir.join("defects.jsonl"), &bad).unwrap();
    // A truncated gzip file: the documents before the cut arrive.
    let lines: String =
        (0..3000).map(|i| format!("{}\n", serde_json::json!({"id": format!("g{i}"), "text": format!("gzip document {i}")}))).collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, lines.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    std::fs::write(dir.join("truncated.jsonl.gz"), &gz[..gz.len() * 2 / 3]).unwrap();

    let p = write_pipeline(tmp.path(), "source:\n  path: in\n  max_line_bytes: 1KiB\nsink:\n  path: out\n");
    let run = run_with_guests(&["run", p.to_str().unwrap()]);
    run.ok();
    let out = tmp.path().join("out");
    let kept: Vec<String> = read_jsonl(&out.join("defects.jsonl")).iter().map(|d| d["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(kept, vec!["v1", "v2"]);
    let rejected = read_jsonl(&out.join("_rejected/defects.jsonl.jsonl"));
    let got: Vec<(u64, String)> =
        rejected.iter().map(|r| (r["line"].as_u64().unwrap(), r["reason"].as_str().unwrap().to_string())).collect();
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0], (2, "invalid UTF-8 at byte 23".to_string()));
    assert!(got[1].0 == 3 && got[1].1.starts_with("not a JSON object"), "{got:?}");
    assert_eq!(got[2], (4, "field \"text\": missing".to_string()));
    assert_eq!(got[3], (5, "field \"text\": expected a string, found an array".to_string()));
    assert_eq!(got[4], (6, "line longer than max_line_bytes (1024 bytes)".to_string()));
    assert!(rejected.iter().all(|r| r["source"].as_str().unwrap().ends_with("defects.jsonl")));

    let gz_docs = read_jsonl(&out.join("truncated.jsonl"));
    assert!(gz_docs.len() > 500 && gz_docs.len() < 3000, "{}", gz_docs.len());
    for (i, d) in gz_docs.iter().enumerate() {
        assert_eq!(d["id"], format!("g{i}"));
    }
    let gz_rejects = read_jsonl(&out.join("_rejected/truncated.jsonl.jsonl"));
    assert_eq!(gz_rejects.len(), 1);
    assert!(gz_rejects[0]["reason"].as_str().unwrap().contains("truncated or corrupt"), "{gz_rejects:?}");
    assert_eq!(summary(&out)["rejected"], 6);
}

#[test]
fn write_modes_and_output_manifest() {
    use sha2::{Digest, Sha256};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.jsonl"), jsonl_bytes(&docs())).unwrap();
    std::fs::write(dir.join("b.jsonl"), jsonl_bytes(&docs()[..5])).unwrap();
    let yaml = |mode: &str| format!("source:\n  path: in\nsink:\n  path: out\n  mode: {mode}\n");
    let p = write_pipeline(tmp.path(), &yaml("error"));
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let out = tmp.path().join("out");
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("_manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    // Each file's checksum, XXH3-128 unless the sink asks for SHA-256, is over its bytes.
    let checked = |out: &std::path::Path, checksum: &dyn Fn(&[u8]) -> String| {
        let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("_manifest.json")).unwrap()).unwrap();
        for f in manifest["files"].as_array().unwrap() {
            let bytes = std::fs::read(out.join(f["path"].as_str().unwrap())).unwrap();
            assert_eq!(f["checksum"].as_str().unwrap(), checksum(&bytes));
            assert_eq!(f["bytes"].as_u64().unwrap(), bytes.len() as u64);
        }
    };
    checked(&out, &|b| format!("xxh3-128:{:032x}", xxhash_rust::xxh3::xxh3_128(b)));
    assert_eq!(files[1]["documents"], 5);

    // ignore: existing outputs are skipped, the missing one is made.
    std::fs::remove_file(out.join("b.jsonl")).unwrap();
    write_pipeline(tmp.path(), &yaml("ignore"));
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let s = summary(&out);
    assert_eq!((s["partitions"].as_u64(), s["skipped_partitions"].as_u64()), (Some(1), Some(1)));
    assert_eq!(read_jsonl(&out.join("b.jsonl")).len(), 5);

    // append: new names beside the old files.
    write_pipeline(tmp.path(), &yaml("append"));
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    assert_eq!(read_jsonl(&out.join("a.1.jsonl")).len(), 40);
    assert_eq!(read_jsonl(&out.join("a.jsonl")).len(), 40);
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("_manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["files"].as_array().unwrap().len(), 4);

    // overwrite: the appended files listed in the manifest are removed.
    write_pipeline(tmp.path(), &yaml("overwrite"));
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    assert!(!out.join("a.1.jsonl").exists());
    assert!(!out.join("b.1.jsonl").exists());
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("_manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["files"].as_array().unwrap().len(), 2);

    // checksum: sha256, what `sha256sum` prints.
    write_pipeline(tmp.path(), &format!("{}  checksum: sha256\n", yaml("overwrite")));
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    checked(&out, &|b| format!("sha256:{}", hex::encode(Sha256::digest(b))));
}

/// A 1 GB JSONL file read with `blocksize: 64MB`: memory stays near one block per worker
/// (in fact far below: batches stream through bounded queues).
#[test]
fn one_gigabyte_file_in_64mb_blocks_keeps_memory_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"];
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("big.jsonl")).unwrap());
    let mut written = 0usize;
    let mut i = 0usize;
    while written < 1 << 30 {
        let n = 20 + (i * 7919) % 120;
        let text: Vec<&str> = (0..n).map(|k| words[(i + k * 31) % words.len()]).collect();
        let line = format!("{}\n", serde_json::json!({"id": i, "text": text.join(" ")}));
        std::io::Write::write_all(&mut f, line.as_bytes()).unwrap();
        written += line.len();
        i += 1;
    }
    drop(f);
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in\n  blocksize: 64MB\nsink:\n  path: out\n  compression: zstd\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 80}\n",
    );
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let s = summary(&tmp.path().join("out"));
    assert_eq!(s["partitions"].as_u64(), Some(written.div_ceil(64 << 20) as u64));
    assert_eq!(s["docs_in"].as_u64(), Some(i as u64));
    let workers = s["workers"].as_f64().unwrap();
    let peak = s["peak_rss_mb"].as_f64().unwrap();
    eprintln!("1 GiB in 64 MiB blocks: peak RSS {peak:.0} MiB with {workers} workers");
    assert!(peak < 64.0 * workers + 128.0, "peak RSS {peak:.0} MiB exceeds one 64 MiB block per worker (+128 MiB)");
}

#[test]
fn a_file_that_yields_nothing_warns_naming_it_and_compressed_bytes_are_never_cut_as_text() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let raw = jsonl_bytes(&docs());
    // Compressed under a plain name, in a run that cuts plain files into 1 KB byte ranges.
    std::fs::write(dir.join("zipped.jsonl"), zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
    std::fs::write(dir.join("plain.jsonl"), &raw).unwrap();
    std::fs::write(dir.join("garbage.jsonl"), b"this is not json\nnor is this\n").unwrap();
    let p = write_pipeline(tmp.path(), "source:\n  path: in\n  blocksize: 1KB\nsink:\n  path: out\n");
    let run = run_with_guests(&["run", p.to_str().unwrap()]);
    run.ok();
    assert!(run.stderr.contains("garbage.jsonl: no document could be read from it (2 rejected"), "{}", run.stderr);
    assert!(!run.stderr.contains("zipped.jsonl: no document"), "{}", run.stderr);
    let n = docs().len();
    assert_eq!(output_docs(&tmp.path().join("out"), ".jsonl").len(), 2 * n, "both good files read whole");
    // Under --strict the same file fails the run, naming it.
    let strict_p = tmp.path().join("strict.yaml");
    std::fs::write(&strict_p, format!("source:\n  path: {}\nsink:\n  path: out-strict\n", dir.display())).unwrap();
    let strict = run_with_guests(&["run", strict_p.to_str().unwrap(), "--strict"]);
    assert_ne!(strict.code, 0);
    assert!(strict.stderr.contains("garbage.jsonl:1"), "{}", strict.stderr);
}

/// A CSV source (a format added through the format seam) through the real binary: files as
/// Python's `csv` module writes them (quoted commas, newlines and quotes in fields), a TSV
/// compressed with gzip, read by `format: csv` from a directory; a directory read without it
/// says which format its files are.
#[test]
fn csv_and_tsv_files_are_read_as_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let texts = docs();
    let script = r#"
import csv, gzip, json, sys
texts = json.load(sys.stdin)
with open(sys.argv[1] + "/a.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "text", "lang"])
    for i, t in enumerate(texts):
        w.writerow([f"a{i}", t + (', "quoted",\nsecond line' if i % 3 == 0 else ""), "en"])
with gzip.open(sys.argv[1] + "/b.tsv.gz", "wt", newline="") as f:
    w = csv.writer(f, delimiter="\t")
    w.writerow(["text", "url"])
    for i, t in enumerate(texts):
        w.writerow([t, f"http://b/{i}"])
"#;
    let mut py = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3 writes the CSV files");
    std::io::Write::write_all(py.stdin.as_mut().unwrap(), serde_json::to_string(&texts).unwrap().as_bytes()).unwrap();
    assert!(py.wait().unwrap().success());

    let unnamed = write_pipeline(tmp.path(), "source:\n  path: in\nsink:\n  path: out\nstages: []\n");
    let run = run_with_guests(&["run", unnamed.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("it holds 2 csv file(s): set the source's `format: csv`"), "{}", run.stderr);

    let yaml =
        "source:\n  path: in\n  format: csv\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 4}\n";
    let p = write_pipeline(tmp.path(), yaml);
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    let a = read_jsonl(&tmp.path().join("out/a.jsonl"));
    let b = read_jsonl(&tmp.path().join("out/b.jsonl"));
    // word_count_filter keeps i % 8 >= 2 (see the first test); the suffix adds words to a's.
    let kept_b: Vec<String> = (0..40).filter(|i| i % 8 >= 2).map(|i| format!("http://b/{i}")).collect();
    assert_eq!(b.iter().map(|d| d["url"].as_str().unwrap().to_string()).collect::<Vec<_>>(), kept_b);
    let first = a.iter().find(|d| d["id"] == "a3").expect("a3 kept");
    assert_eq!(first["text"].as_str().unwrap(), format!("{}, \"quoted\",\nsecond line", texts[3]));
    assert_eq!(first["lang"], "en");
    let a_ids: Vec<&str> = a.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert!(a_ids.contains(&"a0") && !a_ids.contains(&"a1"), "{a_ids:?}");
}
