//! Object storage against a real S3-compatible server on loopback: moto's server
//! (`pip install 'moto[server]'`, started here as `moto_server -H 127.0.0.1 -p PORT`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

pub(crate) struct S3Server {
    child: Child,
    pub port: u16,
}

impl S3Server {
    pub fn start() -> S3Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start moto_server: install it with pip install 'moto[server]' (scripts/test.sh does)");
        let server = S3Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start listening on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    pub fn create_bucket(&self, name: &str) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(s, "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.port).unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        assert!(resp.starts_with("HTTP/1.1 200"), "bucket not created: {resp}");
    }

    pub fn put_object(&self, bucket: &str, key: &str, body: &[u8]) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "PUT /{bucket}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        assert!(resp.starts_with("HTTP/1.1 200"), "object not stored: {resp}");
    }

    pub fn run(&self, pipeline: &std::path::Path) -> Run {
        self.run_via(self.port, pipeline)
    }

    /// Run with the S3 endpoint at `port` on loopback (this server, or a proxy in front of it).
    pub fn run_via(&self, port: u16, pipeline: &std::path::Path) -> Run {
        self.command(port).arg("run").arg(pipeline).arg("--plugins").arg(guests_dir()).output().unwrap().into()
    }

    /// The binary, with credentials for this server and its endpoint at `port`.
    pub fn command(&self, port: u16) -> Command {
        let mut c = host();
        c.env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
            .env("AWS_ALLOW_HTTP", "true");
        c
    }

    /// Copy every object under `prefix` in `bucket` into the local directory `to` (its
    /// key, less the prefix, as the path), with credentials (moto refuses anonymous reads).
    pub fn download(&self, bucket: &str, prefix: &str, to: &std::path::Path) {
        use futures::StreamExt;
        use object_store::{ObjectStore, ObjectStoreExt};
        curator_host::io::tls::install_crypto_provider();
        let store = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(format!("http://127.0.0.1:{}", self.port))
            .with_allow_http(true)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listed: Vec<_> = store.list(Some(&prefix.into())).collect().await;
            for meta in listed {
                let key = meta.unwrap().location;
                let bytes = store.get(&key).await.unwrap().bytes().await.unwrap();
                let path = to.join(key.as_ref().strip_prefix(prefix).unwrap().trim_start_matches('/'));
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, bytes).unwrap();
            }
        });
    }

    /// Keys under `prefix` in `bucket`.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let url = format!("http://127.0.0.1:{}/{bucket}?list-type=2&prefix={prefix}", self.port);
        let body = ureq::get(&url).call().ok().and_then(|mut r| r.body_mut().read_to_string().ok()).unwrap_or_default();
        body.split("<Key>").skip(1).filter_map(|k| k.split("</Key>").next()).map(str::to_string).collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn quickstart_reads_from_and_writes_to_s3() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = S3Server::start();
    s3.create_bucket("curator-test");
    let tmp = tempfile::tempdir().unwrap();
    let data = root().join("examples/quickstart/data");

    // Upload the bundled data (gzip-compressed) with a copy pipeline.
    let up = tmp.path().join("upload.yaml");
    std::fs::write(&up, format!("source:\n  path: {}\nsink:\n  path: s3://curator-test/data\n  compression: gzip\n", data.display()))
        .unwrap();
    s3.run(&up).ok();

    // The quickstart pipeline, from S3 to S3.
    let shipped = std::fs::read_to_string(root().join("examples/quickstart/pipeline.yaml")).unwrap();
    let yaml = shipped.replace("path: data ", "path: s3://curator-test/data ").replace("path: out ", "path: s3://curator-test/out ");
    assert_ne!(yaml, shipped);
    let qs = tmp.path().join("qs.yaml");
    std::fs::write(&qs, yaml).unwrap();
    let run = s3.run(&qs);
    run.ok();
    assert!(run.stdout.contains("wrote"), "{}", run.stdout);

    // Download the result and check it against the local input.
    let down = tmp.path().join("down.yaml");
    std::fs::write(&down, format!("source:\n  path: s3://curator-test/out\nsink:\n  path: {}\n", tmp.path().join("local").display()))
        .unwrap();
    s3.run(&down).ok();
    let mut input = Vec::new();
    for f in ["docs-000.jsonl", "docs-001.jsonl.gz"] {
        input.extend(read_jsonl(&data.join(f)));
    }
    let mut output = Vec::new();
    for f in ["docs-000.jsonl", "docs-001.jsonl"] {
        output.extend(read_jsonl(&tmp.path().join("local").join(f)));
    }
    let expected: Vec<&serde_json::Value> = input.iter().filter(|d| d["text"].as_str().unwrap().split_whitespace().count() >= 50).collect();
    assert!(!output.is_empty());
    assert_eq!(output.len(), expected.len());
    let ids: Vec<&str> = output.iter().map(|d| d["id"].as_str().unwrap()).collect();
    let want: Vec<&str> = expected.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, want);
}

