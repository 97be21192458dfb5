//! `curator-host serve --socket PATH`: a long-lived host that takes `run` requests over a Unix
//! socket, one at a time, and keeps what the next run of the same stages can reuse: the
//! compiled WASM components, every stage's instances (worker processes with their models
//! loaded, WASM instances after `setup`) and the setup checks planning passed. A Ray actor
//! per node (or per GPU) of `curator-ray` keeps one, so a shard task costs a request, not a
//! process, plugins compiled and models loaded.
//!
//! The protocol: a client connects, writes one line of JSON,
//! `{"argv": ["run", "pipeline.yaml", "--shard", "3/16"], "cwd": "/where"}` (the arguments of
//! `curator-host`, and the directory they are relative to), and reads one line back:
//! `{"code": 0, "stdout": "…", "stderr": "…", "elapsed_s": 0.41, "kept": 28}`: the exit code the
//! command would have had, the tails of what it printed, and the instances kept for the next
//! run. A request that panics is answered with code 101, and the server then exits (what it
//! kept can no longer be trusted); its supervisor starts a new one.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

use curator_host::exec::warm::WarmPool;
use curator_host::wasm::WasmRuntime;

use super::{Cli, Command, EXIT_FAILED, EXIT_INVALID};

/// What a serving host keeps between runs.
pub(crate) struct Warm {
    pub(crate) runtime: WasmRuntime,
    pub(crate) pool: Arc<WarmPool>,
}

/// One request.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    /// `curator-host`'s arguments (without the program name); only `run` is served.
    argv: Vec<String>,
    /// The directory relative paths in `argv` are relative to (default: the server's).
    #[serde(default)]
    cwd: Option<PathBuf>,
}

/// Its answer.
#[derive(serde::Serialize)]
struct Reply {
    code: u8,
    stdout: String,
    stderr: String,
    elapsed_s: f64,
    /// Stage instances kept for the next run.
    kept: usize,
}

impl Reply {
    /// An answer before timing (the loop adds `elapsed_s` and `kept`).
    fn of(code: u8, stdout: String, stderr: String) -> Reply {
        Reply { code, stdout, stderr, elapsed_s: 0.0, kept: 0 }
    }
}

/// Longest request line read.
const MAX_REQUEST: u64 = 1 << 20;
/// Bytes of each output stream sent back.
const TAIL: u64 = 64 << 10;
/// A request that panicked.
const EXIT_PANIC: u8 = 101;

pub(crate) fn serve(socket: &Path) -> Result<ExitCode> {
    if std::fs::symlink_metadata(socket).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())) {
        // A socket left by a server that is gone (a live one still answers a connection).
        if UnixStream::connect(socket).is_ok() {
            anyhow::bail!("{} is served by another curator-host", socket.display());
        }
        std::fs::remove_file(socket).with_context(|| format!("cannot remove the stale socket {}", socket.display()))?;
    }
    let listener = UnixListener::bind(socket).with_context(|| format!("cannot listen on {}", socket.display()))?;
    let warm = Warm {
        runtime: WasmRuntime::new(curator_host::os::default_cache_dir()).context("cannot start the WASM runtime")?,
        pool: Arc::new(WarmPool::new()),
    };
    eprintln!("curator-host serve: listening on {} (pid {})", socket.display(), std::process::id());
    for conn in listener.incoming() {
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) => {
                eprintln!("curator-host serve: accept: {e}");
                continue;
            }
        };
        let started = Instant::now();
        let (reply, fatal) = match read_request(&conn) {
            Ok(None) => continue, // a client that only looked whether the socket listens
            Ok(Some(r)) => answer(&r, &warm),
            Err(e) => (Reply::of(EXIT_INVALID, String::new(), format!("error: {e}\n")), false),
        };
        let reply = Reply { elapsed_s: started.elapsed().as_secs_f64(), kept: warm.pool.kept_count(), ..reply };
        eprintln!("curator-host serve: exit code {} in {:.3}s, {} instance(s) kept", reply.code, reply.elapsed_s, reply.kept);
        let line = serde_json::to_string(&reply).unwrap_or_default();
        if let Err(e) = conn.write_all(line.as_bytes()).and_then(|()| conn.write_all(b"\n")) {
            eprintln!("curator-host serve: the client left before its answer: {e}");
        }
        if fatal {
            drop(listener);
            let _ = std::fs::remove_file(socket);
            return Ok(ExitCode::from(EXIT_PANIC));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The request on `conn`; `None` when the client closed it without writing one.
fn read_request(conn: &UnixStream) -> Result<Option<Request>> {
    let mut line = String::new();
    BufReader::new(std::io::Read::take(conn, MAX_REQUEST)).read_line(&mut line).context("cannot read the request")?;
    if line.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(&line).map(Some).context("the request is not {\"argv\": [...], \"cwd\": ...} on one line")
}

/// Run one request with its output captured; whether it panicked.
fn answer(r: &Request, warm: &Warm) -> (Reply, bool) {
    let reply = |code, stderr: String| Reply::of(code, String::new(), stderr);
    eprintln!("curator-host serve: {}", r.argv.join(" "));
    let cli = match Cli::try_parse_from(std::iter::once("curator-host".to_string()).chain(r.argv.iter().cloned())) {
        Ok(c) => c,
        Err(e) => return (reply(EXIT_INVALID, e.render().to_string()), false),
    };
    if !matches!(cli.command, Command::Run { .. }) {
        return (reply(EXIT_INVALID, "error: curator-host serve runs `run` requests only\n".into()), false);
    }
    let back = match &r.cwd {
        Some(dir) => match std::env::current_dir().and_then(|here| std::env::set_current_dir(dir).map(|()| here)) {
            Ok(here) => Some(here),
            Err(e) => return (reply(EXIT_INVALID, format!("error: cannot change to {}: {e}\n", dir.display())), false),
        },
        None => None,
    };
    let captured = match curator_host::os::capture_output() {
        Ok(c) => c,
        Err(e) => return (reply(EXIT_FAILED, format!("error: cannot capture the run's output: {e}\n")), false),
    };
    curator_host::os::reset_peak_rss();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match super::dispatch_run(cli, Some(warm)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            EXIT_FAILED
        }
    }));
    let (stdout, stderr) = captured.finish(TAIL);
    if let Some(here) = back {
        let _ = std::env::set_current_dir(here);
    }
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    let panicked = result.is_err();
    (Reply::of(result.unwrap_or(EXIT_PANIC), text(stdout), text(stderr)), panicked)
}
