//! A WASM stage in a worker process (`isolation: process`): `curator-host worker PLUGIN.wasm
//! --wasm LIMITS` serves it over the native workers' protocol (Arrow IPC frames on
//! stdin/stdout), so the host runs, times, restarts and stops it exactly as it does a native
//! stage.
//!
//! The sandbox is the same as in the host (linear-memory cap, only the granted directories,
//! no sockets, no environment), but the compiled code does not check a deadline at every
//! loop and call: the host's watchdog kills the process when a call runs over its time
//! limit. That is what makes heavy guest code faster here (those checks cost ~20 %); the
//! price is one copy of each batch to the worker and of the (small) answer back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::native::{self, TAG_ERROR, TAG_FATAL, TAG_OOM, write_frame};
use crate::wasm::{CompiledPlugin, DirGrant, InstanceLimits, StageInstance, WasmError, WasmRuntime};

/// What the host tells a WASM worker about its instance (`--wasm` JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WasmWorkerSpec {
    pub label: String,
    /// Linear-memory cap of the instance.
    pub memory_mb: u64,
    /// Granted directories: (name the guest sees, host path, writable).
    pub grants: Vec<(String, PathBuf, bool)>,
    /// Columns the stage reads (the host sends exactly these).
    pub input_columns: Vec<String>,
    /// On-disk cache of compiled artifacts (`None`: compile every time).
    pub cache_dir: Option<PathBuf>,
}

impl WasmWorkerSpec {
    fn limits(&self) -> InstanceLimits {
        InstanceLimits {
            memory_mb: self.memory_mb,
            // Not enforced in here (the code has no deadline checks): the host's watchdog does.
            timeout: Duration::MAX,
            grants: self
                .grants
                .iter()
                .map(|(name, host_path, writable)| DirGrant { name: name.clone(), host_path: host_path.clone(), writable: *writable })
                .collect(),
        }
    }
}

/// Compile (or load from the cache) a plugin as workers run it: without deadline checks.
/// The host calls it once per stage before starting workers, so each worker only loads the
/// cached artifact.
pub fn compile(path: &Path, manifest: curator_core::Manifest, cache_dir: Option<PathBuf>) -> Result<CompiledPlugin, WasmError> {
    WasmRuntime::without_deadline_checks(cache_dir)?.load(path, manifest)
}

/// `curator-host worker PLUGIN.wasm --wasm SPEC`: serve one WASM stage until told to stop.
pub fn serve(plugin: &Path, params: &str, spec: &WasmWorkerSpec, cpus: &[usize]) -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let fatal = |out: &mut std::io::StdoutLock<'_>, msg: String| {
        let _ = write_frame(out, TAG_FATAL, msg.as_bytes());
        3
    };
    if !cpus.is_empty() {
        native::set_affinity(cpus);
    }
    native::keep_large_allocations();
    let manifest = match crate::registry::read_manifest(plugin) {
        Ok(m) => m,
        Err(e) => return fatal(&mut out, e.to_string()),
    };
    let params: serde_json::Value = match serde_json::from_str(params) {
        Ok(p) => p,
        Err(e) => return fatal(&mut out, format!("--params is not JSON: {e}")),
    };
    let compiled = match compile(plugin, manifest, spec.cache_dir.clone()) {
        Ok(c) => c,
        Err(e) => return fatal(&mut out, e.to_string()),
    };
    let start = || compiled.instantiate(&spec.label, &params, &spec.limits());
    let mut inst = match start() {
        Ok(i) => i,
        Err(WasmError::InvalidParams(m)) => return fatal(&mut out, format!("rejected its params: {m}")),
        Err(e) => return fatal(&mut out, e.to_string()),
    };
    let code = native::serve_batches(&mut out, |payload, encoded| {
        let Err(e) = call(&mut inst, payload, &spec.input_columns, encoded) else { return Ok(()) };
        let (tag, lost) = match &e {
            WorkerFailure::Wasm(WasmError::OutOfMemory { .. }) => (TAG_OOM, true),
            WorkerFailure::Wasm(WasmError::Trap { .. } | WasmError::Timeout(_)) => (TAG_ERROR, true),
            _ => (TAG_ERROR, false),
        };
        if lost {
            // the instance is in an unknown state: a fresh one for the next batch
            inst = match start() {
                Ok(i) => i,
                Err(e2) => return Err((TAG_FATAL, format!("{e}; cannot restart the stage: {e2}"))),
            };
        }
        // the host adds "returned an error: " to what a stage says itself
        Err((
            tag,
            match e {
                WorkerFailure::Wasm(WasmError::Failed(m)) => m,
                e => e.to_string(),
            },
        ))
    });
    if code == 0 {
        inst.teardown();
    }
    code
}

#[derive(Debug, thiserror::Error)]
enum WorkerFailure {
    #[error(transparent)]
    Wasm(#[from] WasmError),
    #[error(transparent)]
    Protocol(#[from] native::NativeError),
    #[error(transparent)]
    Output(#[from] crate::columns::InvalidOutput),
}

/// One batch: decode, call the guest, encode its answer as the native protocol's output.
fn call(inst: &mut StageInstance, payload: Vec<u8>, inputs: &[String], encoded: &mut Vec<u8>) -> Result<(), WorkerFailure> {
    let (batch, _) = native::decode_ipc(payload, true)?;
    let out = inst.process(&crate::columns::to_wit(&batch, inputs))?;
    let (kind, out) = crate::columns::to_native_output(out, batch.num_rows())?;
    native::to_ipc_into(&out, Some(kind), encoded)?;
    Ok(())
}
