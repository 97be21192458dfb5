//! What a stage asks of the machine: `cpus`, `gpus` or `gpu_memory_gb` (never both), `memory_mb`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default per-instance memory cap of a WASM stage (its linear memory), in MiB.
pub const DEFAULT_MEMORY_MB: u64 = 512;
/// Default resident-memory budget of a native worker process, in MiB (a GPU framework's host
/// side alone takes hundreds of MiB).
pub const DEFAULT_NATIVE_MEMORY_MB: u64 = 4096;
/// What a WASM worker process (`isolation: process`) may hold beyond its guest's linear
/// memory: the worker's own code, the compiled stage, the batch arenas. MiB.
pub const WASM_WORKER_OVERHEAD_MB: u64 = 512;

/// Where a stage's instances run, as far as memory is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// A WASM instance in the host process: only its linear memory is capped.
    WasmInProcess,
    /// A WASM instance in a worker process: linear memory capped, the process watched.
    WasmWorker,
    /// A native library in a worker process: the process watched.
    NativeWorker,
}

/// A stage's memory, decided once: what the scheduler reserves per worker is what the worker
/// is allowed (and stopped above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    /// Reserved per worker when counting how many workers fit, MiB.
    pub reserved_mb: u64,
    /// Linear-memory cap of a WASM instance, MiB.
    pub guest_cap_mb: Option<u64>,
    /// Resident-memory limit of a worker process (the watchdog's), MiB.
    pub process_mb: Option<u64>,
}

/// The memory policy: `memory_mb` when the stage (or the pipeline) sets it, else the default
/// for where it runs.
pub fn memory_budget(r: &Resources, runs: Runs) -> MemoryBudget {
    match runs {
        Runs::WasmInProcess => {
            let cap = r.memory_mb.unwrap_or(DEFAULT_MEMORY_MB);
            MemoryBudget { reserved_mb: cap, guest_cap_mb: Some(cap), process_mb: None }
        }
        Runs::WasmWorker => {
            let cap = r.memory_mb.unwrap_or(DEFAULT_MEMORY_MB);
            let process = cap + WASM_WORKER_OVERHEAD_MB;
            MemoryBudget { reserved_mb: process, guest_cap_mb: Some(cap), process_mb: Some(process) }
        }
        Runs::NativeWorker => {
            let process = r.memory_mb.unwrap_or(DEFAULT_NATIVE_MEMORY_MB);
            MemoryBudget { reserved_mb: process, guest_cap_mb: None, process_mb: Some(process) }
        }
    }
}

/// The resources one worker of a stage needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// CPU cores per worker (> 0; fractions allowed, e.g. 0.5).
    #[serde(default = "default_cpus")]
    pub cpus: f64,
    /// Whole GPUs per worker, or a fraction < 1 of one GPU. Exclusive with `gpu_memory_gb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
    /// GPU memory per worker in GB, placed as a share of one device. Exclusive with `gpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gb: Option<f64>,
    /// Memory cap per worker in MiB (WASM linear memory for WASM stages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
}

fn default_cpus() -> f64 {
    1.0
}

impl Default for Resources {
    fn default() -> Self {
        Resources { cpus: 1.0, gpus: None, gpu_memory_gb: None, memory_mb: None }
    }
}

