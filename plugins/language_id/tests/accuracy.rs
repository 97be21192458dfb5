//! Accuracy on real text: tests/langid/testset.jsonl (900 documents of ≥ 200 characters, 60
//! in each of 15 languages, from Firefox's human translations; made by
//! scripts/langid/make_testset.py). The goal is ≥ 95 % per language.

use std::collections::BTreeMap;

use language_id::Identifier;

#[test]
fn at_least_95_percent_per_language_on_real_text() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}tests/langid/testset.jsonl")).unwrap();
    let id = Identifier::new(&[], 1000).unwrap();
    let mut per: BTreeMap<String, (usize, usize, Vec<String>)> = BTreeMap::new();
    for line in text.lines() {
        let d: serde_json::Value = serde_json::from_str(line).unwrap();
        let (want, text) = (d["lang"].as_str().unwrap(), d["text"].as_str().unwrap());
        assert!(text.chars().count() >= 200);
        let (got, _) = id.identify(text);
        let e = per.entry(want.to_string()).or_default();
        e.0 += 1;
        if got == want {
            e.1 += 1;
        } else {
            e.2.push(format!("{}→{got}", d["id"].as_str().unwrap()));
        }
    }
    assert_eq!(per.len(), 15);
    let mut low = Vec::new();
    let (mut all, mut right) = (0, 0);
    for (lang, (n, ok, wrong)) in &per {
        eprintln!("{lang}: {ok}/{n} ({:.1} %) {}", 100.0 * *ok as f64 / *n as f64, wrong.join(" "));
        all += n;
        right += ok;
        if (*ok as f64) < 0.95 * *n as f64 {
            low.push(lang.clone());
        }
    }
    eprintln!("all: {right}/{all} ({:.1} %)", 100.0 * right as f64 / all as f64);
    assert!(low.is_empty(), "below 95 %: {low:?}");
}
