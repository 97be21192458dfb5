//! Native (C ABI) stages: `sdk/include/curator_stage.h`.
//!
//! A native library is only ever loaded inside a `curator-host worker` process: a segfault,
//! abort or leak there costs that worker, never the run. The host side (`NativeWorker`)
//! talks to it over the worker's stdin/stdout with length-prefixed frames carrying Arrow IPC
//! streams, and a watchdog thread per worker enforces the RAM budget, the per-call time
//! limit and (with NVML) the GPU memory budget. Inside the worker, batches cross into the
//! plugin through the Arrow C Data Interface without copies (`Library`, `NativeInstance`).
//! Libraries are never unloaded (`dlclose` with live Rust TLS or exported arrays is unsound).

use std::ffi::{CStr, CString, c_char, c_void};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi, to_ffi};
use arrow_array::{Array, RecordBatch, StructArray};
use curator_core::{ABI_MAJOR, ABI_MINOR, Manifest, PluginKind};
use curator_sdk::abi::{self, StageVTable, WorkerContext};

/// Why a native stage failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NativeError {
    #[error("{path}: cannot load: {message}")]
    Load { path: PathBuf, message: String },
    #[error("{path}: no `{}` symbol (not a curator native plugin?)", abi::ENTRY_SYMBOL)]
    NoEntry { path: PathBuf },
    #[error("{path}: built for ABI {found}, host supports {supported}")]
    AbiMismatch { path: PathBuf, found: String, supported: String },
    #[error("{path}: {message}")]
    BadManifest { path: PathBuf, message: String },
    #[error("rejected its params: {0}")]
    InvalidParams(String),
    #[error("returned an error: {0}")]
    Failed(String),
    #[error("ran out of memory: {0}")]
    OutOfMemory(String),
    #[error("worker process died ({0})")]
    WorkerDied(String),
    #[error("worker stopped by the watchdog: {0}")]
    Watchdog(String),
    #[error("exceeded its time limit of {0:?} per call (worker stopped)")]
    Timeout(Duration),
    #[error("cannot start a worker process: {0}")]
    Spawn(String),
    #[error("worker protocol error: {0}")]
    Protocol(String),
    #[error("invalid output: {0}")]
    Output(String),
    /// A worker refused to load the plugin (its message names the file).
    #[error("{0}")]
    Refused(String),
}

impl NativeError {
    /// Whether the worker is gone (or its state unknown) and must be replaced.
    pub fn lost_worker(&self) -> bool {
        matches!(self, NativeError::WorkerDied(_) | NativeError::Watchdog(_) | NativeError::Timeout(_) | NativeError::Protocol(_))
    }
}

fn supported() -> String {
    format!("{ABI_MAJOR}.{ABI_MINOR}")
}

/// A loaded native plugin (inside a worker process, or in tests).
pub struct Library {
    vtable: &'static StageVTable,
    pub manifest: Manifest,
    pub path: PathBuf,
}

impl Library {
    /// Load `path`, check its ABI and read its manifest. The library stays loaded for the
    /// life of the process.
    pub fn load(path: &Path) -> Result<Library, NativeError> {
        // SAFETY: loading runs the library's initialisers; this only happens in worker
        // processes (and tests), whose crash cannot take the host down.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| NativeError::Load { path: path.into(), message: e.to_string() })?;
        let lib: &'static libloading::Library = Box::leak(Box::new(lib));
        // SAFETY: the symbol's type is fixed by curator_stage.h.
        let entry = unsafe { lib.get::<abi::EntryFn>(format!("{}\0", abi::ENTRY_SYMBOL).as_bytes()) }
            .map_err(|_| NativeError::NoEntry { path: path.into() })?;
        // SAFETY: calling the plugin's entry point.
        let vt = unsafe { entry() };
        if vt.is_null() {
            return Err(NativeError::NoEntry { path: path.into() });
        }
        // SAFETY: a static vtable per the contract.
        let vtable: &'static StageVTable = unsafe { &*vt };
        if vtable.abi_major != ABI_MAJOR {
            return Err(NativeError::AbiMismatch {
                path: path.into(),
                found: format!("{}.{}", vtable.abi_major, vtable.abi_minor),
                supported: supported(),
            });
        }
        if vtable.manifest_json.is_null() {
            return Err(NativeError::BadManifest { path: path.into(), message: "no manifest".into() });
        }
        // SAFETY: a NUL-terminated static string per the contract.
        let json = unsafe { CStr::from_ptr(vtable.manifest_json) }.to_bytes();
        let manifest = Manifest::from_json(json).map_err(|e| NativeError::BadManifest { path: path.into(), message: e.to_string() })?;
        if manifest.kind != PluginKind::Native {
            return Err(NativeError::BadManifest { path: path.into(), message: "manifest kind is not \"native\"".into() });
        }
        Ok(Library { vtable, manifest, path: path.into() })
    }

