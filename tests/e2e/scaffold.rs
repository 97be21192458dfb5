//! `curator-host new stage`: a stage crate scaffolded outside the workspace, built and run
//! with the commands its README gives (WASM and native), its unit tests passing.

use std::path::Path;

use crate::support::*;

/// Run the README's command (the code block's last line) in `dir`, with this build's
/// `curator-host` on PATH. The workspace's lock file pins the same dependency versions, so
/// the build needs nothing beyond what the workspace downloaded.
fn follow_readme(dir: &Path) -> Run {
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let command = readme.lines().find(|l| l.starts_with("cargo build")).expect("a build command in README.md").to_string();
    let bin = Path::new(env!("CARGO_BIN_EXE_curator-host")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    std::process::Command::new("bash")
        .args(["-c", &command])
        .current_dir(dir)
        .env("PATH", path)
        .env("CARGO_NET_OFFLINE", "true")
        .env("CURATOR_CACHE_DIR", root().join("target/e2e-cache"))
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap()
        .into()
}

#[test]
fn a_scaffolded_stage_builds_and_runs_as_its_readme_says() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, args, want) in [
        ("long_enough", vec!["--kind", "filter"], vec!["b", "c"]),
        ("char_count", vec!["--kind", "stage", "--native"], vec!["a", "b", "c", "d"]),
    ] {
        let made: Run = host().args(["new", "stage", name, "--dir"]).arg(tmp.path()).args(&args).output().unwrap().into();
        assert!(made.ok().stdout.contains("created"), "{}", made.stdout);
        let dir = tmp.path().join(name);
        let r = follow_readme(&dir);
        assert_eq!(r.code, 0, "{name}: {}\n{}", r.stdout, r.stderr);
        let out = read_jsonl(&dir.join("out/sample.jsonl"));
        let ids: Vec<&str> = out.iter().map(|d| d["id"].as_str().unwrap()).collect();
        assert_eq!(ids, want, "{name}");
        if name == "char_count" {
            assert_eq!(out[0]["chars"], 13);
            // Its own unit tests, on the SDK's test runner.
            let t: Run = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["test", "--offline", "--release"])
                .current_dir(&dir)
                .env_remove("CARGO_TARGET_DIR")
                .output()
                .unwrap()
                .into();
            assert_eq!(t.code, 0, "{}\n{}", t.stdout, t.stderr);
            assert!(t.stdout.contains("2 passed"), "{}", t.stdout);
        }
    }
    let again: Run = host().args(["new", "stage", "long_enough", "--dir"]).arg(tmp.path()).output().unwrap().into();
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}