#[test]
fn videos_are_read_from_s3_through_a_local_copy() {
    if !needs(Need::MotoServer) || !needs(Need::Ffmpeg) {
        return;
    }
    let s3 = S3Server::start();
    s3.create_bucket("videos");
    let mp4 = std::fs::read(crate::video::videos().join("scenes.mp4")).unwrap();
    s3.put_object("videos", "in/scenes.mp4", &mp4);
    s3.put_object("videos", "in/noise.mp4", b"not a video at all");
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("p.yaml");
    std::fs::write(&p, format!("source: {{path: s3://videos/in/, format: video}}\nsink: {{path: {}}}\n", tmp.path().join("out").display()))
        .unwrap();
    let run = host()
        .env("CURATOR_CACHE_DIR", tmp.path().join("cache"))
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", s3.port))
        .env("AWS_ALLOW_HTTP", "true")
        .arg("run")
        .arg(&p)
        .output()
        .unwrap();
    Run::from(run).ok();
    let docs = read_jsonl(&tmp.path().join("out/scenes.mp4.jsonl"));
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["path"], "s3://videos/in/scenes.mp4");
    assert_eq!((docs[0]["codec"].as_str(), docs[0]["num_frames"].as_u64()), (Some("h264"), Some(330)));
    // The stages open the local copy, which is the object byte for byte.
    let local = std::path::PathBuf::from(docs[0]["text"].as_str().unwrap());
    assert!(local.starts_with(tmp.path().join("cache/videos")), "{local:?}");
    assert_eq!(std::fs::read(&local).unwrap(), mp4);
    let rejected = read_jsonl(&tmp.path().join("out/_rejected/noise.mp4.jsonl.jsonl"));
    assert!(rejected[0]["reason"].as_str().unwrap().starts_with("not a video file"), "{rejected:?}");
}

#[test]
fn tokenized_sinks_write_to_s3_the_files_they_write_locally() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = S3Server::start();
    s3.create_bucket("curator-tokens");
    let tmp = tempfile::tempdir().unwrap();
    let data = root().join("examples/quickstart/data");
    let tok = root().join("tests/parity/tokenizers/bpe.json");
    for (format, tokens) in [
        ("megatron", format!("{{tokenizer: {}, eos_token: \"<|endoftext|>\"}}", tok.display())),
        ("datatrove_tokens", format!("{{tokenizer: {}, eos_token: \"<|endoftext|>\", seed: 7}}", tok.display())),
    ] {
        let write = |out: &str, name: &str| {
            let p = tmp.path().join(format!("{format}-{name}.yaml"));
            std::fs::write(
                &p,
                format!("source:\n  path: {}\nsink:\n  path: {out}\n  format: {format}\n  tokens: {tokens}\n", data.display()),
            )
            .unwrap();
            p
        };
        let local = tmp.path().join(format!("{format}-local"));
        s3.run(&write(&local.display().to_string(), "local")).ok();
        s3.run(&write(&format!("s3://curator-tokens/{format}"), "s3")).ok();
        let down = tmp.path().join(format!("{format}-down"));
        s3.download("curator-tokens", format, &down);
        let files = |dir: &std::path::Path| -> Vec<(String, Vec<u8>)> {
            let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('_'))
                .map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap()))
                .collect();
            v.sort();
            v
        };
        let (want, got) = (files(&local), files(&down));
        assert!(want.len() >= 4, "{format}: {:?}", want.iter().map(|f| &f.0).collect::<Vec<_>>());
        assert_eq!(
            got.iter().map(|f| &f.0).collect::<Vec<_>>(),
            want.iter().map(|f| &f.0).collect::<Vec<_>>(),
            "{format}: the same files in the bucket"
        );
        assert!(got == want, "{format}: a file in the bucket differs from the local run's");
    }
}
