//! nvJPEG, loaded at run time (`libnvjpeg.so.13`, as the CUDA toolkit and the `nvidia-nvjpeg`
//! wheel ship it): baseline JPEGs decoded on the card's hardware JPEG engines (A100, H100,
//! H200: `NVJPEG_BACKEND_HARDWARE`), else on its SMs (`NVJPEG_BACKEND_GPU_HYBRID`), into
//! interleaved RGB in device memory, a batch per call on the model's stream.
//!
//! Hand-written bindings (a dozen functions of `nvjpeg.h`): no maintained crate wraps nvJPEG,
//! and cudarc (which loads our other CUDA libraries) does not cover it.

use std::ffi::{c_int, c_uint, c_void};

/// `nvjpegStatus_t`.
type Status = c_int;
type Handle = *mut c_void;
type State = *mut c_void;

/// `nvjpegImage_t`: up to four planes and their pitches (RGBI output uses the first).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct NvImage {
    pub channel: [*mut u8; 4],
    pub pitch: [usize; 4],
}

/// `nvjpegDevAllocator_t`.
#[repr(C)]
struct DevAllocator {
    dev_malloc: extern "C" fn(*mut *mut c_void, usize) -> c_int,
    dev_free: extern "C" fn(*mut c_void) -> c_int,
}

/// `nvjpegPinnedAllocator_t`.
#[repr(C)]
struct PinnedAllocator {
    pinned_malloc: extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int,
    pinned_free: extern "C" fn(*mut c_void) -> c_int,
}

/// The allocators of our pools, static: nvJPEG may keep the pointers for the handle's life.
static POOL_DEVICE: DevAllocator = DevAllocator { dev_malloc: super::nvjpeg_pool::dev_malloc, dev_free: super::nvjpeg_pool::dev_free };
static POOL_PINNED: PinnedAllocator =
    PinnedAllocator { pinned_malloc: super::nvjpeg_pool::pinned_malloc, pinned_free: super::nvjpeg_pool::pinned_free };

const BACKEND_GPU_HYBRID: c_int = 2;
const BACKEND_HARDWARE: c_int = 3;
const OUTPUT_RGBI: c_int = 5;

/// The functions of `nvjpeg.h` we call, resolved from the library (which stays loaded).
struct Api {
    create_ex: unsafe extern "C" fn(c_int, *mut c_void, *mut c_void, c_uint, *mut Handle) -> Status,
    destroy: unsafe extern "C" fn(Handle) -> Status,
    state_create: unsafe extern "C" fn(Handle, *mut State) -> Status,
    state_destroy: unsafe extern "C" fn(State) -> Status,
    batched_init: unsafe extern "C" fn(Handle, State, c_int, c_int, c_int) -> Status,
    batched: unsafe extern "C" fn(Handle, State, *const *const u8, *const usize, *mut NvImage, *mut c_void) -> Status,
    _lib: libloading::Library,
}

impl Api {
    fn load() -> Result<Api, String> {
        let names = ["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"];
        // SAFETY: loading nvJPEG runs its initialisers only (it links libc alone).
        let lib = names
            .iter()
            .find_map(|n| unsafe { libloading::Library::new(n) }.ok())
            .ok_or_else(|| format!("no nvJPEG library ({}) on the library path", names.join(", ")))?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is nvjpeg.h's function of that name, and the field it is
                // stored in has its C signature.
                *unsafe { lib.get($name) }.map_err(|e| format!("nvJPEG: {e}"))?
            };
        }
        Ok(Api {
            create_ex: sym!(b"nvjpegCreateEx\0"),
            destroy: sym!(b"nvjpegDestroy\0"),
            state_create: sym!(b"nvjpegJpegStateCreate\0"),
            state_destroy: sym!(b"nvjpegJpegStateDestroy\0"),
            batched_init: sym!(b"nvjpegDecodeBatchedInitialize\0"),
            batched: sym!(b"nvjpegDecodeBatched\0"),
            _lib: lib,
        })
    }
}

fn check(what: &str, status: Status) -> Result<(), String> {
    if status == 0 { Ok(()) } else { Err(format!("nvJPEG {what}: status {status}")) }
}

/// A decoder: nvJPEG's handle and its batched-decode state.
/// Used under the vision tower's lock, with its CUDA context bound to the calling thread.
pub(crate) struct Nvjpeg {
    api: Api,
    handle: Handle,
    state: State,
    /// The batch size `state` was initialised for.
    batch: Option<usize>,
    /// "hardware" (the JPEG engines) or "GPU" (CUDA cores).
    pub backend: &'static str,
    /// Whether nvJPEG's memory comes from our pools (`nvjpeg_pool`).
    pub pooled: bool,
}

