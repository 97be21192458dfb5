//! The native stage contract (`sdk/include/curator_stage.h`) in Rust: the Arrow C Data
//! Interface structs, the vtable, and the glue that `#[stage(name = "...", native)]` exports.
//!
//! The glue never lets a panic cross the boundary (every entry runs under `catch_unwind`),
//! takes ownership of the input arrays before anything can fail (so `release` runs exactly
//! once), and hands out output arrays whose `release` frees what the plugin allocated.
//! Plugins must be built with `panic = "unwind"`.

use std::ffi::{CStr, CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use crate::context::set_context;
pub use crate::context::{ServiceContext, WorkerContext, context};
use crate::runner::{Runner, StageDef, StageError};

/// The contract's version; `include/curator_stage.h` is the source (`tests/contract.rs`).
pub const ABI_MAJOR: u32 = 0;
pub const ABI_MINOR: u32 = 4;
/// The symbol a native plugin exports.
pub const ENTRY_SYMBOL: &str = "curator_stage_entry";

/// In a "scored" output, the boolean column saying which rows are kept.
pub const SCORED_KEEP: &str = "_keep";
/// Names of the output kinds (the output schema's name).
pub const OUTPUT_SELECTION: &str = "selection";
pub const OUTPUT_COLUMNS: &str = "columns";
pub const OUTPUT_BATCH: &str = "batch";
pub const OUTPUT_SCORED: &str = "scored";

pub const OK: i32 = 0;
pub const ERR_INVALID_PARAMS: i32 = 1;
pub const ERR_FAILED: i32 = 2;
/// The batch did not fit (e.g. a CUDA out-of-memory): the host retries it in halves.
pub const ERR_OUT_OF_MEMORY: i32 = 3;

/// `struct ArrowSchema` of the Arrow C Data Interface.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowSchema {
    pub format: *const c_char,
    pub name: *const c_char,
    pub metadata: *const c_char,
    pub flags: i64,
    pub n_children: i64,
    pub children: *mut *mut ArrowSchema,
    pub dictionary: *mut ArrowSchema,
    pub release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    pub private_data: *mut c_void,
}

/// `struct ArrowArray` of the Arrow C Data Interface.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowArray {
    pub length: i64,
    pub null_count: i64,
    pub offset: i64,
    pub n_buffers: i64,
    pub n_children: i64,
    pub buffers: *mut *const c_void,
    pub children: *mut *mut ArrowArray,
    pub dictionary: *mut ArrowArray,
    pub release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    pub private_data: *mut c_void,
}

impl ArrowSchema {
    /// A released (empty) schema, for the callee to fill.
    pub const fn empty() -> ArrowSchema {
        ArrowSchema {
            format: ptr::null(),
            name: ptr::null(),
            metadata: ptr::null(),
            flags: 0,
            n_children: 0,
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
}

impl ArrowArray {
    /// A released (empty) array, for the callee to fill.
    pub const fn empty() -> ArrowArray {
        ArrowArray {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: ptr::null_mut(),
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
}

pub type CreateFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut *mut c_void, *mut *mut c_char) -> i32;
pub type ProcessFn =
    unsafe extern "C" fn(*mut c_void, *mut ArrowArray, *mut ArrowSchema, *mut ArrowArray, *mut ArrowSchema, *mut *mut c_char) -> i32;

/// `CuratorStageVTable`.
#[repr(C)]
pub struct StageVTable {
    pub abi_major: u32,
    pub abi_minor: u32,
    /// `size_of::<StageVTable>()` as the plugin was built (later minors append fields).
    pub struct_size: u32,
    pub reserved: u32,
    pub manifest_json: *const c_char,
    pub create: CreateFn,
    pub process: ProcessFn,
    pub destroy: unsafe extern "C" fn(*mut c_void),
    pub free_error: unsafe extern "C" fn(*mut c_char),
}

// SAFETY: the vtable is immutable static data; the manifest pointer points at a static string.
unsafe impl Sync for StageVTable {}

pub type EntryFn = unsafe extern "C" fn() -> *const StageVTable;

fn error_out(error: *mut *mut c_char, message: &str) {
    if error.is_null() {
        return;
    }
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: the caller passes a valid out-pointer (or null, checked above).
    unsafe { *error = c.into_raw() };
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "panic".into())
}

/// `create` for stage `T`.
///
/// # Safety
/// Called by the host through the vtable with valid NUL-terminated strings and out-pointers.
pub unsafe extern "C" fn create<T: StageDef>(
    params_json: *const c_char,
    context_json: *const c_char,
    state: *mut *mut c_void,
    error: *mut *mut c_char,
) -> i32 {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: valid C strings from the host (null treated as "{}").
        let params = if params_json.is_null() { "{}" } else { unsafe { CStr::from_ptr(params_json) }.to_str().unwrap_or("{}") };
        let context: WorkerContext = if context_json.is_null() {
            WorkerContext::default()
        } else {
            // SAFETY: not null (checked); the ABI makes it a NUL-terminated string the host
            // owns for the call.
            unsafe { CStr::from_ptr(context_json) }.to_str().ok().and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default()
        };
        set_context(context);
        T::build(params)
    }));
    match r {
        Ok(Ok(runner)) => {
            let boxed: Box<Box<dyn Runner>> = Box::new(runner);
            // SAFETY: valid out-pointer from the host.
            unsafe { *state = Box::into_raw(boxed) as *mut c_void };
            OK
        }
        Ok(Err(e)) => {
            error_out(error, &e.to_string());
            if matches!(e, StageError::InvalidParams(_)) { ERR_INVALID_PARAMS } else { ERR_FAILED }
        }
        Err(p) => {
            error_out(error, &format!("panicked in create: {}", panic_message(p.as_ref())));
            ERR_FAILED
        }
    }
}

