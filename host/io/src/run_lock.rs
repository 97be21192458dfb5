//! One live run per output: a run holds `_running.lock` in its output directory (a shard
//! `_running.shard-0003-of-0008.lock`, a phase `_running.buckets….lock`) for as long as it
//! runs, and a second run is refused before it reads anything, naming the holder.
//!
//! On a local (or NFS) disk the file is held with `flock`, which the kernel drops when the
//! holder dies, so a killed run's lock is taken over at once. In an object store the lock is
//! an object created only if absent (`If-None-Match: *`) and rewritten every `ttl / 4` as a
//! heartbeat; one whose heartbeat is older than the TTL (`CURATOR_RUN_LOCK_TTL_S`, default
//! 60 s), or whose process is gone on this host, is taken over with a message.
//!
//! Which locks exclude which: a whole run (no shard, no phase) excludes every other lock in
//! the directory; a shard or phase excludes the whole run's lock and its own name, so the
//! shards of one run hold theirs side by side.

use std::fs::File;

use std::io::{Read, Seek, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{IoError, Loc};
use crate::remote::{PutError, PutMode, Version};

/// The whole run's lock file.
pub const WHOLE: &str = "_running.lock";
const PREFIX: &str = "_running";

/// The lock file of a run: the whole run's, or a shard's or phase's (`tag` as the journal
/// names it, `shard-0003-of-0008`, with the phase name before it).
pub fn lock_name(tag: Option<&str>) -> String {
    match tag {
        None => WHOLE.to_string(),
        Some(t) => format!("{PREFIX}.{t}.lock"),
    }
}

/// Whether `name` is a run lock's file name (not an output).
pub fn is_lock_file(name: &str) -> bool {
    name.starts_with(PREFIX) && name.ends_with(".lock")
}

/// Whether a run holding `mine` must wait for a live `other`.
fn excludes(mine: &str, other: &str) -> bool {
    mine == WHOLE || other == WHOLE || mine == other
}

/// Who holds a lock: written into the lock file.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    pub started_unix: u64,
    /// Object stores: the last heartbeat.
    pub heartbeat_unix: u64,
    /// What it runs (the pipeline file).
    pub pipeline: String,
}

impl Holder {
    fn me(pipeline: &str) -> Holder {
        let now = now();
        Holder { pid: std::process::id(), host: hostname(), started_unix: now, heartbeat_unix: now, pipeline: pipeline.to_string() }
    }

    fn describe(&self) -> String {
        let ago = now().saturating_sub(self.started_unix);
        format!("{} (pid {} on {}, started {ago} s ago)", self.pipeline, self.pid, self.host)
    }

    /// A process of this host that no longer exists.
    fn gone_here(&self) -> bool {
        self.host == hostname() && !crate::os::process_alive(self.pid)
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

fn ttl() -> Duration {
    let secs = std::env::var("CURATOR_RUN_LOCK_TTL_S").ok().and_then(|v| v.parse::<f64>().ok()).filter(|s| *s > 0.0).unwrap_or(60.0);
    Duration::from_secs_f64(secs)
}

/// Why a run could not take its lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{dir} is being written by another run: {holder} holds {file}; wait for it to finish, or stop it (a killed run's lock is taken over)"
    )]
    Held { dir: String, file: String, holder: String },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// A held run lock; released when dropped.
pub struct RunLock {
    held: Held,
}

enum Held {
    /// `made_dir`: the output directory did not exist before the lock (removed with it when
    /// nothing else was written there).
    Local {
        file: File,
        path: std::path::PathBuf,
        made_dir: bool,
    },
    Remote {
        loc: Loc,
        stop: Arc<(Mutex<bool>, Condvar)>,
        beat: Option<std::thread::JoinHandle<()>>,
    },
}

impl std::fmt::Debug for RunLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.held {
            Held::Local { path, .. } => write!(f, "RunLock({})", path.display()),
            Held::Remote { loc, .. } => write!(f, "RunLock({})", loc.display()),
        }
    }
}

impl RunLock {
    /// Take the lock `name` in `dir` for the run of `pipeline`, or say who holds it (or a lock
    /// it excludes).
    pub fn acquire(dir: &Loc, name: &str, pipeline: &str) -> Result<RunLock, LockError> {
        match dir {
            Loc::Local(d) => acquire_local(d, name, pipeline),
            Loc::Remote(_) => acquire_remote(dir, name, pipeline),
        }
    }
}

fn io_err(path: &std::path::Path, source: std::io::Error) -> LockError {
    LockError::Io(IoError::Open { path: path.display().to_string(), source })
}

