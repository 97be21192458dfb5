//! `run --shard I/N` and `merge`: shards cover every partition once, a killed shard resumes,
//! merged shards equal one machine's run, and the cluster examples run as written.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::*;

const PIPELINE: &str =
    "source: {path: data, blocksize: 60KB}\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 50}\nsink: {path: OUT}\n";

/// The dedup example's documents (954, real text) copied into `dir/data`.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    for f in ["shard-000.jsonl", "shard-001.jsonl"] {
        std::fs::copy(root().join("examples/dedup/data").join(f), dir.path().join("data").join(f)).unwrap();
    }
    dir
}

fn run(dir: &Path, out: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    std::fs::write(dir.join("pipeline.yaml"), PIPELINE.replace("OUT", out)).unwrap();
    let mut c = host();
    c.current_dir(dir).args(["run", "pipeline.yaml"]).args(args).arg("--plugins").arg(guests_dir());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

fn merge(dir: &Path, out: &str) -> Run {
    host().current_dir(dir).args(["merge", out]).output().unwrap().into()
}

/// (path, checksum) of every file in a manifest.
fn manifest(dir: &Path) -> Vec<(String, String)> {
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("_manifest.json")).unwrap()).unwrap();
    m["files"].as_array().unwrap().iter().map(|f| (f["path"].as_str().unwrap().into(), f["checksum"].as_str().unwrap().into())).collect()
}

#[test]
fn shards_then_merge_equal_one_machine_and_cover_each_partition_once() {
    let dir = setup();
    run(dir.path(), "single", &[], &[]).ok();
    let single = manifest(&dir.path().join("single"));
    assert!(single.len() >= 8, "{single:?}");
    for n in [1usize, 2, 3, 7] {
        let out = format!("out{n}");
        let mut owned: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..n {
            run(dir.path(), &out, &["--shard", &format!("{i}/{n}")], &[]).ok();
            let rec: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.path().join(&out).join(format!("_shards/shard-{i:04}-of-{n:04}.json"))).unwrap())
                    .unwrap();
            for f in rec["files"].as_array().unwrap() {
                *owned.entry(f["path"].as_str().unwrap().to_string()).or_default() += 1;
            }
        }
        assert!(owned.values().all(|&c| c == 1), "{n} shards: {owned:?}");
        let m = merge(dir.path(), &out);
        assert!(m.ok().stdout.contains(&format!("merged {n} shard(s)")), "{}", m.stdout);
        assert_eq!(manifest(&dir.path().join(&out)), single, "{n} shards");
        let s: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join(&out).join("_summary.json")).unwrap()).unwrap();
        assert_eq!(s["documents_in"].as_u64(), Some(954));
        assert!(!dir.path().join(&out).join(format!("_journal.shard-0000-of-{n:04}.jsonl")).exists());
    }
}

#[test]
fn branch_sinks_of_shards_merge_into_one_manifest_each() {
    let dir = setup();
    let with_branch = |out: &str| {
        PIPELINE.replace("OUT", out).replace("{min_words: 50}\n", &format!("{{min_words: 400}}\n    rejected: {{path: {out}-short}}\n"))
    };
    std::fs::write(dir.path().join("single.yaml"), with_branch("single")).unwrap();
    std::fs::write(dir.path().join("sharded.yaml"), with_branch("sharded")).unwrap();
    let go =
        |args: &[&str]| -> Run { host().current_dir(dir.path()).args(args).arg("--plugins").arg(guests_dir()).output().unwrap().into() };
    go(&["run", "single.yaml"]).ok();
    for i in 0..3 {
        go(&["run", "sharded.yaml", "--shard", &format!("{i}/3")]).ok();
    }
    // `merge` from another directory finds the branch's directory (recorded absolute).
    let m: Run = host().current_dir("/").arg("merge").arg(dir.path().join("sharded")).output().unwrap().into();
    m.ok();
    assert_eq!(manifest(&dir.path().join("sharded")), manifest(&dir.path().join("single")));
    let short = manifest(&dir.path().join("sharded-short"));
    assert!(!short.is_empty());
    assert_eq!(short, manifest(&dir.path().join("single-short")));
}

