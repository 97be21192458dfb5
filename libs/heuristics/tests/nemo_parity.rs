//! Parity with NeMo Curator: every heuristic's score and decision on every fixture document
//! against what NeMo Curator 1.4.0 itself computed (tests/parity/nemo_reference.jsonl).

mod common;

use std::collections::BTreeMap;

use curator_heuristics::nemo::{repetition_all, score_all};

/// Per filter: documents compared, score mismatches, decision mismatches, documents NeMo raised on.
#[derive(Default)]
struct Tally {
    compared: usize,
    scores: Vec<String>,
    keeps: Vec<String>,
    raised: Vec<String>,
    /// Ties between n-grams: NeMo's score depends on its hash seed; ours is one of its possible scores.
    tie_broken: usize,
}

#[test]
fn scores_and_decisions_match_nemo_curator() {
    let fixture = common::jsonl("tests/parity/fixture.jsonl");
    let reference = common::jsonl("tests/parity/nemo_reference.jsonl");
    assert!(fixture.len() >= 300, "the fixture has {} documents", fixture.len());
    assert_eq!(fixture.len(), reference.len());
    let mut stats: BTreeMap<&str, Tally> = BTreeMap::new();
    for (doc, want) in fixture.iter().zip(&reference) {
        assert_eq!(doc["id"], want["id"]);
        let text = doc["text"].as_str().unwrap();
        let all = score_all(text).into_iter().map(|(n, s, k)| (n.to_string(), s, k)).chain(repetition_all(text));
        for (name, score, keep) in all {
            let name: &'static str = Box::leak(name.into_boxed_str());
            let st = stats.entry(name).or_default();
            // RepeatingTopNGramsFilter with several equally frequent n-grams: NeMo's pick (and
            // score) depends on its hash-set order; ours must be one of its possible scores.
            let candidates = want["candidates"][name].as_array();
            if let Some(candidates) = candidates.filter(|c| c.len() > 1) {
                assert!(
                    candidates.iter().any(|c| (c.as_f64().unwrap() - score).abs() <= 1e-6),
                    "{name} on {}: ours {score} is none of NeMo's possible scores {candidates:?}",
                    doc["id"]
                );
                st.tie_broken += 1;
                continue;
            }
            if let Some(err) = want["errors"].get(name) {
                st.raised.push(format!("{} ({err}; we score {score})", doc["id"]));
                continue;
            }
            st.compared += 1;
            let ws = want["scores"][name].as_f64().unwrap_or_else(|| panic!("{name} has no score for {}", doc["id"]));
            if (ws - score).abs() > 1e-6 {
                st.scores.push(format!("{}: NeMo {ws}, ours {score}", doc["id"]));
            }
            if want["keep"][name].as_bool() != Some(keep) {
                st.keeps.push(format!("{}: NeMo keep={}, ours {keep}", doc["id"], want["keep"][name]));
            }
        }
    }
    let mut report = String::new();
    for (name, Tally { compared: n, scores, keeps, raised, tie_broken }) in &stats {
        report += &format!(
            "{name}: {n} compared, {} score and {} decision mismatches, NeMo raised on {}, {tie_broken} hash-seed dependent (ours among NeMo's possible scores)\n  {}\n  {}\n",
            scores.len(),
            keeps.len(),
            raised.len(),
            scores.iter().take(5).cloned().collect::<Vec<_>>().join("\n  "),
            keeps.iter().take(5).cloned().collect::<Vec<_>>().join("\n  ")
        );
    }
    eprintln!("{report}");
    for (name, Tally { compared: n, scores, keeps, .. }) in &stats {
        assert!(scores.is_empty(), "{name}: scores differ\n{report}");
        let agree = 1.0 - keeps.len() as f64 / *n as f64;
        assert!(agree >= 0.995, "{name}: decisions agree on {:.1} %\n{report}", agree * 100.0);
    }
}