    /// Build an instance.
    pub fn create(&self, params_json: &str, context: &WorkerContext) -> Result<NativeInstance, NativeError> {
        let params = CString::new(params_json).map_err(|_| NativeError::InvalidParams("params contain NUL".into()))?;
        let ctx = CString::new(serde_json::to_string(context).unwrap_or_default()).unwrap_or_default();
        let mut state: *mut c_void = std::ptr::null_mut();
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: valid strings and out-pointers.
        let rc = unsafe { (self.vtable.create)(params.as_ptr(), ctx.as_ptr(), &mut state, &mut err) };
        if rc != abi::OK {
            let message = self.take_error(err);
            return Err(if rc == abi::ERR_INVALID_PARAMS { NativeError::InvalidParams(message) } else { NativeError::Failed(message) });
        }
        Ok(NativeInstance { vtable: self.vtable, state })
    }

    fn take_error(&self, err: *mut c_char) -> String {
        take_error(self.vtable, err)
    }
}

fn take_error(vt: &StageVTable, err: *mut c_char) -> String {
    if err.is_null() {
        return "no message".into();
    }
    // SAFETY: a NUL-terminated string owned by the plugin, freed with its own function.
    let s = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    unsafe { (vt.free_error)(err) };
    s
}

/// One instance of a native stage.
pub struct NativeInstance {
    vtable: &'static StageVTable,
    state: *mut c_void,
}

/// What a native stage's output means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Selection,
    Columns,
    Batch,
    /// Columns plus a boolean `_keep` column: add the columns, keep the marked rows.
    Scored,
}

impl OutputKind {
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Selection => "selection",
            OutputKind::Columns => "columns",
            OutputKind::Batch => "batch",
            OutputKind::Scored => "scored",
        }
    }
    pub fn parse(name: &str) -> Result<OutputKind, NativeError> {
        match name {
            "selection" => Ok(OutputKind::Selection),
            "" | "columns" => Ok(OutputKind::Columns),
            "batch" => Ok(OutputKind::Batch),
            "scored" => Ok(OutputKind::Scored),
            other => Err(NativeError::Output(format!("unknown output kind {other:?}"))),
        }
    }
}

impl NativeInstance {
    /// Call `process`: the batch is exported without copying; the output is imported
    /// without copying (its buffers stay the plugin's until the last Arrow array drops).
    pub fn process(&mut self, batch: &RecordBatch) -> Result<(OutputKind, RecordBatch), NativeError> {
        let data = StructArray::from(batch.clone()).into_data();
        let (mut in_array, mut in_schema) = to_ffi(&data).map_err(|e| NativeError::Output(format!("cannot export batch: {e}")))?;
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
            return Err(if rc == abi::ERR_OUT_OF_MEMORY { NativeError::OutOfMemory(message) } else { NativeError::Failed(message) });
        }
        let kind = OutputKind::parse(out_schema.name().unwrap_or(""))?;
        // SAFETY: the plugin filled both per the contract; from_ffi takes the array.
        let data = unsafe { from_ffi(out_array, &out_schema) }.map_err(|e| NativeError::Output(e.to_string()))?;
        let out = StructArray::from(data);
        Ok((kind, RecordBatch::from(out)))
    }
}

impl Drop for NativeInstance {
    fn drop(&mut self) {
        // SAFETY: the state came from this vtable's `create`.
        unsafe { (self.vtable.destroy)(self.state) };
    }
}

