//! What the operating system tells and does for the executor: usable cores and memory
//! (affinity, cgroup v2), resident memory of this process and of its workers, CPU pinning,
//! process exit statuses and signals. Linux first; elsewhere the probes answer what they can.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Usable cores: affinity and cgroup quota aware (std's `available_parallelism`).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Memory the machine can give workers, MiB: `MemAvailable`, capped by a cgroup v2 limit.
pub fn available_memory_mb() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let avail_kb: u64 = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let mut mb = avail_kb / 1024;
    if let Ok(limit) = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        && let Ok(bytes) = limit.trim().parse::<u64>()
    {
        let used = std::fs::read_to_string("/sys/fs/cgroup/memory.current").ok().and_then(|u| u.trim().parse::<u64>().ok()).unwrap_or(0);
        mb = mb.min(bytes.saturating_sub(used) >> 20);
    }
    Some(mb)
}

/// Memory available to this process in bytes (`available_memory_mb`; 8 GiB when unknown).
pub fn available_memory_bytes() -> u64 {
    available_memory_mb().map(|mb| mb << 20).unwrap_or(8 << 30)
}

/// A `VmXXX:` line of `/proc/<pid>/status`, in KiB.
fn status_kb(pid: &str, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
}

/// Resident memory of process `pid`, bytes (`None`: it is gone).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    status_kb(&pid.to_string(), "VmRSS:").map(|kb| kb << 10)
}

/// Anonymous resident memory of process `pid` (`RssAnon`: its heap and stacks, not shared
/// memory such as the batch arenas, not mapped files), bytes.
pub fn anon_rss_bytes(pid: u32) -> Option<u64> {
    status_kb(&pid.to_string(), "RssAnon:").map(|kb| kb << 10)
}

/// Resident memory of this process, bytes.
pub fn own_rss_bytes() -> u64 {
    status_kb("self", "VmRSS:").map(|kb| kb << 10).unwrap_or(0)
}

/// Peak resident memory of this process alone (VmHWM), bytes.
pub fn own_peak_rss_bytes() -> u64 {
    status_kb("self", "VmHWM:").map(|kb| kb << 10).unwrap_or(0)
}

/// Give the allocator's free memory back to the system (glibc's `malloc_trim`), so that what
/// a phase measures is its own.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Reset this process's peak resident memory (`VmHWM`) to its current RSS, so that the next
/// reading of [`own_peak_rss_bytes`] is the peak since now (Linux ≥ 4.0; a no-op elsewhere).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", b"5");
}

/// Resident memory of this process and every process it started (worker processes), bytes:
/// the children listed by `/proc/self/task/*/children`, followed down. Shared pages (the
/// workers' batch arenas) are counted once per process that maps them, as `ps` does.
pub fn tree_rss_bytes() -> u64 {
    let mut total = own_rss_bytes();
    let mut stack = children_of("self");
    let mut seen = std::collections::HashSet::new();
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        total += rss_bytes(pid).unwrap_or(0);
        stack.extend(children_of(&pid.to_string()));
    }
    total
}

fn children_of(pid: &str) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

/// This process's stdout and stderr sent to files until [`Captured::finish`]: what a
/// serving host (`curator-host serve`) hands back as one request's output. Process-wide
/// (file descriptors 1 and 2), so only one request may be captured at a time; whatever any
/// thread writes meanwhile, worker processes' stderr relayed through the log included, lands
/// in the capture.
pub struct Captured {
    saved: [std::os::fd::OwnedFd; 2],
    files: [std::fs::File; 2],
}

/// Start capturing stdout and stderr (see [`Captured`]).
pub fn capture_output() -> std::io::Result<Captured> {
    use std::os::fd::{AsRawFd, FromRawFd};
    flush_std();
    let files = [tempfile::tempfile()?, tempfile::tempfile()?];
    let mut saved = Vec::new();
    for fd in [1, 2] {
        // SAFETY: dup of a descriptor this process has open; the result is a new descriptor
        // owned by nobody else.
        let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if copy < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `copy` was just created and is owned here only.
        saved.push(unsafe { std::os::fd::OwnedFd::from_raw_fd(copy) });
    }
    for (fd, file) in [1, 2].into_iter().zip(&files) {
        // SAFETY: dup2 onto stdout/stderr of this process from an open file.
        if unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
            let e = std::io::Error::last_os_error();
            restore(&saved);
            return Err(e);
        }
    }
    let [out, err]: [std::os::fd::OwnedFd; 2] = saved.try_into().map_err(|_| std::io::Error::other("two descriptors"))?;
    Ok(Captured { saved: [out, err], files })
}