#[test]
fn a_killed_shard_resumes_and_merge_names_missing_shards() {
    let dir = setup();
    run(dir.path(), "single", &[], &[]).ok();
    run(dir.path(), "out", &["--shard", "0/3"], &[]).ok();
    let killed = run(dir.path(), "out", &["--shard", "1/3", "--workers", "1"], &[("CURATOR_DEDUP_CRASH_AT", "output-partition")]);
    assert_ne!(killed.code, 0, "{}", killed.stderr);
    let m = merge(dir.path(), "out");
    assert_eq!(m.code, 1);
    assert!(m.stderr.contains("shard(s) 1, 2 of 3 have not finished"), "{}", m.stderr);
    let rerun = run(dir.path(), "out", &["--shard", "1/3"], &[]);
    assert!(rerun.ok().stdout.contains("1 resumed") || rerun.stdout.contains("2 resumed"), "{}", rerun.stdout);
    run(dir.path(), "out", &["--shard", "2/3"], &[]).ok();
    // A requeued shard that had finished does nothing new.
    let again = run(dir.path(), "out", &["--shard", "2/3"], &[]);
    assert!(again.ok().stdout.contains("wrote 0 to"), "{}", again.stdout);
    merge(dir.path(), "out").ok();
    assert_eq!(manifest(&dir.path().join("out")), manifest(&dir.path().join("single")));
}

#[test]
fn the_slurm_example_runs_under_an_array_driver_and_the_job_is_indexed() {
    let dir = setup();
    std::fs::write(dir.path().join("pipeline.yaml"), PIPELINE.replace("OUT", "curated")).unwrap();
    let script = root().join("examples/cluster/slurm.sbatch");
    for i in 1..=4 {
        // What `sbatch --array=1-4` gives each task.
        let r: Run = std::process::Command::new("bash")
            .arg(&script)
            .current_dir(dir.path())
            .env("CURATOR", env!("CARGO_BIN_EXE_curator-host"))
            .env("CURATOR_CACHE_DIR", root().join("target/e2e-cache"))
            .env("PIPELINE", "pipeline.yaml")
            .env("PLUGINS", guests_dir())
            .env("SLURM_ARRAY_TASK_ID", i.to_string())
            .env("SLURM_ARRAY_TASK_MIN", "1")
            .env("SLURM_ARRAY_TASK_COUNT", "4")
            .output()
            .unwrap()
            .into();
        r.ok();
    }
    merge(dir.path(), "curated").ok();
    run(dir.path(), "single", &[], &[]).ok();
    assert_eq!(manifest(&dir.path().join("curated")), manifest(&dir.path().join("single")));
    // The Kubernetes example: an Indexed Job whose shard count is its completions.
    let text = std::fs::read_to_string(root().join("examples/cluster/k8s-indexed-job.yaml")).unwrap();
    let job: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let count = container["env"].as_array().unwrap().iter().find(|e| e["name"] == "CURATOR_SHARD_COUNT").unwrap()["value"].clone();
    assert_eq!(count.as_str().unwrap().parse::<u64>().unwrap(), job["spec"]["completions"].as_u64().unwrap());
    assert!(container["command"].as_array().unwrap().iter().any(|a| a == "--shard-from-env"));
}

#[test]
fn sharded_runs_refuse_what_they_cannot_split() {
    let dir = setup();
    std::fs::write(dir.path().join("pipeline.yaml"), "source: {path: data}\nstages:\n  - dedup: {method: exact}\nsink: {path: out}\n")
        .unwrap();
    let r: Run = host().current_dir(dir.path()).args(["run", "pipeline.yaml", "--shard", "0/2"]).output().unwrap().into();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("stages[0].dedup: a dedup step needs every partition: run it sharded in phases"), "{}", r.stderr);
    let bad: Run = host().current_dir(dir.path()).args(["run", "pipeline.yaml", "--shard", "2/2"]).output().unwrap().into();
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("expected I/N"), "{}", bad.stderr);
    let env: Run = host()
        .current_dir(dir.path())
        .args(["run", "pipeline.yaml", "--shard-from-env"])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap()
        .into();
    assert_eq!(env.code, 2);
    assert!(env.stderr.contains("neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX"), "{}", env.stderr);
}

#[test]
fn a_shard_removes_only_its_own_leftover_temp_files() {
    let dir = setup();
    let owned = |i: usize| -> Vec<String> {
        let r = run(dir.path(), "out", &["--shard", &format!("{i}/3"), "--dry-run"], &[]);
        r.ok().stdout.lines().filter_map(|l| l.split(" -> ").nth(1).map(str::to_string)).collect()
    };
    let (mine, theirs) = (owned(0), owned(2));
    assert!(!mine.is_empty() && !theirs.is_empty());
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    // What a killed attempt of shard 0 left, and what shard 2 is writing right now.
    let left = dir.path().join(format!("out/.{}.tmp-999999-0", mine[0]));
    let live = dir.path().join(format!("out/.{}.tmp-999998-0", theirs[0]));
    std::fs::write(&left, b"partial").unwrap();
    std::fs::write(&live, b"in progress").unwrap();
    run(dir.path(), "out", &["--shard", "0/3"], &[]).ok();
    assert!(!left.exists(), "shard 0 removes its own leftovers");
    assert!(live.exists(), "shard 0 leaves shard 2's temp file alone");
}
