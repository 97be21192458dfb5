//! Dedup steps end to end: exact and fuzzy groups on planted fixtures checked against brute
//! force, the survivor rule under different partitionings, worker counts and bands per
//! iteration, kill -9 in every phase then rerun, `plan` on a terabyte listing, `remove_ids`,
//! the actions, and bad input.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arrow_array::{Array, StringArray, UInt64Array};
use curator_sdk::shingle::{Scratch, Shingles, jaccard, shingle_set};

use crate::support::*;

/// A plugins directory with the native `minhash` plugin, built from source once.
pub(crate) fn minhash_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| native_plugins_dir("dedup-plugins", &["minhash"]))
}

pub(crate) fn run_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = host();
    c.current_dir(dir).args(args).arg("--plugins").arg(minhash_dir()).arg("--plugins").arg(guests_dir());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("cannot start curator-host").into()
}

/// A tiny deterministic generator (the fixture must not change between runs).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

const W5: Shingles = Shingles::Words(5);

fn set(t: &str) -> Vec<u64> {
    shingle_set(t, W5, &mut Scratch::default())
}

/// Replace words of `text` one at a time (from `rng`) until its word 5-gram Jaccard with the
/// original drops to `target` or below.
fn edit_to(text: &str, target: f64, rng: &mut Lcg) -> String {
    let original = set(text);
    let mut words: Vec<String> = text.split(' ').map(String::from).collect();
    loop {
        let k = (rng.next() as usize) % words.len();
        words[k] = format!("edit{}", rng.next() % 100_000);
        let t = words.join(" ");
        if jaccard(&original, &set(&t)) <= target {
            return t;
        }
    }
}

/// Real text: the quickstart's documents cut into pieces of 120 words, one line each.
fn base_texts() -> Vec<String> {
    let mut out = Vec::new();
    for f in ["docs-000.jsonl", "docs-001.jsonl.gz"] {
        for d in read_jsonl(&root().join("examples/quickstart/data").join(f)) {
            let words: Vec<&str> = d["text"].as_str().unwrap_or_default().split_whitespace().collect();
            out.extend(words.chunks_exact(120).map(|c| c.join(" ")));
        }
    }
    out
}

/// Two input files: `a.jsonl` (base documents and a few copies at its end) and `b.jsonl`
/// (planted copies, near-duplicates at Jaccard ~0.9, chains A~B~C with A≁C, and pairs just
/// below 0.8). Returns (id, text) in source order.
fn fuzzy_fixture(dir: &Path) -> Vec<(String, String)> {
    let base = base_texts();
    assert!(base.len() >= 300, "the quickstart data has {} long documents", base.len());
    let mut rng = Lcg(42);
    let mut a: Vec<String> = base[..300].to_vec();
    let mut b: Vec<String> = Vec::new();
    for i in 0..10 {
        b.push(base[i * 3].clone());
    }
    for i in 0..5 {
        a.push(base[40 + i].clone());
    }
    for i in 0..20 {
        b.push(edit_to(&base[60 + i], 0.9, &mut rng));
    }
    let mut chains = 0;
    for i in 0..40 {
        let x = &base[100 + i];
        let y = edit_to(x, 0.88, &mut rng);
        let z = edit_to(&y, 0.88, &mut rng);
        if jaccard(&set(x), &set(&z)) < 0.8 && jaccard(&set(&y), &set(&z)) >= 0.8 {
            b.push(y);
            b.push(z);
            chains += 1;
        }
        if chains == 6 {
            break;
        }
    }
    assert_eq!(chains, 6, "could not build six chains");
    for i in 0..15 {
        b.push(edit_to(&base[200 + i], 0.72, &mut rng));
    }
    let mut all = Vec::new();
    for (name, texts, prefix) in [("a.jsonl", &a, "a"), ("b.jsonl", &b, "b")] {
        let mut s = String::new();
        for (i, t) in texts.iter().enumerate() {
            let id = format!("{prefix}{i:04}");
            s.push_str(&serde_json::json!({"id": id, "text": t}).to_string());
            s.push('\n');
            all.push((id, t.clone()));
        }
        std::fs::write(dir.join("data").join(name), s).unwrap();
    }
    all
}

