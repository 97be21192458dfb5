//! One in-flight limit for every worker process of a service: the [`crate::limit::Aimd`]
//! policy's state in a small file that each worker maps (`MAP_SHARED`), so the requests of
//! all of a stage's workers together follow one limit, where per-worker limits would add up
//! (eight workers of 256 each: 2,048 requests queued at one vLLM).
//!
//! Lock-free, so a worker killed at any instruction cannot wedge the others: the limit and
//! the best latency are atomics updated by compare-and-swap, and each worker counts its
//! requests in flight in a slot of its own (claimed by its pid). A worker that dies with
//! requests counted leaves its slot's count behind; the others clear a slot whose process is
//! gone when they find the limit reached. Two workers may both take the last place at once,
//! so the limit can be passed by a request per worker for a moment: a server's batch does not
//! mind.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Worker slots in one file: more workers than this share the file's limit but count their
/// requests locally (rare: one stage's workers of one service on one machine).
const SLOTS: usize = 256;
const MAGIC: u64 = u64::from_le_bytes(*b"CURLIM01");

#[repr(C)]
struct Slot {
    pid: AtomicU32,
    in_flight: AtomicU32,
}

/// The file's layout.
#[repr(C)]
struct Shared {
    magic: AtomicU64,
    /// The limit (f64 bits); 0: not set yet (the first worker sets its initial value).
    limit: AtomicU64,
    /// The best latency seen, in nanoseconds (`u64::MAX`: none yet).
    best_ns: AtomicU64,
    slots: [Slot; SLOTS],
}

/// A worker's view of a service's shared limit.
pub struct SharedLimit {
    shared: *mut Shared,
    slot: usize,
    pid: u32,
    min: f64,
    max: f64,
    tolerance: f64,
    /// When dead workers' slots were last looked for.
    last_sweep: std::sync::Mutex<Option<Instant>>,
}

// SAFETY: every field of `Shared` the pointer reaches is an atomic, and the mapping lives as
// long as the value (unmapped in `Drop`), so sharing the pointer between threads is sound.
unsafe impl Send for SharedLimit {}
// SAFETY: as above: all access through the pointer is through atomics.
unsafe impl Sync for SharedLimit {}

impl SharedLimit {
    /// Map `path` (created if missing) and claim a slot; the limit starts at `initial` unless
    /// another worker set it already. `max` caps it.
    pub fn open(path: &Path, initial: usize, max: usize) -> std::io::Result<SharedLimit> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let size = std::mem::size_of::<Shared>() as u64;
        if file.metadata()?.len() < size {
            file.set_len(size)?;
        }
        // SAFETY: a shared, read-write mapping of `size` bytes of a file at least that long;
        // the file may be closed afterwards (the mapping keeps it).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let shared = ptr.cast::<Shared>();
        // SAFETY: the mapping is page-aligned, `size_of::<Shared>()` long and zero-filled when
        // new; all-zero bytes are valid atomics.
        let s = unsafe { &*shared };
        let magic = match s.magic.compare_exchange(0, MAGIC, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => MAGIC,
            Err(found) => found,
        };
        if magic != MAGIC {
            // SAFETY: the mapping made above, not yet shared with anything.
            unsafe { libc::munmap(ptr, size as usize) };
            return Err(std::io::Error::other(format!(
                "{} is not a limit file of this version (it starts {:?}): remove it, or name another",
                path.display(),
                String::from_utf8_lossy(&magic.to_le_bytes())
            )));
        }
        let _ = s.best_ns.compare_exchange(0, u64::MAX, Ordering::AcqRel, Ordering::Acquire);
        let max = max.max(1) as f64;
        let first = (initial.max(1) as f64).min(max);
        let _ = s.limit.compare_exchange(0, first.to_bits(), Ordering::AcqRel, Ordering::Acquire);
        let pid = std::process::id();
        let mut me = SharedLimit { shared, slot: usize::MAX, pid, min: 1.0, max, tolerance: 3.0, last_sweep: Default::default() };
        me.slot = me.claim().ok_or_else(|| std::io::Error::other(format!("all {SLOTS} worker slots of {} are taken", path.display())))?;
        Ok(me)
    }

    fn shared(&self) -> &Shared {
        // SAFETY: mapped in `open`, unmapped only in `Drop`.
        unsafe { &*self.shared }
    }

    /// A free slot, or one whose process is gone, taken for this process.
    fn claim(&self) -> Option<usize> {
        let s = self.shared();
        for (i, slot) in s.slots.iter().enumerate() {
            if slot.pid.compare_exchange(0, self.pid, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                slot.in_flight.store(0, Ordering::Release);
                return Some(i);
            }
        }
        for (i, slot) in s.slots.iter().enumerate() {
            let owner = slot.pid.load(Ordering::Acquire);
            if !alive(owner) && slot.pid.compare_exchange(owner, self.pid, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                slot.in_flight.store(0, Ordering::Release);
                return Some(i);
            }
        }
        None
    }

    /// Requests in flight across every worker.
    pub fn in_flight(&self) -> usize {
        self.shared()
            .slots
            .iter()
            .filter(|s| s.pid.load(Ordering::Acquire) != 0)
            .map(|s| s.in_flight.load(Ordering::Acquire) as usize)
            .sum()
    }

    /// Requests allowed in flight now, across every worker.
    pub fn allowed(&self) -> usize {
        f64::from_bits(self.shared().limit.load(Ordering::Acquire)).floor().max(1.0) as usize
    }

    /// Take a place if the limit allows one now.
    pub fn try_acquire(&self) -> bool {
        if self.in_flight() < self.allowed() {
            self.shared().slots[self.slot].in_flight.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        self.sweep();
        false
    }

    /// Give a place back.
    pub fn release(&self) {
        let mine = &self.shared().slots[self.slot].in_flight;
        let _ = mine.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// An answer came back after `latency_s`: one more place per window of answers within
    /// `tolerance` of the best latency, half as many past it (the policy of `Aimd`).
    pub fn answered(&self, latency_s: f64) {
        let ns = (latency_s * 1e9) as u64;
        let before = self.shared().best_ns.fetch_min(ns, Ordering::AcqRel);
        let best = before.min(ns) as f64 / 1e9;
        if latency_s <= best * self.tolerance {
            self.update(|l| (l + 1.0 / l).min(self.max));
        } else {
            self.overloaded();
        }
    }

    /// The server said it is full (429, 503).
    pub fn overloaded(&self) {
        self.update(|l| (l / 2.0).max(self.min));
    }

    fn update(&self, f: impl Fn(f64) -> f64) {
        let _ = self.shared().limit.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some(f(f64::from_bits(bits)).to_bits()));
    }

    /// Clear the counts of workers that died with requests counted (at most every 100 ms).
    fn sweep(&self) {
        {
            let mut last = self.last_sweep.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
                return;
            }
            *last = Some(Instant::now());
        }
        for slot in &self.shared().slots {
            let owner = slot.pid.load(Ordering::Acquire);
            if owner != 0
                && owner != self.pid
                && !alive(owner)
                && slot.pid.compare_exchange(owner, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                slot.in_flight.store(0, Ordering::Release);
            }
        }
    }
}

