//! Nemotron-CC's pre- and post-processing through the real binary, composed as NeMo Curator's
//! tutorial composes it: a stage's `text_field` (the model's answer as the text it works on),
//! `document_splitter` / `document_joiner`, and the Diverse-QA and knowledge-list clean-ups.
//! The generation itself (`llm_generate`'s presets against a real server) is in `services.rs`.

use std::path::Path;

use crate::support::*;

fn write_rows(path: &Path, rows: &[serde_json::Value]) {
    let lines: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn run_pipeline(dir: &Path, input: &Path, stages: &str) -> Vec<serde_json::Value> {
    let yaml = format!("source:\n  path: {}\nsink:\n  path: out\nstages:\n{stages}", input.display());
    run_with_guests(&["run", write_pipeline(dir, &yaml).to_str().unwrap()]).ok();
    read_jsonl(&dir.join("out").join(input.file_name().unwrap()))
}

#[test]
fn wikipedia_answers_are_cleaned_and_joined_per_document_as_nemo_does() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("segments.jsonl");
    // What the generation stage leaves: a document's segments, each with the model's answer.
    let answer = |s: &str| format!("Here is a paraphrased version:\n\n{s}");
    write_rows(
        &input,
        &[
            serde_json::json!({"id": "a", "text": "first line", "segment_id": 1, "rephrased": answer("The **second** part.")}),
            serde_json::json!({"id": "a", "text": "zeroth line", "segment_id": 0, "rephrased": answer("\"A quoted start.\"")}),
            serde_json::json!({"id": "b", "text": "other", "segment_id": 0, "rephrased": "Sure! I cannot help."}),
            serde_json::json!({"id": "a", "text": "last line", "segment_id": 2, "rephrased": answer("A [link](http://x) end.")}),
        ],
    );
    let on = |plugin: &str, params: &str| format!("  - plugin: {plugin}\n    text_field: rephrased\n    params: {params}\n");
    let stages = [
        on("markdown_remover", "{}"),
        on("substring_filter", "{substring: 'Here is a paraphrased version:', position: prefix}"),
        on("slicer", "{left: 'Here is a paraphrased version:', include_left: false, strip: true}"),
        on("quotation_remover", "{}"),
        on("document_joiner", "{separator: \"\\n\"}"),
    ]
    .concat();
    let out = run_pipeline(tmp.path(), &input, &stages);
    // b's answer lacks the prefix: dropped. a's three answers, cleaned, joined in segment
    // order; the document's own text is the first segment's (NeMo's "first" of other fields).
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["id"], "a");
    assert_eq!(out[0]["rephrased"], "A quoted start.\nThe second part.\nA http://x end.");
    assert_eq!(out[0]["text"], "zeroth line");
}

#[test]
fn split_then_joined_documents_come_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let input = root().join("tests/parity/fixture.jsonl");
    let original = read_jsonl(&input);
    let stages =
        "  - plugin: document_splitter\n    params: {separator: \"\\n\"}\n  - plugin: document_joiner\n    params: {separator: \"\\n\"}\n";
    let out = run_pipeline(tmp.path(), &input, stages);
    assert_eq!(out.len(), original.len());
    for (o, i) in out.iter().zip(&original) {
        assert_eq!(o["id"], i["id"]);
        assert_eq!(o["text"], i["text"], "document {}", i["id"]);
    }
    // Packed by token count as the pre-processing packs lines into model inputs: every
    // packed row within the limit unless a line alone is longer, and the rows of a document,
    // joined again, its text.
    let tmp = tempfile::tempdir().unwrap();
    let tok = root().join("tests/parity/tokenizers");
    let stages = format!(
        "  - plugin: document_splitter\n    params: {{separator: \"\\n\"}}\n\
         \x20 - plugin: token_count_filter\n    params: {{tokenizer_file: /tokenizer/bpe.json, score_field: segment_token_count}}\n    grants: {{tokenizer: {}}}\n\
         \x20 - plugin: document_joiner\n    params: {{separator: \"\\n\", max_length: 60, length_field: segment_token_count, drop_segment_id_field: false}}\n",
        tok.display()
    );
    let packed = run_pipeline(tmp.path(), &input, &stages);
    assert!(packed.len() > original.len(), "nothing was packed apart");
    for i in &original {
        let rows: Vec<&serde_json::Value> = packed.iter().filter(|p| p["id"] == i["id"]).collect();
        let numbers: Vec<i64> = rows.iter().map(|r| r["segment_id"].as_i64().unwrap()).collect();
        assert_eq!(numbers, (0..rows.len() as i64).collect::<Vec<_>>());
        let joined: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
        assert_eq!(joined.join("\n"), i["text"].as_str().unwrap());
        for r in &rows {
            let len = r["segment_token_count"].as_f64().unwrap();
            assert!(len <= 60.0 || !r["text"].as_str().unwrap().contains('\n'), "{r}");
        }
    }
}

#[test]
fn diverse_qa_and_knowledge_list_answers_are_post_processed() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("answers.jsonl");
    let qa = "Here are the questions and answers based on the provided text:\n\
              - Question: What is it? Answer: A test.\n\
              - Question: Is it short?\nAnswer: Yes.";
    write_rows(
        &input,
        &[
            serde_json::json!({"id": "a", "text": "A short text.", "diverse_qa": qa, "knowledge_list": "Key facts:\n- It is short.\n  - nested"}),
            serde_json::json!({"id": "b", "text": "Another.", "diverse_qa": "I cannot do that.", "knowledge_list": "- one"}),
        ],
    );
    let stages = "  - plugin: diverse_qa_postprocess\n    params: {seed: 3}\n\
                  \x20 - plugin: knowledge_list_postprocess\n    text_field: knowledge_list\n";
    let out = run_pipeline(tmp.path(), &input, stages);
    assert_eq!(out.len(), 2);
    // The text, then one or both pairs; an answer without pairs becomes empty.
    let a = out[0]["diverse_qa"].as_str().unwrap();
    let (text, pairs) = a.split_once("\n\n").unwrap();
    assert_eq!(text, "A short text.");
    for p in pairs.split("\n\n") {
        assert!(["Question: What is it? Answer: A test.", "Question: Is it short?\nAnswer: Yes."].contains(&p), "{p:?}");
    }
    assert_eq!(out[1]["diverse_qa"], "");
    assert_eq!(out[0]["knowledge_list"], "It is short.\n- nested");
    assert_eq!(out[1]["knowledge_list"], "one");
    // The document's text is untouched by a stage run on another field.
    assert_eq!(out[0]["text"], "A short text.");
    // Seeded: a second run writes the same pairs.
    let again = tempfile::tempdir().unwrap();
    assert_eq!(run_pipeline(again.path(), &input, stages)[0]["diverse_qa"], a);
}

#[test]
fn a_text_field_the_documents_lack_stops_the_run_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("docs.jsonl");
    write_rows(&input, &[serde_json::json!({"id": "a", "text": "x", "n": 3})]);
    let yaml = format!(
        "source:\n  path: {}\nsink:\n  path: out\nstages:\n  - plugin: markdown_remover\n    text_field: missing\n",
        input.display()
    );
    let run = run_with_guests(&["run", write_pipeline(tmp.path(), &yaml).to_str().unwrap()]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("text_field \"missing\""), "{}", run.stderr);
    let yaml = yaml.replace("text_field: missing", "text_field: _meta");
    let run = run_with_guests(&["run", write_pipeline(tmp.path(), &yaml).to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("stages[0].text_field"), "{}", run.stderr);
}
