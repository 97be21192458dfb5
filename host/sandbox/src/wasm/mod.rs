//! The WASM stage runtime: one [`WasmRuntime`] (engine, linker, epoch ticker, artifact cache)
//! per process; one [`CompiledPlugin`] per plugin file; one [`StageInstance`] per worker.
//!
//! Enforced per instance: a linear-memory cap ([`MemoryCap`]), a wall-clock deadline per call
//! (epoch interruption), no filesystem but the granted directories, no sockets, no
//! environment, no inherited stdio (guest stderr is captured, and shown when it traps).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use curator_core::Manifest;

use crate::plugin_facts::FileId;
use crate::stage::{StageCall, StageFailure, StageOutput};

pub mod columns;

/// Host bindings of the `curator:stage` world.
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../sdk/wit",
        world: "stage",
    });
}

use bindings::curator::stage::types as wit;

/// Interval of the epoch ticker; deadlines are rounded up to it.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Bytes of guest stderr kept for error messages.
const STDERR_CAPTURE: usize = 16 * 1024;

/// Why a WASM plugin could not be compiled or instantiated. (What a running instance does
/// wrong is a [`StageFailure`].)
#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    #[error("{path}: cannot read plugin: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: cannot compile plugin: {message}")]
    Compile { path: PathBuf, message: String },
    #[error("cannot instantiate: {0}")]
    Instantiate(String),
    #[error("cannot grant directory {name:?} ({path}): {message}")]
    Grant { name: String, path: PathBuf, message: String },
}

impl From<WasmError> for StageFailure {
    fn from(e: WasmError) -> StageFailure {
        StageFailure::Load(e.to_string())
    }
}

/// A plugin file as a runtime memoizes it: its path and its identity when it was read.
type PluginFile = (PathBuf, Option<FileId>);

/// The engine and everything shared by all plugins of a run.
pub struct WasmRuntime {
    engine: Engine,
    linker: Linker<HostState>,
    cache_dir: Option<PathBuf>,
    stop_ticker: Arc<AtomicBool>,
    /// Whether compiled code checks the per-call deadline (epoch interruption).
    deadline_checks: bool,
    /// Components compiled by this runtime, by plugin file and its identity (and whether each
    /// came from the disk cache): planning's setup check and the run compile a plugin once
    /// between them, and a serving host (`curator-host serve`) once for all its runs, until
    /// the file changes.
    compiled: std::sync::Mutex<std::collections::HashMap<PluginFile, (Component, bool)>>,
    /// The runtime for code that worker processes run (no deadline checks), made on demand.
    for_workers: std::sync::OnceLock<Box<WasmRuntime>>,
}

impl Drop for WasmRuntime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

struct ShaHasher(Sha256);
impl std::hash::Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl WasmRuntime {
    /// Create the engine. `cache_dir: None` disables the on-disk artifact cache.
    pub fn new(cache_dir: Option<PathBuf>) -> Result<WasmRuntime, WasmError> {
        WasmRuntime::with_deadline_checks(cache_dir, true)
    }

    /// An engine whose compiled code does not check a per-call deadline: for a worker
    /// process, which the host stops from outside when a call runs over (`isolation:
    /// process`). Without the checks at every loop and call, heavy guest code runs ~20 %
    /// faster. A run never uses it in the host process, where nothing could stop a guest's
    /// endless loop (`curator-host bench` does, to time what the workers run).
    pub fn without_deadline_checks(cache_dir: Option<PathBuf>) -> Result<WasmRuntime, WasmError> {
        WasmRuntime::with_deadline_checks(cache_dir, false)
    }

