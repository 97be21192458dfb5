//! Shared-memory arenas: one memfd file (an unlinked temp file off Linux) mapped by the host
//! and one worker process. The host creates both arenas of a worker; the one the worker
//! writes is sealed against shrinking first, so no process can take pages from under the
//! other's mapping. Buffers wrapped in place hold their mapping alive.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_buffer::Buffer;

/// One mapping of an arena file. Arrow buffers that point into it hold it alive.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; who may write it is decided by the protections
// it was mapped with. Rust code reads what another process may write only by copying it out
// through a raw pointer (`Arena::copy_region`), hands out `&[u8]` only over an arena the other
// side cannot write (`Arena::buffer`, the worker's read-only view of its input), and writes
// through the arena that owns the mapping.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: shared references only read through raw pointers or over read-only
// views, so sharing one between threads adds nothing another process could not already do.
unsafe impl Sync for Mapping {}
impl std::panic::RefUnwindSafe for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap and nothing refers to it any more.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// An arena file and this process's mapping of it.
pub struct Arena {
    fd: OwnedFd,
    map: Arc<Mapping>,
    writable: bool,
}

fn file_size(fd: RawFd) -> std::io::Result<usize> {
    // SAFETY: stat is plain integers, for which all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat only writes the struct it is given; `fd` is a descriptor we own.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.st_size as usize)
}

fn map(fd: RawFd, len: usize, writable: bool) -> std::io::Result<Mapping> {
    let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
    // SAFETY: a fresh shared mapping of a file we hold; checked for failure below.
    let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len.max(1), prot, libc::MAP_SHARED, fd, 0) };
    if ptr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Mapping { ptr: NonNull::new(ptr.cast()).ok_or_else(|| std::io::Error::other("mmap returned null"))?, len: len.max(1) })
}

#[cfg(target_os = "linux")]
fn anonymous_file(name: &str) -> std::io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    // SAFETY: memfd_create with a valid name; the result is checked.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
fn anonymous_file(name: &str) -> std::io::Result<OwnedFd> {
    // An unlinked temporary file: the same sharing, without memfd's seals.
    let path = std::env::temp_dir().join(format!(
        ".{name}-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now().elapsed().map(|d| d.as_nanos()).unwrap_or(0)
    ));
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    let _ = std::fs::remove_file(&path);
    Ok(file.into())
}

