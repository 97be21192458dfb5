//! What the host decided for this worker process (its GPU memory budget, visible devices,
//! granted directories), set once by the C ABI's `create` and read by the stage and the SDK.

/// What a plugin's `create` gets from the host besides params.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerContext {
    /// Index of the worker within its stage.
    #[serde(default)]
    pub worker: usize,
    /// GPU memory this worker may use, in bytes (its `gpu_memory_gb`, or the devices' memory
    /// for `gpus`); a framework should cap its allocator here. The host's watchdog stops a
    /// worker that goes over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_budget_bytes: Option<u64>,
    /// `CUDA_VISIBLE_DEVICES` as set for the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    /// The directories the pipeline granted the stage: name → host path. A native stage is
    /// not sandboxed; this tells it where its grants are (see `granted_path`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub dirs: std::collections::BTreeMap<String, String>,
    /// The host's cache directory (absent with `--no-cache`): where a stage may keep what it
    /// compiles at start-up (GPU kernels, say) for the next worker or run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
    /// This instance only checks the set-up while a run is planned, and is dropped right
    /// after `init`: validate params and inputs, but leave devices alone (a GPU stage need
    /// not load its model onto the card).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_only: bool,
    /// The model server the pipeline gave this stage (its `service:`), once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceContext>,
}

/// A model server a stage may send requests to: an OpenAI-compatible API at each URL.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServiceContext {
    /// The service's name in the pipeline's `services:`.
    pub name: String,
    /// Each replica's base URL (`http://127.0.0.1:PORT`, no `/v1`). Empty in a set-up check,
    /// which runs before services start.
    #[serde(default)]
    pub urls: Vec<String>,
    /// The environment variable holding the API key, if the server wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The model requests name; `None`: the first the server lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A file the service's workers keep one in-flight limit in (each maps it), so their
    /// requests together follow one limit; `None`: each worker its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_file: Option<String>,
}

static CONTEXT: std::sync::Mutex<Option<WorkerContext>> = std::sync::Mutex::new(None);

/// What the host decided for this worker process: its GPU memory budget and visible devices.
/// Default (empty) outside a worker.
pub fn context() -> WorkerContext {
    CONTEXT.lock().ok().and_then(|c| c.clone()).unwrap_or_default()
}

pub(crate) fn set_context(c: WorkerContext) {
    if let Ok(mut slot) = CONTEXT.lock() {
        *slot = Some(c);
    }
}