/// Apply a native stage's output to its input batch.
pub fn apply_output(input: &RecordBatch, kind: OutputKind, out: RecordBatch) -> Result<RecordBatch, NativeError> {
    let rows = input.num_rows();
    let bad = |m: String| NativeError::Output(m);
    match kind {
        OutputKind::Selection => {
            let sel = out
                .columns()
                .first()
                .and_then(|c| c.as_any().downcast_ref::<arrow_array::UInt32Array>())
                .ok_or_else(|| bad("a selection must be one uint32 column".into()))?;
            let mut mask = vec![false; rows];
            let mut prev: Option<u32> = None;
            for &k in sel.values().iter() {
                if k as usize >= rows || prev.is_some_and(|p| k <= p) {
                    return Err(bad(format!("selection index {k} is out of range or not ascending ({rows} rows)")));
                }
                mask[k as usize] = true;
                prev = Some(k);
            }
            arrow_select::filter::filter_record_batch(input, &arrow_array::BooleanArray::from(mask)).map_err(|e| bad(e.to_string()))
        }
        OutputKind::Columns => {
            if out.num_rows() != rows && out.num_columns() > 0 {
                return Err(bad(format!("{} rows of columns for a batch of {rows}", out.num_rows())));
            }
            let mut fields: Vec<arrow_schema::Field> = input.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
            let mut arrays = input.columns().to_vec();
            for (f, a) in out.schema().fields().iter().zip(out.columns()) {
                match fields.iter().position(|x| x.name() == f.name()) {
                    Some(i) => {
                        fields[i] = f.as_ref().clone();
                        arrays[i] = a.clone();
                    }
                    None => {
                        fields.push(f.as_ref().clone());
                        arrays.push(a.clone());
                    }
                }
            }
            RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), arrays).map_err(|e| bad(e.to_string()))
        }
        OutputKind::Batch => Ok(out),
        OutputKind::Scored => {
            let keep = out
                .column_by_name(abi::SCORED_KEEP)
                .and_then(|c| c.as_any().downcast_ref::<arrow_array::BooleanArray>())
                .cloned()
                .ok_or_else(|| bad(format!("a scored output needs a boolean column {:?}", abi::SCORED_KEEP)))?;
            let idx = out.schema().index_of(abi::SCORED_KEEP).map_err(|e| bad(e.to_string()))?;
            let mut columns = out.clone();
            columns.remove_column(idx);
            let with = apply_output(input, OutputKind::Columns, columns)?;
            if keep.len() != rows {
                return Err(bad(format!("{} keep flags for a batch of {rows}", keep.len())));
            }
            arrow_select::filter::filter_record_batch(&with, &keep).map_err(|e| bad(e.to_string()))
        }
    }
}

// ---------------------------------------------------------------------------------------
// The worker process and its protocol.

pub(crate) const TAG_BATCH: u8 = 1;
pub(crate) const TAG_SHUTDOWN: u8 = 2;
pub(crate) const TAG_READY: u8 = 0x10;
pub(crate) const TAG_OUTPUT: u8 = 0x11;
pub(crate) const TAG_ERROR: u8 = 0x12;
pub(crate) const TAG_OOM: u8 = 0x13;
pub(crate) const TAG_FATAL: u8 = 0x14;
const TAG_MANIFEST: u8 = 0x15;
/// Pipe buffer size between host and worker.
#[cfg(target_os = "linux")]
const PIPE_BYTES: libc::c_int = 1 << 20;
/// Schema-metadata key carrying the output kind over IPC.
const KIND_KEY: &str = "curator.output";

pub(crate) fn write_frame(w: &mut impl Write, tag: u8, payload: &[u8]) -> std::io::Result<()> {
    let mut head = [0u8; 9];
    head[0] = tag;
    head[1..].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    w.write_all(&head)?;
    w.write_all(payload)?;
    w.flush()
}

