//! The README's quickstart pipeline, on the bundled data.

use crate::support::*;

#[test]
fn quickstart_pipeline_filters_and_normalises() {
    let tmp = tempfile::tempdir().unwrap();
    let data = root().join("examples/quickstart/data");
    let shipped = std::fs::read_to_string(root().join("examples/quickstart/pipeline.yaml")).unwrap();
    // Same pipeline, reading the bundled data and writing into a temp dir.
    let yaml = shipped
        .replace("path: data ", &format!("path: {} ", data.display()))
        .replace("path: out ", &format!("path: {} ", tmp.path().join("out").display()));
    assert_ne!(yaml, shipped, "pipeline paths not rewritten");
    let p = write_pipeline(tmp.path(), &yaml);
    let run = run_with_guests(&["run", p.to_str().unwrap()]);
    run.ok();

    let mut input = Vec::new();
    for f in ["docs-000.jsonl", "docs-001.jsonl.gz"] {
        input.extend(read_jsonl(&data.join(f)));
    }
    let mut output = Vec::new();
    for f in ["docs-000.jsonl", "docs-001.jsonl"] {
        output.extend(read_jsonl(&tmp.path().join("out").join(f)));
    }
    assert!(!output.is_empty(), "no documents kept");
    assert!(output.len() < input.len(), "nothing was filtered: {} of {}", output.len(), input.len());
    let by_id: std::collections::HashMap<&str, &serde_json::Value> = input.iter().map(|d| (d["id"].as_str().unwrap(), d)).collect();
    let mut normalised = 0;
    for d in &output {
        let text = d["text"].as_str().unwrap();
        assert!(text.split_whitespace().count() >= 50, "kept a short document: {}", d["id"]);
        let original = by_id[d["id"].as_str().unwrap()];
        assert_eq!(d["source"], original["source"], "metadata lost");
        assert_eq!(d["url"], original["url"], "metadata lost");
        if text != original["text"].as_str().unwrap() {
            normalised += 1;
            assert!(!text.contains('\u{308}'), "combining diaeresis left in NFC output");
        }
    }
    // Every kept input with >= 50 words is present (ids are unique).
    let expected = input.iter().filter(|d| d["text"].as_str().unwrap().split_whitespace().count() >= 50).count();
    assert_eq!(output.len(), expected);
    assert!(normalised > 0, "the NFD documents in the sample were not normalised");
    assert!(run.stdout.contains("word_count_filter"), "summary table missing:\n{}", run.stdout);
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["docs_in"].as_u64().unwrap() as usize, input.len());
    assert_eq!(summary["docs_out"].as_u64().unwrap() as usize, output.len());
}
