//! Worker processes: where native stages (and WASM stages with `isolation: process`) run, so
//! that a segfault, abort, leak or endless loop costs a worker, never the run.
//!
//! - `process.rs`: the host's handle ([`WorkerProcess`], a [`crate::stage::StageCall`]);
//! - `watchdog.rs`: RAM, time and GPU budgets, enforced from outside the worker;
//! - `protocol.rs`: control frames on the worker's stdin/stdout;
//! - `arena.rs`: the two shared-memory arenas batches travel through;
//! - `layout/`: how a batch is written into them and read back (checked);
//! - `serve.rs`: the worker's side (`curator-host worker …`);
//! - `ffi.rs`: the C ABI from the loading side (libraries and their instances).

pub mod arena;
pub mod ffi;
pub mod layout;
pub mod process;
pub mod protocol;
pub mod serve;
pub mod watchdog;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use curator_core::Manifest;
use serde::{Deserialize, Serialize};

pub use process::{WorkerPlugin, WorkerProcess};
pub use watchdog::{WorkerLimits, gpu_tolerance_bytes, gpu_used_by};

use crate::stage::StageFailure;
use crate::wasm::{CompiledPlugin, DirGrant, InstanceLimits, WasmRuntime};

pub use crate::os::{set_worker_exe, worker_command, worker_exe};

/// A native plugin's manifest JSON, read in a throw-away worker process (the caller checks it:
/// `registry::read_manifest`).
pub fn read_manifest_json(path: &Path) -> Result<String, StageFailure> {
    let out = worker_command()
        .arg("worker")
        .arg(path)
        .arg("--manifest")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| StageFailure::Load(format!("cannot start a worker process: {e}")))?;
    let mut cursor = std::io::Cursor::new(out.stdout);
    match protocol::read_frame(&mut cursor) {
        Ok((protocol::TAG_MANIFEST, json)) => {
            String::from_utf8(json).map_err(|e| StageFailure::Load(format!("{}: manifest is not UTF-8: {e}", path.display())))
        }
        Ok((protocol::TAG_FATAL, msg)) => Err(StageFailure::Load(String::from_utf8_lossy(&msg).into())),
        _ => Err(StageFailure::WorkerDied(crate::os::describe_status(out.status))),
    }
}

/// What the host tells a WASM worker about its instance (`--wasm` JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WasmWorkerSpec {
    pub label: String,
    /// The plugin's manifest, as the host's registry read and checked it (the worker does not
    /// read plugin files' manifests itself: that is the registry's job, one floor up).
    pub manifest: Manifest,
    /// Linear-memory cap of the instance.
    pub memory_mb: u64,
    /// Granted directories: (name the guest sees, host path, writable).
    pub grants: Vec<(String, PathBuf, bool)>,
    /// On-disk cache of compiled artifacts (`None`: compile every time).
    pub cache_dir: Option<PathBuf>,
}

impl WasmWorkerSpec {
    pub fn limits(&self) -> InstanceLimits {
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

/// Compile (or load from the cache) a WASM plugin as workers run it: without deadline checks
/// (the watchdog stops a worker whose call runs over; those checks cost ~20 % of heavy guest
/// code). The host calls it once per stage before starting workers, so each worker only
/// loads the cached artifact.
pub fn compile_wasm(path: &Path, manifest: Manifest, runtime: &WasmRuntime) -> Result<CompiledPlugin, StageFailure> {
    Ok(runtime.for_workers()?.load(path, manifest)?)
}
