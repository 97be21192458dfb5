//! A dedup step run in phases (`run --phase P --shard I/N`), as the jobs of a cluster would:
//! the duplicates, the output files and the manifest equal one machine's run, a phase that
//! starts too early names what is missing, and a phase of another pipeline is refused.

use std::path::Path;

use crate::dedup::{duplicates, output_ids, run_in, setup, truth};
use crate::support::*;

/// The phases of `pipeline` with `docs` docs shards, `buckets` bucket shards and `docs`
/// output shards, then `merge OUT`.
fn phased(dir: &Path, pipeline: &str, out: &str, docs: usize, buckets: usize) {
    let step = |phase: &str, shard: Option<(usize, usize)>| {
        let mut args = vec!["run".to_string(), pipeline.to_string(), "--phase".into(), phase.into()];
        if let Some((i, n)) = shard {
            args.extend(["--shard".into(), format!("{i}/{n}")]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_in(dir, &args, &[]).ok();
    };
    for i in 0..docs {
        step("docs", Some((i, docs)));
    }
    for j in 0..buckets {
        step("buckets", Some((j, buckets)));
    }
    step("components", None);
    for i in 0..docs {
        step("output", Some((i, docs)));
    }
    let merged: Run = host().current_dir(dir).args(["merge", out]).output().unwrap().into();
    merged.ok();
    assert!(!dir.join(out).join("_dedup_work").exists(), "merge leaves the work directory: {}", merged.stdout);
}

fn manifest(out: &Path) -> Vec<(String, String)> {
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("_manifest.json")).unwrap()).unwrap();
    m["files"].as_array().unwrap().iter().map(|f| (f["path"].as_str().unwrap().into(), f["checksum"].as_str().unwrap().into())).collect()
}

#[test]
fn fuzzy_dedup_in_phases_over_three_shards_equals_one_machine() {
    fuzzy_in_phases("{method: fuzzy, word_ngrams: 5, bands_per_iteration: 4}");
    // Without the pair check: the scans hold band keys, the output shards read the source again.
    fuzzy_in_phases("{method: fuzzy, word_ngrams: 5, bands_per_iteration: 4, jaccard_threshold: 0}");
}

fn fuzzy_in_phases(stage: &str) {
    let (dir, docs) = setup(stage, ", blocksize: 40KB");
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let single = dir.path().join("out");
    assert!(!duplicates(&single).is_empty());
    let found = duplicates(&single).keys().cloned().collect::<std::collections::BTreeSet<_>>();
    if stage.contains("jaccard_threshold: 0") {
        assert!(found.is_superset(&truth(&docs, 0.8)), "{stage}");
    } else {
        assert_eq!(found, truth(&docs, 0.8));
    }
    let yaml = std::fs::read_to_string(dir.path().join("pipeline.yaml")).unwrap().replace("path: out,", "path: phased,");
    std::fs::write(dir.path().join("phased.yaml"), &yaml).unwrap();
    // 3 docs shards, 2 bucket shards (the 5 passes dealt 3 + 2).
    phased(dir.path(), "phased.yaml", "phased", 3, 2);
    let out = dir.path().join("phased");
    assert_eq!(duplicates(&out), duplicates(&single));
    assert_eq!(output_ids(&out), output_ids(&single));
    assert_eq!(manifest(&out), manifest(&single));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("_summary.json")).unwrap()).unwrap();
    assert_eq!(s["documents_in"].as_u64(), Some(docs.len() as u64), "{s}");
    assert_eq!(s["documents_out"].as_u64(), Some((docs.len() - duplicates(&single).len()) as u64), "{s}");
    // The merged summary carries the step's statistics, as one machine's does.
    assert_eq!(s["dedup"]["duplicates"].as_u64(), Some(duplicates(&single).len() as u64), "{s}");
    assert_eq!(s["dedup"]["method"].as_str(), Some("fuzzy"), "{s}");
    // More bucket shards than passes: the extra ones have nothing to do, the result is the same.
    let yaml6 = yaml.replace("path: phased,", "path: phased6,");
    std::fs::write(dir.path().join("phased6.yaml"), yaml6).unwrap();
    phased(dir.path(), "phased6.yaml", "phased6", 2, 7);
    assert_eq!(duplicates(&dir.path().join("phased6")), duplicates(&single));
    assert_eq!(manifest(&dir.path().join("phased6")), manifest(&single));
}