    fn with_deadline_checks(cache_dir: Option<PathBuf>, deadline_checks: bool) -> Result<WasmRuntime, WasmError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(deadline_checks);
        if std::env::var_os("CURATOR_WASM_PERFMAP").is_some() {
            // /tmp/perf-PID.map names the compiled guest functions for `perf report`.
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(|e| WasmError::Compile { path: PathBuf::new(), message: e.to_string() })?;
        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| WasmError::Instantiate(e.to_string()))?;
        bindings::Stage::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| WasmError::Instantiate(e.to_string()))?;

        let stop_ticker = Arc::new(AtomicBool::new(!deadline_checks));
        if deadline_checks {
            let (weak_engine, stop) = (engine.weak(), stop_ticker.clone());
            std::thread::Builder::new()
                .name("curator-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        match weak_engine.upgrade() {
                            Some(e) => e.increment_epoch(),
                            None => break,
                        }
                    }
                })
                .map_err(|e| WasmError::Instantiate(format!("cannot start epoch ticker: {e}")))?;
        }
        Ok(WasmRuntime {
            engine,
            linker,
            cache_dir,
            stop_ticker,
            deadline_checks,
            compiled: Default::default(),
            for_workers: Default::default(),
        })
    }

    /// The runtime that compiles what worker processes run (`isolation: process`): same
    /// cache, no deadline checks. Made once per runtime.
    pub fn for_workers(&self) -> Result<&WasmRuntime, WasmError> {
        if let Some(r) = self.for_workers.get() {
            return Ok(r);
        }
        let r = WasmRuntime::without_deadline_checks(self.cache_dir.clone())?;
        Ok(self.for_workers.get_or_init(|| Box::new(r)))
    }

    /// Where compiled artifacts are cached (`None`: not cached).
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// Cache key of a plugin: sha256 of its bytes + the engine's compatibility hash.
    fn cache_path(&self, wasm: &[u8]) -> Option<PathBuf> {
        let dir = self.cache_dir.as_ref()?;
        let mut h = ShaHasher(Sha256::new());
        std::hash::Hash::hash(&self.engine.precompile_compatibility_hash(), &mut h);
        let engine_key = hex::encode(&h.0.finalize()[..8]);
        let wasm_key = hex::encode(Sha256::digest(wasm));
        Some(dir.join("wasm").join(format!("{wasm_key}-{engine_key}.cwasm")))
    }

    /// Compile (or load from the cache) the plugin at `path`.
    pub fn load(&self, path: &Path, manifest: Manifest) -> Result<CompiledPlugin, WasmError> {
        let key = (path.to_path_buf(), FileId::of(path));
        let memo = self.compiled.lock().ok().and_then(|m| m.get(&key).cloned());
        let (component, from_cache) = match memo {
            Some(c) => c,
            None => {
                let c = self.compile(path)?;
                if let Ok(mut m) = self.compiled.lock() {
                    m.insert(key, c.clone());
                }
                c
            }
        };
        let pre =
            self.linker.instantiate_pre(&component).map_err(|e| WasmError::Compile { path: path.into(), message: format!("{e:#}") })?;
        let pre = bindings::StagePre::new(pre)
            .map_err(|e| WasmError::Compile { path: path.into(), message: format!("not a curator stage: {e:#}") })?;
        Ok(CompiledPlugin {
            engine: self.engine.clone(),
            pre,
            manifest,
            path: path.into(),
            from_cache,
            deadline_checks: self.deadline_checks,
        })
    }

    /// Compile the plugin at `path`, or load it from the disk cache (then `true`).
    fn compile(&self, path: &Path) -> Result<(Component, bool), WasmError> {
        let bytes = std::fs::read(path).map_err(|source| WasmError::Read { path: path.into(), source })?;
        let cached = self.cache_path(&bytes);
        let mut from_cache = false;
        let mut component = None;
        if let Some(cp) = cached.as_ref().filter(|p| p.exists()) {
            // SAFETY: the file was written by `Component::serialize` of an engine with the same
            // compatibility hash (it is in the file name), atomically (temp + rename), into a
            // cache directory owned by the user running the host. A corrupt or foreign file is
            // rejected by wasmtime's header checks and recompiled below.
            match unsafe { Component::deserialize_file(&self.engine, cp) } {
                Ok(c) => {
                    component = Some(c);
                    from_cache = true;
                }
                Err(e) => tracing::warn!("ignoring unusable cached artifact {}: {e}", cp.display()),
            }
        }
        let component = match component {
            Some(c) => c,
            None => {
                let c = Component::new(&self.engine, &bytes)
                    .map_err(|e| WasmError::Compile { path: path.into(), message: format!("{e:#}") })?;
                if let Some(cp) = &cached
                    && let Err(e) = write_atomic(cp, &c)
                {
                    tracing::warn!("cannot cache compiled plugin at {}: {e}", cp.display());
                }
                c
            }
        };
        Ok((component, from_cache))
    }
}