pub(crate) fn read_frame(r: &mut impl Read) -> std::io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    r.read_exact(&mut head)?;
    let len = u64::from_le_bytes(head[1..].try_into().unwrap_or([0; 8])) as usize;
    // No zero-filling: read straight into spare capacity.
    let mut payload = Vec::with_capacity(len);
    r.take(len as u64).read_to_end(&mut payload)?;
    if payload.len() != len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok((head[0], payload))
}

/// Encode into `buf` (cleared first; its capacity is reused, so steady state does not
/// fault fresh pages in for every batch).
pub(crate) fn to_ipc_into(batch: &RecordBatch, kind: Option<OutputKind>, buf: &mut Vec<u8>) -> Result<(), NativeError> {
    buf.clear();
    let mut metadata = batch.schema().metadata().clone();
    if let Some(k) = kind {
        metadata.insert(KIND_KEY.to_string(), k.name().to_string());
    }
    let schema = Arc::new(arrow_schema::Schema::new_with_metadata(batch.schema().fields().clone(), metadata));
    let batch = RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).map_err(|e| NativeError::Protocol(e.to_string()))?;
    buf.reserve(batch.get_array_memory_size() + 4096);
    let mut w = arrow_ipc::writer::StreamWriter::try_new(buf, &schema).map_err(|e| NativeError::Protocol(e.to_string()))?;
    w.write(&batch).map_err(|e| NativeError::Protocol(e.to_string()))?;
    w.finish().map_err(|e| NativeError::Protocol(e.to_string()))?;
    Ok(())
}

/// Decode a frame's IPC stream without copying: the arrays point into `bytes`.
fn from_ipc(bytes: Vec<u8>) -> Result<(RecordBatch, Option<String>), NativeError> {
    decode_ipc(bytes, false)
}

