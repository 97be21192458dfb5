//! The pipeline's `services:` as the run starts them: how many replicas, and on which GPUs
//! (placed in the same pass as the GPU stages' workers, `checks::place_gpu_stages`, so a
//! card a service holds is never given to a stage).

use curator_core::placement::{Assignment, GpuRequest};
use curator_core::service::{ServiceSpec, base_url};

/// One service of the plan.
#[derive(Debug, Clone)]
pub struct PlannedService {
    pub name: String,
    pub spec: ServiceSpec,
    /// A server the host starts: one entry per replica, its GPUs (`None`: a CPU server).
    /// Empty for an endpoint.
    pub replicas: Vec<Option<Assignment>>,
    /// An endpoint's base URL.
    pub endpoint: Option<String>,
    /// Where its command runs: the pipeline file's directory, so relative paths in it (a
    /// model file) resolve as the pipeline's other paths do.
    pub cwd: std::path::PathBuf,
}

impl PlannedService {
    /// What its GPU placement asks for, if it needs GPUs.
    pub fn gpu_request(&self) -> Option<GpuRequest> {
        self.spec.command.as_ref().and(GpuRequest::from_resources(&self.spec.resources))
    }

    /// Cores its replicas hold on this machine.
    pub fn cpus(&self) -> f64 {
        self.spec.resources.cpus * self.replicas.len() as f64
    }
}

/// The services of a checked spec, before GPU placement: CPU servers get their replicas
/// (default one), GPU ones get theirs from placement, endpoints none.
pub fn plan_services(spec: &curator_core::PipelineSpec, base: &std::path::Path) -> Vec<PlannedService> {
    spec.services
        .iter()
        .map(|(name, s)| {
            let endpoint = s.endpoint.as_deref().and_then(|u| base_url(u).ok());
            let gpu = GpuRequest::from_resources(&s.resources).is_some();
            let replicas = match (&s.command, gpu) {
                (Some(_), false) => vec![None; s.replicas.unwrap_or(1)],
                _ => Vec::new(),
            };
            PlannedService { name: name.clone(), spec: s.clone(), replicas, endpoint, cwd: base.to_path_buf() }
        })
        .collect()
}

/// What a stage whose entry names service `name` is told of it at planning: its name, key
/// variable and model, and an endpoint's URL (a started service's come when it starts).
pub fn context(spec: &curator_core::PipelineSpec, name: &str) -> curator_sdk::abi::ServiceContext {
    let s = spec.services.get(name);
    curator_sdk::abi::ServiceContext {
        name: name.to_string(),
        urls: s.and_then(|s| s.endpoint.as_deref()).and_then(|u| base_url(u).ok()).into_iter().collect(),
        api_key_env: s.and_then(|s| s.api_key_env.clone()),
        model: s.and_then(|s| s.model.clone()),
        limit_file: Some(limit_file(name).display().to_string()),
    }
}

/// Where the workers of this host process that reach service `name` keep their one in-flight
/// limit (`curator_llm::SharedLimit`): the same file for every run of a serving host, so a
/// kept worker and a new one share it. A run removes it when it ends (`exec/run.rs`).
pub fn limit_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("curator-{}-{name}.limit", std::process::id()))
}
