//! The C ABI (`sdk/include/curator_stage.h`) from the loading side: a native library and its
//! instances. Only worker processes (and tests, and `bench`) load libraries; the host never
//! does. Libraries are never unloaded (`dlclose` with live Rust TLS or exported arrays is
//! unsound).

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi, to_ffi};
use arrow_array::{Array, RecordBatch, StructArray};
use curator_core::{ABI_MAJOR, ABI_MINOR, Manifest, PluginKind};
use curator_sdk::abi::{self, StageVTable, WorkerContext};

use crate::stage::{OutputKind, StageCall, StageFailure, StageOutput};

/// Why a library could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LibraryError {
    #[error("{path}: cannot load: {message}")]
    Load { path: PathBuf, message: String },
    #[error("{path}: no `{}` symbol (not a curator native plugin?)", abi::ENTRY_SYMBOL)]
    NoEntry { path: PathBuf },
    #[error("{path}: built for ABI {found}, host supports {ABI_MAJOR}.{ABI_MINOR}")]
    AbiMismatch { path: PathBuf, found: String },
    #[error("{path}: {message}")]
    BadManifest { path: PathBuf, message: String },
}

impl From<LibraryError> for StageFailure {
    fn from(e: LibraryError) -> StageFailure {
        StageFailure::Load(e.to_string())
    }
}

/// The fields of the vtable this host reads (ABI 0.2 and later): everything up to `free_error`.
const VTABLE_FIELDS_0_2: usize = std::mem::size_of::<StageVTable>();

/// A loaded native plugin.
pub struct Library {
    vtable: &'static StageVTable,
    pub manifest: Manifest,
    pub path: PathBuf,
}

impl Library {
    /// Load `path`, check its ABI and read its manifest. The library stays loaded for the
    /// life of the process.
    pub fn load(path: &Path) -> Result<Library, LibraryError> {
        // SAFETY: loading runs the library's initialisers; this only happens in worker
        // processes (and tests), whose crash cannot take the host down.
        let lib =
            unsafe { libloading::Library::new(path) }.map_err(|e| LibraryError::Load { path: path.into(), message: e.to_string() })?;
        let lib: &'static libloading::Library = Box::leak(Box::new(lib));
        // SAFETY: the symbol's type is fixed by curator_stage.h.
        let entry = unsafe { lib.get::<abi::EntryFn>(format!("{}\0", abi::ENTRY_SYMBOL).as_bytes()) }
            .map_err(|_| LibraryError::NoEntry { path: path.into() })?;
        // SAFETY: calling the plugin's entry point.
        let vt = unsafe { entry() };
        if vt.is_null() {
            return Err(LibraryError::NoEntry { path: path.into() });
        }
        // The version fields come first in every ABI; read them before trusting the rest.
        // SAFETY: a static vtable per the contract; its first two fields are u32s.
        let (major, minor) = unsafe { (*(vt as *const u32), *(vt as *const u32).add(1)) };
        if !curator_core::abi_compatible(major, minor) {
            return Err(LibraryError::AbiMismatch { path: path.into(), found: format!("{major}.{minor}") });
        }
        // SAFETY: same ABI, so the layout of StageVTable.
        let vtable: &'static StageVTable = unsafe { &*vt };
        if (vtable.struct_size as usize) < VTABLE_FIELDS_0_2 {
            return Err(LibraryError::BadManifest {
                path: path.into(),
                message: format!("vtable of {} bytes, ABI {major}.{minor} needs {VTABLE_FIELDS_0_2}", vtable.struct_size),
            });
        }
        if vtable.manifest_json.is_null() {
            return Err(LibraryError::BadManifest { path: path.into(), message: "no manifest".into() });
        }
        // SAFETY: a NUL-terminated static string per the contract.
        let json = unsafe { CStr::from_ptr(vtable.manifest_json) }.to_bytes();
        let manifest = Manifest::from_json(json).map_err(|e| LibraryError::BadManifest { path: path.into(), message: e.to_string() })?;
        if manifest.kind != PluginKind::Native {
            return Err(LibraryError::BadManifest { path: path.into(), message: "manifest kind is not \"native\"".into() });
        }
        Ok(Library { vtable, manifest, path: path.into() })
    }

