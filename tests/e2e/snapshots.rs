//! Snapshots of what users read (insta; `cargo insta review` after an intended change): the
//! CLI's help, the plan report of the quickstart, the pipeline file's JSON Schema and a
//! plugin's params as `plugin inspect` shows them. A change to any of them shows up line by
//! line in review instead of passing unnoticed.

use crate::support::*;

fn stdout(args: &[&str]) -> String {
    let run: Run = host().args(args).output().expect("cannot start curator-host").into();
    run.ok();
    run.stdout
}

#[test]
fn cli_help() {
    insta::assert_snapshot!("help", stdout(&["--help"]));
    insta::assert_snapshot!("run_help", stdout(&["run", "--help"]));
    insta::assert_snapshot!("plan_help", stdout(&["plan", "--help"]));
}

#[test]
fn pipeline_schema() {
    insta::assert_snapshot!(stdout(&["schema", "pipeline"]));
}

#[test]
fn plugin_params_as_inspect_shows_them() {
    let run = run_with_guests(&["plugin", "inspect", "word_count_filter"]);
    run.ok();
    // The plugin's file and size depend on the build.
    let shown: Vec<&str> = run.stdout.lines().filter(|l| !l.trim_start().starts_with("file") && !l.contains("bytes")).collect();
    insta::assert_snapshot!(shown.join("\n"));
}

/// `curator-host plan` on the quickstart, for a fixed machine (`--memory`, `--workers`):
/// stages, workers, reservations, the corpus estimate.
#[test]
fn plan_report_of_the_quickstart() {
    let tmp = tempfile::tempdir().unwrap();
    let quickstart = root().join("examples/quickstart");
    std::fs::copy(quickstart.join("pipeline.yaml"), tmp.path().join("pipeline.yaml")).unwrap();
    std::fs::create_dir_all(tmp.path().join("data")).unwrap();
    for e in std::fs::read_dir(quickstart.join("data")).unwrap().flatten() {
        std::fs::copy(e.path(), tmp.path().join("data").join(e.file_name())).unwrap();
    }
    let run: Run = host()
        .current_dir(tmp.path())
        .args(["plan", "pipeline.yaml", "--memory", "8GiB", "--workers", "4", "--plugins"])
        .arg(guests_dir())
        .output()
        .expect("cannot start curator-host")
        .into();
    run.ok();
    let text = run.stdout.replace(&tmp.path().display().to_string(), "[DIR]").replace(&guests_dir().display().to_string(), "[PLUGINS]");
    insta::assert_snapshot!(text);
}