/// `trusted`: skip Arrow's validation (UTF-8, offsets). Only for what the host sends its own
/// worker (the host built and validated it); never for what comes back from a plugin.
pub(crate) fn decode_ipc(bytes: Vec<u8>, trusted: bool) -> Result<(RecordBatch, Option<String>), NativeError> {
    let perr = |e: arrow_schema::ArrowError| NativeError::Protocol(e.to_string());
    let mut buffer = arrow_buffer::Buffer::from_vec(bytes);
    let mut decoder = arrow_ipc::reader::StreamDecoder::new();
    if trusted {
        // SAFETY: the bytes are the host's own encoding of arrays it has validated.
        decoder = unsafe { decoder.with_skip_validation(true) };
    }
    let mut batches = Vec::new();
    while !buffer.is_empty() {
        if let Some(b) = decoder.decode(&mut buffer).map_err(perr)? {
            batches.push(b);
        }
    }
    decoder.finish().map_err(perr)?;
    let schema = decoder.schema().ok_or_else(|| NativeError::Protocol("empty IPC stream".into()))?;
    let mut metadata = schema.metadata().clone();
    let kind = metadata.remove(KIND_KEY);
    let clean = Arc::new(arrow_schema::Schema::new_with_metadata(schema.fields().clone(), metadata));
    let batch = match batches.pop() {
        Some(b) => RecordBatch::try_new(clean, b.columns().to_vec()).map_err(|e| NativeError::Protocol(e.to_string()))?,
        None => RecordBatch::new_empty(clean),
    };
    Ok((batch, kind))
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

/// Pin this process to `cpus` (Linux).
pub(crate) fn set_affinity(cpus: &[usize]) {
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

/// `curator-host worker PLUGIN …`: serve one plugin over stdin/stdout until told to stop.
/// With `manifest_only`, print the plugin's manifest JSON and exit (how the registry reads
/// native manifests without loading libraries into the host).
pub fn serve(plugin: &Path, params: &str, context: &WorkerContext, cpus: &[usize], manifest_only: bool) -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let lib = match Library::load(plugin) {
        Ok(l) => l,
        Err(e) => {
            let _ = write_frame(&mut out, TAG_FATAL, e.to_string().as_bytes());
            return 3;
        }
    };
    if manifest_only {
        let json = serde_json::to_vec(&lib.manifest).unwrap_or_default();
        let _ = write_frame(&mut out, TAG_MANIFEST, &json);
        return 0;
    }
    if !cpus.is_empty() {
        set_affinity(cpus);
    }
    keep_large_allocations();
    let mut inst = match lib.create(params, context) {
        Ok(i) => i,
        Err(e) => {
            let _ = write_frame(&mut out, TAG_FATAL, e.to_string().as_bytes());
            return 3;
        }
    };
    serve_batches(&mut out, |payload, encoded| {
        let reply = decode_ipc(payload, true)
            .and_then(|(batch, _)| inst.process(&batch))
            .and_then(|(kind, b)| to_ipc_into(&b, Some(kind), encoded));
        match reply {
            Ok(()) => Ok(()),
            Err(NativeError::OutOfMemory(m)) => Err((TAG_OOM, m)),
            Err(NativeError::Failed(m)) => Err((TAG_ERROR, m)),
            Err(e) => Err((TAG_ERROR, e.to_string())),
        }
    })
}

/// The worker's side of the protocol once its stage is ready: say so, then answer each batch
/// frame with `process` (`Ok`: the output it encoded; `Err`: a frame tag and message, where
/// [`TAG_FATAL`] also ends the worker) until the host says stop or goes away. The exit code.
pub(crate) fn serve_batches(out: &mut impl Write, mut process: impl FnMut(Vec<u8>, &mut Vec<u8>) -> Result<(), (u8, String)>) -> i32 {
    if write_frame(out, TAG_READY, &[]).is_err() {
        return 1;
    }
    let stdin = std::io::stdin();
    let mut input = BufReader::with_capacity(1 << 20, stdin.lock());
    let mut encoded = Vec::new();
    loop {
        let Ok((tag, payload)) = read_frame(&mut input) else { return 0 };
        match tag {
            TAG_BATCH => {}
            TAG_SHUTDOWN => return 0,
            _ => return 4,
        }
        let sent = match process(payload, &mut encoded) {
            Ok(()) => write_frame(out, TAG_OUTPUT, &encoded),
            Err((TAG_FATAL, m)) => {
                let _ = write_frame(out, TAG_FATAL, m.as_bytes());
                return 3;
            }
            Err((tag, m)) => write_frame(out, tag, m.as_bytes()),
        };
        if sent.is_err() {
            return 1;
        }
    }
}

/// The binary that runs workers: `$CURATOR_WORKER_EXE`, else this executable.
pub fn worker_exe() -> PathBuf {
    std::env::var_os("CURATOR_WORKER_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| "curator-host".into())
}

/// Read a native plugin's manifest in a throw-away worker process.
pub fn read_manifest(path: &Path) -> Result<Manifest, NativeError> {
    let out = Command::new(worker_exe())
        .arg("worker")
        .arg(path)
        .arg("--manifest")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| NativeError::Spawn(e.to_string()))?;
    let mut cursor = std::io::Cursor::new(out.stdout);
    match read_frame(&mut cursor) {
        Ok((TAG_MANIFEST, json)) => {
            Manifest::from_json(&json).map_err(|e| NativeError::BadManifest { path: path.into(), message: e.to_string() })
        }
        Ok((TAG_FATAL, msg)) => Err(NativeError::Refused(String::from_utf8_lossy(&msg).into())),
        _ => Err(NativeError::WorkerDied(describe_status(out.status))),
    }
}

fn describe_status(status: std::process::ExitStatus) -> String {
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

/// Limits the host enforces on one worker process.
#[derive(Debug, Clone)]
pub struct WorkerLimits {
    /// Resident memory budget (MiB); the watchdog stops the worker above it.
    pub memory_mb: u64,
    /// Wall-clock limit per call.
    pub timeout: Duration,
    /// CPUs to pin the worker to (empty: no pinning).
    pub cpus: Vec<usize>,
    /// `CUDA_VISIBLE_DEVICES` for the worker.
    pub cuda_visible_devices: Option<String>,
    /// GPU memory budget (bytes); the NVML watchdog stops the worker above it (+ tolerance).
    pub gpu_memory_budget_bytes: Option<u64>,
}

/// GPU memory tolerance over the declared budget: the CUDA context itself (300–500 MiB on
/// H100/H200) is not part of what a framework's allocator counts, and allocators round up;
/// 512 MiB or 5 %, whichever is more.
pub fn gpu_tolerance_bytes(budget: u64) -> u64 {
    (512u64 << 20).max(budget / 20)
}

struct Watch {
    pid: u32,
    reason: Mutex<Option<NativeError>>,
    busy_since: Mutex<Option<Instant>>,
    stop: AtomicBool,
    stderr_tail: Mutex<std::collections::VecDeque<String>>,
}

fn rss_mb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

fn gpu_used_by(nvml: &nvml_wrapper::Nvml, pid: u32) -> u64 {
    let n = nvml.device_count().unwrap_or(0);
    let mut total = 0;
    for i in 0..n {
        let Ok(d) = nvml.device_by_index(i) else { continue };
        for p in d.running_compute_processes().unwrap_or_default() {
            if p.pid == pid
                && let nvml_wrapper::enums::device::UsedGpuMemory::Used(b) = p.used_gpu_memory
            {
                total += b;
            }
        }
    }
    total
}

fn kill(pid: u32) {
    // SAFETY: sending SIGKILL to our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

/// The host's handle on one worker process.
pub struct NativeWorker {
    /// Encoding buffer, reused from batch to batch.
    encoded: Vec<u8>,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    watch: Arc<Watch>,
    label: String,
}

impl NativeWorker {
    /// Start a worker for `plugin` and wait until its instance is created.
    pub fn spawn(
        label: &str,
        plugin: &Path,
        params: &serde_json::Value,
        context: &WorkerContext,
        limits: &WorkerLimits,
    ) -> Result<NativeWorker, NativeError> {
        NativeWorker::spawn_with(label, plugin, params, context, limits, &[])
    }

    /// [`NativeWorker::spawn`] with more worker arguments (`--wasm SPEC` for a WASM stage).
    pub fn spawn_with(
        label: &str,
        plugin: &Path,
        params: &serde_json::Value,
        context: &WorkerContext,
        limits: &WorkerLimits,
        extra: &[String],
    ) -> Result<NativeWorker, NativeError> {
        let mut cmd = Command::new(worker_exe());
        cmd.arg("worker")
            .args(extra)
            .arg(plugin)
            .arg("--params")
            .arg(params.to_string())
            .arg("--context")
            .arg(serde_json::to_string(context).unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if !limits.cpus.is_empty() {
            cmd.arg("--cpus").arg(limits.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","));
        }
        if let Some(d) = &limits.cuda_visible_devices {
            cmd.env("CUDA_VISIBLE_DEVICES", d);
        }
        let mut child = cmd.spawn().map_err(|e| NativeError::Spawn(format!("{}: {e}", worker_exe().display())))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            let _ = child.kill();
            return Err(NativeError::Spawn("no pipes".into()));
        };
        // 1 MiB pipes instead of 64 KiB: a 10 MB batch crosses in 10 wake-ups, not 160.
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            for fd in [stdin.as_raw_fd(), stdout.as_raw_fd()] {
                // SAFETY: fcntl on pipe descriptors we own; failure only leaves the default size.
                unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_BYTES) };
            }
        }
        let watch = Arc::new(Watch {
            pid: child.id(),
            reason: Mutex::new(None),
            busy_since: Mutex::new(None),
            stop: AtomicBool::new(false),
            stderr_tail: Mutex::new(Default::default()),
        });
        {
            let (watch, label) = (watch.clone(), label.to_string());
            let _ = std::thread::Builder::new().name("curator-worker-stderr".into()).spawn(move || {
                use std::io::BufRead;
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    tracing::debug!(stage = %label, "worker: {line}");
                    if let Ok(mut t) = watch.stderr_tail.lock() {
                        t.push_back(line);
                        if t.len() > 8 {
                            t.pop_front();
                        }
                    }
                }
            });
        }
        {
            let (watch, limits) = (watch.clone(), limits.clone());
            let _ = std::thread::Builder::new().name("curator-watchdog".into()).spawn(move || watchdog(&watch, &limits));
        }
        let mut w = NativeWorker {
            encoded: Vec::new(),
            child,
            stdin,
            stdout: BufReader::with_capacity(1 << 20, stdout),
            watch,
            label: label.to_string(),
        };
        match read_frame(&mut w.stdout) {
            Ok((TAG_READY, _)) => Ok(w),
            Ok((TAG_FATAL, msg)) => {
                let msg = String::from_utf8_lossy(&msg).into_owned();
                Err(if msg.starts_with("rejected its params: ") {
                    NativeError::InvalidParams(msg.trim_start_matches("rejected its params: ").into())
                } else {
                    NativeError::Spawn(msg)
                })
            }
            Ok((tag, _)) => Err(NativeError::Protocol(format!("unexpected frame {tag} at start"))),
            Err(_) => Err(w.death()),
        }
    }

    /// Why the worker is gone: the watchdog's reason, or how the process ended.
    fn death(&mut self) -> NativeError {
        let status = self.child.wait();
        if let Some(reason) = self.watch.reason.lock().ok().and_then(|mut r| r.take()) {
            return reason;
        }
        // Give the stderr thread a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(20));
        let tail: Vec<String> = self.watch.stderr_tail.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
        let status = status.map(describe_status).unwrap_or_else(|e| e.to_string());
        let last = tail.iter().rev().find(|l| !l.trim().is_empty()).cloned().unwrap_or_default();
        NativeError::WorkerDied(if last.is_empty() { status } else { format!("{status}; stderr: {last}") })
    }

    /// Process one batch in the worker.
    pub fn process(&mut self, batch: &RecordBatch) -> Result<(OutputKind, RecordBatch), NativeError> {
        to_ipc_into(batch, None, &mut self.encoded)?;
        if let Ok(mut b) = self.watch.busy_since.lock() {
            *b = Some(Instant::now());
        }
        let sent = write_frame(&mut self.stdin, TAG_BATCH, &self.encoded);
        let reply = sent.and_then(|_| read_frame(&mut self.stdout));
        if let Ok(mut b) = self.watch.busy_since.lock() {
            *b = None;
        }
        match reply {
            Ok((TAG_OUTPUT, payload)) => {
                let (batch, kind) = from_ipc(payload)?;
                Ok((OutputKind::parse(kind.as_deref().unwrap_or(""))?, batch))
            }
            Ok((TAG_ERROR, m)) => Err(NativeError::Failed(String::from_utf8_lossy(&m).into())),
            Ok((TAG_OOM, m)) => Err(NativeError::OutOfMemory(String::from_utf8_lossy(&m).into())),
            Ok((tag, _)) => Err(NativeError::Protocol(format!("unexpected frame {tag}"))),
            Err(_) => Err(self.death()),
        }
    }

    /// Resident memory of the worker process, in bytes.
    pub fn memory_bytes(&self) -> usize {
        rss_mb(self.watch.pid).unwrap_or(0) as usize * (1 << 20)
    }

    pub fn pid(&self) -> u32 {
        self.watch.pid
    }
}