fn write_atomic(path: &Path, component: &Component) -> std::io::Result<()> {
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// A directory handed to a stage.
#[derive(Debug, Clone)]
pub struct DirGrant {
    /// Name the manifest requested; the guest sees it at `/<name>`.
    pub name: String,
    pub host_path: PathBuf,
    pub writable: bool,
}

/// Limits of one instance.
#[derive(Debug, Clone)]
pub struct InstanceLimits {
    pub memory_mb: u64,
    pub timeout: Duration,
    pub grants: Vec<DirGrant>,
}

/// A plugin compiled and linked, ready to instantiate per worker.
pub struct CompiledPlugin {
    engine: Engine,
    pre: bindings::StagePre<HostState>,
    pub manifest: Manifest,
    pub path: PathBuf,
    /// Whether the compiled artifact came from the on-disk cache.
    pub from_cache: bool,
    /// Whether its code checks the per-call deadline (see [`WasmRuntime::without_deadline_checks`]).
    pub deadline_checks: bool,
}

/// Per-store state.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryCap,
    label: String,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl bindings::curator::stage::types::Host for HostState {}

impl bindings::curator::stage::log::Host for HostState {
    fn log(&mut self, level: wit::Level, message: String) {
        let label = &self.label;
        match level {
            wit::Level::Trace => tracing::trace!(stage = %label, "{message}"),
            wit::Level::Debug => tracing::debug!(stage = %label, "{message}"),
            wit::Level::Info => tracing::info!(stage = %label, "{message}"),
            wit::Level::Warn => tracing::warn!(stage = %label, "{message}"),
            wit::Level::Error => tracing::error!(stage = %label, "{message}"),
        }
    }
}

/// Caps linear memory; growing past the cap traps with a message naming the cap.
pub struct MemoryCap {
    cap_bytes: usize,
    /// Set when the cap was hit, so the trap can be reported as out-of-memory.
    hit: Option<usize>,
    /// Linear memory in use (all memories of the instance; memories never shrink).
    current: usize,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.cap_bytes {
            self.hit = Some(desired);
            return Err(wasmtime::Error::msg(format!("memory cap of {} MiB exceeded", self.cap_bytes >> 20)));
        }
        self.current += desired.saturating_sub(current);
        Ok(true)
    }
    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// One running instance of a stage (one per worker).
pub struct StageInstance {
    store: Store<HostState>,
    stage: bindings::Stage,
    stderr: MemoryOutputPipe,
    timeout: Duration,
    cap_mb: u64,
    deadline_checks: bool,
}

impl CompiledPlugin {
    /// Instantiate with `limits` and call `setup(params)`.
    pub fn instantiate(&self, label: &str, params: &serde_json::Value, limits: &InstanceLimits) -> Result<StageInstance, StageFailure> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stderr(stderr.clone()).allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
        for g in &limits.grants {
            let perms = if g.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
            wasi.preopened_dir(&g.host_path, format!("/{}", g.name), perms).map_err(|e| {
                StageFailure::from(WasmError::Grant { name: g.name.clone(), path: g.host_path.clone(), message: e.to_string() })
            })?;
        }
        let cap_bytes = usize::try_from(limits.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        let state = HostState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: MemoryCap { cap_bytes, hit: None, current: 0 },
            label: label.to_string(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        if self.deadline_checks {
            store.epoch_deadline_trap();
            store.set_epoch_deadline(deadline_ticks(limits.timeout));
        }
        let stage = match self.pre.instantiate(&mut store) {
            Ok(s) => s,
            Err(e) => {
                let tail = stderr_tail(&stderr);
                return Err(classify(e, &store, limits.timeout, limits.memory_mb, tail));
            }
        };
        let mut inst = StageInstance {
            store,
            stage,
            stderr,
            timeout: limits.timeout,
            cap_mb: limits.memory_mb,
            deadline_checks: self.deadline_checks,
        };
        let params_json = params.to_string();
        match inst.guarded(|stage, store| stage.call_setup(store, &params_json))? {
            Ok(()) => Ok(inst),
            Err(e) => Err(stage_error(e)),
        }
    }
}

fn deadline_ticks(timeout: Duration) -> u64 {
    (timeout.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64).max(1) + 1
}

fn stderr_tail(pipe: &MemoryOutputPipe) -> String {
    let bytes = pipe.contents();
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(" (stage stderr: {})", text.lines().rev().take(6).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(" | "))
    }
}

/// A stage's own error (`stage-error`) as a failure.
fn stage_error(e: wit::StageError) -> StageFailure {
    match e {
        wit::StageError::InvalidParams(m) => StageFailure::InvalidParams(m),
        wit::StageError::Failed(m) => StageFailure::Failed(m),
        wit::StageError::OutOfMemory(m) => StageFailure::OutOfMemory(m),
    }
}

fn classify(err: wasmtime::Error, store: &Store<HostState>, timeout: Duration, cap_mb: u64, stderr: String) -> StageFailure {
    if let Some(wanted) = store.data().limiter.hit {
        return StageFailure::MemoryCap { cap_mb, wanted_mb: (wanted as u64).div_ceil(1 << 20) };
    }
    if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return StageFailure::Timeout(timeout);
    }
    let message = match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(), // "wasm trap: …"
        None => format!("{err:#}").lines().next().unwrap_or_default().to_string(),
    };
    StageFailure::Trap(format!("{message}{stderr}"))
}