/// Ids that must go: every member of a component of the "Jaccard ≥ threshold" graph but its
/// first, by brute force over all pairs.
pub(crate) fn truth(docs: &[(String, String)], threshold: f64) -> BTreeSet<String> {
    let sets: Vec<Vec<u64>> = docs.iter().map(|(_, t)| set(t)).collect();
    let mut parent: Vec<usize> = (0..docs.len()).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            x = p[x];
        }
        x
    }
    for i in 0..docs.len() {
        for j in i + 1..docs.len() {
            let (a, b) = (sets[i].len() as f64, sets[j].len() as f64);
            if a.min(b) < threshold * a.max(b) {
                continue;
            }
            if jaccard(&sets[i], &sets[j]) >= threshold {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                let (lo, hi) = (ri.min(rj), ri.max(rj));
                parent[hi] = lo;
            }
        }
    }
    (0..docs.len()).filter(|&i| find(&mut parent, i) != i).map(|i| docs[i].0.clone()).collect()
}

/// `_duplicates/` as (id → kept id).
pub(crate) fn duplicates(out: &Path) -> BTreeMap<String, String> {
    let f = std::fs::File::open(out.join("_duplicates/part-00000.parquet")).expect("_duplicates/part-00000.parquet");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
    let mut m = BTreeMap::new();
    for batch in reader {
        let batch = batch.unwrap();
        let id = batch.column_by_name("id").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
        let kept = batch.column_by_name("kept_id").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
        assert!(batch.column_by_name("group").unwrap().as_any().downcast_ref::<UInt64Array>().is_some());
        for r in 0..id.len() {
            m.insert(id.value(r).to_string(), kept.value(r).to_string());
        }
    }
    m
}

/// Ids written to the sink, by output file.
pub(crate) fn output_ids(out: &Path) -> BTreeMap<String, Vec<String>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(out).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".jsonl") {
            m.insert(name, read_jsonl(&e.path()).iter().map(|d| d["id"].as_str().unwrap_or_default().to_string()).collect());
        }
    }
    m
}

