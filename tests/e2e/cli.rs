//! The CLI: plugin listing and inspection, schemas, the compiled-plugin cache.

use crate::support::*;

#[test]
fn plugin_list_json_shows_manifests() {
    let run = run_with_guests(&["plugin", "list", "--json"]);
    run.ok();
    let list: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
    let wc = list.iter().find(|p| p["name"] == "word_count_filter").expect("word_count_filter listed");
    assert_eq!(wc["version"], "0.1.0");
    assert_eq!(wc["kind"], "wasm");
    assert_eq!(wc["resources"]["cpus"], 1.0);
    assert_eq!(wc["resources"]["memory_mb"], 256);
    assert_eq!(wc["params_schema"]["type"], "object");
    assert_eq!(wc["params_schema"]["properties"]["min_words"]["type"], "integer");
    assert_eq!(wc["params_schema"]["properties"]["min_words"]["default"], 50);
    let un = list.iter().find(|p| p["name"] == "unicode_normalize").expect("unicode_normalize listed");
    assert_eq!(un["params_schema"]["properties"]["form"]["enum"][1], "nfkc");
    let dr = list.iter().find(|p| p["name"] == "dir_reader").expect("dir_reader listed");
    assert_eq!(dr["permissions"]["directories"][0]["name"], "data");
}

#[test]
fn a_closed_stdout_ends_a_listing_quietly() {
    // `curator-host plugin list | head -0`: the reader is gone before the first line
    let mut child = host()
        .args(["plugin", "list", "--json", "--plugins"])
        .arg(guests_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn plugin_list_reports_unreadable_files_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("broken.wasm"), b"garbage").unwrap();
    let run: Run = host().args(["plugin", "list", "--plugins"]).arg(tmp.path()).output().unwrap().into();
    run.ok();
    assert!(run.stderr.contains("broken.wasm: not a WebAssembly component"), "{}", run.stderr);
}

#[test]
fn duplicate_plugins_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let wasm = guests_dir().join("word_count_filter.wasm");
    std::fs::copy(&wasm, tmp.path().join("a.wasm")).unwrap();
    std::fs::copy(&wasm, tmp.path().join("b.wasm")).unwrap();
    let run: Run = host().args(["plugin", "list", "--plugins"]).arg(tmp.path()).output().unwrap().into();
    run.ok();
    assert!(run.stderr.contains("duplicate plugin \"word_count_filter\""), "{}", run.stderr);
    assert!(run.stderr.contains("b.wasm is ignored"), "{}", run.stderr);
}

#[test]
fn plugin_inspect_by_file_and_name() {
    let file = guests_dir().join("unicode_normalize.wasm");
    let run: Run = host().args(["plugin", "inspect"]).arg(&file).arg("--json").output().unwrap().into();
    run.ok();
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["name"], "unicode_normalize");
    let run = run_with_guests(&["plugin", "inspect", "word_count_filter"]);
    run.ok();
    assert!(run.stdout.contains("min_words: integer = 50"), "{}", run.stdout);
    let run = run_with_guests(&["plugin", "inspect", "nope"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("no plugin named \"nope\""), "{}", run.stderr);
}

#[test]
fn plugins_found_through_env_var() {
    let run: Run = host().env("CURATOR_PLUGINS", guests_dir()).args(["plugin", "list"]).output().unwrap().into();
    run.ok();
    assert!(run.stdout.contains("word_count_filter"), "{}", run.stdout);
}

#[test]
fn plugin_list_columns_stay_aligned_with_long_names() {
    let run = run_with_guests(&["plugin", "list"]);
    run.ok();
    let lines: Vec<&str> = run.stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    let path_col = lines[0].find("PATH").expect("header");
    let long = lines.iter().find(|l| l.split_whitespace().next().is_some_and(|n| n.len() > 24)).expect("a plugin with a long name");
    assert!(long.len() > path_col, "{long}");
    for l in &lines[1..] {
        // Every row's path starts under the PATH header, however long the names before it.
        let chars: Vec<char> = l.chars().collect();
        assert!(chars.get(path_col).is_some_and(|c| !c.is_whitespace()), "misaligned row: {l:?}\n{}", run.stdout);
        assert!(path_col == 0 || chars[path_col - 1].is_whitespace(), "misaligned row: {l:?}");
    }
}

#[test]
fn schemas_are_json_schema() {
    for what in ["manifest", "pipeline"] {
        let run: Run = host().args(["schema", what]).output().unwrap().into();
        run.ok();
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert!(v["$schema"].as_str().unwrap().contains("json-schema.org"), "{what}");
        assert!(v["properties"].is_object(), "{what}");
    }
}

#[test]
fn second_run_uses_compiled_cache() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    write_docs(&tmp.path().join("in/a.jsonl"), &["one two three".to_string()]);
    let p = write_pipeline(
        tmp.path(),
        "source:\n  path: in\nsink:\n  path: out\n  mode: overwrite\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 1}\n  - plugin: unicode_normalize\n",
    );
    let cache = tmp.path().join("cache");
    let summary = |n: usize| {
        let run: Run =
            host().env("CURATOR_CACHE_DIR", &cache).arg("run").arg(&p).arg("--plugins").arg(guests_dir()).output().unwrap().into();
        run.ok();
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/_summary.json")).unwrap()).unwrap();
        assert_eq!(s["cached_plugins"], n, "run {n}");
    };
    summary(0);
    assert_eq!(std::fs::read_dir(cache.join("wasm")).unwrap().count(), 2, "two artifacts cached");
    summary(2);
}

#[test]
fn gpus_command_reports_inventory_or_why_empty() {
    let run: Run = host().args(["gpus", "--json"]).output().unwrap().into();
    run.ok();
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let gpus = v["gpus"].as_array().unwrap();
    if gpus.is_empty() {
        // No driver here (CI): exit 0, an empty list and the reason.
        assert!(v["note"].as_str().is_some_and(|n| !n.is_empty()), "{v}");
    } else {
        assert!(gpus.iter().all(|g| g["memory_total_mb"].as_u64().unwrap() > 0 && g["uuid"].as_str().unwrap().starts_with("GPU-")), "{v}");
    }
    let text: Run = host().arg("gpus").output().unwrap().into();
    text.ok();
}