/// Why a resource request is invalid. Each message names the field(s) at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResourceError {
    #[error("cpus: must be > 0, found {0}")]
    CpusNotPositive(f64),
    #[error("gpus and gpu_memory_gb are both set ({gpus} and {gpu_memory_gb}); set only one")]
    BothGpuKinds { gpus: f64, gpu_memory_gb: f64 },
    #[error("{field}: must not be negative, found {value}")]
    Negative { field: &'static str, value: f64 },
    #[error("{field}: must be a finite number, found {value}")]
    NotFinite { field: &'static str, value: f64 },
    #[error("gpus: a value of 1 or more must be a whole number of devices, found {0}")]
    FractionalMultiGpu(f64),
    #[error("memory_mb: must be > 0")]
    ZeroMemory,
}

/// Documents per call of a stage written for a GPU that runs on the CPU instead
/// ([`on_cpu_instead`]), when the pipeline sets no `batch_size` for it: the manifest's batch
/// keeps a GPU's passes full (thousands of documents), which a CPU takes minutes over.
pub const CPU_INSTEAD_BATCH_SIZE: usize = 64;
/// The per-call limit of such a stage when the pipeline sets no `timeout_s`: a model's
/// f32 reference path is one to two orders of magnitude slower than the GPU it was sized for.
pub const CPU_INSTEAD_TIMEOUT_S: f64 = 600.0;

/// Whether a stage whose manifest asks for a GPU runs on the CPU instead: the pipeline's
/// `resources` override takes its GPU away (`gpu_memory_gb: 0` or `gpus: 0`).
pub fn on_cpu_instead(manifest: &Resources, planned: &Resources) -> bool {
    manifest.needs_gpu() && !planned.needs_gpu()
}

/// (documents per call, per-call limit in seconds) of a stage: the pipeline's settings when
/// given, else the defaults for where it runs.
pub fn call_defaults(
    manifest: &Resources,
    planned: &Resources,
    (manifest_batch, set_batch): (Option<usize>, Option<usize>),
    set_timeout_s: Option<f64>,
    default_timeout_s: f64,
) -> (Option<usize>, f64) {
    let cpu = on_cpu_instead(manifest, planned);
    let batch = set_batch.or(match cpu {
        true => Some(manifest_batch.map_or(CPU_INSTEAD_BATCH_SIZE, |b| b.min(CPU_INSTEAD_BATCH_SIZE))),
        false => manifest_batch,
    });
    let timeout = set_timeout_s.unwrap_or(if cpu { default_timeout_s.max(CPU_INSTEAD_TIMEOUT_S) } else { default_timeout_s });
    (batch, timeout)
}

impl Resources {
    /// Check the invariants of a resource request.
    pub fn validate(&self) -> Result<(), ResourceError> {
        let fields = [("cpus", Some(self.cpus)), ("gpus", self.gpus), ("gpu_memory_gb", self.gpu_memory_gb)];
        for (field, value) in fields {
            if let Some(value) = value {
                if !value.is_finite() {
                    return Err(ResourceError::NotFinite { field, value });
                }
                if value < 0.0 {
                    return Err(ResourceError::Negative { field, value });
                }
            }
        }
        if let (Some(gpus), Some(gpu_memory_gb)) = (self.gpus, self.gpu_memory_gb) {
            return Err(ResourceError::BothGpuKinds { gpus, gpu_memory_gb });
        }
        if self.cpus <= 0.0 {
            return Err(ResourceError::CpusNotPositive(self.cpus));
        }
        if let Some(g) = self.gpus
            && g >= 1.0
            && g.fract() != 0.0
        {
            return Err(ResourceError::FractionalMultiGpu(g));
        }
        if self.memory_mb == Some(0) {
            return Err(ResourceError::ZeroMemory);
        }
        Ok(())
    }

    /// Whether this request needs a GPU at all.
    pub fn needs_gpu(&self) -> bool {
        self.gpus.is_some_and(|g| g > 0.0) || self.gpu_memory_gb.is_some_and(|g| g > 0.0)
    }

    /// A pipeline override applied over the manifest's request: fields set in `over` win.
    pub fn overridden_by(&self, over: &ResourceOverride) -> Resources {
        let mut r = self.clone();
        if let Some(c) = over.cpus {
            r.cpus = c;
        }
        if over.gpus.is_some() || over.gpu_memory_gb.is_some() {
            // Switching GPU kind in an override replaces the manifest's GPU request whole.
            r.gpus = over.gpus;
            r.gpu_memory_gb = over.gpu_memory_gb;
        }
        if over.memory_mb.is_some() {
            r.memory_mb = over.memory_mb;
        }
        r
    }

    /// How many workers of this request fit on `cores` CPU cores (at least one).
    pub fn workers_on(&self, cores: usize) -> usize {
        self.workers_on_capacity(cores as f64)
    }

    /// How many workers fit in `capacity` cores, which may be fractional (at least one).
    pub fn workers_on_capacity(&self, capacity: f64) -> usize {
        // A small epsilon keeps 0.95 × 20 cores / 1 cpu at 19, not 18, through rounding.
        ((capacity / self.cpus) + 1e-9).floor().max(1.0) as usize
    }
}

/// The `resources:` block of a pipeline stage: every field optional, set fields win.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_memory_is_what_the_worker_is_allowed() {
        let none = Resources { memory_mb: None, ..Resources::default() };
        for runs in [Runs::WasmInProcess, Runs::WasmWorker, Runs::NativeWorker] {
            let b = memory_budget(&none, runs);
            let enforced = b.process_mb.or(b.guest_cap_mb).unwrap();
            assert_eq!(b.reserved_mb, enforced, "{runs:?}");
        }
        assert_eq!(memory_budget(&none, Runs::NativeWorker).process_mb, Some(DEFAULT_NATIVE_MEMORY_MB));
        let set = Resources { memory_mb: Some(100), ..Resources::default() };
        assert_eq!(
            memory_budget(&set, Runs::WasmWorker),
            MemoryBudget { reserved_mb: 612, guest_cap_mb: Some(100), process_mb: Some(612) }
        );
    }

    fn r(cpus: f64, gpus: Option<f64>, gpu_memory_gb: Option<f64>) -> Resources {
        Resources { cpus, gpus, gpu_memory_gb, memory_mb: None }
    }

    #[test]
    fn valid_requests() {
        for ok in [r(1.0, None, None), r(0.5, Some(1.0), None), r(2.0, Some(0.25), None), r(1.0, None, Some(16.0)), r(1.0, Some(4.0), None)]
        {
            assert_eq!(ok.validate(), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn both_gpu_kinds_named() {
        let err = r(1.0, Some(1.0), Some(8.0)).validate().unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("gpus") && msg.contains("gpu_memory_gb"), "{msg}");
    }

    #[test]
    fn invalid_requests() {
        assert_eq!(r(0.0, None, None).validate(), Err(ResourceError::CpusNotPositive(0.0)));
        assert_eq!(r(-1.0, None, None).validate(), Err(ResourceError::Negative { field: "cpus", value: -1.0 }));
        assert_eq!(r(1.0, Some(-0.5), None).validate(), Err(ResourceError::Negative { field: "gpus", value: -0.5 }));
        assert_eq!(r(1.0, None, Some(-2.0)).validate(), Err(ResourceError::Negative { field: "gpu_memory_gb", value: -2.0 }));
        assert_eq!(r(1.0, Some(1.5), None).validate(), Err(ResourceError::FractionalMultiGpu(1.5)));
        assert!(matches!(r(f64::NAN, None, None).validate(), Err(ResourceError::NotFinite { .. })));
        let zero_mem = Resources { memory_mb: Some(0), ..Resources::default() };
        assert_eq!(zero_mem.validate(), Err(ResourceError::ZeroMemory));
    }

    #[test]
    fn override_replaces_gpu_kind_whole() {
        let base = r(1.0, Some(1.0), None);
        let o = ResourceOverride { gpu_memory_gb: Some(10.0), ..Default::default() };
        let merged = base.overridden_by(&o);
        assert_eq!(merged.gpus, None);
        assert_eq!(merged.gpu_memory_gb, Some(10.0));
        assert_eq!(merged.validate(), Ok(()));
    }

    #[test]
    fn workers_fit_cores() {
        assert_eq!(r(1.0, None, None).workers_on(8), 8);
        assert_eq!(r(3.0, None, None).workers_on(8), 2);
        assert_eq!(r(0.5, None, None).workers_on(2), 4);
        assert_eq!(r(16.0, None, None).workers_on(2), 1);
    }

    #[test]
    fn a_gpu_stage_on_the_cpu_gets_small_calls_and_a_long_limit_unless_told() {
        let gpu = Resources { gpu_memory_gb: Some(4.0), ..Resources::default() };
        let cpu = Resources { gpu_memory_gb: Some(0.0), ..Resources::default() };
        // On its GPU: the manifest's batch, the default limit.
        assert_eq!(call_defaults(&gpu, &gpu, (Some(8192), None), None, 60.0), (Some(8192), 60.0));
        // On the CPU instead: 64 documents a call, ten minutes a call.
        assert_eq!(call_defaults(&gpu, &cpu, (Some(8192), None), None, 60.0), (Some(64), 600.0));
        assert_eq!(call_defaults(&gpu, &cpu, (Some(16), None), None, 60.0), (Some(16), 600.0));
        // What the pipeline sets wins.
        assert_eq!(call_defaults(&gpu, &cpu, (Some(8192), Some(500)), Some(30.0), 60.0), (Some(500), 30.0));
        // A CPU stage is not one.
        assert_eq!(call_defaults(&cpu, &cpu, (None, None), None, 60.0), (None, 60.0));
    }
}
