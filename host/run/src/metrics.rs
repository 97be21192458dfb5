//! Run metrics: counters shared by readers, workers and the writer; a Prometheus text
//! endpoint (`--metrics ADDR`) and periodic status lines.
//!
//! The exposition is written by hand (the text format is a few lines per metric) rather
//! than through a metrics framework: no async runtime or HTTP stack for one GET route.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Counters of one stage.
#[derive(Debug, Default)]
pub struct StageCounters {
    pub label: String,
    pub docs_in: AtomicU64,
    pub docs_out: AtomicU64,
    pub failed: AtomicU64,
    pub batches: AtomicU64,
    pub busy_ns: AtomicU64,
    /// CPU time of the stage's calls (this process's threads or its worker processes).
    pub cpu_ns: AtomicU64,
    /// Bytes of text sent into the stage.
    pub bytes_in: AtomicU64,
    /// Batches waiting in the stage's input queue.
    pub queued: AtomicI64,
    /// Workers alive.
    pub workers: AtomicI64,
    /// Nanoseconds workers of the stage were alive (added when a worker exits).
    pub alive_ns: AtomicU64,
    /// Totals of the integer columns its manifest names in `sums`.
    pub sums: std::sync::Mutex<std::collections::BTreeMap<String, i64>>,
}

/// Counters of a dedup step's phases.
#[derive(Debug, Default)]
pub struct DedupCounters {
    /// Documents whose key (text hash or signature) was read into the step.
    pub docs_hashed: AtomicU64,
    /// Fuzzy: bucket passes done, and planned.
    pub iterations_done: AtomicU64,
    pub iterations_total: AtomicU64,
    /// Fuzzy: distinct candidate pairs, and those that passed the Jaccard check.
    pub candidate_pairs: AtomicU64,
    pub verified_pairs: AtomicU64,
    /// Fuzzy: candidate pairs compared on their shingle sets (the signatures left doubt).
    pub text_checks: AtomicU64,
    /// Duplicate groups (two or more documents), and documents `remove` drops.
    pub groups: AtomicU64,
    pub duplicates: AtomicU64,
}

/// Everything a run counts.
#[derive(Debug, Default)]
pub struct RunMetrics {
    pub stages: Vec<StageCounters>,
    pub dedup: DedupCounters,
    /// Batches waiting for a writer.
    pub sink_queued: AtomicI64,
    /// Most stage workers seen alive at once (sampled).
    pub max_workers: AtomicU64,
    pub docs_read: AtomicU64,
    pub docs_written: AtomicU64,
    pub rejected: AtomicU64,
    /// Whether to ask NVML for GPU memory at each scrape.
    pub gpus: bool,
}

impl RunMetrics {
    pub fn new(labels: impl IntoIterator<Item = String>, gpus: bool) -> RunMetrics {
        RunMetrics {
            stages: labels.into_iter().map(|label| StageCounters { label, ..Default::default() }).collect(),
            gpus,
            ..Default::default()
        }
    }

    /// Stage workers alive now.
    pub fn workers(&self) -> u64 {
        self.stages.iter().map(|c| c.workers.load(Ordering::Relaxed).max(0) as u64).sum()
    }

    /// Batches waiting in any queue.
    pub fn queued(&self) -> u64 {
        self.stages.iter().map(|c| c.queued.load(Ordering::Relaxed).max(0) as u64).sum::<u64>()
            + self.sink_queued.load(Ordering::Relaxed).max(0) as u64
    }

    /// Update the high-water mark of workers.
    pub fn sample_workers(&self) {
        self.max_workers.fetch_max(self.workers(), Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let stage_metric = |s: &mut String, name: &str, help: &str, kind: &str, get: &dyn Fn(&StageCounters) -> f64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for c in &self.stages {
                let _ = writeln!(s, "{name}{{stage=\"{}\"}} {}", escape(&c.label), get(c));
            }
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        stage_metric(&mut s, "curator_stage_documents_in_total", "Documents sent into the stage.", "counter", &|c| load(&c.docs_in));
        stage_metric(&mut s, "curator_stage_documents_out_total", "Documents the stage kept.", "counter", &|c| load(&c.docs_out));
        stage_metric(&mut s, "curator_stage_documents_failed_total", "Documents the stage failed on (dead-lettered).", "counter", &|c| {
            load(&c.failed)
        });
        stage_metric(&mut s, "curator_stage_bytes_in_total", "Bytes of text sent into the stage.", "counter", &|c| load(&c.bytes_in));
        stage_metric(&mut s, "curator_stage_batches_total", "Batches the stage processed.", "counter", &|c| load(&c.batches));
        stage_metric(&mut s, "curator_stage_busy_seconds_total", "Seconds workers spent in the stage.", "counter", &|c| {
            c.busy_ns.load(Ordering::Relaxed) as f64 / 1e9
        });
        stage_metric(&mut s, "curator_stage_queue_depth", "Batches waiting in the stage's input queue.", "gauge", &|c| {
            c.queued.load(Ordering::Relaxed).max(0) as f64
        });
        stage_metric(&mut s, "curator_stage_workers", "Workers of the stage.", "gauge", &|c| {
            c.workers.load(Ordering::Relaxed).max(0) as f64
        });
        let scalar = |s: &mut String, name: &str, help: &str, kind: &str, v: f64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        };
        scalar(&mut s, "curator_queue_depth", "Batches waiting in any queue (stages and writers).", "gauge", self.queued() as f64);
        scalar(
            &mut s,
            "curator_sink_queue_depth",
            "Batches waiting for a writer.",
            "gauge",
            self.sink_queued.load(Ordering::Relaxed).max(0) as f64,
        );
        scalar(&mut s, "curator_workers", "Stage workers (all stages).", "gauge", self.workers() as f64);
        scalar(&mut s, "curator_documents_read_total", "Documents read from the source.", "counter", load(&self.docs_read));
        scalar(&mut s, "curator_documents_written_total", "Documents written to the sink.", "counter", load(&self.docs_written));
        scalar(&mut s, "curator_input_rejected_total", "Input lines quarantined as bad input.", "counter", load(&self.rejected));
        let d = &self.dedup;
        for (name, help, kind, v) in [
            ("curator_dedup_documents_hashed_total", "Documents whose dedup key was read.", "counter", &d.docs_hashed),
            ("curator_dedup_bucket_passes_done", "Fuzzy dedup: LSH bucket passes done.", "gauge", &d.iterations_done),
            ("curator_dedup_bucket_passes", "Fuzzy dedup: LSH bucket passes planned.", "gauge", &d.iterations_total),
            ("curator_dedup_candidate_pairs", "Fuzzy dedup: distinct candidate pairs from LSH buckets.", "gauge", &d.candidate_pairs),
            ("curator_dedup_verified_pairs", "Fuzzy dedup: candidate pairs at or over the Jaccard threshold.", "gauge", &d.verified_pairs),
            ("curator_dedup_text_checks", "Fuzzy dedup: candidate pairs compared on their shingle sets.", "gauge", &d.text_checks),
            ("curator_dedup_groups", "Duplicate groups (connected components of two or more).", "gauge", &d.groups),
            ("curator_dedup_duplicates", "Documents a dedup step removes.", "gauge", &d.duplicates),
        ] {
            scalar(&mut s, name, help, kind, load(v));
        }
        scalar(&mut s, "curator_process_resident_memory_bytes", "Resident memory of the process.", "gauge", rss_bytes() as f64);
        if self.gpus {
            let _ =
                writeln!(s, "# HELP curator_gpu_memory_used_bytes GPU memory in use (NVML).\n# TYPE curator_gpu_memory_used_bytes gauge");
            for (i, uuid, used) in gpu_memory_used() {
                let _ = writeln!(s, "curator_gpu_memory_used_bytes{{gpu=\"{i}\",uuid=\"{uuid}\"}} {used}");
            }
        }
        s
    }