/// `process`: import the batch, run the stage, export its output.
///
/// # Safety
/// `state` comes from `create`; the arrays follow the C Data Interface.
pub unsafe extern "C" fn process(
    state: *mut c_void,
    input: *mut ArrowArray,
    input_schema: *mut ArrowSchema,
    output: *mut ArrowArray,
    output_schema: *mut ArrowSchema,
    error: *mut *mut c_char,
) -> i32 {
    // Take ownership first, so the inputs are released whatever happens next.
    // SAFETY: the host passes valid arrays it no longer uses.
    let input = unsafe { Imported::take(input, input_schema) };
    let r = catch_unwind(AssertUnwindSafe(|| {
        let batch = input.to_batch().map_err(StageError::Failed)?;
        drop(input);
        let rows = batch.num_rows as usize;
        // SAFETY: `state` is the Box<Box<dyn Runner>> made by `create`.
        let runner = unsafe { &mut *(state as *mut Box<dyn Runner>) };
        runner.process(batch).map(|out| (out, rows))
    }));
    match r {
        Ok(Ok((out, rows))) => {
            let (array, schema) = export_output(out, rows);
            // SAFETY: valid out-pointers from the host.
            unsafe {
                ptr::write(output, array);
                ptr::write(output_schema, schema);
            }
            OK
        }
        Ok(Err(e)) => {
            error_out(error, &e.to_string());
            if matches!(e, StageError::OutOfMemory(_)) { ERR_OUT_OF_MEMORY } else { ERR_FAILED }
        }
        Err(p) => {
            error_out(error, &format!("panicked: {}", panic_message(p.as_ref())));
            ERR_FAILED
        }
    }
}

/// `destroy`.
///
/// # Safety
/// `state` comes from `create` and is not used afterwards.
pub unsafe extern "C" fn destroy(state: *mut c_void) {
    if state.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: made by `create`.
        drop(unsafe { Box::from_raw(state as *mut Box<dyn Runner>) });
    }));
}

/// `free_error`.
///
/// # Safety
/// `error` was returned by this plugin's `create` or `process`.
pub unsafe extern "C" fn free_error(error: *mut c_char) {
    if !error.is_null() {
        // SAFETY: made by `CString::into_raw` in `error_out`.
        drop(unsafe { CString::from_raw(error) });
    }
}

/// The vtable of stage `T` (the `#[stage(native)]` attribute puts this in a static).
pub const fn vtable<T: StageDef>(manifest_json: *const c_char) -> StageVTable {
    StageVTable {
        abi_major: ABI_MAJOR,
        abi_minor: ABI_MINOR,
        struct_size: std::mem::size_of::<StageVTable>() as u32,
        reserved: 0,
        manifest_json,
        create: create::<T>,
        process,
        destroy,
        free_error,
    }
}

mod arrow;
use arrow::{Imported, export_output};
