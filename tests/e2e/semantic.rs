//! Semantic dedup end to end on the CPU: the `embedder` stage (all-MiniLM-L6-v2, CPU
//! reference path) in front of `- dedup: {method: semantic}`, on a fixture of planted
//! near-copies (case, spacing and punctuation variants that embed at cosine ≥ 0.99) among
//! unrelated documents. The removed set must be exactly the planted copies; the keep rules
//! must pick what they say; workers and kill -9 must not change the result.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::dedup::duplicates;
use crate::models::{models, plugins};
use crate::support::*;

const BASE: &[&str] = &[
    "The committee approved the new budget for public libraries after a long debate on Tuesday evening.",
    "Photosynthesis converts light energy into chemical energy stored in glucose, releasing oxygen as a by-product.",
    "The recipe calls for two cups of flour, one egg, a pinch of salt and a little warm milk.",
    "Volcanic eruptions can inject ash high into the stratosphere and cool the climate for several years.",
    "The football club signed a young striker from Brazil on a five year contract worth millions.",
    "To reset the router, hold the small button on the back for ten seconds until the lights blink.",
    "Medieval monasteries preserved classical manuscripts by copying them by hand in their scriptoria.",
    "The new smartphone has a larger battery, a brighter screen and cameras that work well at night.",
    "Regular exercise lowers blood pressure, improves sleep and reduces the risk of heart disease.",
    "The river flooded the valley in spring, and the farmers moved their cattle to higher pastures and hills.",
    "Compilers translate source code into machine instructions and optimise loops, calls and memory access.",
    "The orchestra rehearsed the symphony for weeks before the premiere in the old concert hall.",
];

/// (id, text, planted: the id it copies). Copies: the same text lower-cased, with doubled
/// spaces, or with a serial comma added (cosine ≥ 0.998 under MiniLM).
fn fixture() -> Vec<(String, String, Option<String>)> {
    let mut docs: Vec<(String, String, Option<String>)> =
        BASE.iter().enumerate().map(|(i, t)| (format!("b{i:02}"), t.to_string(), None)).collect();
    let copies = [
        (0, BASE[0].to_lowercase()),
        (2, BASE[2].replace("salt and", "salt, and")),
        (4, BASE[4].replace(' ', "  ")),
        (7, BASE[7].to_uppercase()),
        (9, BASE[9].replace("pastures and", "pastures, and")),
        (10, BASE[10].replace("calls and", "calls, and")),
    ];
    for (k, (of, text)) in copies.into_iter().enumerate() {
        docs.push((format!("c{k:02}"), text, Some(format!("b{of:02}"))));
    }
    docs
}

fn setup(dedup: &str, embedder_extra: &str) -> (tempfile::TempDir, Vec<(String, String, Option<String>)>) {
    let tmp = tempfile::tempdir().unwrap();
    let docs = fixture();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    // Copies interleaved with the originals, over two files.
    let lines: Vec<String> = docs.iter().map(|(id, t, _)| serde_json::json!({"id": id, "text": t}).to_string()).collect();
    let (a, b): (Vec<_>, Vec<_>) = lines.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let join = |v: Vec<(usize, &String)>| v.into_iter().map(|(_, l)| l.clone()).collect::<Vec<_>>().join("\n") + "\n";
    std::fs::write(tmp.path().join("in/a.jsonl"), join(a)).unwrap();
    std::fs::write(tmp.path().join("in/b.jsonl"), join(b)).unwrap();
    let yaml = format!(
        "source: {{path: in}}\nbatch_size: 4\nstages:\n  - plugin: embedder\n    params: {{model: /models/all-MiniLM-L6-v2, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\n{embedder_extra}  - dedup: {dedup}\nsink: {{path: out}}\n",
        models().display()
    );
    write_pipeline(tmp.path(), &yaml);
    (tmp, docs)
}

fn run(dir: &Path, env: &[(&str, &str)]) -> Run {
    let mut c = host();
    c.current_dir(dir).args(["run", "pipeline.yaml"]).arg("--plugins").arg(plugins());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("cannot start curator-host").into()
}

/// Planted pairs as sets of ids.
fn planted(docs: &[(String, String, Option<String>)]) -> Vec<BTreeSet<String>> {
    docs.iter().filter_map(|(id, _, of)| of.as_ref().map(|o| BTreeSet::from([id.clone(), o.clone()]))).collect()
}

#[test]
fn removes_exactly_the_planted_copies_and_keeps_one_of_each() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let (tmp, docs) = setup("{method: semantic, n_clusters: 3, eps: [0.01, 0.5]}", "");
    run(tmp.path(), &[]).ok();
    let dups = duplicates(&tmp.path().join("out"));
    let pairs = planted(&docs);
    assert_eq!(dups.len(), pairs.len(), "{dups:?}");
    for (removed, kept) in &dups {
        assert!(pairs.contains(&BTreeSet::from([removed.clone(), kept.clone()])), "{removed} → {kept} was not planted");
    }
    // Everything else reached the sink, once.
    let out: Vec<String> = ["a.jsonl", "b.jsonl"]
        .iter()
        .flat_map(|f| read_jsonl(&tmp.path().join("out").join(f)))
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(out.len(), docs.len() - pairs.len());
    assert!(dups.keys().all(|d| !out.contains(d)));
    // The summary reports every eps: at 0.5 more documents count as duplicates.
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/_summary.json")).unwrap()).unwrap();
    let sem = summary.to_string();
    assert!(sem.contains("\"eps\":[0.01,0.5]"), "{sem}");
}