// SAFETY: the handles are used by one thread at a time (the tower's lock), which nvJPEG allows.
unsafe impl Send for Nvjpeg {}

impl Nvjpeg {
    /// The library, a handle on the hardware decoder where the card has one (else the GPU
    /// back-end) and its batched-decode state. (Which batches may use it while other
    /// processes share the card: `GpuVision::alone_on_card`.)
    pub(crate) fn open() -> Result<Nvjpeg, String> {
        let api = Api::load()?;
        let mut handle: Handle = std::ptr::null_mut();
        // NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION (libjpeg-turbo's "fancy upsampling", which
        // Pillow uses) was tried: embeddings moved from 0.99834 to 0.99862 of the host path's
        // (min cosine, 64 photos, ViT-L/14) and a run of five workers hung in a decode; left off.
        // `CURATOR_NVJPEG_BACKEND=gpu` skips the hardware engines (to tell their faults from
        // ours).
        let hardware = std::env::var("CURATOR_NVJPEG_BACKEND").map_or(true, |b| b != "gpu");
        let all = [(BACKEND_HARDWARE, "hardware"), (BACKEND_GPU_HYBRID, "GPU")];
        let tries = if hardware { &all[..] } else { &all[1..] };
        // `CURATOR_NVJPEG_POOL=1`: nvJPEG's memory from our pools (`nvjpeg_pool`: no
        // `cuMemFree` during a decode), and the decoder then shares the card with other
        // processes. Opt-in until a GPU run shows it clears the multi-worker hang
        // (`scripts/models/gpu-clip.sh KIT hang`); nvJPEG's own allocators otherwise.
        let pooled = std::env::var("CURATOR_NVJPEG_POOL").is_ok_and(|v| v == "1");
        let (dev_ptr, pinned_ptr): (*mut c_void, *mut c_void) = if pooled {
            ((&raw const POOL_DEVICE).cast_mut().cast(), (&raw const POOL_PINNED).cast_mut().cast())
        } else {
            (std::ptr::null_mut(), std::ptr::null_mut())
        };
        let mut status = -1;
        let mut backend = "";
        for &(b, name) in tries {
            // SAFETY: the allocator structs have nvjpeg.h's layout and live for the process (or
            // are null: its defaults; nvJPEG never writes them); default flags; the handle is
            // written on success.
            status = unsafe { (api.create_ex)(b, dev_ptr, pinned_ptr, 0, &mut handle) };
            if status == 0 {
                backend = name;
                break;
            }
        }
        check("create", status)?;
        let mut d = Nvjpeg { api, handle, state: std::ptr::null_mut(), batch: None, backend, pooled };
        // SAFETY: `handle` is live; the call writes the state on success (and Drop destroys
        // only what is non-null).
        check("state", unsafe { (d.api.state_create)(d.handle, &mut d.state) })?;
        Ok(d)
    }

    /// Decode `data[i]` into `out[i]` (interleaved RGB, device memory of `pitch × height`
    /// bytes each) on `stream`. Every image must be one the hardware decoder takes
    /// (`curator_image::jpeg::JpegHeader::gpu_decodable`); a failed call leaves the decoder
    /// ready for the next.
    ///
    /// # Safety
    /// `out`'s planes must be device memory of the current context, large enough for their
    /// images, and not touched by other work until `stream` has run the decode; `data` must
    /// stay unchanged until then.
    pub(crate) unsafe fn decode(&mut self, data: &[&[u8]], out: &mut [NvImage], stream: *mut c_void) -> Result<(), String> {
        if data.len() != out.len() {
            return Err("nvJPEG: as many outputs as images".into());
        }
        if self.batch != Some(data.len()) {
            // SAFETY: live handle and state.
            check("batch set-up", unsafe { (self.api.batched_init)(self.handle, self.state, data.len() as c_int, 1, OUTPUT_RGBI) })?;
            self.batch = Some(data.len());
        }
        let ptrs: Vec<*const u8> = data.iter().map(|d| d.as_ptr()).collect();
        let lens: Vec<usize> = data.iter().map(|d| d.len()).collect();
        // SAFETY: the arrays hold `batch` entries; the caller vouches for the buffers.
        let status = unsafe { (self.api.batched)(self.handle, self.state, ptrs.as_ptr(), lens.as_ptr(), out.as_mut_ptr(), stream) };
        if status != 0 {
            // Set the state up again before the next batch.
            self.batch = None;
        }
        check("decode", status)
    }
}

impl Drop for Nvjpeg {
    fn drop(&mut self) {
        // SAFETY: the state was created on this handle; each is destroyed once, handle last.
        unsafe {
            if !self.state.is_null() {
                (self.api.state_destroy)(self.state);
            }
            (self.api.destroy)(self.handle);
        }
    }
}
