//! The pipeline's `services:` while a run lasts: each replica's server started on its GPUs
//! and a free loopback port, waited for until its readiness probe answers, started again
//! when it dies (its port kept, so the stages' clients find it where it was), its output in
//! `<output>/_services/NAME-K.log`, and stopped when the run ends, however it ends.
//!
//! A replica runs in a process group of its own (a server's own children, such as vLLM's
//! engine processes, are stopped with it) and is told to stop by the kernel if the thread
//! that started it goes away (`PR_SET_PDEATHSIG`): a host killed by Ctrl-C or SIGKILL
//! leaves no server behind. That thread is the replica's supervisor, alive as long as the
//! replica is.

use std::collections::VecDeque;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use curator_core::service::{probe_interval_s, restart_delay_s};

use crate::plan::Plan;
use crate::plan::services::PlannedService;

/// Why a service did not come up.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("service {name:?} (replica {replica}) {why}; the last lines of {log}:\n{tail}")]
    NotReady { name: String, replica: usize, why: String, log: String, tail: String },
    #[error("service {name:?}: {why}")]
    Start { name: String, why: String },
}

/// The started services of one run; dropping it stops them.
pub(crate) struct Services {
    replicas: Vec<Replica>,
}

/// Services a serving host (`curator-host serve`) keeps between runs: a model server takes
/// minutes to load, so a run whose service is the same as a kept one (same entry, working
/// directory and cards) is given the kept replicas' URLs instead of starting its own. Kept
/// services the next run does not name are stopped when it starts (their cards may be placed
/// anew); the rest stop with the host. A kept replica's log stays in the run that started it.
#[derive(Default)]
pub struct ServicePool {
    kept: std::sync::Mutex<Vec<KeptService>>,
}

struct KeptService {
    key: String,
    name: String,
    urls: Vec<String>,
    ready_path: String,
    /// Dropped: stopped.
    _replicas: Services,
}