#[test]
fn keep_rules_pick_what_they_say() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let survivors = |rule: &str| -> BTreeMap<BTreeSet<String>, String> {
        let (tmp, _) = setup(&format!("{{method: semantic, n_clusters: 3, which_to_keep: {rule}, action: identify}}"), "");
        run(tmp.path(), &[]).ok();
        duplicates(&tmp.path().join("out")).into_iter().map(|(r, k)| (BTreeSet::from([r, k.clone()]), k)).collect()
    };
    let (hard, easy, random) = (survivors("hard"), survivors("easy"), survivors("random"));
    assert_eq!(hard.len(), 6);
    assert_eq!(random, survivors("random"), "random is seeded");
    for (pair, kept) in &hard {
        let identical = pair.iter().any(|id| ["c00", "c02", "c03"].contains(&id.as_str()));
        if identical {
            // Same vector, same distance: the earlier position stays under both rules.
            assert_eq!(kept, &easy[pair], "{pair:?}");
        } else {
            // Hard keeps the one farther from the centroid, easy the nearer: opposite picks.
            assert_ne!(kept, &easy[pair], "{pair:?}");
        }
    }
}

#[test]
fn workers_and_kill_9_do_not_change_the_duplicates() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let (one, _) = setup("{method: semantic, n_clusters: 3}", "    num_workers: 1\n");
    run(one.path(), &[]).ok();
    let want = duplicates(&one.path().join("out"));
    let (many, _) = setup("{method: semantic, n_clusters: 3}", "    num_workers: 2\n");
    run(many.path(), &[]).ok();
    assert_eq!(duplicates(&many.path().join("out")), want);
    for phase in ["scan", "kmeans", "groups"] {
        let (tmp, _) = setup("{method: semantic, n_clusters: 3}", "");
        let killed = run(tmp.path(), &[("CURATOR_DEDUP_CRASH_AT", phase)]);
        assert_ne!(killed.code, 0, "killed at {phase}");
        run(tmp.path(), &[]).ok();
        assert_eq!(duplicates(&tmp.path().join("out")), want, "after a kill at {phase}");
    }
}

#[test]
fn a_missing_embedding_column_is_named() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    std::fs::write(tmp.path().join("in/a.jsonl"), "{\"id\": \"x\", \"text\": \"no embedding here\"}\n").unwrap();
    write_pipeline(tmp.path(), "source: {path: in}\nstages:\n  - dedup: {method: semantic}\nsink: {path: out}\n");
    let r = run(tmp.path(), &[]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("\"embedding\"") && r.stderr.contains("embedder"), "{}", r.stderr);
}

#[test]
fn device_gpu_without_a_gpu_fails_clearly_and_auto_falls_back() {
    if !needs(Need::EncoderModels) {
        return;
    }
    // Every GPU hidden, so the test means the same on a GPU machine (where
    // scripts/models/gpu-models.sh runs the GPU path).
    let hidden = [("CUDA_VISIBLE_DEVICES", "")];
    let (tmp, _) = setup("{method: semantic, n_clusters: 3, device: gpu}", "");
    let r = run(tmp.path(), &hidden);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("GPU"), "{}", r.stderr);
    let (auto, _) = setup("{method: semantic, n_clusters: 3, device: auto}", "");
    run(auto.path(), &hidden).ok();
    assert_eq!(duplicates(&auto.path().join("out")).len(), 6);
}

#[test]
fn embedding_in_one_pipeline_and_deduplicating_in_another_equals_one_pipeline() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let (tmp, _) = setup("{method: semantic, n_clusters: 3}", "");
    run(tmp.path(), &[]).ok();
    let want = duplicates(&tmp.path().join("out"));
    assert!(!want.is_empty());
    // Embed and store (Parquet), then deduplicate the stored vectors in a second pipeline.
    let embed = format!(
        "source: {{path: in}}\nbatch_size: 4\nstages:\n  - plugin: embedder\n    params: {{model: /models/all-MiniLM-L6-v2, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\nsink: {{path: stored, format: parquet}}\n",
        models().display()
    );
    std::fs::write(tmp.path().join("embed.yaml"), embed).unwrap();
    std::fs::write(
        tmp.path().join("dedup.yaml"),
        "source: {path: stored}\nbatch_size: 4\nstages:\n  - dedup: {method: semantic, n_clusters: 3}\nsink: {path: out2}\n",
    )
    .unwrap();
    for p in ["embed.yaml", "dedup.yaml"] {
        let r: Run = host().current_dir(tmp.path()).args(["run", p]).arg("--plugins").arg(plugins()).output().unwrap().into();
        r.ok();
    }
    assert_eq!(duplicates(&tmp.path().join("out2")), want);
}