pub(crate) fn setup(yaml_stage: &str, extra: &str) -> (tempfile::TempDir, Vec<(String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let docs = fuzzy_fixture(dir.path());
    write_pipeline(
        dir.path(),
        &format!("source: {{path: data{extra}}}\nbatch_size: 64\nstages:\n  - dedup: {yaml_stage}\nsink: {{path: out, mode: overwrite}}\n"),
    );
    (dir, docs)
}

const FUZZY: &str = "{method: fuzzy, word_ngrams: 5}";

#[test]
fn fuzzy_word_shingles_find_exactly_the_planted_near_duplicates() {
    let (dir, docs) = setup(FUZZY, "");
    let r = run_in(dir.path(), &["run", "pipeline.yaml"], &[]);
    r.ok();
    let want = truth(&docs, 0.8);
    // Pairs checked on text a few documents at a time give the same answer.
    let (chunked, _) = setup(FUZZY, "");
    run_in(chunked.path(), &["run", "pipeline.yaml"], &[("CURATOR_DEDUP_CHECK_CHUNK", "7")]).ok();
    assert_eq!(duplicates(&chunked.path().join("out")), duplicates(&dir.path().join("out")));
    let got = duplicates(&dir.path().join("out"));
    let got_ids: BTreeSet<String> = got.keys().cloned().collect();
    assert_eq!(got_ids, want, "stdout:\n{}", r.stdout);
    // 10 copies + 5 copies + 20 near-duplicates + 6 chains × 2, at least.
    assert!(want.len() >= 47, "{}", want.len());
    // Survivors are the first of their group in source order: every chain and pair keeps its a-document.
    for (dup, kept) in &got {
        assert!(kept < dup, "{dup} kept {kept}");
        assert!(kept.starts_with('a'), "{dup} kept {kept}");
    }
    // Pairs just below the threshold are kept.
    let ids: Vec<&String> = docs.iter().map(|(i, _)| i).collect();
    let below: Vec<&&String> = ids.iter().rev().take(15).collect();
    assert!(below.iter().all(|id| !got.contains_key(**id)));
    // The sink holds everything else, without the signature column.
    let out = output_ids(&dir.path().join("out"));
    let written: BTreeSet<String> = out.values().flatten().cloned().collect();
    assert_eq!(written.len() + want.len(), docs.len());
    assert!(written.is_disjoint(&want));
    let first = read_jsonl(&dir.path().join("out/a.jsonl"));
    assert!(first[0].get("minhash_signature").is_none(), "{}", first[0]);
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("out/_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["dedup"]["duplicates"].as_u64(), Some(want.len() as u64));
    assert!(summary["dedup"]["candidate_pairs"].as_u64() >= summary["dedup"]["verified_pairs"].as_u64());
    assert!(!dir.path().join("out/_dedup_work").exists(), "the work directory is removed after a complete run");
}

#[test]
fn signatures_cross_as_binary_and_sinks_write_them_as_hex() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    write_docs(&dir.path().join("data/a.jsonl"), &base_texts()[..20]);
    write_pipeline(
        dir.path(),
        "source: {path: data}\nstages:\n  - plugin: minhash\n    params: {device: cpu, num_hashes: 16}\n    resources: {gpu_memory_gb: 0}\nsink: {path: out}\n",
    );
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let docs = read_jsonl(&dir.path().join("out/a.jsonl"));
    assert_eq!(docs.len(), 20);
    for d in &docs {
        let hex = d["minhash_signature"].as_str().unwrap();
        assert_eq!(hex.len(), 16 * 8, "{hex}");
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}

#[test]
fn same_duplicates_whatever_the_workers_partitions_and_bands_per_iteration() {
    let (dir, _) = setup(FUZZY, "");
    run_in(dir.path(), &["run", "pipeline.yaml", "--workers", "1"], &[]).ok();
    let reference = duplicates(&dir.path().join("out"));
    for (stage, extra, workers) in [
        ("{method: fuzzy, word_ngrams: 5, bands_per_iteration: 1}", "", "2"),
        ("{method: fuzzy, word_ngrams: 5, bands_per_iteration: 5, partitions: 3}", ", blocksize: 40KB", "3"),
        ("{method: fuzzy, word_ngrams: 5, num_workers: 2}", ", blocksize: 100KB", "2"),
    ] {
        let (d2, _) = setup(stage, extra);
        run_in(d2.path(), &["run", "pipeline.yaml", "--workers", workers], &[]).ok();
        assert_eq!(duplicates(&d2.path().join("out")), reference, "{stage} {extra}");
    }
}

#[test]
fn exact_groups_identical_texts_with_either_hash() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let base = base_texts();
    let a: Vec<String> = (0..50).map(|i| base[i].clone()).chain([base[3].clone(), base[3].clone()]).collect();
    let b: Vec<String> = (0..10).map(|i| base[i * 2].clone()).chain([format!("{} ", base[7])]).collect();
    let mut docs = Vec::new();
    for (name, texts, p) in [("a.jsonl", &a, "a"), ("b.jsonl", &b, "b")] {
        let mut s = String::new();
        for (i, t) in texts.iter().enumerate() {
            s.push_str(&serde_json::json!({"id": format!("{p}{i:03}"), "text": t}).to_string());
            s.push('\n');
            docs.push((format!("{p}{i:03}"), t.clone()));
        }
        std::fs::write(dir.path().join("data").join(name), s).unwrap();
    }
    let mut first: HashMap<&str, &str> = HashMap::new();
    let mut want = BTreeMap::new();
    for (id, t) in &docs {
        match first.get(t.as_str()) {
            Some(k) => {
                want.insert(id.clone(), k.to_string());
            }
            None => {
                first.insert(t, id);
            }
        }
    }
    assert_eq!(want.len(), 12);
    for hash in ["xxh3", "md5"] {
        write_pipeline(
            dir.path(),
            &format!(
                "source: {{path: data}}\nstages:\n  - dedup: {{method: exact, hash: {hash}}}\nsink: {{path: out-{hash}, mode: overwrite}}\n"
            ),
        );
        run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
        assert_eq!(duplicates(&dir.path().join(format!("out-{hash}"))), want, "{hash}");
        let written: usize = output_ids(&dir.path().join(format!("out-{hash}"))).values().map(Vec::len).sum();
        assert_eq!(written, docs.len() - 12);
    }
}

#[test]
fn killed_in_any_phase_a_rerun_finishes_with_the_same_duplicates() {
    let (dir, _) = setup("{method: fuzzy, word_ngrams: 5, bands_per_iteration: 5}", ", blocksize: 60KB");
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let reference = duplicates(&dir.path().join("out"));
    let reference_out = output_ids(&dir.path().join("out"));
    for phase in ["spill-0", "docs", "scan", "buckets-000", "buckets-001", "groups", "output-partition", "duplicates"] {
        let (d, _) = setup("{method: fuzzy, word_ngrams: 5, bands_per_iteration: 5}", ", blocksize: 60KB");
        let killed = run_in(d.path(), &["run", "pipeline.yaml"], &[("CURATOR_DEDUP_CRASH_AT", phase)]);
        assert_ne!(killed.code, 0, "{phase}: the run was not killed\n{}", killed.stderr);
        assert!(d.path().join("out/_dedup_work").exists(), "{phase}");
        let rerun = run_in(d.path(), &["run", "pipeline.yaml"], &[]);
        rerun.ok();
        assert_eq!(duplicates(&d.path().join("out")), reference, "{phase}");
        assert_eq!(output_ids(&d.path().join("out")), reference_out, "{phase}");
        assert!(temp_leftovers(&d.path().join("out")).is_empty(), "{phase}");
    }
}

#[test]
fn mark_keeps_everything_and_identify_writes_only_the_ids() {
    let (dir, docs) = setup("{method: fuzzy, word_ngrams: 5, action: mark}", "");
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let dups = duplicates(&dir.path().join("out"));
    let mut seen = 0;
    for f in ["a.jsonl", "b.jsonl"] {
        for d in read_jsonl(&dir.path().join("out").join(f)) {
            let id = d["id"].as_str().unwrap();
            assert_eq!(d["is_duplicate"].as_bool(), Some(dups.contains_key(id)), "{d}");
            if dups.contains_key(id) {
                assert!(d["duplicate_group"].is_i64());
            }
            seen += 1;
        }
    }
    assert_eq!(seen, docs.len());
    let (dir, _) = setup("{method: fuzzy, word_ngrams: 5, action: identify}", "");
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    assert_eq!(duplicates(&dir.path().join("out")), dups);
    assert!(output_ids(&dir.path().join("out")).is_empty());
}

#[test]
fn remove_ids_drops_exactly_the_listed_ids() {
    let (dir, docs) = setup("{method: fuzzy, word_ngrams: 5, action: identify}", "");
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let dups = duplicates(&dir.path().join("out"));
    write_pipeline(
        dir.path(),
        "source: {path: data}\nstages:\n  - remove_ids: {path: out/_duplicates}\nsink: {path: removed, mode: overwrite}\n",
    );
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let written: BTreeSet<String> = output_ids(&dir.path().join("removed")).into_values().flatten().collect();
    let want: BTreeSet<String> = docs.iter().map(|(i, _)| i.clone()).filter(|i| !dups.contains_key(i)).collect();
    assert_eq!(written, want);
    // JSONL id lists work too.
    std::fs::write(dir.path().join("ids.jsonl"), "{\"id\": \"a0000\"}\n{\"id\": \"b0003\"}\n").unwrap();
    write_pipeline(
        dir.path(),
        "source: {path: data}\nstages:\n  - remove_ids: {path: ids.jsonl}\nsink: {path: removed2, mode: overwrite}\n",
    );
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let written: usize = output_ids(&dir.path().join("removed2")).values().map(Vec::len).sum();
    assert_eq!(written, docs.len() - 2);
}

#[test]
fn bad_input_is_quarantined_and_the_rest_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let t = "the same text in several documents of this little file";
    let lines = [
        serde_json::json!({"id": "x1", "text": t}).to_string(),
        serde_json::json!({"id": "x2"}).to_string(),
        serde_json::json!({"id": [1], "text": t}).to_string(),
        serde_json::json!({"id": 7, "text": t}).to_string(),
        serde_json::json!({"id": "x5", "text": t}).to_string(),
    ];
    std::fs::write(dir.path().join("data/a.jsonl"), lines.join("\n") + "\n").unwrap();
    // A file of which no line is a document: its partition spills a batch of no rows, without
    // the columns the stages in front add (the fuzzy scan reads only those).
    std::fs::write(dir.path().join("data/b.jsonl"), "{\n \"not\": 1\n}\n").unwrap();
    for method in ["exact", "fuzzy, word_ngrams: 5"] {
        write_pipeline(
            dir.path(),
            &format!("source: {{path: data}}\nstages:\n  - dedup: {{method: {method}}}\nsink: {{path: out, mode: overwrite}}\n"),
        );
        run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
        let rejected = std::fs::read_to_string(dir.path().join("out/_rejected/a.jsonl.jsonl")).unwrap_or_default();
        // A line without text and one whose id is neither a string nor a number (numbers are
        // ids, as everywhere) are quarantined with their line numbers; the rest is deduplicated.
        let rejected: Vec<serde_json::Value> = rejected.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(rejected.len(), 2, "{method}: {rejected:?}");
        assert!(rejected[0].to_string().contains("a.jsonl") && rejected[0].to_string().contains('2'), "{}", rejected[0]);
        let b = std::fs::read_to_string(dir.path().join("out/_rejected/b.jsonl.jsonl")).unwrap_or_default();
        assert_eq!(b.lines().count(), 3, "{method}: {b}");
        let dups = duplicates(&dir.path().join("out"));
        let want: BTreeMap<String, String> = [("7", "x1"), ("x5", "x1")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!(dups, want, "{method}");
    }
}

#[test]
fn plan_recommends_one_to_three_bands_per_iteration_for_a_terabyte_on_24_gib() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    // 1 TiB of JSONL as sparse files: real documents at the start of each (what `plan`
    // samples), holes after.
    let base = base_texts();
    // Web documents average 2–4 KB (FineWeb ≈ 3 KB): pieces of ~2.5 KB.
    let mut head = String::new();
    for (i, t) in base.iter().map(|t| &t[..t.len().min(2500)]).enumerate().take(400) {
        head.push_str(&serde_json::json!({"id": format!("d{i}"), "text": t}).to_string());
        head.push('\n');
    }
    for k in 0..16 {
        let path = dir.path().join(format!("data/shard-{k:02}.jsonl"));
        std::fs::write(&path, &head).unwrap();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(1u64 << 36).unwrap();
    }
    write_pipeline(dir.path(), "source: {path: data}\nstages:\n  - dedup: {method: fuzzy}\nsink: {path: out}\n");
    let r = run_in(dir.path(), &["plan", "pipeline.yaml", "--memory", "24GiB", "--json"], &[]);
    r.ok();
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let bpi = report["dedup"]["plan"]["bands_per_iteration"].as_u64().unwrap();
    assert!((1..=3).contains(&bpi), "{}", r.stdout);
    assert_eq!(report["dedup"]["recommended_bands_per_iteration"].as_u64(), Some(bpi));
    let docs = report["corpus"]["documents"].as_u64().unwrap();
    assert!(docs > 100_000_000, "{docs}");
    // The text report says the same; and a setting that cannot fit is a warning in `plan` and
    // an error (exit 2) in `run`.
    let text = run_in(dir.path(), &["plan", "pipeline.yaml", "--memory", "24GiB"], &[]);
    assert!(text.ok().stdout.contains(&format!("bands per iteration {bpi}")), "{}", text.stdout);
    write_pipeline(
        dir.path(),
        "source: {path: data}\nstages:\n  - dedup: {method: fuzzy, bands_per_iteration: 20, partitions: 1}\nsink: {path: out}\n",
    );
    let warn = run_in(dir.path(), &["plan", "pipeline.yaml", "--memory", "24GiB"], &[]);
    assert!(warn.ok().stdout.contains("will not fit"), "{}", warn.stdout);
    let refused = run_in(dir.path(), &["run", "pipeline.yaml"], &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("stages[0].dedup: needs about"), "{}", refused.stderr);
    assert!(!dir.path().join("out").exists());
}