impl ServicePool {
    /// Services kept now.
    pub fn kept_count(&self) -> usize {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// What makes a started service the same as a kept one: its entry, where it runs and on
/// which cards (the command's `{port}` is the host's pick, so not part of it).
fn service_key(s: &PlannedService) -> String {
    let gpus: Vec<Vec<u32>> = s.replicas.iter().map(|a| a.as_ref().map(|a| a.devices.clone()).unwrap_or_default()).collect();
    format!("{}\u{0}{}\u{0}{}\u{0}{gpus:?}", s.name, serde_json::to_string(&s.spec).unwrap_or_default(), s.cwd.display())
}

struct Replica {
    stop: Arc<AtomicBool>,
    supervisor: Option<std::thread::JoinHandle<()>>,
}

/// What a replica's supervisor needs.
struct Launch {
    name: String,
    k: usize,
    args: Vec<String>,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    port: u16,
    log: PathBuf,
    ready_path: String,
    startup: Duration,
    max_restarts: u32,
}

impl Services {
    /// Start every service `plan` starts itself and wait until all of them are ready.
    /// Returns the plan with each stage's service URLs filled in.
    /// With a `pool` (a serving host), services it keeps are reused and those started are
    /// kept in it when the run ends.
    pub(crate) fn start(plan: &Plan, pool: Option<&ServicePool>) -> Result<(Services, Option<Plan>), ServiceError> {
        let mut services = Services { replicas: Vec::new() };
        let mut started: Vec<&PlannedService> = plan.services.iter().filter(|s| s.spec.is_started()).collect();
        let mut urls: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        if let Some(pool) = pool {
            let mut kept = pool.kept.lock().unwrap_or_else(|e| e.into_inner());
            let wanted: Vec<String> = started.iter().map(|s| service_key(s)).collect();
            // Those this run does not name are stopped now (dropped), and so is one whose
            // replica no longer answers.
            kept.retain(|k| {
                let keep = wanted.contains(&k.key) && k.urls.iter().all(|u| url_port(u).is_some_and(|p| probe(p, &k.ready_path)));
                if !keep {
                    tracing::info!(service = %k.name, "stopping a kept service this run does not use");
                }
                keep
            });
            started.retain(|s| match kept.iter().find(|k| k.key == service_key(s)) {
                Some(k) => {
                    tracing::info!(service = %s.name, "reusing the serving host's running service at {}", k.urls.join(", "));
                    urls.insert(s.name.clone(), k.urls.clone());
                    false
                }
                None => true,
            });
        }
        if started.is_empty() {
            return Ok((services, with_urls(plan, &urls)));
        }
        let log_dir = match &plan.output_dir {
            crate::io::Loc::Local(p) => p.join("_services"),
            _ => std::env::temp_dir().join(format!("curator-services-{}", std::process::id())),
        };
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| ServiceError::Start { name: started[0].name.clone(), why: format!("cannot create {}: {e}", log_dir.display()) })?;
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), ServiceError>>();
        let first_replica = services.replicas.len();
        let mut groups: Vec<(String, String, String, usize)> = Vec::new();
        let mut waiting = 0;
        for s in &started {
            groups.push((service_key(s), s.name.clone(), s.spec.ready_path.clone(), s.replicas.len()));
            let command = s.spec.command.as_ref().expect("a started service has a command");
            for (k, gpu) in s.replicas.iter().enumerate() {
                let port = free_port().map_err(|e| ServiceError::Start { name: s.name.clone(), why: format!("no free port: {e}") })?;
                let mut env: Vec<(String, String)> = s.spec.env.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
                if let Some(a) = gpu {
                    let ids: Vec<String> = a.devices.iter().map(|&d| crate::gpu::cuda_id(d).to_string()).collect();
                    env.push(("CUDA_VISIBLE_DEVICES".into(), ids.join(",")));
                }
                let launch = Launch {
                    name: s.name.clone(),
                    k,
                    args: command.args(port),
                    cwd: s.cwd.clone(),
                    env,
                    port,
                    log: log_dir.join(format!("{}-{k}.log", s.name)),
                    ready_path: s.spec.ready_path.clone(),
                    startup: Duration::from_secs_f64(s.spec.startup_timeout_s),
                    max_restarts: s.spec.max_restarts,
                };
                tracing::info!(service = %s.name, replica = k, port, "starting: {}", launch.args.join(" "));
                urls.entry(s.name.clone()).or_default().push(format!("http://127.0.0.1:{port}"));
                let stop = Arc::new(AtomicBool::new(false));
                let (stop2, tx) = (stop.clone(), ready_tx.clone());
                let supervisor = std::thread::Builder::new()
                    .name(format!("curator-service-{}-{k}", s.name))
                    .spawn(move || supervise(&launch, &stop2, &tx))
                    .map_err(|e| ServiceError::Start { name: s.name.clone(), why: e.to_string() })?;
                services.replicas.push(Replica { stop, supervisor: Some(supervisor) });
                waiting += 1;
            }
        }
        drop(ready_tx);
        let started_at = Instant::now();
        for _ in 0..waiting {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => break,
            }
        }
        tracing::info!("services ready after {:.1} s", started_at.elapsed().as_secs_f64());
        // A serving host keeps what it started, for the runs after this one.
        if let Some(pool) = pool {
            let mut replicas = services.replicas.split_off(first_replica).into_iter();
            let mut kept = pool.kept.lock().unwrap_or_else(|e| e.into_inner());
            for (key, name, ready_path, n) in groups {
                let group = Services { replicas: replicas.by_ref().take(n).collect() };
                kept.push(KeptService { urls: urls.get(&name).cloned().unwrap_or_default(), key, name, ready_path, _replicas: group });
            }
        }
        Ok((services, with_urls(plan, &urls)))
    }
}

