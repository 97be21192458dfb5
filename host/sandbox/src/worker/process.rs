//! The host's handle on one worker process: start it with its two shared-memory arenas, send
//! it batches, read its answers, explain its death, stop it.

use std::io::{BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use curator_sdk::abi::WorkerContext;

use super::layout::{Arena, Decoder, Encoder, INITIAL_ARENA_BYTES, Source, Written};
use super::protocol::{self, TAG_BATCH, TAG_ERROR, TAG_FATAL, TAG_INVALID_PARAMS, TAG_OOM, TAG_OUTPUT, TAG_READY, TAG_SHUTDOWN};
use super::watchdog::{Watch, WorkerLimits, watchdog};
use crate::stage::{StageCall, StageFailure, StageOutput};

/// What a worker serves: a native library, or a WASM component (`--wasm SPEC`).
pub enum WorkerPlugin<'a> {
    Native,
    Wasm(&'a super::WasmWorkerSpec),
}

/// A `curator-host worker` process running one stage instance.
pub struct WorkerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    watch: Arc<Watch>,
    label: String,
    input: Arena,
    output: Arena,
    encoder: Encoder,
    decoder: Decoder,
    /// What the last call wrote into the input arena (for pass-through outputs).
    written: Written,
    /// CPU time of the last call in the worker.
    last_cpu: Option<Duration>,
    /// Most input-arena bytes a call used since the last look at the arena's size, and calls.
    recent_peak: usize,
    calls: u32,
}

/// Calls between looks at whether the input arena is far larger than batches need.
const SHRINK_EVERY: u32 = 64;

/// The size to shrink an input arena of `len` bytes to when the batches of the last
/// [`SHRINK_EVERY`] calls used at most `peak` bytes: only for arenas over 64 MiB that are more
/// than 4 times what was needed (one huge batch should not hold its memory for the worker's
/// life; ordinary ones should not remap every time).
pub fn shrink_target(len: usize, peak: usize) -> Option<usize> {
    let want = peak.next_power_of_two().max(INITIAL_ARENA_BYTES);
    (len > 64 << 20 && len > 4 * want).then_some(want)
}