fn flush_std() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
}

fn restore(saved: &[std::os::fd::OwnedFd]) {
    use std::os::fd::AsRawFd;
    for (fd, copy) in [1, 2].into_iter().zip(saved) {
        // SAFETY: dup2 of a descriptor this process owns back onto stdout/stderr.
        unsafe { libc::dup2(copy.as_raw_fd(), fd) };
    }
}

impl Captured {
    /// Stop capturing; what was written to stdout and to stderr, each its last `tail` bytes.
    pub fn finish(self, tail: u64) -> (Vec<u8>, Vec<u8>) {
        use std::io::{Read, Seek, SeekFrom};
        flush_std();
        restore(&self.saved);
        let read = |mut f: &std::fs::File| {
            let len = f.seek(SeekFrom::End(0)).unwrap_or(0);
            let mut buf = Vec::new();
            if f.seek(SeekFrom::Start(len.saturating_sub(tail))).is_ok() {
                let _ = f.read_to_end(&mut buf);
            }
            buf
        };
        (read(&self.files[0]), read(&self.files[1]))
    }
}

/// CPUs this process may run on (its affinity mask), in order.
pub fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t filled by sched_getaffinity for this process.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                return (0..libc::CPU_SETSIZE as usize).filter(|c| libc::CPU_ISSET(*c, &set)).collect();
            }
        }
    }
    (0..available_cores()).collect()
}

/// Pin this process to `cpus` (Linux; elsewhere nothing).
pub fn set_affinity(cpus: &[usize]) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t filled with CPU_SET, applied to this process.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                libc::CPU_SET(c, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpus;
}

/// Let glibc reuse large freed blocks instead of returning them to the OS each time: every
/// batch allocates buffers of about the batch's size, and faulting fresh pages in for each
/// one costs more than copying the data (glibc's default hands blocks of 32 MB+ back).
pub fn keep_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

