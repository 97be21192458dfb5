//! nvJPEG's memory, from pools of our own: the device and pinned allocators
//! `nvjpegCreateEx` takes, so that a decode never calls `cuMemFree` (or `cuMemFreeHost`).
//!
//! Why: with nvJPEG's default allocators, a decode that grows one of its buffers frees the old
//! one with `cuMemFree`, which waits for the whole device. On an H200 shared by two processes,
//! a process that ended while the other was inside `nvjpegDecodeBatched` left that wait
//! hanging for good (issue: images at the card's speed). Here a freed block is kept: it goes
//! to a quarantine first (nvJPEG may have queued work on its own streams that still uses it),
//! and becomes free for reuse at [`settle`], which the decoder calls once the stream its
//! decodes are joined to has run (every earlier decode's work is then done). Blocks go back to
//! the driver only when a fresh allocation fails for want of memory, and at exit.
//!
//! Opt-in (`CURATOR_NVJPEG_POOL=1`) until a GPU run (`scripts/models/gpu-clip.sh KIT hang`)
//! shows that it clears the hang: the stack of the hung decode went through `libnvcuvid`,
//! which may free memory of its own that no allocator of nvJPEG's sees.
//!
//! The allocators are C function pointers without a context argument, so the pools are
//! process-wide (one per kind of memory); the policy ([`Blocks`]) is plain data, unit-tested
//! without a GPU.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;

/// Allocations are rounded up to this (fewer distinct sizes: a grown buffer often fits a block
/// another freed).
const GRANULE: usize = 2 << 20;

/// What a pool holds: blocks handed out, blocks freed but perhaps still read by queued work,
/// and blocks free to hand out again.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    live: BTreeMap<usize, usize>,
    quarantine: Vec<(usize, usize)>,
    free: Vec<(usize, usize)>,
    /// Bytes obtained from the driver and not given back.
    pub held: usize,
    /// Allocations served from a kept block, and from the driver.
    pub reused: u64,
    pub fresh: u64,
}

impl Blocks {
    pub(crate) const fn new() -> Blocks {
        Blocks { live: BTreeMap::new(), quarantine: Vec::new(), free: Vec::new(), held: 0, reused: 0, fresh: 0 }
    }

    /// The bytes to ask the driver for, for a request of `size`.
    pub(crate) fn rounded(size: usize) -> usize {
        size.max(1).next_multiple_of(GRANULE)
    }

    /// The smallest free block that holds `size` bytes without wasting more than its size
    /// again, now live.
    pub(crate) fn take(&mut self, size: usize) -> Option<usize> {
        let want = Blocks::rounded(size);
        let (i, _) =
            self.free.iter().enumerate().filter(|(_, (_, cap))| *cap >= want && *cap <= 2 * want).min_by_key(|(_, (_, cap))| *cap)?;
        let (ptr, cap) = self.free.swap_remove(i);
        self.live.insert(ptr, cap);
        self.reused += 1;
        Some(ptr)
    }

    /// A block fresh from the driver, now live.
    pub(crate) fn add(&mut self, ptr: usize, cap: usize) {
        self.live.insert(ptr, cap);
        self.held += cap;
        self.fresh += 1;
    }

    /// A live block given back: quarantined until [`Blocks::settle`]. False for a pointer this
    /// pool did not hand out.
    pub(crate) fn give_back(&mut self, ptr: usize) -> bool {
        match self.live.remove(&ptr) {
            Some(cap) => {
                self.quarantine.push((ptr, cap));
                true
            }
            None => false,
        }
    }

    /// Every quarantined block is free for reuse (the work that could read them has run).
    pub(crate) fn settle(&mut self) {
        self.free.append(&mut self.quarantine);
    }

    /// The free blocks, taken out of the pool (to give back to the driver).
    pub(crate) fn drain_free(&mut self) -> Vec<(usize, usize)> {
        let out = std::mem::take(&mut self.free);
        self.held -= out.iter().map(|(_, c)| c).sum::<usize>();
        out
    }
}

static DEVICE: Mutex<Blocks> = Mutex::new(Blocks::new());
static PINNED: Mutex<Blocks> = Mutex::new(Blocks::new());

fn lock(pool: &Mutex<Blocks>) -> std::sync::MutexGuard<'_, Blocks> {
    // The pools stay consistent across a panic elsewhere (each change is one push or remove).
    pool.lock().unwrap_or_else(|e| e.into_inner())
}

/// `cudaErrorMemoryAllocation`, which nvJPEG reports as its own allocator failure.
const OUT_OF_MEMORY: c_int = 2;

/// An allocation from `pool`: a kept block, else the driver's (`alloc`); when the driver has
/// no room, the pool's free blocks go back to it first and the allocation is tried again.
fn allocate(pool: &Mutex<Blocks>, size: usize, alloc: impl Fn(usize) -> Option<usize>, release: impl Fn(usize)) -> Option<usize> {
    let mut p = lock(pool);
    if let Some(ptr) = p.take(size) {
        return Some(ptr);
    }
    let cap = Blocks::rounded(size);
    let ptr = match alloc(cap) {
        Some(ptr) => ptr,
        None => {
            for (ptr, _) in p.drain_free() {
                release(ptr);
            }
            alloc(cap)?
        }
    };
    p.add(ptr, cap);
    Some(ptr)
}

fn device_alloc(cap: usize) -> Option<usize> {
    // SAFETY: a plain allocation in the current context (nvJPEG calls its allocator on the
    // thread that decodes, with the tower's context bound).
    unsafe { cudarc::driver::result::malloc_sync(cap) }.ok().map(|p| p as usize)
}