impl WorkerProcess {
    /// Start a worker for `plugin` and wait until its instance is created.
    pub fn spawn(
        label: &str,
        plugin_path: &Path,
        plugin: WorkerPlugin<'_>,
        params: &serde_json::Value,
        context: &WorkerContext,
        limits: &WorkerLimits,
    ) -> Result<WorkerProcess, StageFailure> {
        let spawn_err = |e: std::io::Error| StageFailure::Load(format!("cannot start a worker process: {e}"));
        let input = Arena::create("curator-input", INITIAL_ARENA_BYTES, false).map_err(spawn_err)?;
        let output = Arena::create("curator-output", INITIAL_ARENA_BYTES, true).map_err(spawn_err)?;
        // The worker may only read the input; it writes its answers into the output.
        let input_ro = input.read_only_fd().map_err(spawn_err)?;
        let (in_fd, out_fd) = (input_ro.as_raw_fd(), output.raw_fd());
        let mut cmd = super::worker_command();
        cmd.arg("worker");
        if let WorkerPlugin::Wasm(spec) = plugin {
            cmd.arg("--wasm").arg(serde_json::to_string(spec).unwrap_or_default());
        }
        cmd.arg(plugin_path)
            .arg("--params")
            .arg(params.to_string())
            .arg("--context")
            .arg(serde_json::to_string(context).unwrap_or_default())
            .arg("--shm")
            .arg(format!("{in_fd},{out_fd}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if !limits.cpus.is_empty() {
            cmd.arg("--cpus").arg(limits.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","));
        }
        if let Some(d) = &limits.cuda_visible_devices {
            cmd.env("CUDA_VISIBLE_DEVICES", d);
        }
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: only async-signal-safe calls between fork and exec: the two arena
            // descriptors (close-on-exec everywhere else, so no other worker inherits them)
            // are kept open in this child.
            unsafe {
                cmd.pre_exec(move || {
                    for fd in [in_fd, out_fd] {
                        if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(|e| StageFailure::Load(format!("{}: {e}", super::worker_exe().display())))?;
        drop(input_ro);
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            let _ = child.kill();
            return Err(StageFailure::Load("no pipes to the worker".into()));
        };
        let watch = Arc::new(Watch::new(child.id()));
        {
            let (watch, label) = (watch.clone(), label.to_string());
            let _ = std::thread::Builder::new().name("curator-worker-stderr".into()).spawn(move || {
                use std::io::BufRead;
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    log_worker_line(&label, &line);
                    if let Ok(mut t) = watch.stderr_tail.lock() {
                        t.push_back(line);
                        if t.len() > 8 {
                            t.pop_front();
                        }
                    }
                }
            });
        }
        {
            let (watch, limits) = (watch.clone(), limits.clone());
            let _ = std::thread::Builder::new().name("curator-watchdog".into()).spawn(move || watchdog(&watch, &limits));
        }
        let mut w = WorkerProcess {
            child,
            stdin,
            stdout: BufReader::with_capacity(1 << 16, stdout),
            watch,
            label: label.to_string(),
            input,
            output,
            encoder: Encoder::default(),
            decoder: Decoder::default(),
            written: Written::default(),
            last_cpu: None,
            recent_peak: 0,
            calls: 0,
        };
        let text = |m: Vec<u8>| String::from_utf8_lossy(&m).into_owned();
        match protocol::read_frame(&mut w.stdout) {
            Ok((TAG_READY, _)) => Ok(w),
            Ok((TAG_INVALID_PARAMS, msg)) => Err(StageFailure::InvalidParams(text(msg))),
            Ok((TAG_FATAL, msg)) => Err(StageFailure::Load(text(msg))),
            Ok((tag, _)) => Err(StageFailure::Protocol(format!("unexpected frame {tag} at start"))),
            Err(_) => Err(w.death()),
        }
    }

    /// Why the worker is gone: the watchdog's reason, or how the process ended.
    fn death(&mut self) -> StageFailure {
        let status = self.child.wait();
        if let Some(reason) = self.watch.reason.lock().ok().and_then(|mut r| r.take()) {
            return reason;
        }
        // Give the stderr thread a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(20));
        let tail: Vec<String> = self.watch.stderr_tail.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
        let status = status.map(crate::os::describe_status).unwrap_or_else(|e| e.to_string());
        let last = tail.iter().rev().find(|l| !l.trim().is_empty()).cloned().unwrap_or_default();
        StageFailure::WorkerDied(if last.is_empty() { status } else { format!("{status}; stderr: {last}") })
    }

    pub fn pid(&self) -> u32 {
        self.watch.pid
    }

    fn exchange(&mut self, input: &RecordBatch) -> Result<StageOutput, StageFailure> {
        let shm = |e: super::layout::ShmError| StageFailure::Protocol(e.to_string());
        let (descriptor, written) = self.encoder.write_input(input, &mut self.input, protocol::KIND_INPUT).map_err(|e| match e {
            super::layout::ShmError::Unsupported(_) => StageFailure::Failed(e.to_string()),
            e => shm(e),
        })?;
        self.recent_peak = self.recent_peak.max(written.bytes);
        self.written = written;
        self.watch.set_busy(true);
        let sent = protocol::write_frame(&mut self.stdin, TAG_BATCH, &descriptor);
        let reply = sent.and_then(|_| protocol::read_frame(&mut self.stdout));
        self.watch.set_busy(false);
        let text = |m: Vec<u8>| String::from_utf8_lossy(&m).into_owned();
        match reply {
            Ok((TAG_OUTPUT, reply)) => {
                let (cpu, descriptor) = protocol::split_cpu(&reply)?;
                self.last_cpu = Some(cpu);
                self.output.follow().map_err(|e| StageFailure::Protocol(e.to_string()))?;
                let source = Source::Host { input: &self.input, output: &self.output, written: &self.written };
                let decoded = self.decoder.read(descriptor, &source).map_err(|e| StageFailure::InvalidOutput(e.to_string()))?;
                protocol::output_from_wire(decoded.kind, decoded.batch)
            }
            Ok((TAG_ERROR, m)) => Err(StageFailure::Failed(text(m))),
            Ok((TAG_OOM, m)) => Err(StageFailure::OutOfMemory(text(m))),
            Ok((tag, _)) => Err(StageFailure::Protocol(format!("unexpected frame {tag}"))),
            Err(_) => Err(self.death()),
        }
    }
}

impl StageCall for WorkerProcess {
    fn call(&mut self, input: &RecordBatch) -> Result<StageOutput, StageFailure> {
        self.last_cpu = None;
        let out = self.exchange(input);
        // Nothing the answer refers to stays in the arenas (outputs are copied out or are
        // the host's own buffers), so both are free for the next batch.
        self.written = Written::default();
        self.calls += 1;
        if self.calls.is_multiple_of(SHRINK_EVERY) {
            if let Some(size) = shrink_target(self.input.len(), self.recent_peak)
                && let Err(e) = self.input.shrink_to(size)
            {
                tracing::debug!(stage = %self.label, "cannot shrink the input arena: {e}");
            }
            self.recent_peak = 0;
        }
        out
    }

    fn is_worker_process(&self) -> bool {
        true
    }

    fn last_call_cpu(&self) -> Option<Duration> {
        self.last_cpu
    }

    /// The worker's anonymous resident memory (not the shared arenas, not mapped files) plus
    /// the GPU memory it held at the watchdog's last look, in bytes.
    fn memory_bytes(&self) -> usize {
        let anon = crate::os::anon_rss_bytes(self.watch.pid).unwrap_or(0);
        (anon + self.watch.gpu_bytes.load(Ordering::Relaxed)) as usize
    }

    fn leak_rule(&self) -> curator_core::leak::LeakRule {
        curator_core::leak::LeakRule::Resident
    }

    fn teardown(self: Box<Self>) {
        drop(self)
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.watch.stop.store(true, Ordering::Relaxed);
        let _ = protocol::write_frame(&mut self.stdin, TAG_SHUTDOWN, &[]);
        let _ = self.stdin.flush();
        let asked = Instant::now();
        let deadline = asked + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => {
                    tracing::debug!(stage = %self.label, "worker exited {:.3}s after it was asked to", asked.elapsed().as_secs_f64());
                    break;
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                _ => {
                    tracing::debug!(stage = %self.label, "worker did not stop: killing it");
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
    }
}

/// The level a worker's stderr line was written at: a native stage's `curator_sdk::log` writes
/// `[Level] message`; anything else (a library's own output) is debug.
fn worker_line_level(line: &str) -> (tracing::Level, &str) {
    let levels = [
        ("[Error] ", tracing::Level::ERROR),
        ("[Warn] ", tracing::Level::WARN),
        ("[Info] ", tracing::Level::INFO),
        ("[Debug] ", tracing::Level::DEBUG),
        ("[Trace] ", tracing::Level::TRACE),
    ];
    levels.iter().find_map(|(tag, level)| line.strip_prefix(tag).map(|m| (*level, m))).unwrap_or((tracing::Level::DEBUG, line))
}

/// Log a line of a worker's stderr at the level its stage logged it at, as the sandbox does
/// for a WASM stage's log calls.
fn log_worker_line(label: &str, line: &str) {
    match worker_line_level(line) {
        (tracing::Level::ERROR, m) => tracing::error!(stage = %label, "{m}"),
        (tracing::Level::WARN, m) => tracing::warn!(stage = %label, "{m}"),
        (tracing::Level::INFO, m) => tracing::info!(stage = %label, "{m}"),
        (tracing::Level::TRACE, m) => tracing::trace!(stage = %label, "{m}"),
        (_, m) => tracing::debug!(stage = %label, "worker: {m}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_stages_log_lines_keep_their_level() {
        assert_eq!(worker_line_level("[Info] embedder: set up in 1.20 s"), (tracing::Level::INFO, "embedder: set up in 1.20 s"));
        assert_eq!(worker_line_level("[Warn] slow"), (tracing::Level::WARN, "slow"));
        assert_eq!(worker_line_level("[Error] broken"), (tracing::Level::ERROR, "broken"));
        assert_eq!(worker_line_level("[Trace] t"), (tracing::Level::TRACE, "t"));
        assert_eq!(worker_line_level("cuBLAS said something"), (tracing::Level::DEBUG, "cuBLAS said something"));
        assert_eq!(worker_line_level("[Info]no space"), (tracing::Level::DEBUG, "[Info]no space"), "only the SDK's exact form");
    }

    #[test]
    fn only_far_too_large_arenas_shrink() {
        assert_eq!(shrink_target(1 << 30, 10 << 20), Some(16 << 20));
        assert_eq!(shrink_target(32 << 20, 1 << 10), None, "small arenas stay");
        assert_eq!(shrink_target(128 << 20, 40 << 20), None, "close to what batches need");
        assert_eq!(shrink_target(1 << 30, 0), Some(INITIAL_ARENA_BYTES));
    }
}