    /// One progress-bar line for stage `i`: documents in and out, docs/s, workers, queue fill.
    pub fn stage_line(&self, i: usize, elapsed: Duration, queue_capacity: usize) -> String {
        let c = &self.stages[i];
        let docs = c.docs_in.load(Ordering::Relaxed);
        let rate = if elapsed.as_secs_f64() > 0.0 { docs as f64 / elapsed.as_secs_f64() } else { 0.0 };
        format!(
            "{:<24} in {:>10}  out {:>10}  {:>9.0} docs/s  workers {}  queue {}/{}",
            c.label,
            docs,
            c.docs_out.load(Ordering::Relaxed),
            rate,
            c.workers.load(Ordering::Relaxed).max(0),
            c.queued.load(Ordering::Relaxed).max(0),
            queue_capacity
        )
    }

    /// One status line for logs.
    pub fn status_line(&self, elapsed: Duration) -> String {
        let mut line = format!(
            "{:.0}s: read {} documents, wrote {}, {} batches queued",
            elapsed.as_secs_f64(),
            self.docs_read.load(Ordering::Relaxed),
            self.docs_written.load(Ordering::Relaxed),
            self.queued()
        );
        for c in &self.stages {
            let busy = c.busy_ns.load(Ordering::Relaxed) as f64 / 1e9;
            let docs = c.docs_in.load(Ordering::Relaxed);
            let rate = if busy > 0.0 { docs as f64 / busy } else { 0.0 };
            let _ = write!(
                line,
                "; {} {} in {} out ({:.0} docs/s busy, {} workers)",
                c.label,
                docs,
                c.docs_out.load(Ordering::Relaxed),
                rate,
                c.workers.load(Ordering::Relaxed).max(0)
            );
        }
        line
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn gpu_memory_used() -> Vec<(u32, String, u64)> {
    let Ok(nvml) = nvml_wrapper::Nvml::init() else { return Vec::new() };
    let n = nvml.device_count().unwrap_or(0);
    (0..n)
        .filter_map(|i| {
            let d = nvml.device_by_index(i).ok()?;
            Some((i, d.uuid().unwrap_or_default(), d.memory_info().ok()?.used))
        })
        .collect()
}

/// Serve `GET /metrics` (any path) on `addr` until `stop` is set. Returns the bound address.
pub fn serve(addr: SocketAddr, metrics: Arc<RunMetrics>, stop: Arc<AtomicBool>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("curator-metrics".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut buf = [0u8; 4096];
                    let _ = conn.read(&mut buf);
                    let body = metrics.render();
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })?;
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = RunMetrics::new(["wc \"x\"".to_string()], false);
        m.stages[0].docs_in.store(5, Ordering::Relaxed);
        m.stages[0].queued.store(3, Ordering::Relaxed);
        let text = m.render();
        assert!(text.contains("# TYPE curator_stage_documents_in_total counter"));
        assert!(text.contains("curator_stage_documents_in_total{stage=\"wc \\\"x\\\"\"} 5"), "{text}");
        assert!(text.contains("curator_queue_depth 3"));
        assert!(text.contains("curator_process_resident_memory_bytes "));
        assert!(m.status_line(Duration::from_secs(3)).starts_with("3s: read 0 documents, wrote 0, 3 batches queued; wc \"x\" 5 in 0 out"));
        m.stages[0].workers.store(2, Ordering::Relaxed);
        let line = m.stage_line(0, Duration::from_secs(5), 4);
        assert!(
            line.contains("in          5") && line.contains("1 docs/s") && line.contains("workers 2") && line.ends_with("queue 3/4"),
            "{line}"
        );
    }
}
