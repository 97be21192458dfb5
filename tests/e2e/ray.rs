//! `curator-ray` (python/curator-ray): its policy unit tests, and the quickstart and a fuzzy
//! dedup pipeline on a real local Ray cluster of two worker nodes, one of them killed mid-run
//! (python/curator-ray/tests/). Ray comes from PyPI (scripts/test.sh installs it).

use crate::support::*;

#[test]
fn curator_ray_runs_shards_and_dedup_phases_on_a_ray_cluster_and_survives_a_lost_node() {
    if !needs(Need::Ray) {
        return;
    }
    let package = root().join("python/curator-ray");
    let plugins = format!("{}:{}", guests_dir().display(), crate::dedup::minhash_dir().display());
    let r: Run = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-v", "-s", "tests", "-t", "."])
        .current_dir(&package)
        .env("PYTHONPATH", &package)
        .env("CURATOR", env!("CARGO_BIN_EXE_curator-host"))
        .env("CURATOR_CACHE_DIR", root().join("target/e2e-cache"))
        .env("CURATOR_TEST_PLUGINS", plugins)
        .env("CURATOR_TEST_EXAMPLES", root().join("examples"))
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .output()
        .expect("python3")
        .into();
    assert_eq!(r.code, 0, "curator-ray tests failed:\n{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("Ran 13 tests") && r.stderr.contains("OK"), "{}", r.stderr);
}
