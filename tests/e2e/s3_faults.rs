//! Object storage that misbehaves: a loopback proxy in front of moto answers some connections
//! with 500s, drops others, delays others and cuts long-lived ones; runs retry with backoff
//! and finish with the same output, or fail naming what failed once the retries are spent.
//! And a run writing to an object store, killed with SIGKILL, resumes from its journal.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::s3::S3Server;
use crate::support::*;

/// What the proxy does with the `n`th connection.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fault {
    Pass,
    /// Read the request head, answer 500, close.
    Error500,
    /// Read the request head, close without answering.
    Drop,
    /// Wait, then pass.
    Slow,
}

struct FaultProxy {
    port: u16,
    injected: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl FaultProxy {
    /// A proxy to `upstream` choosing each connection's fault with `plan(n)`.
    fn start(upstream: u16, plan: fn(usize) -> Fault) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let injected = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (inj, st) = (injected.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0usize;
            while !st.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                };
                let _ = client.set_nonblocking(false);
                let fault = plan(n);
                n += 1;
                if fault != Fault::Pass {
                    inj.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::spawn(move || serve(client, upstream, fault));
            }
        });
        FaultProxy { port, injected, stop }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn read_head(s: &mut TcpStream) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).is_ok_and(|n| n == 1) {
        head.push(b[0]);
    }
}

fn serve(mut client: TcpStream, upstream: u16, fault: Fault) {
    match fault {
        Fault::Error500 => {
            read_head(&mut client);
            let body = "<Error><Code>InternalError</Code><Message>injected</Message></Error>";
            let _ =
                write!(client, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            let _ = client.shutdown(Shutdown::Both);
        }
        Fault::Drop => {
            read_head(&mut client);
            let _ = client.shutdown(Shutdown::Both);
        }
        Fault::Pass | Fault::Slow => {
            if fault == Fault::Slow {
                std::thread::sleep(Duration::from_millis(300));
            }
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { return };
            // A kept-alive connection lives at most a second, then is cut: later requests on it
            // fail mid-flight too.
            let deadline = Duration::from_secs(1);
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let _ = client.set_read_timeout(Some(deadline));
            let _ = s2.set_read_timeout(Some(deadline));
            let up = std::thread::spawn(move || {
                let _ = std::io::copy(&mut client, &mut { server });
            });
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(Shutdown::Both);
            let _ = s2.shutdown(Shutdown::Both);
            let _ = up.join();
        }
    }
}

/// Every fourth connection fails one way or another.
fn flaky(n: usize) -> Fault {
    match n % 8 {
        1 => Fault::Error500,
        3 => Fault::Slow,
        5 => Fault::Drop,
        _ => Fault::Pass,
    }
}

fn always_500(_: usize) -> Fault {
    Fault::Error500
}

fn input_files(dir: &Path, files: usize, docs: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for f in 0..files {
        let texts: Vec<String> = (0..docs).map(|i| format!("file {f} document {i} {}", "word ".repeat((i * 7 + f) % 40))).collect();
        write_docs(&dir.join(format!("part-{f:03}.jsonl")), &texts);
    }
}

/// Documents under `prefix` of the bucket, downloaded through a local copy, sorted.
fn downloaded(s3: &S3Server, tmp: &Path, url: &str) -> Vec<String> {
    let local = tmp.join(format!("down-{}", url.replace(['/', ':'], "_")));
    let _ = std::fs::remove_dir_all(&local);
    let p = tmp.join("down.yaml");
    std::fs::write(&p, format!("source:\n  path: {url}\nsink:\n  path: {}\n", local.display())).unwrap();
    s3.run(&p).ok();
    output_docs(&local, ".jsonl")
}

const RETRY: &str = "  retry: {max_retries: 10, initial_backoff_ms: 20, max_backoff_s: 0.5, retry_timeout_s: 60}\n";

#[test]
fn object_store_faults_are_retried_and_the_output_is_whole() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = S3Server::start();
    s3.create_bucket("faults");
    let tmp = tempfile::tempdir().unwrap();
    input_files(&tmp.path().join("in"), 12, 300);
    let stages = "stages:\n  - plugin: word_count_filter\n    params: {min_words: 10}\n";
    // Upload the input, then the same pipeline from S3 to S3: straight, and through the proxy.
    let up = tmp.path().join("up.yaml");
    std::fs::write(&up, format!("source:\n  path: {}\nsink:\n  path: s3://faults/in\n", tmp.path().join("in").display())).unwrap();
    s3.run(&up).ok();
    let clean = tmp.path().join("clean.yaml");
    std::fs::write(&clean, format!("source:\n  path: s3://faults/in\nsink:\n  path: s3://faults/clean\n{RETRY}{stages}")).unwrap();
    s3.run(&clean).ok();
    let proxy = FaultProxy::start(s3.port, flaky);
    let faulty = tmp.path().join("faulty.yaml");
    std::fs::write(
        &faulty,
        format!("source:\n  path: s3://faults/in\nsink:\n  path: s3://faults/faulty\n  compression: zstd\n{RETRY}{stages}"),
    )
    .unwrap();
    let run = s3.run_via(proxy.port, &faulty);
    run.ok();
    let injected = proxy.injected.load(Ordering::Relaxed);
    assert!(injected >= 3, "only {injected} faults were injected");
    let want = downloaded(&s3, tmp.path(), "s3://faults/clean");
    assert!(want.len() > 1000, "{}", want.len());
    assert_eq!(downloaded(&s3, tmp.path(), "s3://faults/faulty"), want);
    assert!(s3.keys("faults", "faulty/_journal").is_empty(), "journal left after a finished run");
    eprintln!("{injected} faults injected; the output is whole");
}