fn device_release(ptr: usize) {
    // SAFETY: a block this pool allocated and nobody holds (taken from the free list).
    let _ = unsafe { cudarc::driver::result::free_sync(ptr as cudarc::driver::sys::CUdeviceptr) };
}

fn pinned_alloc(cap: usize, flags: c_uint) -> Option<usize> {
    // SAFETY: page-locked host memory of the current context.
    unsafe { cudarc::driver::result::malloc_host(cap, flags) }.ok().map(|p| p as usize)
}

fn pinned_release(ptr: usize) {
    // SAFETY: as `device_release`, for page-locked host memory.
    let _ = unsafe { cudarc::driver::result::free_host(ptr as *mut c_void) };
}

/// An allocation of `size` bytes from `pool` written to `out`, as nvJPEG's allocators return
/// it (0, or `OUT_OF_MEMORY`).
fn malloc_into(
    out: *mut *mut c_void,
    pool: &Mutex<Blocks>,
    size: usize,
    alloc: impl Fn(usize) -> Option<usize>,
    release: fn(usize),
) -> c_int {
    if out.is_null() {
        return OUT_OF_MEMORY;
    }
    match allocate(pool, size, alloc, release) {
        Some(ptr) => {
            // SAFETY: nvJPEG passes a pointer to write the allocation to.
            unsafe { *out = ptr as *mut c_void };
            0
        }
        None => OUT_OF_MEMORY,
    }
}

/// A block given back to `pool` (quarantined); 0, as nvJPEG's allocators return.
fn free_into(pool: &Mutex<Blocks>, ptr: *mut c_void) -> c_int {
    if !ptr.is_null() {
        lock(pool).give_back(ptr as usize);
    }
    0
}

/// `tDevMalloc`.
pub(crate) extern "C" fn dev_malloc(out: *mut *mut c_void, size: usize) -> c_int {
    malloc_into(out, &DEVICE, size, device_alloc, device_release)
}

/// `tDevFree`.
pub(crate) extern "C" fn dev_free(ptr: *mut c_void) -> c_int {
    free_into(&DEVICE, ptr)
}

/// `tPinnedMalloc`. (Blocks of the pool may have been made with other flags; nvJPEG asks for
/// portable or default page-locked memory, and either serves its copies.)
pub(crate) extern "C" fn pinned_malloc(out: *mut *mut c_void, size: usize, flags: c_uint) -> c_int {
    malloc_into(out, &PINNED, size, |cap| pinned_alloc(cap, flags), pinned_release)
}

/// `tPinnedFree`.
pub(crate) extern "C" fn pinned_free(ptr: *mut c_void) -> c_int {
    free_into(&PINNED, ptr)
}

/// Blocks nvJPEG gave back since the last call may be handed out again: call once the stream
/// nvJPEG's decodes are joined to has run.
pub(crate) fn settle() {
    lock(&DEVICE).settle();
    lock(&PINNED).settle();
}

/// (device bytes held, pinned bytes held, allocations served from kept blocks, from the driver).
pub(crate) fn stats() -> (usize, usize, u64, u64) {
    let (d, p) = (lock(&DEVICE), lock(&PINNED));
    (d.held, p.held, d.reused + p.reused, d.fresh + p.fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_block_is_reused_only_after_settle_and_only_when_it_fits() {
        let mut b = Blocks::default();
        let mb = 1 << 20;
        assert_eq!(b.take(mb), None, "an empty pool has nothing");
        b.add(0x1000, Blocks::rounded(mb));
        assert_eq!(b.held, 2 * mb);
        assert!(b.give_back(0x1000));
        assert!(!b.give_back(0x1000), "a block is given back once");
        assert!(!b.give_back(0x9999), "a pointer the pool never handed out");
        assert_eq!(b.take(mb), None, "quarantined until settle");
        b.settle();
        assert_eq!(b.take(3 * mb), None, "too small for 3 MiB");
        assert_eq!(b.take(mb), Some(0x1000));
        assert_eq!((b.reused, b.fresh), (1, 1));
        // A block more than twice the request stays for a larger one.
        b.add(0x2000, Blocks::rounded(64 * mb));
        b.give_back(0x2000);
        b.settle();
        assert_eq!(b.take(mb), None);
        assert_eq!(b.take(40 * mb), Some(0x2000));
    }

    #[test]
    fn the_smallest_fitting_block_is_taken_and_drained_blocks_leave_the_count() {
        let mut b = Blocks::default();
        for (ptr, mib) in [(1, 8), (2, 4), (3, 6)] {
            b.add(ptr, mib << 20);
            b.give_back(ptr);
        }
        b.settle();
        assert_eq!(b.take(3 << 20), Some(2));
        let drained = b.drain_free();
        assert_eq!(drained.len(), 2);
        assert_eq!(b.held, 4 << 20, "only the live block is still held");
    }

    #[test]
    fn a_failed_allocation_gives_the_free_blocks_back_and_tries_again() {
        let pool = Mutex::new(Blocks::default());
        {
            let mut p = lock(&pool);
            p.add(0x10, 2 << 20);
            p.give_back(0x10);
            p.settle();
        }
        let released = Mutex::new(Vec::new());
        let tries = std::sync::atomic::AtomicUsize::new(0);
        // The first driver call fails; after the free block went back, the second succeeds.
        let alloc = |_cap: usize| (tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0).then_some(0x20);
        let got = allocate(&pool, 10 << 20, alloc, |p| released.lock().unwrap().push(p));
        assert_eq!(got, Some(0x20));
        assert_eq!(*released.lock().unwrap(), vec![0x10]);
        assert_eq!(lock(&pool).held, 10 << 20);
    }
}
