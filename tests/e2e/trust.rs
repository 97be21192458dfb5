//! Signed plugins: `plugin keygen`, `plugin sign`, `plugin verify`, and a pipeline's
//! `trust:` setting enforced before any plugin file is read: tampered files, unknown keys and
//! unsigned files under `signed` are refused, naming the file and the reason.

use std::path::Path;

use crate::support::*;

fn go(dir: &Path, args: &[&str]) -> Run {
    host().current_dir(dir).args(args).output().unwrap().into()
}

fn pipeline(dir: &Path, trust: &str) {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    write_docs(&dir.join("data/a.jsonl"), &["one two three four five six".to_string(), "too short".to_string()]);
    write_pipeline(
        dir,
        &format!(
            "source: {{path: data}}\nstages:\n  - plugin: word_count_filter\n    params: {{min_words: 5}}\nsink: {{path: out, mode: overwrite}}\n{trust}"
        ),
    );
}

fn run(dir: &Path) -> Run {
    go(dir, &["run", "pipeline.yaml", "--plugins", "plugins", "--trust-dir", "trust"])
}

#[test]
fn pipelines_run_only_the_plugins_their_trust_setting_allows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::create_dir_all(dir.join("trust")).unwrap();
    let plugin = dir.join("plugins/word_count_filter.wasm");
    std::fs::copy(guests_dir().join("word_count_filter.wasm"), &plugin).unwrap();
    let me = go(dir, &["plugin", "keygen", "keys/me"]);
    let id = me.ok().stdout.split_whitespace().nth(1).unwrap().trim_end_matches(':').to_string();
    go(dir, &["plugin", "keygen", "keys/stranger"]).ok();
    std::fs::copy(dir.join("keys/me.pub"), dir.join("trust/me.pub")).unwrap();

    // Unsigned: runs under `any` (the default) with a warning, refused under `signed`.
    pipeline(dir, "");
    let r = run(dir);
    assert!(r.ok().stderr.contains("word_count_filter.wasm is not signed"), "{}", r.stderr);
    pipeline(dir, "trust: signed\n");
    let r = run(dir);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("word_count_filter.wasm") && r.stderr.contains("is not signed"), "{}", r.stderr);

    // Signed by a trusted key: runs; `plugin verify` agrees.
    let signed = go(dir, &["plugin", "sign", "plugins/word_count_filter.wasm", "--key", "keys/me.key"]);
    assert!(signed.ok().stdout.contains(&id), "{}", signed.stdout);
    run(dir).ok();
    assert_eq!(read_jsonl(&dir.join("out/a.jsonl")).len(), 1);
    go(dir, &["plugin", "verify", "plugins/word_count_filter.wasm", "--trust-dir", "trust"]).ok();
    pipeline(dir, &format!("trust: {{keys: [{id}]}}\n"));
    run(dir).ok();

    // One byte changed: refused under every setting, naming the file and the reason.
    let mut bytes = std::fs::read(&plugin).unwrap();
    let original = bytes.clone();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&plugin, &bytes).unwrap();
    for trust in ["", "trust: signed\n"] {
        pipeline(dir, trust);
        let r = run(dir);
        assert_eq!(r.code, 2, "{trust}: {}", r.stderr);
        assert!(r.stderr.contains("does not match its signature"), "{trust}: {}", r.stderr);
    }
    let v = go(dir, &["plugin", "verify", "plugins/word_count_filter.wasm", "--trust-dir", "trust"]);
    assert_eq!(v.code, 1);
    assert!(v.stderr.contains("tampered"), "{}", v.stderr);

    // Signed by a key the store does not hold: refused under `signed`, warned under `any`.
    std::fs::write(&plugin, &original).unwrap();
    go(dir, &["plugin", "sign", "plugins/word_count_filter.wasm", "--key", "keys/stranger.key"]).ok();
    pipeline(dir, "trust: signed\n");
    let r = run(dir);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("which is not in the trust store"), "{}", r.stderr);
    pipeline(dir, "");
    let r = run(dir);
    assert!(r.ok().stderr.contains("which is not in the trust store"), "{}", r.stderr);
    // A key list that names another key.
    go(dir, &["plugin", "sign", "plugins/word_count_filter.wasm", "--key", "keys/me.key"]).ok();
    pipeline(dir, "trust: {keys: [\"0000000000000000\"]}\n");
    let r = run(dir);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("not one of the pipeline's trust.keys"), "{}", r.stderr);
}

#[test]
fn a_lock_file_pins_each_plugin_and_refuses_another_build() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    let plugin = dir.join("plugins/word_count_filter.wasm");
    std::fs::copy(guests_dir().join("word_count_filter.wasm"), &plugin).unwrap();
    pipeline(dir, "");
    let locked = go(dir, &["lock", "pipeline.yaml", "--plugins", "plugins"]);
    assert!(locked.ok().stdout.contains("wrote pipeline.lock (1 plugin(s))"), "{}", locked.stdout);
    let lock: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("pipeline.lock")).unwrap()).unwrap();
    let pinned = lock["plugins"][0]["sha256"].as_str().unwrap().to_string();
    assert_eq!(lock["plugins"][0]["name"], "word_count_filter");
    assert_eq!(lock["plugins"][0]["abi"], format!("{}.{}", curator_core::ABI_MAJOR, curator_core::ABI_MINOR));
    go(dir, &["run", "pipeline.yaml", "--plugins", "plugins"]).ok();
    // Another build of the plugin (here: one byte more at the end of the file).
    let mut bytes = std::fs::read(&plugin).unwrap();
    bytes.push(0);
    std::fs::write(&plugin, &bytes).unwrap();
    let r = go(dir, &["run", "pipeline.yaml", "--plugins", "plugins"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("stages[0].plugin: word_count_filter") && r.stderr.contains(&pinned), "{}", r.stderr);
    assert!(r.stderr.contains("but pipeline.lock pins word_count_filter"), "{}", r.stderr);
    // A stage the lock does not know.
    std::fs::write(dir.join("pipeline.lock"), r#"{"version": 1, "plugins": []}"#).unwrap();
    let r = go(dir, &["run", "pipeline.yaml", "--plugins", "plugins"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("word_count_filter is not in pipeline.lock"), "{}", r.stderr);
}

#[test]
fn pipelines_may_ask_for_a_version_range() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    pipeline(dir, "");
    let yaml = std::fs::read_to_string(dir.join("pipeline.yaml")).unwrap();
    let plugins = guests_dir().display().to_string();
    std::fs::write(dir.join("ok.yaml"), yaml.replace("plugin: word_count_filter", "plugin: word_count_filter@^0.1")).unwrap();
    std::fs::write(dir.join("no.yaml"), yaml.replace("plugin: word_count_filter", "plugin: word_count_filter@^9")).unwrap();
    go(dir, &["run", "ok.yaml", "--plugins", &plugins]).ok();
    let r = go(dir, &["run", "no.yaml", "--plugins", &plugins]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("stages[0].plugin: no version of word_count_filter matches ^9; found 0.1.0"), "{}", r.stderr);
}