/// Every output document of `out` (each file's lines, by file name).
fn outputs(out: &Path) -> BTreeMap<String, Vec<serde_json::Value>> {
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(out).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".jsonl") && !name.starts_with('_') {
            files.insert(name, read_jsonl(&e.path()));
        }
    }
    files
}

/// Exact dedup, and fuzzy dedup without the pair check, spill no text: their output reads
/// the source again (`host/dedup/src/lean.rs`). What it writes equals the path that spills
/// whole batches (forced by a stage in front that rewrites the text, to itself), with files
/// cut into byte ranges, a bad line, a filter in front, `mark`, and after a kill in any phase.
/// Fuzzy dedup that checks its pairs spills the text.
#[test]
fn output_read_from_the_source_again_equals_the_spilled_batches() {
    output_read_again_equals_spilled("method: exact", &["spill-0", "docs", "scan", "groups", "output-partition", "duplicates"]);
    output_read_again_equals_spilled("method: fuzzy, word_ngrams: 5, jaccard_threshold: 0", &["docs", "scan", "buckets-001", "groups"]);
    let (dir, _) = setup(FUZZY, "");
    let checked = run_in(dir.path(), &["run", "pipeline.yaml"], &[]);
    assert!(!checked.ok().stderr.contains("output reads the source again"), "{}", checked.stderr);
}