impl StageInstance {
    /// Run one guest call under the deadline, classifying traps.
    fn guarded<R>(&mut self, f: impl FnOnce(&bindings::Stage, &mut Store<HostState>) -> wasmtime::Result<R>) -> Result<R, StageFailure> {
        if self.deadline_checks {
            self.store.set_epoch_deadline(deadline_ticks(self.timeout));
        }
        match f(&self.stage, &mut self.store) {
            Ok(r) => Ok(r),
            Err(e) => {
                let tail = stderr_tail(&self.stderr);
                Err(classify(e, &self.store, self.timeout, self.cap_mb, tail))
            }
        }
    }

    /// Process one batch in the guest's own form; the output is not yet checked.
    pub fn process(&mut self, batch: &wit::Batch) -> Result<wit::Output, StageFailure> {
        self.guarded(|stage, store| stage.call_process(store, batch))?.map_err(stage_error)
    }

    /// The manifest the running guest reports (should equal its custom section).
    pub fn manifest(&mut self) -> Result<String, StageFailure> {
        self.guarded(|stage, store| stage.call_manifest(store))
    }

    /// Linear memory the instance has grown to, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limiter.current
    }

    /// Call `teardown`; errors are logged, not returned.
    pub fn teardown(mut self) {
        if let Err(e) = self.guarded(|stage, store| stage.call_teardown(store)) {
            tracing::debug!("teardown failed: {e}");
        }
    }
}

impl StageCall for StageInstance {
    fn call(&mut self, input: &arrow_array::RecordBatch) -> Result<StageOutput, StageFailure> {
        let out = self.process(&crate::wasm::columns::to_wit(input, &["*".to_string()]))?;
        crate::wasm::columns::output_from_wit(out, input.num_rows())
    }

    fn memory_bytes(&self) -> usize {
        StageInstance::memory_bytes(self)
    }

    fn teardown(self: Box<Self>) {
        StageInstance::teardown(*self)
    }
}
