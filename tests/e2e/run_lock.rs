//! One live run per output (`io::run_lock`): a second run on the same output is refused
//! before it reads anything (exit 2) naming the first; a killed run's lock is taken over;
//! shards of one run hold their own locks side by side. Locally and in an object store.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::s3::S3Server;
use crate::support::*;

/// 3,000 documents through `hostile`'s slow mode (20 ms a batch of 10): a run of seconds.
fn slow_pipeline(tmp: &Path, out: &str, extra: &str) -> std::path::PathBuf {
    let texts: Vec<String> = (0..3000).map(|i| format!("document {i} of the slow run")).collect();
    std::fs::create_dir_all(tmp.join("in")).unwrap();
    write_docs(&tmp.join("in/data.jsonl"), &texts);
    let yaml = format!(
        "source:\n  path: {}\nsink:\n  path: {out}\n{extra}batch_size: 10\nstages:\n  - plugin: hostile\n    params: {{mode: slow, trigger: document}}\n",
        tmp.join("in").display()
    );
    write_pipeline(tmp, &yaml)
}

fn spawn(mut c: Command, pipeline: &Path, extra: &[&str]) -> Child {
    c.arg("run").arg(pipeline).args(extra).arg("--plugins").arg(guests_dir()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(c: Child) -> Run {
    c.wait_with_output().unwrap().into()
}

/// Wait until `ready` holds (the first run took its lock and started).
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_local_run_is_refused_and_a_killed_runs_lock_is_taken_over() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let p = slow_pipeline(tmp.path(), &out.display().to_string(), "");
    let lock = out.join("_running.lock");

    let first = spawn(host(), &p, &[]);
    wait_for("the first run's lock", || std::fs::read(&lock).is_ok_and(|b| !b.is_empty()));
    let second = run_with_guests(&["run", p.to_str().unwrap()]);
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert!(second.stderr.contains("is being written by another run"), "{}", second.stderr);
    assert!(second.stderr.contains(&format!("pid {}", first.id())), "names the holder: {}", second.stderr);
    let first = finish(first);
    first.ok();
    assert_eq!(output_docs(&out, ".jsonl").len(), 3000, "the first run's output is whole");
    assert!(!lock.exists(), "a finished run leaves no lock");

    // Killed mid-run: the next run takes the lock over and resumes.
    let out2 = tmp.path().join("out2");
    let p2 = slow_pipeline(tmp.path(), &out2.display().to_string(), "");
    let mut killed = spawn(host(), &p2, &[]);
    wait_for("the run's lock", || std::fs::read(out2.join("_running.lock")).is_ok_and(|b| !b.is_empty()));
    std::thread::sleep(Duration::from_millis(300));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let next = run_with_guests(&["run", p2.to_str().unwrap()]);
    next.ok();
    assert!(next.stderr.contains("taking over"), "{}", next.stderr);
    assert_eq!(output_docs(&out2, ".jsonl").len(), 3000);
}

#[test]
fn shards_of_one_run_write_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let p = slow_pipeline(tmp.path(), &out.display().to_string(), "");
    // Two input files, so each shard owns one.
    std::fs::copy(tmp.path().join("in/data.jsonl"), tmp.path().join("in/more.jsonl")).unwrap();
    let a = spawn(host(), &p, &["--shard", "0/2"]);
    let b = spawn(host(), &p, &["--shard", "1/2"]);
    let (a, b) = (finish(a), finish(b));
    a.ok();
    b.ok();
    assert_eq!(output_docs(&out, ".jsonl").len(), 6000);
}

#[test]
fn a_second_run_on_an_object_store_output_is_refused_until_the_first_ends() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = S3Server::start();
    s3.create_bucket("locks");
    let tmp = tempfile::tempdir().unwrap();
    let p = slow_pipeline(tmp.path(), "s3://locks/out", "");
    let first = spawn(s3.command(s3.port), &p, &[]);
    wait_for("the first run's lock object", || s3.keys("locks", "out/_running.lock").len() == 1);
    let second: Run = s3.command(s3.port).arg("run").arg(&p).arg("--plugins").arg(guests_dir()).output().unwrap().into();
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert!(second.stderr.contains("is being written by another run"), "{}", second.stderr);
    assert!(second.stderr.contains(&format!("pid {}", first.id())), "{}", second.stderr);
    finish(first).ok();
    assert!(s3.keys("locks", "out/_running.lock").is_empty(), "a finished run removes its lock object");

    // A killed run's lock object: its process is gone on this host, so it is taken over.
    let p2 = slow_pipeline(tmp.path(), "s3://locks/out2", "");
    let mut killed = spawn(s3.command(s3.port), &p2, &[]);
    wait_for("the run's lock object", || s3.keys("locks", "out2/_running.lock").len() == 1);
    killed.kill().unwrap();
    killed.wait().unwrap();
    let next: Run = s3.command(s3.port).arg("run").arg(&p2).arg("--plugins").arg(guests_dir()).output().unwrap().into();
    next.ok();
    assert!(next.stderr.contains("taking over"), "{}", next.stderr);
}
