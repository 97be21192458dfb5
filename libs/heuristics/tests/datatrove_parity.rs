//! Parity with datatrove: every quality filter's decision (and reason, and C4's rewritten
//! text) on every fixture document against what datatrove 0.10.1 itself decided
//! (tests/parity/datatrove_reference.jsonl), plus the English word counts of spaCy's
//! tokenizer that datatrove's filters are built on.

mod common;

use std::collections::BTreeMap;

use curator_heuristics::datatrove::{C4Quality, FineWebQuality, GopherQuality, GopherRepetition};
use curator_heuristics::en_words;

/// Ours for one filter configuration: Ok(rewritten text or None) or Err(reason).
fn run(name: &str, text: &str) -> Result<Option<String>, String> {
    match name {
        "GopherQualityFilter" => GopherQuality::default().check(text).map(|_| None).map_err(str::to_string),
        "GopherRepetitionFilter" => GopherRepetition::default().check(text).map(|_| None),
        "C4QualityFilter" => C4Quality::default().apply(text).map(Some).map_err(str::to_string),
        "C4QualityFilter(filter_no_terminal_punct=False)" => {
            C4Quality { filter_no_terminal_punct: false, ..C4Quality::default() }.apply(text).map(Some).map_err(str::to_string)
        }
        "FineWebQualityFilter" => FineWebQuality::default().check(text).map(|_| None).map_err(str::to_string),
        other => panic!("no such filter in the reference: {other}"),
    }
}

#[test]
fn decisions_match_datatrove() {
    let fixture = common::jsonl("tests/parity/fixture.jsonl");
    let reference = common::jsonl("tests/parity/datatrove_reference.jsonl");
    assert!(fixture.len() >= 300);
    assert_eq!(fixture.len(), reference.len());
    let mut word_diffs = Vec::new();
    let mut per_filter: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    for (doc, want) in fixture.iter().zip(&reference) {
        assert_eq!(doc["id"], want["id"]);
        let (id, text) = (doc["id"].as_str().unwrap(), doc["text"].as_str().unwrap());
        let ours = en_words::words(text).len() as u64;
        if want["words"].as_u64() != Some(ours) {
            word_diffs.push(format!("{id}: spaCy {} words, ours {ours}", want["words"]));
        }
        for (name, res) in want["results"].as_object().unwrap() {
            let entry = per_filter.entry(name.clone()).or_default();
            entry.0 += 1;
            let got = run(name, text);
            let same = match (&got, res["keep"].as_bool().unwrap()) {
                (Ok(rewritten), true) => rewritten.as_deref() == res["text"].as_str(),
                (Err(reason), false) => res["reason"].as_str() == Some(reason.as_str()),
                _ => false,
            };
            if !same {
                entry.1.push(format!("{id}: datatrove {} {:?}, ours {got:?}", res["keep"], res["reason"]));
            }
        }
    }
    let mut failed = false;
    for (name, (n, diffs)) in &per_filter {
        let agree = 1.0 - diffs.len() as f64 / *n as f64;
        eprintln!("{name}: {}/{n} decisions agree ({:.2} %)", n - diffs.len(), agree * 100.0);
        for d in diffs {
            eprintln!("    {d}");
        }
        failed |= !diffs.is_empty();
    }
    eprintln!("word counts: {} of {} documents differ from spaCy's", word_diffs.len(), fixture.len());
    for d in &word_diffs {
        eprintln!("    {d}");
    }
    assert!(!failed, "decisions differ from datatrove's (listed above)");
    assert!(word_diffs.is_empty(), "word counts differ from spaCy's (listed above)");
}

/// The filters as one chain (words split once and shared) decide and rewrite exactly as the
/// same filters one after another, on every fixture document.
#[test]
fn chain_equals_the_filters_in_sequence() {
    use curator_heuristics::datatrove::{AnyFilter, run_chain};
    let (rep, qual, fw) = (GopherRepetition::default(), GopherQuality::default(), FineWebQuality::default());
    let c4 = C4Quality { filter_no_terminal_punct: false, ..C4Quality::default() };
    let chain = [
        AnyFilter::from_params("gopher_repetition_filter", serde_json::json!({})).unwrap(),
        AnyFilter::from_params("gopher_quality_filter", serde_json::json!({})).unwrap(),
        AnyFilter::from_params("c4_quality_filter", serde_json::json!({"filter_no_terminal_punct": false})).unwrap(),
        AnyFilter::from_params("fineweb_quality_filter", serde_json::json!({})).unwrap(),
    ];
    assert_eq!(chain[2], AnyFilter::C4Quality(c4.clone()));
    let mut kept = 0;
    for doc in common::jsonl("tests/parity/fixture.jsonl") {
        let text = doc["text"].as_str().unwrap();
        let sequential = (|| {
            rep.check(text).ok()?;
            qual.check(text).ok()?;
            let t = c4.apply(text).ok()?;
            fw.check(&t).ok()?;
            Some(t)
        })();
        let chained = run_chain(&chain, text).map(|t| t.into_owned());
        assert_eq!(chained, sequential, "{}", doc["id"]);
        kept += usize::from(chained.is_some());
    }
    assert!(kept > 20, "only {kept} documents kept: the test would not see rewrites");
    let e = AnyFilter::from_params("gopher_quality_filter", serde_json::json!({"min_doc_wrds": 3})).unwrap_err();
    assert!(e.contains("min_doc_wrds"), "{e}");
}