impl Drop for SharedLimit {
    fn drop(&mut self) {
        let s = self.shared();
        s.slots[self.slot].in_flight.store(0, Ordering::Release);
        let _ = s.slots[self.slot].pid.compare_exchange(self.pid, 0, Ordering::AcqRel, Ordering::Acquire);
        // SAFETY: the mapping made in `open`, of that size, not used after this.
        unsafe {
            libc::munmap(self.shared.cast(), std::mem::size_of::<Shared>());
        }
    }
}

/// Whether process `pid` exists (one we may not signal exists too).
fn alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_another_layout_is_refused_not_misread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.limit");
        std::fs::write(&path, b"CURLIM00 an older layout").unwrap();
        let err = SharedLimit::open(&path, 2, 8).err().expect("refused");
        assert!(err.to_string().contains("not a limit file of this version"), "{err}");
        // A new (empty) file is claimed and marked.
        let fresh = dir.path().join("fresh.limit");
        SharedLimit::open(&fresh, 2, 8).unwrap();
        assert_eq!(&std::fs::read(&fresh).unwrap()[..8], b"CURLIM01");
    }

    #[test]
    fn two_mappings_of_one_file_share_one_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.limit");
        let a = SharedLimit::open(&path, 2, 8).unwrap();
        // A second worker's view (in this process: another slot of the same pid is fine).
        let b = SharedLimit::open(&path, 5, 8).unwrap();
        assert_ne!(a.slot, b.slot);
        assert_eq!(b.allowed(), 2, "the first worker's initial limit holds");
        assert!(a.try_acquire());
        assert!(b.try_acquire());
        assert!(!a.try_acquire() && !b.try_acquire(), "two in flight across both: the limit");
        assert_eq!(a.in_flight(), 2);
        b.release();
        assert!(a.try_acquire());
        // The policy moves the one limit: growth seen by both, halving too.
        for _ in 0..8 {
            a.answered(1.0);
        }
        assert!(b.allowed() >= 4, "{}", b.allowed());
        b.overloaded();
        assert!(a.allowed() <= 3);
        for _ in 0..1000 {
            b.answered(1.0);
        }
        assert_eq!(a.allowed(), 8, "capped at max");
        a.answered(10.0);
        assert_eq!(b.allowed(), 4, "an answer past 3× the best halves it");
        // A worker that goes away frees its places.
        drop(a);
        assert_eq!(b.in_flight(), 0);
    }

    #[test]
    fn a_dead_workers_places_are_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.limit");
        let me = SharedLimit::open(&path, 1, 1).unwrap();
        // A slot held by a process that no longer exists, with a request counted.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let other = (me.slot + 1) % SLOTS;
        me.shared().slots[other].pid.store(dead, Ordering::Release);
        me.shared().slots[other].in_flight.store(1, Ordering::Release);
        assert!(!me.try_acquire(), "the dead worker's request still counts until a sweep");
        *me.last_sweep.lock().unwrap() = None;
        assert!(me.try_acquire() || me.try_acquire(), "swept: its place is free again");
    }
}