#[test]
fn phases_that_share_only_an_object_store_equal_one_machine() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = crate::s3::S3Server::start();
    through_object_store(&s3, "{method: fuzzy, word_ngrams: 5, bands_per_iteration: 4}", "phases-fuzzy");
    // Without the pair check the scans hold band keys and no text is spilled.
    through_object_store(&s3, "{method: fuzzy, word_ngrams: 5, bands_per_iteration: 4, jaccard_threshold: 0}", "phases-fuzzy-lean");
    // Exact dedup's documents spill holds no text either: the output shards read the source
    // (in the store) again.
    through_object_store(&s3, "{method: exact}", "phases-exact");
}

/// The phases of a dedup step `stage` on the fixture, every job in a directory of its own
/// with the object store `s3` as the only medium they share, equal one machine's run.
fn through_object_store(s3: &crate::s3::S3Server, stage: &str, bucket: &str) {
    let (dir, _) = setup(stage, ", blocksize: 40KB");
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let single = dir.path().join("out");
    assert!(!duplicates(&single).is_empty());
    s3.create_bucket(bucket);
    for f in std::fs::read_dir(dir.path().join("data")).unwrap().flatten() {
        s3.put_object(bucket, &format!("data/{}", f.file_name().to_string_lossy()), &std::fs::read(f.path()).unwrap());
    }
    // The input, the work (OUTPUT/_dedup_work, by default for an object-store sink) and the
    // output live in the object store only: every job runs in a directory of its own, with a
    // temporary directory of its own, as on nodes that share no filesystem.
    let yaml = std::fs::read_to_string(dir.path().join("pipeline.yaml"))
        .unwrap()
        .replace("path: data,", &format!("path: s3://{bucket}/data,"))
        .replace("path: out,", &format!("path: s3://{bucket}/out,"));
    let pipeline = dir.path().join("s3.yaml");
    std::fs::write(&pipeline, yaml).unwrap();
    let job = |args: &[&str]| {
        let node = tempfile::tempdir().unwrap();
        let mut c = s3.command(s3.port);
        c.current_dir(node.path()).env("TMPDIR", node.path()).args(args);
        let run: Run = c.output().unwrap().into();
        run.ok();
        // The job's scratch copy of the work is gone when it ends.
        let left = scratch_left(node.path());
        assert!(left.is_empty(), "{left:?}");
        run
    };
    let phase = |p: &str, shard: &str| {
        let plugins = [crate::dedup::minhash_dir().to_str().unwrap(), guests_dir().to_str().unwrap()];
        let mut args = vec!["run", pipeline.to_str().unwrap(), "--phase", p, "--plugins", plugins[0], "--plugins", plugins[1]];
        if !shard.is_empty() {
            args.extend(["--shard", shard]);
        }
        job(&args)
    };
    // Three docs shards, two bucket shards (the passes dealt between them), three output shards.
    for i in ["0/3", "1/3", "2/3"] {
        let docs = phase("docs", i);
        assert!(docs.stderr.contains(&format!("uploaded to s3://{bucket}/out/_dedup_work")), "{}", docs.stderr);
    }
    let early: Run = s3
        .command(s3.port)
        .args(["run", pipeline.to_str().unwrap(), "--phase", "output", "--plugins"])
        .arg(crate::dedup::minhash_dir())
        .output()
        .unwrap()
        .into();
    assert!(early.stderr.contains("the components phase has not finished"), "{}", early.stderr);
    for j in ["0/2", "1/2"] {
        let buckets = phase("buckets", j);
        // A fuzzy step's bucket shards check their own passes' pairs; components only joins.
        assert_eq!(stage.contains("fuzzy"), buckets.stderr.contains("candidate pair(s) checked here"), "{}", buckets.stderr);
    }
    phase("components", "");
    for i in ["0/3", "1/3", "2/3"] {
        phase("output", i);
    }
    let merged = job(&["merge", &format!("s3://{bucket}/out")]);
    // The work has served: merge removes it from the store.
    assert!(merged.stdout.contains("removed the dedup step's work"), "{}", merged.stdout);
    assert!(s3.keys(bucket, "out/_dedup_work").is_empty());
    let phased = dir.path().join("phased");
    s3.download(bucket, "out", &phased);
    assert_eq!(duplicates(&phased), duplicates(&single));
    assert_eq!(output_ids(&phased), output_ids(&single));
    assert_eq!(manifest(&phased), manifest(&single));
}