/// Start writing `len` bytes of `file` from `offset` to its disk without waiting for them
/// (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`; elsewhere nothing), so that the `fsync`
/// that commits the file finds little left to write.
pub fn start_writeback(file: &std::fs::File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a hint to the kernel on an open descriptor; errors (a filesystem that does
        // not support it) change nothing but timing and are ignored.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset as i64, len as i64, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// Whether process `pid` of this host is running (or a zombie not yet reaped).
pub fn process_alive(pid: u32) -> bool {
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

/// Stop process `pid` now (SIGKILL).
pub fn kill(pid: u32) {
    // SAFETY: sending a signal to a process id; at worst it is gone (ESRCH).
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

/// How a process ended, in words: `exit code 3`, `killed by SIGSEGV (11)`.
pub fn describe_status(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                libc::SIGSEGV => "SIGSEGV",
                libc::SIGABRT => "SIGABRT",
                libc::SIGKILL => "SIGKILL",
                libc::SIGBUS => "SIGBUS",
                libc::SIGFPE => "SIGFPE",
                libc::SIGILL => "SIGILL",
                _ => "signal",
            };
            return format!("killed by {name} ({sig})");
        }
    }
    match status.code() {
        Some(c) => format!("exit code {c}"),
        None => "unknown status".into(),
    }
}

/// CPU time the calling thread has used, user + system.
pub fn thread_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time this process has used on all its threads, user + system: a worker process's
/// call, whatever threads its stage runs on.
pub fn process_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    // SAFETY: timespec is plain integers, for which all-zero bytes are a valid value.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime only writes the timespec it is given, which lives across the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The mount point of the filesystem holding `path` (the longest mount point above its
/// nearest existing ancestor), from `/proc/self/mounts`. `None` off Linux.
pub fn mount_point(path: &std::path::Path) -> Option<std::path::PathBuf> {
    let existing = path.ancestors().find(|a| a.exists())?.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        // Spaces and tabs in mount points are written as octal escapes.
        .map(|m| std::path::PathBuf::from(m.replace("\\040", " ").replace("\\011", "\t")))
        .filter(|m| existing.starts_with(m))
        .max_by_key(|m| m.as_os_str().len())
}

/// Where compiled artifacts are cached: `$CURATOR_CACHE_DIR`, else `$XDG_CACHE_HOME/curator`,
/// else `$HOME/.cache/curator`.
pub fn default_cache_dir() -> Option<std::path::PathBuf> {
    if let Some(d) = std::env::var_os("CURATOR_CACHE_DIR") {
        return Some(std::path::PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(std::path::PathBuf::from(d).join("curator"));
    }
    std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache").join("curator"))
}

/// For the resume tests: `CURATOR_DEDUP_CRASH_AT=<marker>` kills this process with SIGKILL
/// right after that marker is written (as `kill -9` would at that moment).
pub fn crash_point(marker: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT.get_or_init(|| std::env::var("CURATOR_DEDUP_CRASH_AT").ok()).as_deref() == Some(marker) {
        tracing::warn!("CURATOR_DEDUP_CRASH_AT={marker}: killing this process");
        kill(std::process::id());
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
}

/// Where an installed `curator-host` (`PREFIX/bin/curator-host`: the pip wheel, a tarball)
/// keeps what it ships, below `PREFIX`: the first-party plugins in `plugins/`, the key they
/// are signed with in `trust/`.
pub const INSTALLED_SHARE: &str = "share/curator";

/// `PREFIX/share/curator/NAME` for the running binary's `PREFIX/bin/curator-host`.
pub fn installed(name: &str) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join(INSTALLED_SHARE).join(name))
}

// The binary worker processes run: this process's own image.

static WORKER_EXE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Run workers with `exe` (a library user whose own binary is not `curator-host`: tests,
/// benches). Only the first call counts.
pub fn set_worker_exe(exe: PathBuf) {
    let _ = WORKER_EXE.set(exe);
}

/// The binary that runs workers: [`set_worker_exe`], else `$CURATOR_WORKER_EXE`, else this
/// process's own image.
pub fn worker_exe() -> PathBuf {
    if let Some(p) = WORKER_EXE.get() {
        return p.clone();
    }
    std::env::var_os("CURATOR_WORKER_EXE").map(PathBuf::from).unwrap_or_else(own_image)
}

/// The running binary as the kernel holds it: `/proc/self/exe` on Linux, which execs the
/// image this process was started from even when the file on disk has since been replaced or
/// deleted (an upgrade, a rebuild during a run); elsewhere the path it was started from.
fn own_image() -> PathBuf {
    let proc_exe = Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && proc_exe.exists() {
        return proc_exe.to_path_buf();
    }
    std::env::current_exe().unwrap_or_else(|_| "curator-host".into())
}

/// A command that runs [`worker_exe`], named (`argv[0]`, what `ps` shows) as this binary is.
pub fn worker_command() -> Command {
    let mut cmd = Command::new(worker_exe());
    if let Some(name) = std::env::current_exe().ok().and_then(|p| p.file_name().map(|n| n.to_owned())) {
        use std::os::unix::process::CommandExt as _;
        cmd.arg0(name.to_string_lossy().trim_end_matches(" (deleted)"));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_found_for_existing_and_future_paths() {
        if cfg!(target_os = "linux") {
            assert_eq!(mount_point(std::path::Path::new("/")), Some(std::path::PathBuf::from("/")));
            let dir = tempfile::tempdir().unwrap();
            let m = mount_point(&dir.path().join("not/yet/there.jsonl")).unwrap();
            assert!(dir.path().canonicalize().unwrap().starts_with(&m), "{m:?}");
        }
    }

    #[test]
    fn probes_answer_on_this_machine() {
        assert!(available_cores() >= 1);
        assert!(!allowed_cpus().is_empty());
        if cfg!(target_os = "linux") {
            assert!(own_rss_bytes() > 0);
            assert!(own_peak_rss_bytes() >= own_rss_bytes() / 2);
            // A child's memory counts in the tree.
            let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
            std::thread::sleep(Duration::from_millis(50));
            assert!(tree_rss_bytes() > own_rss_bytes());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