fn read_holder(bytes: &[u8]) -> Option<Holder> {
    serde_json::from_slice(bytes).ok()
}

fn held(dir: &str, file: &str, holder: Option<Holder>) -> LockError {
    let holder = holder.map(|h| h.describe()).unwrap_or_else(|| "another run".into());
    LockError::Held { dir: dir.to_string(), file: file.to_string(), holder }
}

fn acquire_local(dir: &std::path::Path, name: &str, pipeline: &str) -> Result<RunLock, LockError> {
    let made_dir = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let path = dir.join(name);
    let mut file = loop {
        let mut file = File::options().read(true).write(true).create(true).truncate(false).open(&path).map_err(|e| io_err(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = Vec::new();
                let _ = file.read_to_end(&mut text);
                return Err(held(&dir.display().to_string(), &path.display().to_string(), read_holder(&text)));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&path, e)),
        }
        // The holder we waited on may have removed the file after we opened it: then our lock
        // is on a file nobody else can see, so open the path again.
        use std::os::unix::fs::MetadataExt;
        let same = match (file.metadata(), std::fs::metadata(&path)) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        };
        if same {
            break file;
        }
    };
    let mut old = Vec::new();
    file.read_to_end(&mut old).map_err(|e| io_err(&path, e))?;
    if let Some(prev) = read_holder(&old) {
        tracing::warn!("taking over {}: the run that held it is gone ({})", path.display(), prev.describe());
    }
    // Locks this one excludes: a live one (locked by its holder) refuses this run.
    let entries = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    for entry in entries.flatten() {
        let other = entry.file_name().to_string_lossy().into_owned();
        if other == name || !is_lock_file(&other) || !excludes(name, &other) {
            continue;
        }
        let Ok(mut f) = File::open(entry.path()) else { continue };
        if let Err(std::fs::TryLockError::WouldBlock) = f.try_lock_shared() {
            let mut text = Vec::new();
            let _ = f.read_to_end(&mut text);
            // Ours is not held yet: remove it while still locked, then let go.
            let _ = std::fs::remove_file(&path);
            drop(file);
            if made_dir {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(held(&dir.display().to_string(), &entry.path().display().to_string(), read_holder(&text)));
        }
    }
    let record = serde_json::to_vec(&Holder::me(pipeline)).unwrap_or_default();
    file.set_len(0).and_then(|_| file.rewind()).and_then(|_| file.write_all(&record)).map_err(|e| io_err(&path, e))?;
    Ok(RunLock { held: Held::Local { file, path, made_dir } })
}

fn remote_err(loc: &Loc, e: impl std::fmt::Display) -> LockError {
    LockError::Io(IoError::Open { path: loc.display(), source: std::io::Error::other(e.to_string()) })
}

/// A remote lock's holder, its version (for a conditional take-over) and whether it is live.
fn remote_state(loc: &Loc) -> Result<Option<(Option<Holder>, Version, bool)>, LockError> {
    let Loc::Remote(o) = loc else { return Ok(None) };
    let Some((bytes, version)) = o.get_versioned().map_err(|e| remote_err(loc, e))? else { return Ok(None) };
    let holder = read_holder(&bytes);
    let live = holder.as_ref().is_some_and(|h| !h.gone_here() && now().saturating_sub(h.heartbeat_unix) < ttl().as_secs().max(1));
    Ok(Some((holder, version, live)))
}

/// The run locks in a remote directory (its own objects only, not those below).
fn remote_locks(dir: &Loc) -> Result<Vec<Loc>, LockError> {
    let Loc::Remote(o) = dir else { return Ok(Vec::new()) };
    let listed = o.list_here().map_err(|e| remote_err(dir, e))?;
    Ok(listed.into_iter().filter(|o| is_lock_file(&o.file_name())).map(Loc::Remote).collect())
}

fn put(loc: &Loc, holder: &Holder, mode: PutMode) -> Result<(), PutError> {
    let Loc::Remote(o) = loc else { return Ok(()) };
    o.put(serde_json::to_vec(holder).unwrap_or_default(), mode)
}