#[test]
fn exact_dedup_in_phases_equals_one_machine() {
    let (dir, _) = setup("{method: exact}", ", blocksize: 40KB");
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let yaml = std::fs::read_to_string(dir.path().join("pipeline.yaml")).unwrap().replace("path: out,", "path: phased,");
    std::fs::write(dir.path().join("phased.yaml"), yaml).unwrap();
    phased(dir.path(), "phased.yaml", "phased", 4, 1);
    assert_eq!(duplicates(&dir.path().join("phased")), duplicates(&dir.path().join("out")));
    assert_eq!(manifest(&dir.path().join("phased")), manifest(&dir.path().join("out")));
}

#[test]
fn phases_name_what_is_missing_and_refuse_another_pipeline() {
    let (dir, _) = setup("{method: fuzzy, word_ngrams: 5, bands_per_iteration: 10}", ", blocksize: 40KB");
    let go = |args: &[&str]| run_in(dir.path(), args, &[]);
    go(&["run", "pipeline.yaml", "--phase", "docs", "--shard", "1/3"]).ok();
    let early = go(&["run", "pipeline.yaml", "--phase", "buckets"]);
    assert_eq!(early.code, 1, "{}", early.stderr);
    assert!(early.stderr.contains("docs shard(s) 0, 2 of 3 have not finished"), "{}", early.stderr);
    go(&["run", "pipeline.yaml", "--phase", "docs", "--shard", "0/3"]).ok();
    go(&["run", "pipeline.yaml", "--phase", "docs", "--shard", "2/3"]).ok();
    // A requeued docs shard finds its work done.
    go(&["run", "pipeline.yaml", "--phase", "docs", "--shard", "2/3"]).ok();
    go(&["run", "pipeline.yaml", "--phase", "buckets", "--shard", "0/2"]).ok();
    let components = go(&["run", "pipeline.yaml", "--phase", "components"]);
    assert_eq!(components.code, 1);
    assert!(components.stderr.contains("LSH pass(es) 1 of 2 have not finished"), "{}", components.stderr);
    let output = go(&["run", "pipeline.yaml", "--phase", "output"]);
    assert!(output.stderr.contains("the components phase has not finished"), "{}", output.stderr);
    // Another pipeline (a different threshold) cannot use this work.
    let other = std::fs::read_to_string(dir.path().join("pipeline.yaml"))
        .unwrap()
        .replace("word_ngrams: 5", "word_ngrams: 5, jaccard_threshold: 0.7");
    std::fs::write(dir.path().join("other.yaml"), other).unwrap();
    let refused = go(&["run", "other.yaml", "--phase", "buckets", "--shard", "1/2"]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("holds the dedup work of another pipeline or input"), "{}", refused.stderr);
    let bad = go(&["run", "pipeline.yaml", "--phase", "components", "--shard", "0/2"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--phase components is one job"), "{}", bad.stderr);
    let sharded = go(&["run", "pipeline.yaml", "--shard", "0/2"]);
    assert_eq!(sharded.code, 2);
    assert!(sharded.stderr.contains("run it sharded in phases"), "{}", sharded.stderr);
}

/// What `sbatch` does for the example, run here and now: array tasks one after another with
/// Slurm's variables, `--wrap` commands, a job id on stdout (the jobs' output on stderr).
const FAKE_SBATCH: &str = r#"#!/usr/bin/env bash
set -euo pipefail
array="" wrap="" script=""
while [ $# -gt 0 ]; do
    case "$1" in
        --array=*) array="${1#--array=}" ;;
        --wrap) wrap="$2"; shift ;;
        --*) ;;
        *) script="$1" ;;
    esac
    shift
done
if [ -n "$wrap" ]; then
    bash -c "$wrap" >&2
elif [ -n "$array" ]; then
    lo="${array%-*}" hi="${array#*-}"
    for i in $(seq "$lo" "$hi"); do
        SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_MIN=$lo SLURM_ARRAY_TASK_COUNT=$((hi - lo + 1)) bash "$script" >&2
    done
else
    bash "$script" >&2
fi
echo "$RANDOM"
"#;

