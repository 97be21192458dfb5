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
    assert!(again.stderr.contains("a.jsonl already exists (sink.mode is \"error\""), "{}", again.stderr);
}

#[test]
fn bad_line_names_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/a.jsonl"), jsonl_bytes(&docs())).unwrap();
    std::fs::write(tmp.path().join("in/b.jsonl"), "{\"text\": \"ok\"}\n{\"text\": 42}\n").unwrap();
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in\nsink:\n  path: out\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 0}\n",
    );
    let run = run_with_guests(&["run", p.to_str().unwrap(), "--workers", "1"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("b.jsonl:2: field \"text\": expected a string, found a number"), "{}", run.stderr);
    assert_eq!(read_jsonl(&tmp.path().join("out/a.jsonl")).len(), 40, "file finished before the bad one was lost");
    assert!(!tmp.path().join("out/b.jsonl").exists());
    assert!(temp_leftovers(&tmp.path().join("out")).is_empty());
}

#[test]
fn empty_input_gives_empty_output_and_limit_applies() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/empty.jsonl"), "").unwrap();
    std::fs::write(tmp.path().join("in/full.jsonl"), jsonl_bytes(&docs())).unwrap();
    let p = write_pipeline(tmp.path(), "source:\n  path: in\n  limit: 5\nsink:\n  path: out\nbatch_size: 2\n");
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    assert!(read_jsonl(&tmp.path().join("out/empty.jsonl")).is_empty());
    assert_eq!(read_jsonl(&tmp.path().join("out/full.jsonl")).len(), 5);
}
