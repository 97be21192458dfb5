//! Parity with NeMo Curator's code filters on real source files installed on the machine that
//! made the fixture (tests/parity/code_fixture.jsonl, code_reference.jsonl).

mod common;

use std::collections::BTreeMap;

use curator_heuristics::code;

/// NeMo Curator's code_meta.csv (its data, copied by scripts/parity/make_code_reference.py).
fn nemo_code_meta() -> String {
    common::repo_file("tests/parity/nemo_code_meta.csv")
}

#[test]
fn scores_and_decisions_match_nemo_curator_code_filters() {
    let fixture = common::jsonl("tests/parity/code_fixture.jsonl");
    let reference = common::jsonl("tests/parity/code_reference.jsonl");
    assert!(fixture.len() >= 100);
    assert_eq!(fixture.len(), reference.len());
    let meta = nemo_code_meta();
    let mut stats: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    for (doc, want) in fixture.iter().zip(&reference) {
        assert_eq!(doc["id"], want["id"]);
        let text = doc["text"].as_str().unwrap();
        let (lang, ext, mime) = (doc["language"].as_str().unwrap(), doc["extension"].as_str().unwrap(), doc["mime"].as_str().unwrap());
        for (name, expected) in want["scores"].as_object().unwrap() {
            let keep_want = want["keep"][name].as_bool().unwrap();
            let (score, keep) = match name.as_str() {
                "NumberOfLinesOfCodeFilter" => {
                    let s = code::number_of_lines(text) as f64;
                    (s, (10.0..=20000.0).contains(&s))
                }
                "XMLHeaderFilter" => {
                    let s = code::xml_header(text, 100);
                    (s, s != 1.0)
                }
                "AlphaFilter" => {
                    let s = code::alpha_ratio(text);
                    (s, s >= 0.25)
                }
                "HTMLBoilerplateFilter" => {
                    let s = code::html_content_ratio(text, 100);
                    (s, s >= 0.2)
                }
                "GeneralCommentToCodeFilter" => {
                    let s = code::comment_ratio(text, mime);
                    (s, (0.01..=0.85).contains(&s))
                }
                "PythonCommentToCodeFilter" => {
                    let s = code::python_comment_ratio(text);
                    (s, (0.01..=0.85).contains(&s))
                }
                "PerExtensionFilter" => {
                    let rules = code::load_extension_rules(&meta, Some(&lang.to_lowercase())).unwrap();
                    let s = code::per_extension_score(text, rules.get(&(code::csv_language(lang), ext.to_string())));
                    (s, s != 0.0)
                }
                other => panic!("unknown filter {other}"),
            };
            let entry = stats.entry(name.clone()).or_default();
            entry.0 += 1;
            let score_ok = expected.as_f64().is_some_and(|e| (e - score).abs() <= 1e-6);
            if !score_ok || keep != keep_want {
                entry.1.push(format!("{} ({lang}, {}): NeMo {expected} {keep_want}, ours {score} {keep}", doc["id"], doc["path"]));
            }
        }
    }
    let mut failed = Vec::new();
    for (name, (n, diffs)) in &stats {
        eprintln!("{name}: {}/{n} equal", n - diffs.len());
        for d in diffs {
            eprintln!("    {d}");
        }
        if !diffs.is_empty() {
            failed.push(name.clone());
        }
    }
    assert!(failed.is_empty(), "differences from NeMo Curator in {failed:?}");
}