#[test]
fn the_slurm_dedup_chain_runs_under_a_fake_sbatch_and_equals_one_machine() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    for f in ["shard-000.jsonl", "shard-001.jsonl"] {
        std::fs::copy(root().join("examples/dedup/data").join(f), dir.path().join("data").join(f)).unwrap();
    }
    let yaml = std::fs::read_to_string(root().join("examples/cluster/pipeline-dedup.yaml")).unwrap().replace("../dedup/data", "data");
    std::fs::write(dir.path().join("single.yaml"), yaml.replace("path: out ", "path: single ")).unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), &yaml).unwrap();
    let sbatch = dir.path().join("sbatch");
    std::fs::write(&sbatch, FAKE_SBATCH).unwrap();
    std::fs::set_permissions(&sbatch, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    run_in(dir.path(), &["run", "single.yaml"], &[]).ok();
    let guests = guests_dir().display().to_string();
    let r: Run = std::process::Command::new("bash")
        .arg(root().join("examples/cluster/slurm-dedup.sh"))
        .current_dir(dir.path())
        .env("SBATCH", &sbatch)
        .env("N", "3")
        .env("M", "3")
        .env("CURATOR", env!("CARGO_BIN_EXE_curator-host"))
        .env("CURATOR_CACHE_DIR", root().join("target/e2e-cache"))
        .env("PIPELINE", dir.path().join("pipeline.yaml"))
        .env("PLUGINS", crate::dedup::minhash_dir())
        .env("CURATOR_PLUGINS", &guests)
        .env("OUTPUT", dir.path().join("out"))
        .output()
        .unwrap()
        .into();
    r.ok();
    let (single, out) = (dir.path().join("single"), dir.path().join("out"));
    assert!(!duplicates(&single).is_empty());
    assert_eq!(duplicates(&out), duplicates(&single));
    assert_eq!(manifest(&out), manifest(&single));
}

/// Semantic bucket shards, started at once (they fit k-means together), each succeeding
/// and checking its own clusters.
fn together(shards: impl Iterator<Item = std::process::Command>) {
    let started: Vec<_> =
        shards.map(|mut c| c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap()).collect();
    for s in started {
        let run: Run = s.wait_with_output().unwrap().into();
        run.ok();
        assert!(run.stderr.contains("cluster(s) checked here"), "{}", run.stderr);
    }
}

/// `n` seeded unit vectors of 16 dimensions around a few dozen centres, and a near-copy
/// (cosine ≈ 0.999) of every seventh: JSONL documents with the vector as `embedding`, cut
/// into `files` files under `data/`.
fn vector_fixture(dir: &Path, n: usize, files: usize) {
    let mut next = crate::stored_vectors::noise(0x2545_f491_4f6c_dd1d);
    let unit = crate::stored_vectors::unit;
    let centres: Vec<Vec<f32>> = (0..40).map(|_| (0..16).map(|_| next()).collect()).collect();
    let mut lines = Vec::new();
    for i in 0..n {
        let v = unit(centres[i % centres.len()].iter().map(|c| c + 1.5 * next()).collect());
        if i % 7 == 3 {
            let copy = unit(v.iter().map(|x| x + 0.01 * next()).collect());
            lines.push(serde_json::json!({"id": format!("c{i:04}"), "text": format!("copy of {i}"), "embedding": copy}).to_string());
        }
        lines.push(serde_json::json!({"id": format!("d{i:04}"), "text": format!("document {i}"), "embedding": v}).to_string());
    }
    std::fs::create_dir_all(dir.join("data")).unwrap();
    for (f, chunk) in lines.chunks(lines.len().div_ceil(files)).enumerate() {
        std::fs::write(dir.join(format!("data/part-{f:02}.jsonl")), chunk.join("\n") + "\n").unwrap();
    }
}