fn acquire_remote(dir: &Loc, name: &str, pipeline: &str) -> Result<RunLock, LockError> {
    let loc = dir.join(name);
    let me = Holder::me(pipeline);
    match put(&loc, &me, PutMode::Create) {
        Ok(()) => {}
        Err(PutError::Exists) => match remote_state(&loc)? {
            Some((holder, _, true)) => return Err(held(&dir.display(), &loc.display(), holder)),
            Some((holder, version, false)) => {
                // Stale: replace it only if nobody else replaced it first.
                put(&loc, &me, PutMode::Update(version)).map_err(|e| match e {
                    PutError::Changed => held(&dir.display(), &loc.display(), None),
                    e => remote_err(&loc, e),
                })?;
                let who = holder.map(|h| h.describe()).unwrap_or_else(|| "unreadable".into());
                tracing::warn!("taking over {}: the run that held it stopped its heartbeat ({who})", loc.display());
            }
            None => return acquire_remote(dir, name, pipeline),
        },
        Err(e) => return Err(remote_err(&loc, e)),
    }
    // Locks this one excludes.
    for other in remote_locks(dir)? {
        let other_name = other.file_name();
        if other_name == name || !excludes(name, &other_name) {
            continue;
        }
        if let Some((holder, _, true)) = remote_state(&other)? {
            let _ = loc.delete();
            return Err(held(&dir.display(), &other.display(), holder));
        }
    }
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let beat = {
        let (loc, stop2, mut me) = (loc.clone(), stop.clone(), me);
        let every = ttl() / 4;
        std::thread::spawn(move || {
            let (flag, cv) = &*stop2;
            let mut stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
            while !*stopped {
                stopped = cv.wait_timeout(stopped, every).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
                if !*stopped {
                    me.heartbeat_unix = now();
                    if let Err(e) = put(&loc, &me, PutMode::Overwrite) {
                        tracing::warn!("cannot renew the run lock {}: {e}", loc.display());
                    }
                }
            }
        })
    };
    Ok(RunLock { held: Held::Remote { loc, stop, beat: Some(beat) } })
}

impl Drop for RunLock {
    fn drop(&mut self) {
        match &mut self.held {
            Held::Local { file, path, made_dir } => {
                // Remove the file while still holding it; a run that opened it meanwhile
                // sees that its file is gone (`acquire_local`) and opens the path again.
                let _ = std::fs::remove_file(&*path);
                let _ = file.unlock();
                if let (true, Some(dir)) = (*made_dir, path.parent()) {
                    let _ = std::fs::remove_dir(dir); // only when empty: a plan refused later
                }
            }
            Held::Remote { loc, stop, beat } => {
                {
                    let (flag, cv) = &**stop;
                    *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
                    cv.notify_all();
                }
                if let Some(b) = beat.take() {
                    let _ = b.join();
                }
                let _ = loc.delete();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_is_refused_naming_the_first_and_may_start_once_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let out = Loc::Local(dir.path().join("out"));
        let first = RunLock::acquire(&out, WHOLE, "a.yaml").unwrap();
        let e = RunLock::acquire(&out, WHOLE, "b.yaml").unwrap_err().to_string();
        assert!(e.contains("a.yaml") && e.contains(&format!("pid {}", std::process::id())) && e.contains("_running.lock"), "{e}");
        drop(first);
        assert!(!dir.path().join("out/_running.lock").exists(), "released locks are removed");
        let _again = RunLock::acquire(&out, WHOLE, "b.yaml").unwrap();
    }

    #[test]
    fn shards_lock_side_by_side_and_exclude_the_whole_run() {
        let dir = tempfile::tempdir().unwrap();
        let out = Loc::Local(dir.path().to_path_buf());
        let (a, b) = (lock_name(Some("shard-0000-of-0002")), lock_name(Some("shard-0001-of-0002")));
        let s0 = RunLock::acquire(&out, &a, "p.yaml").unwrap();
        let s1 = RunLock::acquire(&out, &b, "p.yaml").unwrap();
        assert!(RunLock::acquire(&out, &a, "p.yaml").is_err(), "one shard twice");
        assert!(RunLock::acquire(&out, WHOLE, "p.yaml").unwrap_err().to_string().contains("shard-000"), "whole run beside shards");
        drop((s0, s1));
        let whole = RunLock::acquire(&out, WHOLE, "p.yaml").unwrap();
        assert!(RunLock::acquire(&out, &a, "p.yaml").unwrap_err().to_string().contains("_running.lock"));
        drop(whole);
    }

    #[test]
    fn a_lock_file_left_by_a_dead_run_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let dead = Holder { pid: u32::MAX, host: hostname(), started_unix: 1, heartbeat_unix: 1, pipeline: "old.yaml".into() };
        std::fs::write(dir.path().join(WHOLE), serde_json::to_vec(&dead).unwrap()).unwrap();
        let _l = RunLock::acquire(&Loc::Local(dir.path().to_path_buf()), WHOLE, "new.yaml").unwrap();
        let now: Holder = serde_json::from_slice(&std::fs::read(dir.path().join(WHOLE)).unwrap()).unwrap();
        assert_eq!((now.pipeline.as_str(), now.pid), ("new.yaml", std::process::id()));
    }
}