    /// Build an instance.
    pub fn create(&self, params_json: &str, context: &WorkerContext) -> Result<NativeInstance, StageFailure> {
        let params = CString::new(params_json).map_err(|_| StageFailure::InvalidParams("params contain NUL".into()))?;
        let ctx = CString::new(serde_json::to_string(context).unwrap_or_default()).unwrap_or_default();
        let mut state: *mut c_void = std::ptr::null_mut();
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: valid strings and out-pointers.
        let rc = unsafe { (self.vtable.create)(params.as_ptr(), ctx.as_ptr(), &mut state, &mut err) };
        if rc != abi::OK {
            let message = take_error(self.vtable, err);
            return Err(if rc == abi::ERR_INVALID_PARAMS { StageFailure::InvalidParams(message) } else { StageFailure::Failed(message) });
        }
        Ok(NativeInstance { vtable: self.vtable, state })
    }
}

fn take_error(vt: &StageVTable, err: *mut c_char) -> String {
    if err.is_null() {
        return "no message".into();
    }
    // SAFETY: the ABI makes a non-null error a NUL-terminated string the plugin owns until
    // it is given back; it is copied out before that.
    let s = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    // SAFETY: given back once, to the plugin's own free function, as the ABI requires.
    unsafe { (vt.free_error)(err) };
    s
}

/// One instance of a native stage.
pub struct NativeInstance {
    vtable: &'static StageVTable,
    state: *mut c_void,
}

// SAFETY: an instance is used by one thread at a time (StageCall takes &mut self); the C ABI
// asks plugins for instances that may move between threads.
unsafe impl Send for NativeInstance {}

impl NativeInstance {
    /// Call `process`: the batch is exported without copying; the output is imported
    /// without copying (its buffers stay the plugin's until the last Arrow array drops).
    pub fn process(&mut self, batch: &RecordBatch) -> Result<(OutputKind, RecordBatch), StageFailure> {
        let data = StructArray::from(batch.clone()).into_data();
        let (mut in_array, mut in_schema) = to_ffi(&data).map_err(|e| StageFailure::Protocol(format!("cannot export batch: {e}")))?;
        let mut out_array = FFI_ArrowArray::empty();
        let mut out_schema = FFI_ArrowSchema::empty();
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: arrow's FFI structs have the C Data Interface layout, as do the SDK's.
        let rc = unsafe {
            (self.vtable.process)(
                self.state,
                &mut in_array as *mut FFI_ArrowArray as *mut abi::ArrowArray,
                &mut in_schema as *mut FFI_ArrowSchema as *mut abi::ArrowSchema,
                &mut out_array as *mut FFI_ArrowArray as *mut abi::ArrowArray,
                &mut out_schema as *mut FFI_ArrowSchema as *mut abi::ArrowSchema,
                &mut err,
            )
        };
        if rc != abi::OK {
            let message = take_error(self.vtable, err);
            return Err(if rc == abi::ERR_OUT_OF_MEMORY { StageFailure::OutOfMemory(message) } else { StageFailure::Failed(message) });
        }
        let kind = OutputKind::parse(out_schema.name().unwrap_or(""))?;
        // SAFETY: the plugin filled both per the contract; from_ffi takes the array.
        let data = unsafe { from_ffi(out_array, &out_schema) }.map_err(|e| StageFailure::InvalidOutput(e.to_string()))?;
        if !matches!(data.data_type(), arrow_schema::DataType::Struct(_)) {
            return Err(StageFailure::InvalidOutput(format!("the output must be a struct array, not {}", data.data_type())));
        }
        let out = StructArray::from(data);
        if out.null_count() > 0 {
            return Err(StageFailure::InvalidOutput("the output struct array has null rows".into()));
        }
        Ok((kind, RecordBatch::from(out)))
    }
}

impl StageCall for NativeInstance {
    fn call(&mut self, input: &RecordBatch) -> Result<StageOutput, StageFailure> {
        let (kind, out) = self.process(input)?;
        StageOutput::from_abi(kind, out)
    }

    fn memory_bytes(&self) -> usize {
        crate::os::own_rss_bytes() as usize
    }

    fn leak_rule(&self) -> curator_core::leak::LeakRule {
        curator_core::leak::LeakRule::Resident
    }

    fn teardown(self: Box<Self>) {}
}

impl Drop for NativeInstance {
    fn drop(&mut self) {
        // SAFETY: the state came from this vtable's `create`.
        unsafe { (self.vtable.destroy)(self.state) };
    }
}