#[test]
fn semantic_dedup_in_phases_equals_one_machine() {
    let dir = tempfile::tempdir().unwrap();
    vector_fixture(dir.path(), 900, 5);
    // A fit sample (fit_fraction) spanning the shards; more clusters than blobs, so some
    // clusters run empty in a shard's rows during the fit.
    let stage = "{method: semantic, n_clusters: 60, eps: [0.01, 0.05], fit_fraction: 0.7, max_iter: 40, tol: 1e-9, device: cpu}";
    let yaml = format!("source: {{path: data, blocksize: 16KB}}\nbatch_size: 32\nstages:\n  - dedup: {stage}\nsink: {{path: out}}\n");
    write_pipeline(dir.path(), &yaml);
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let single = dir.path().join("out");
    let found = duplicates(&single);
    assert!(found.len() >= 100 && found.keys().any(|id| id.starts_with('c')), "{found:?}");
    let summary = |out: &Path| -> serde_json::Value {
        let s: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("_duplicates/summary.json")).unwrap()).unwrap();
        assert!(s["semantic"]["clusters"].as_u64().is_some(), "{s}");
        s["semantic"].clone()
    };
    for (docs, buckets) in [(3, 3), (2, 1), (1, 4)] {
        let name = format!("phased-{docs}-{buckets}");
        std::fs::write(dir.path().join(format!("{name}.yaml")), yaml.replace("path: out}", &format!("path: {name}}}"))).unwrap();
        let pipeline = format!("{name}.yaml");
        let step = |phase: &str, shard: Option<String>| {
            let mut args = vec!["run", pipeline.as_str(), "--phase", phase];
            if let Some(s) = &shard {
                args.extend(["--shard", s.as_str()]);
            }
            run_in(dir.path(), &args, &[]).ok();
        };
        for i in 0..docs {
            step("docs", Some(format!("{i}/{docs}")));
        }
        // A semantic step's bucket shards fit k-means together: all of them at once.
        together((0..buckets).map(|j| {
            let mut c = host();
            c.current_dir(dir.path()).args(["run", &pipeline, "--phase", "buckets", "--shard", &format!("{j}/{buckets}")]);
            c
        }));
        step("components", None);
        for i in 0..docs {
            step("output", Some(format!("{i}/{docs}")));
        }
        host().current_dir(dir.path()).args(["merge", &name]).output().map(Run::from).unwrap().ok();
        let out = dir.path().join(&name);
        assert_eq!(duplicates(&out), found, "{docs} docs shard(s), {buckets} bucket shard(s)");
        assert_eq!(output_ids(&out), output_ids(&single));
        assert_eq!(manifest(&out), manifest(&single));
        assert_eq!(summary(&out), summary(&single), "{docs} docs shard(s), {buckets} bucket shard(s)");
        let merged = |out: &Path| -> serde_json::Value {
            serde_json::from_slice::<serde_json::Value>(&std::fs::read(out.join("_summary.json")).unwrap()).unwrap()["dedup"]["semantic"]
                .clone()
        };
        assert_eq!(merged(&out), merged(&single));
    }
    // The shards fit on their CPUs: device: gpu is refused in phases, naming the field.
    std::fs::write(dir.path().join("gpu.yaml"), yaml.replace("device: cpu", "device: gpu").replace("path: out}", "path: gpu-out}"))
        .unwrap();
    let refused = run_in(dir.path(), &["run", "gpu.yaml", "--phase", "docs", "--shard", "0/2"], &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("stages[0].dedup.device") && refused.stderr.contains("device: cpu or auto"), "{}", refused.stderr);
}

#[test]
fn a_killed_semantic_bucket_shard_rejoins_the_fit_with_the_same_result() {
    let dir = tempfile::tempdir().unwrap();
    vector_fixture(dir.path(), 900, 3);
    let stage = "{method: semantic, n_clusters: 40, max_iter: 40, tol: 1e-9, device: cpu}";
    let yaml = format!("source: {{path: data}}\nbatch_size: 32\nstages:\n  - dedup: {stage}\nsink: {{path: out}}\n");
    write_pipeline(dir.path(), &yaml);
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    std::fs::write(dir.path().join("phased.yaml"), yaml.replace("path: out}", "path: phased}")).unwrap();
    run_in(dir.path(), &["run", "phased.yaml", "--phase", "docs"], &[]).ok();
    let shard = |j: usize, crash: Option<&str>| {
        let mut c = host();
        c.current_dir(dir.path()).args(["run", "phased.yaml", "--phase", "buckets", "--shard", &format!("{j}/2")]);
        if let Some(at) = crash {
            c.env("CURATOR_DEDUP_CRASH_AT", at);
        }
        c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap()
    };
    // Shard 1 dies right after its partial of round 2; shard 0 waits for the round's reduce.
    let first = shard(0, None);
    let killed: Run = shard(1, Some("kmeans/partial-0002-shard-0001-of-0002.bin")).wait_with_output().unwrap().into();
    assert_ne!(killed.code, 0, "{}", killed.stderr);
    assert!(killed.stderr.contains("killing this process"), "{}", killed.stderr);
    // Started again, it joins at the last round written.
    let again: Run = shard(1, None).wait_with_output().unwrap().into();
    again.ok();
    let first: Run = first.wait_with_output().unwrap().into();
    first.ok();
    run_in(dir.path(), &["run", "phased.yaml", "--phase", "components"], &[]).ok();
    run_in(dir.path(), &["run", "phased.yaml", "--phase", "output"], &[]).ok();
    let (single, phased) = (dir.path().join("out"), dir.path().join("phased"));
    assert!(!duplicates(&single).is_empty());
    assert_eq!(duplicates(&phased), duplicates(&single));
    let stats = |out: &Path| -> serde_json::Value {
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(out.join("_summary.json")).unwrap()).unwrap()["dedup"]["semantic"]
            .clone()
    };
    assert_eq!(stats(&phased), stats(&single));
}