/// `plan` with each stage's service URLs filled in (none to fill: `None`, the plan as it is).
fn with_urls(plan: &Plan, urls: &std::collections::BTreeMap<String, Vec<String>>) -> Option<Plan> {
    if urls.is_empty() {
        return None;
    }
    let mut plan = plan.clone();
    for stage in &mut plan.stages {
        if let Some(svc) = &mut stage.service
            && let Some(u) = urls.get(&svc.name)
        {
            svc.urls = u.clone();
        }
    }
    Some(plan)
}

/// The port of a loopback URL `http://127.0.0.1:PORT`.
fn url_port(url: &str) -> Option<u16> {
    url.rsplit(':').next()?.parse().ok()
}

impl Drop for Services {
    fn drop(&mut self) {
        for r in &self.replicas {
            r.stop.store(true, Ordering::SeqCst);
        }
        for r in &mut self.replicas {
            if let Some(h) = r.supervisor.take() {
                let _ = h.join();
            }
        }
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// Start the replica, report its first readiness, start it again each time it dies (up to
/// `max_restarts`), stop it when asked.
fn supervise(l: &Launch, stop: &AtomicBool, ready: &mpsc::Sender<Result<(), ServiceError>>) {
    let mut restarts = 0u32;
    let mut first = true;
    loop {
        let mut child = match spawn(l) {
            Ok(c) => c,
            Err(why) => {
                let _ = ready.send(Err(not_ready(l, why)));
                return;
            }
        };
        let up = wait_ready(l, &mut child, stop);
        match up {
            Ok(()) if first => {
                first = false;
                let _ = ready.send(Ok(()));
            }
            Ok(()) => tracing::info!(service = %l.name, replica = l.k, "ready again after restart {restarts}"),
            Err(why) => {
                terminate(&mut child);
                if first {
                    let _ = ready.send(Err(not_ready(l, why)));
                } else if !stop.load(Ordering::SeqCst) {
                    let why = format!(
                        "service {:?} replica {} did not come back after a restart: {why}; its log: {}",
                        l.name,
                        l.k,
                        l.log.display()
                    );
                    tracing::error!("{why}");
                    answer_gone(l.port, &why, stop);
                }
                return;
            }
        }
        // Serving: wait until it exits or the run ends.
        let status = loop {
            if stop.load(Ordering::SeqCst) {
                terminate(&mut child);
                return;
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(_) => break std::process::ExitStatus::default(),
            }
        };
        // What the server started is stopped with it (vLLM's engine process would hold the
        // card's memory the restart needs).
        // SAFETY: a signal to the process group this host created for the replica.
        unsafe {
            libc::killpg(child.id() as i32, libc::SIGKILL);
        }
        restarts += 1;
        if restarts > l.max_restarts {
            let why = format!(
                "service {:?} replica {} exited ({status}) and was restarted {} time(s) already (max_restarts); it is not started again. Its log: {}",
                l.name,
                l.k,
                restarts - 1,
                l.log.display()
            );
            tracing::error!("{why}");
            answer_gone(l.port, &why, stop);
            return;
        }
        let delay = restart_delay_s(restarts);
        tracing::warn!(service = %l.name, replica = l.k, "exited ({status}); restart {restarts} of {} in {delay} s", l.max_restarts);
        let until = Instant::now() + Duration::from_secs_f64(delay);
        while Instant::now() < until {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A replica that is gone for good: its port answers every request `410 Gone` with the
/// reason, until the run ends. A client takes a 4xx as final, so the documents waiting for
/// it fail at once with that reason (dead-lettered, or the run stops) instead of waiting
/// for a server that will not come back.
fn answer_gone(port: u16, why: &str, stop: &AtomicBool) {
    let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) else { return };
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let body = serde_json::json!({"error": {"message": why, "type": "service_gone"}}).to_string();
    let answer =
        format!("HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((mut conn, _)) => {
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                // Read the whole request (a client that is cut off mid-send sees a reset, not
                // the answer), then answer and close.
                let mut reader = std::io::BufReader::new(&mut conn);
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line.trim().is_empty() => break,
                        Ok(_) => {
                            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                                len = v.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                }
                let _ = std::io::copy(&mut reader.take(len as u64), &mut std::io::sink());
                let _ = conn.write_all(answer.as_bytes());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn not_ready(l: &Launch, why: String) -> ServiceError {
    ServiceError::NotReady { name: l.name.clone(), replica: l.k, why, log: l.log.display().to_string(), tail: log_tail(&l.log, 20) }
}

fn spawn(l: &Launch) -> Result<Child, String> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&l.log).map_err(|e| format!("{}: {e}", l.log.display()))?;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&l.args[0]);
    cmd.args(&l.args[1..]).current_dir(&l.cwd).envs(l.env.iter().map(|(a, b)| (a, b))).stdin(Stdio::null()).stdout(log).stderr(err);
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls between fork and exec: a process group of its
        // own, and the kernel's word to stop it when this (supervisor) thread goes away.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setpgid(0, 0) != 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.spawn().map_err(|e| format!("could not start {:?}: {e}", l.args[0]))
}

/// Probe until the replica answers 200, it exits, the start-up time runs out or the run ends.
fn wait_ready(l: &Launch, child: &mut Child, stop: &AtomicBool) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if stop.load(Ordering::SeqCst) {
            return Err("the run ended".into());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited ({status}) before it was ready"));
        }
        if probe(l.port, &l.ready_path) {
            tracing::info!(service = %l.name, replica = l.k, "ready after {:.1} s", started.elapsed().as_secs_f64());
            return Ok(());
        }
        let elapsed = started.elapsed().as_secs_f64();
        if elapsed > l.startup.as_secs_f64() {
            return Err(format!("was not ready after {:.0} s (startup_timeout_s; probed GET {})", elapsed, l.ready_path));
        }
        std::thread::sleep(Duration::from_secs_f64(probe_interval_s(elapsed)));
    }
}

/// Whether `GET path` on the loopback port answers 200. Hand-written (a request line and a
/// status line over a socket to this machine) so the host takes on no HTTP client.
fn probe(port: u16, path: &str) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").as_bytes()).is_err() {
        return false;
    }
    let mut line = String::new();
    if std::io::BufReader::new(&mut s).read_line(&mut line).is_err() {
        return false;
    }
    line.split_whitespace().nth(1) == Some("200")
}