#[test]
fn an_object_store_that_keeps_failing_fails_the_run_naming_it() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = S3Server::start();
    s3.create_bucket("down");
    let tmp = tempfile::tempdir().unwrap();
    input_files(&tmp.path().join("in"), 2, 50);
    let proxy = FaultProxy::start(s3.port, always_500);
    let p = tmp.path().join("p.yaml");
    std::fs::write(
        &p,
        format!(
            "source:\n  path: {}\nsink:\n  path: s3://down/out\n  retry: {{max_retries: 2, initial_backoff_ms: 10, max_backoff_s: 0.1, retry_timeout_s: 20}}\n",
            tmp.path().join("in").display()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let run = s3.run_via(proxy.port, &p);
    // Refused before anything is read: the run's first request, taking its lock on the
    // output (`io::run_lock`), keeps failing after its retries.
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("s3://down/out"), "{}", run.stderr);
    assert!(run.stderr.contains("500") || run.stderr.contains("Internal"), "{}", run.stderr);
    assert!(proxy.injected.load(Ordering::Relaxed) >= 3, "the requests were not retried");
    eprintln!("failed after {:?}: {}", started.elapsed(), run.stderr.lines().last().unwrap_or(""));
}

/// 60 partitions written to S3; killed with SIGKILL after a few are journaled, three times,
/// and run again: the output equals a clean run's as a multiset of documents.
#[test]
fn killed_runs_writing_to_an_object_store_resume_from_its_journal() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = S3Server::start();
    s3.create_bucket("resume");
    let tmp = tempfile::tempdir().unwrap();
    input_files(&tmp.path().join("in"), 60, 400);
    let yaml = |out: &str| {
        format!(
            "source:\n  path: {}\nsink:\n  path: s3://resume/{out}\n  compression: zstd\nbatch_size: 16\nstages:\n  - plugin: unicode_normalize\n  - plugin: word_count_filter\n    params: {{min_words: 10}}\n",
            tmp.path().join("in").display()
        )
    };
    let clean = tmp.path().join("clean.yaml");
    std::fs::write(&clean, yaml("clean")).unwrap();
    s3.run(&clean).ok();
    let want = downloaded(&s3, tmp.path(), "s3://resume/clean");
    let mut resumed = 0;
    // The journal's entries (one `.json` object per committed partition; `begun` marks a run
    // that opened an output).
    let entries = |out: &str| s3.keys("resume", &format!("{out}/_journal/")).into_iter().filter(|k| k.ends_with(".json")).count();
    for (round, target) in [3usize, 17, 40].into_iter().enumerate() {
        let out = format!("killed-{round}");
        let p = tmp.path().join(format!("{out}.yaml"));
        std::fs::write(&p, yaml(&out)).unwrap();
        let mut child = s3
            .command(s3.port)
            .arg("run")
            .arg(&p)
            .arg("--plugins")
            .arg(guests_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut killed = false;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(status.success(), "round {round}: run failed before it was killed");
                break;
            }
            if entries(&out) >= target {
                let _ = child.kill(); // SIGKILL
                let _ = child.wait();
                killed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if killed {
            resumed += 1;
            // A PUT the killed run had already sent may still land after the kill: count the
            // journal once it has stopped changing.
            let count = || entries(&out);
            let mut journaled = count();
            loop {
                std::thread::sleep(Duration::from_millis(300));
                let now = count();
                if now == journaled {
                    break;
                }
                journaled = now;
            }
            let run = s3.run(&p);
            run.ok();
            assert!(run.stdout.contains(&format!("skipped, {journaled} resumed)")), "round {round}: {}", run.stdout);
        }
        assert_eq!(downloaded(&s3, tmp.path(), &format!("s3://resume/{out}")), want, "round {round}: output differs from a clean run");
        assert!(s3.keys("resume", &format!("{out}/_journal/")).is_empty(), "round {round}: journal left after a finished run");
    }
    assert!(resumed >= 2, "only {resumed} of 3 rounds were killed mid-run");
}