/// The output of dedup step `{step}` read from the source again equals the one replayed from
/// whole spilled batches; a kill at each of `kills` and a rerun write the same.
fn output_read_again_equals_spilled(step: &str, kills: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let base = base_texts();
    let mut docs = 0;
    for (f, name) in ["a.jsonl", "b.jsonl"].iter().enumerate() {
        let mut s = String::new();
        for i in 0..120 {
            // Every fourth document repeats an earlier one (across files too), every tenth
            // is short (and repeated); texts with escapes and non-ASCII; metadata of every
            // JSON type.
            let t = match i {
                _ if i % 10 == 9 => format!("a short document {}", i % 3),
                _ if i % 4 == 3 => base[(i * 7 + f) % 40].clone(),
                _ => format!("{}\n«{f}-{i}» ünïcödé\t\"q\"", base[(i + f * 120) % base.len()]),
            };
            let meta = serde_json::json!({"id": format!("{f}-{i:03}"), "text": t, "url": format!("https://x/{i}"), "n": i, "nested": {"a": [i, null, true]}});
            s.push_str(&meta.to_string());
            s.push('\n');
            docs += 1;
            if i == 50 {
                s.push_str("{\"id\": \"broken\", \"text\": \n");
            }
        }
        std::fs::write(dir.path().join("data").join(name), s).unwrap();
    }
    let run = |stages: &str, out: &str, extra: &[(&str, &str)]| {
        write_pipeline(
            dir.path(),
            &format!(
                "source: {{path: data, blocksize: 40KB}}\nbatch_size: 16\nstages:\n{stages}\nsink: {{path: {out}, mode: overwrite}}\n"
            ),
        );
        run_in(dir.path(), &["run", "pipeline.yaml"], extra)
    };
    let dedup = |extra: &str| format!("  - dedup: {{{step}{extra}}}");
    let again = "output reads the source again";
    // (Exact dedup's output is written during its documents phase unless told not to: the
    // streamed output is checked against this one below.)
    let lean = run(&dedup(""), "lean", &[("CURATOR_DEDUP_STREAM", "0")]);
    lean.ok();
    assert!(lean.stderr.contains(again), "{}", lean.stderr);
    let whole = run(&format!("  - plugin: unicode_normalize\n{}", dedup("")), "whole", &[]);
    whole.ok();
    assert!(!whole.stderr.contains(again), "a rewrite in front spills whole batches\n{}", whole.stderr);
    let (l, w) = (dir.path().join("lean"), dir.path().join("whole"));
    assert_eq!(duplicates(&l), duplicates(&w));
    assert!(duplicates(&l).len() >= 40, "{}", duplicates(&l).len());
    assert_eq!(outputs(&l), outputs(&w));
    let written: usize = outputs(&l).values().map(Vec::len).sum();
    assert_eq!(written + duplicates(&l).len(), docs);
    // Exact dedup that removes, with nothing after it, writes each partition as soon as it
    // and the ones before it are read (`host/src/exec/stream_dedup.rs`): the same files.
    let streamed = run(&dedup(""), "streamed", &[]);
    streamed.ok();
    let streams = "written while their documents were read";
    assert_eq!(streamed.stderr.contains(streams), step.contains("exact"), "{}", streamed.stderr);
    assert_eq!(outputs(&dir.path().join("streamed")), outputs(&l));
    assert_eq!(duplicates(&dir.path().join("streamed")), duplicates(&l));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("streamed/_manifest.json")).unwrap(),
        std::fs::read_to_string(l.join("_manifest.json")).unwrap(),
        "the manifests list the same files, in the same order"
    );
    // The documents phase keeps its batches in memory for the output (every one of them by
    // default on this input), none, or some: a partition is replayed from memory only when
    // all its batches were kept, and the output is the same either way.
    let kept = |stderr: &str| -> (u64, u64) {
        let line = stderr.lines().find(|l| l.contains("kept in memory for the output")).unwrap_or_else(|| panic!("{stderr}"));
        let num = |at: &str| {
            line[..line.find(at).unwrap()].rsplit(|c: char| !c.is_ascii_digit()).find(|w| !w.is_empty()).unwrap().parse().unwrap()
        };
        (num(" batch(es)"), num(" that did not fit"))
    };
    assert_eq!(kept(&lean.stderr).1, 0, "{}", lean.stderr);
    for (front, budget, want) in [("", "0", "none"), ("", "60000", "some"), ("  - plugin: unicode_normalize\n", "60000", "some")] {
        let out = format!("kept-{want}-{}", front.len());
        let r = run(&format!("{front}{}", dedup("")), &out, &[("CURATOR_DEDUP_RESIDENT_BYTES", budget)]);
        r.ok();
        let (held, refused) = kept(&r.stderr);
        match want {
            "none" => assert_eq!(held, 0, "{}", r.stderr),
            _ => assert!(held > 0 && refused > 0, "{budget} bytes keep some batches, not all\n{}", r.stderr),
        }
        assert_eq!(outputs(&dir.path().join(&out)), outputs(&l), "{out}");
        assert_eq!(duplicates(&dir.path().join(&out)), duplicates(&l), "{out}");
    }
    // The bad lines were quarantined once, by the first reading.
    let rejected: usize = std::fs::read_dir(l.join("_rejected")).unwrap().flatten().map(|e| read_jsonl(&e.path()).len()).sum();
    assert_eq!(rejected, 2);

    // A filter in front: the spill keeps its rows, the output reads just those back.
    let front = format!("  - plugin: word_count_filter\n    params: {{min_words: 10}}\n{}", dedup(""));
    let filtered = run(&front, "filtered", &[("CURATOR_DEDUP_STREAM", "0")]);
    filtered.ok();
    assert!(filtered.stderr.contains(again), "{}", filtered.stderr);
    // Streamed (exact), the same.
    let filtered_streamed = run(&front, "filtered-streamed", &[]);
    assert_eq!(filtered_streamed.ok().stderr.contains(streams), step.contains("exact"), "{}", filtered_streamed.stderr);
    assert_eq!(outputs(&dir.path().join("filtered-streamed")), outputs(&dir.path().join("filtered")));
    let long = |v: &serde_json::Value| v["text"].as_str().unwrap().split_whitespace().count() >= 10;
    let unfiltered = outputs(&l);
    for (name, lines) in outputs(&dir.path().join("filtered")) {
        let want: Vec<&serde_json::Value> = unfiltered[&name].iter().filter(|v| long(v)).collect();
        assert_eq!(lines.iter().collect::<Vec<_>>(), want, "{name}");
    }

    // mark: every document, with the verdict's columns.
    for out in ["lean-mark", "whole-mark"] {
        let front = if out == "whole-mark" { "  - plugin: unicode_normalize\n" } else { "" };
        run(&format!("{front}{}", dedup(", action: mark")), out, &[]).ok();
    }
    let marked = outputs(&dir.path().join("lean-mark"));
    assert_eq!(marked, outputs(&dir.path().join("whole-mark")));
    assert_eq!(marked.values().map(Vec::len).sum::<usize>(), docs);
    assert_eq!(marked.values().flatten().filter(|v| v["is_duplicate"] == true).count(), duplicates(&l).len());

    // Killed in any phase, a rerun writes the same.
    for phase in kills {
        let out = format!("killed-{phase}");
        let killed = run(&dedup(""), &out, &[("CURATOR_DEDUP_CRASH_AT", phase)]);
        assert_ne!(killed.code, 0, "{phase}: the run was not killed\n{}", killed.stderr);
        run(&dedup(""), &out, &[]).ok();
        assert_eq!(outputs(&dir.path().join(&out)), outputs(&l), "{step}: {phase}");
        assert_eq!(duplicates(&dir.path().join(&out)), duplicates(&l), "{step}: {phase}");
    }
}