impl Drop for NativeWorker {
    fn drop(&mut self) {
        self.watch.stop.store(true, Ordering::Relaxed);
        let _ = write_frame(&mut self.stdin, TAG_SHUTDOWN, &[]);
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                _ => {
                    tracing::debug!(stage = %self.label, "worker did not stop: killing it");
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
    }
}

/// Every 50 ms: RSS over budget or a call over its time limit stops the worker; every
/// 500 ms with a GPU budget, NVML's per-process GPU memory too.
fn watchdog(watch: &Watch, limits: &WorkerLimits) {
    let nvml = limits.gpu_memory_budget_bytes.and_then(|_| nvml_wrapper::Nvml::init().ok());
    let mut tick = 0u64;
    while !watch.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        tick += 1;
        let Some(rss) = rss_mb(watch.pid) else { return }; // the process is gone
        let mut verdict = None;
        if rss > limits.memory_mb {
            verdict = Some(NativeError::Watchdog(format!("resident memory {rss} MiB is over its budget of {} MiB", limits.memory_mb)));
        }
        let busy = watch.busy_since.lock().ok().and_then(|b| *b);
        if verdict.is_none() && busy.is_some_and(|t| t.elapsed() > limits.timeout) {
            verdict = Some(NativeError::Timeout(limits.timeout));
        }
        if verdict.is_none()
            && tick.is_multiple_of(10)
            && let (Some(nvml), Some(budget)) = (&nvml, limits.gpu_memory_budget_bytes)
        {
            let used = gpu_used_by(nvml, watch.pid);
            if used > budget + gpu_tolerance_bytes(budget) {
                verdict = Some(NativeError::Watchdog(format!(
                    "GPU memory {} MiB is over its budget of {} MiB (+{} MiB tolerance)",
                    used >> 20,
                    budget >> 20,
                    gpu_tolerance_bytes(budget) >> 20
                )));
            }
        }
        if let Some(v) = verdict {
            tracing::warn!("stopping worker process {}: {v}", watch.pid);
            if let Ok(mut r) = watch.reason.lock() {
                *r = Some(v);
            }
            kill(watch.pid);
            return;
        }
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
    (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect()
}

/// The CPUs of worker `k` of a stage whose workers need `cpus` cores each: consecutive
/// shares of `allowed`, wrapping around when there are more workers than cores.
pub fn cpu_share(allowed: &[usize], k: usize, cpus: f64) -> Vec<usize> {
    if allowed.is_empty() {
        return Vec::new();
    }
    let n = (cpus.ceil() as usize).clamp(1, allowed.len());
    (0..n).map(|j| allowed[(k * n + j) % allowed.len()]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_shares_are_consecutive_and_wrap() {
        let cpus: Vec<usize> = (0..8).collect();
        assert_eq!(cpu_share(&cpus, 0, 2.0), vec![0, 1]);
        assert_eq!(cpu_share(&cpus, 3, 2.0), vec![6, 7]);
        assert_eq!(cpu_share(&cpus, 4, 2.0), vec![0, 1]);
        assert_eq!(cpu_share(&cpus, 1, 0.5), vec![1]);
        assert_eq!(cpu_share(&cpus, 0, 64.0).len(), 8);
        assert!(cpu_share(&[], 0, 1.0).is_empty());
    }

    #[test]
    fn gpu_tolerance_is_the_larger_of_512_mib_and_5_percent() {
        assert_eq!(gpu_tolerance_bytes(1 << 30), 512 << 20);
        assert_eq!(gpu_tolerance_bytes(40 << 30), 2 << 30);
    }

    #[test]
    fn frames_round_trip_and_outputs_apply() {
        let mut buf = Vec::new();
        write_frame(&mut buf, TAG_BATCH, b"hello").unwrap();
        assert_eq!(read_frame(&mut std::io::Cursor::new(buf)).unwrap(), (TAG_BATCH, b"hello".to_vec()));
        let input =
            RecordBatch::try_from_iter([("text", Arc::new(arrow_array::StringArray::from(vec!["a", "b", "c"])) as arrow_array::ArrayRef)])
                .unwrap();
        let sel =
            RecordBatch::try_from_iter([("selection", Arc::new(arrow_array::UInt32Array::from(vec![0, 2])) as arrow_array::ArrayRef)])
                .unwrap();
        let mut bytes = Vec::new();
        to_ipc_into(&sel, Some(OutputKind::Selection), &mut bytes).unwrap();
        let (back, kind) = from_ipc(bytes).unwrap();
        assert_eq!(kind.as_deref(), Some("selection"));
        let kept = apply_output(&input, OutputKind::Selection, back).unwrap();
        assert_eq!(kept.num_rows(), 2);
        let bad =
            RecordBatch::try_from_iter([("selection", Arc::new(arrow_array::UInt32Array::from(vec![2, 1])) as arrow_array::ArrayRef)])
                .unwrap();
        assert!(apply_output(&input, OutputKind::Selection, bad).unwrap_err().to_string().contains("not ascending"));
        let cols =
            RecordBatch::try_from_iter([("score", Arc::new(arrow_array::Int64Array::from(vec![1, 2])) as arrow_array::ArrayRef)]).unwrap();
        assert!(apply_output(&input, OutputKind::Columns, cols).unwrap_err().to_string().contains("2 rows of columns for a batch of 3"));
    }
}
