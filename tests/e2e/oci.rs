//! `plugin publish` and `plugin install` through a real OCI registry on loopback (Debian's
//! `docker-registry`, the CNCF distribution registry; scripts/test.sh installs it): a signed
//! plugin round-trips with its signature and runs under `trust: signed`; unsigned or unpinned
//! ones are refused when the installer asks for a signature or a lock.

use std::path::Path;

use crate::support::*;

/// A registry serving from a temporary directory until dropped.
struct Registry {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn registry() -> Registry {
    let bin = ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"].into_iter().find(|p| Path::new(p).exists());
    let bin = bin.expect("Debian's docker-registry is needed for the OCI tests (scripts/test.sh installs it)");
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: {}}}}}\nhttp: {{addr: 127.0.0.1:{port}}}\n",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let child = std::process::Command::new(bin)
        .arg("serve")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed and waited for when dropped, whichever way the test ends.
    let reg = Registry { child, port, _dir: dir };
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return reg;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the registry did not start on port {port}");
}

fn go(dir: &Path, args: &[&str]) -> Run {
    host().current_dir(dir).args(args).output().unwrap().into()
}

#[test]
fn a_signed_plugin_round_trips_through_an_oci_registry() {
    if !needs(Need::DockerRegistry) {
        return;
    }
    let reg = registry();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::copy(guests_dir().join("word_count_filter.wasm"), dir.join("word_count_filter.wasm")).unwrap();
    go(dir, &["plugin", "keygen", "keys/me"]).ok();
    std::fs::create_dir_all(dir.join("trust")).unwrap();
    std::fs::copy(dir.join("keys/me.pub"), dir.join("trust/me.pub")).unwrap();
    let signed_ref = format!("oci://127.0.0.1:{}/curator/word_count_filter:0.1.0", reg.port);
    let unsigned_ref = format!("oci://127.0.0.1:{}/curator/word_count_filter:unsigned", reg.port);
    go(dir, &["plugin", "publish", "word_count_filter.wasm", &unsigned_ref]).ok();
    go(dir, &["plugin", "sign", "word_count_filter.wasm", "--key", "keys/me.key"]).ok();
    let p = go(dir, &["plugin", "publish", "word_count_filter.wasm", &signed_ref]);
    assert!(p.ok().stdout.contains("with its signature"), "{}", p.stdout);

    let i = go(dir, &["plugin", "install", &signed_ref, "--dir", "installed", "--require-signature", "--trust-dir", "trust"]);
    assert!(i.ok().stdout.contains("Signed("), "{}", i.stdout);
    assert_eq!(
        std::fs::read(dir.join("installed/word_count_filter.wasm")).unwrap(),
        std::fs::read(dir.join("word_count_filter.wasm")).unwrap()
    );
    assert!(dir.join("installed/word_count_filter.wasm.minisig").exists());
    // And it runs where only signed plugins may.
    std::fs::create_dir_all(dir.join("data")).unwrap();
    write_docs(&dir.join("data/a.jsonl"), &["one two three four five six".to_string(), "short".to_string()]);
    write_pipeline(
        dir,
        "source: {path: data}\nstages:\n  - plugin: word_count_filter\n    params: {min_words: 5}\nsink: {path: out}\ntrust: signed\n",
    );
    go(dir, &["run", "pipeline.yaml", "--plugins", "installed", "--trust-dir", "trust"]).ok();
    assert_eq!(read_jsonl(&dir.join("out/a.jsonl")).len(), 1);

    // Unsigned: refused when a signature is required, nothing left in the directory.
    let r = go(dir, &["plugin", "install", &unsigned_ref, "--dir", "strict", "--require-signature", "--trust-dir", "trust"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("refused: it is not signed"), "{}", r.stderr);
    assert!(std::fs::read_dir(dir.join("strict")).map(|d| d.count()).unwrap_or(0) == 0);
    let r = go(dir, &["plugin", "install", &unsigned_ref, "--dir", "lax", "--trust-dir", "trust"]);
    assert!(r.ok().stderr.contains("is not signed"), "{}", r.stderr);
    // A lock that pins another build.
    std::fs::write(dir.join("other.lock"), r#"{"version": 1, "plugins": [{"name": "word_count_filter", "version": "0.1.0", "abi": "0.4", "kind": "wasm", "sha256": "00", "file": "x"}]}"#).unwrap();
    let r = go(dir, &["plugin", "install", &signed_ref, "--dir", "locked", "--lock", "other.lock", "--trust-dir", "trust"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("which the lock pins for no plugin"), "{}", r.stderr);
    assert!(!dir.join("locked/word_count_filter.wasm").exists());
}

#[test]
fn a_signed_plugin_installs_from_a_url_with_its_signature() {
    if !needs(Need::DockerRegistry) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("served")).unwrap();
    std::fs::copy(guests_dir().join("word_count_filter.wasm"), dir.join("served/word_count_filter.wasm")).unwrap();
    go(dir, &["plugin", "keygen", "keys/me"]).ok();
    go(dir, &["plugin", "sign", "served/word_count_filter.wasm", "--key", "keys/me.key"]).ok();
    std::fs::create_dir_all(dir.join("trust")).unwrap();
    std::fs::copy(dir.join("keys/me.pub"), dir.join("trust/me.pub")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = std::process::Command::new("python3")
        .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1"])
        .current_dir(dir.join("served"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/word_count_filter.wasm");
    let r = go(dir, &["plugin", "install", &url, "--dir", "installed", "--require-signature", "--trust-dir", "trust"]);
    let _ = server.kill();
    let _ = server.wait();
    assert!(r.ok().stdout.contains("Signed("), "{}", r.stdout);
    assert!(dir.join("installed/word_count_filter.wasm.minisig").exists());
    // Plain http from elsewhere is refused.
    let r = go(dir, &["plugin", "install", "http://example.invalid/x.wasm", "--dir", "installed"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("only from this machine"), "{}", r.stderr);
}