#[test]
fn semantic_phases_that_share_only_an_object_store_equal_one_machine() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = crate::s3::S3Server::start();
    let bucket = "phases-semantic";
    let dir = tempfile::tempdir().unwrap();
    vector_fixture(dir.path(), 400, 3);
    let stage = "{method: semantic, n_clusters: 24, fit_fraction: 0.8, device: cpu}";
    let yaml = format!("source: {{path: data}}\nbatch_size: 32\nstages:\n  - dedup: {stage}\nsink: {{path: out}}\n");
    write_pipeline(dir.path(), &yaml);
    run_in(dir.path(), &["run", "pipeline.yaml"], &[]).ok();
    let single = dir.path().join("out");
    s3.create_bucket(bucket);
    for f in std::fs::read_dir(dir.path().join("data")).unwrap().flatten() {
        s3.put_object(bucket, &format!("data/{}", f.file_name().to_string_lossy()), &std::fs::read(f.path()).unwrap());
    }
    let pipeline = dir.path().join("s3.yaml");
    std::fs::write(
        &pipeline,
        yaml.replace("path: data}", &format!("path: s3://{bucket}/data}}")).replace("path: out}", &format!("path: s3://{bucket}/out}}")),
    )
    .unwrap();
    // Every job in a directory of its own, with a TMPDIR of its own: the store is all they share.
    let nodes: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let job = |node: usize, args: &[&str]| {
        let mut c = s3.command(s3.port);
        c.current_dir(nodes[node].path()).env("TMPDIR", nodes[node].path()).args(args);
        c
    };
    let p = pipeline.to_str().unwrap();
    for i in 0..2 {
        let run: Run = job(i, &["run", p, "--phase", "docs", "--shard", &format!("{i}/2")]).output().unwrap().into();
        run.ok();
    }
    // The two bucket shards at once; they meet in the store between rounds.
    together((0..2).map(|j| job(2 + j, &["run", p, "--phase", "buckets", "--shard", &format!("{j}/2")])));
    assert!(!s3.keys(bucket, "out/_dedup_work/kmeans/round-0000.bin").is_empty());
    let run: Run = job(0, &["run", p, "--phase", "components"]).output().unwrap().into();
    run.ok();
    for i in 0..2 {
        let run: Run = job(i, &["run", p, "--phase", "output", "--shard", &format!("{i}/2")]).output().unwrap().into();
        run.ok();
    }
    let merged: Run = job(0, &["merge", &format!("s3://{bucket}/out")]).output().unwrap().into();
    merged.ok();
    assert!(s3.keys(bucket, "out/_dedup_work").is_empty());
    for node in &nodes {
        let left = scratch_left(node.path());
        assert!(left.is_empty(), "{left:?}");
    }
    let phased = dir.path().join("phased");
    s3.download(bucket, "out", &phased);
    assert!(!duplicates(&single).is_empty());
    assert_eq!(duplicates(&phased), duplicates(&single));
    assert_eq!(output_ids(&phased), output_ids(&single));
    assert_eq!(manifest(&phased), manifest(&single));
}

/// What a job left in its temp directory: every entry but an empty `curator-spool/` (where
/// object-store uploads are spooled; each spool file is removed once uploaded).
fn scratch_left(tmp: &std::path::Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name() != "curator-spool" || std::fs::read_dir(e.path()).map(|mut d| d.next().is_some()).unwrap_or(true))
        .map(|e| e.file_name())
        .collect()
}