/// Stop a replica and its children: SIGTERM to its group, SIGKILL after 10 s.
fn terminate(child: &mut Child) {
    let pgid = child.id() as i32;
    // SAFETY: signals sent to the process group this host created for the replica.
    unsafe {
        libc::killpg(pgid, libc::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            // The group may still hold the server's children.
            // SAFETY: as above.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// The last `n` lines of a log file.
fn log_tail(path: &Path, n: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let mut lines: VecDeque<&str> = VecDeque::new();
    for line in text.lines() {
        lines.push_back(line);
        if lines.len() > n {
            lines.pop_front();
        }
    }
    lines.into_iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_reads_the_status_line() {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for status in ["503 Service Unavailable", "200 OK"] {
                let (mut c, _) = listener.accept().unwrap();
                let mut buf = [0u8; 512];
                let _ = c.read(&mut buf);
                c.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes()).unwrap();
            }
        });
        assert!(!probe(port, "/health"));
        assert!(probe(port, "/health"));
        server.join().unwrap();
        assert!(!probe(port, "/health"), "nothing listens any more");
    }

    #[test]
    fn a_log_tail_is_its_last_lines() {
        let dir = std::env::temp_dir().join(format!("curator-svc-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.log");
        std::fs::write(&p, (1..=30).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
        let t = log_tail(&p, 3);
        assert_eq!(t, "  line 28\n  line 29\n  line 30");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