impl Arena {
    /// A new arena file of `size` bytes, mapped read-write. `no_shrink`: seal it so that no
    /// process can make it smaller (for a file another process writes and this one reads).
    pub fn create(name: &str, size: usize, no_shrink: bool) -> std::io::Result<Arena> {
        let fd = anonymous_file(name)?;
        // SAFETY: ftruncate on our own descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        #[cfg(target_os = "linux")]
        if no_shrink {
            // SAFETY: fcntl on our own memfd.
            if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = no_shrink;
        let map = Arc::new(map(fd.as_raw_fd(), size, true)?);
        Ok(Arena { fd, map, writable: true })
    }

    /// Map an arena file another process created (`fd` inherited from it).
    pub fn open(fd: OwnedFd, writable: bool) -> std::io::Result<Arena> {
        let size = file_size(fd.as_raw_fd())?;
        let map = Arc::new(map(fd.as_raw_fd(), size, writable)?);
        Ok(Arena { fd, map, writable })
    }

    /// A read-only descriptor of the same file, for the process that only reads it.
    #[cfg(target_os = "linux")]
    pub fn read_only_fd(&self) -> std::io::Result<OwnedFd> {
        let path = std::ffi::CString::new(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).map_err(std::io::Error::other)?;
        // SAFETY: open with a valid path; the result is checked.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Elsewhere the worker gets the same descriptor (it maps it read-only).
    #[cfg(not(target_os = "linux"))]
    pub fn read_only_fd(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn len(&self) -> usize {
        self.map.len
    }

    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    /// Make the file (and this mapping) at least `size` bytes (the writer's side). Buffers
    /// that point into the old mapping keep it alive.
    pub fn grow_to(&mut self, size: usize) -> std::io::Result<()> {
        if size <= self.map.len {
            return Ok(());
        }
        let size = size.next_power_of_two();
        // SAFETY: ftruncate on our own descriptor.
        if unsafe { libc::ftruncate(self.fd.as_raw_fd(), size as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.map = Arc::new(map(self.fd.as_raw_fd(), size, self.writable)?);
        Ok(())
    }

    /// Give back memory after one large batch: make the file `size` bytes (the writer's side,
    /// for an arena the other process only reads at places this one tells it, never past
    /// `size` from now on).
    pub fn shrink_to(&mut self, size: usize) -> std::io::Result<()> {
        if size >= self.map.len {
            return Ok(());
        }
        // SAFETY: ftruncate on our own descriptor; this mapping is replaced right after.
        if unsafe { libc::ftruncate(self.fd.as_raw_fd(), size as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.map = Arc::new(map(self.fd.as_raw_fd(), size, self.writable)?);
        Ok(())
    }

    /// Follow a file the other process grew: map all of it (never less than now).
    pub fn follow(&mut self) -> std::io::Result<()> {
        let size = file_size(self.fd.as_raw_fd())?;
        if size > self.map.len {
            self.map = Arc::new(map(self.fd.as_raw_fd(), size, self.writable)?);
        }
        Ok(())
    }

    /// A copy of bytes `[off, off + len)`, if the mapping holds them. The other process may
    /// still be writing the arena (a worker is untrusted), so its bytes are copied through a
    /// raw pointer into a buffer this process owns, and no `&[u8]` over shared memory ever
    /// exists: a reference would promise that the bytes cannot change while it lives.
    pub fn copy_region(&self, off: usize, len: usize) -> Option<Vec<u8>> {
        if off.checked_add(len)? > self.map.len {
            return None;
        }
        let mut out = Vec::<u8>::with_capacity(len);
        // SAFETY: `[off, off + len)` lies inside the live mapping (checked above), `out` has
        // room for `len` bytes and cannot overlap it, and `set_len` follows the copy that
        // initialised them. The source is only ever read through this raw pointer.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.ptr.as_ptr().add(off), out.as_mut_ptr(), len);
            out.set_len(len);
        }
        Some(out)
    }

    /// A copy of the whole arena.
    #[cfg(test)]
    pub(crate) fn copy_all(&self) -> Vec<u8> {
        self.copy_region(0, self.map.len).unwrap_or_default()
    }

    /// Whether `[ptr, ptr + len)` lies inside this mapping; its offset if so.
    pub(super) fn offset_of(&self, ptr: *const u8, len: usize) -> Option<usize> {
        let base = self.map.ptr.as_ptr() as usize;
        let p = ptr as usize;
        (p >= base && p.checked_add(len)? <= base + self.map.len).then(|| p - base)
    }

    /// Arrow buffer over `[off, off + len)` of this mapping, without copying. Only for an arena
    /// the other side cannot write (the worker's view of the input).
    pub(super) fn buffer(&self, off: usize, len: usize) -> Option<Buffer> {
        if off.checked_add(len)? > self.map.len {
            return None;
        }
        // SAFETY: `off` is within the mapping (checked above), so the pointer is in bounds of
        // one allocation and, the mapping's base being non-null, non-null.
        let ptr = unsafe { NonNull::new_unchecked(self.map.ptr.as_ptr().add(off)) };
        // SAFETY: `len` bytes from `ptr` are within the mapping (checked above); the Arc given
        // as the owner keeps the mapping alive while the buffer (or a slice of it) lives.
        Some(unsafe { Buffer::from_custom_allocation(ptr, len, self.map.clone()) })
    }

    /// Where this process writes the arena (a writable mapping only; also the fuzz harness's
    /// way to plant bytes in an output arena).
    pub fn base_mut(&mut self) -> *mut u8 {
        debug_assert!(self.writable);
        self.map.ptr.as_ptr()
    }
}
