//! Each stage of a pipeline resolved: its plugin found, params checked against the
//! manifest's schema, resources merged and validated, memory decided, grants matched.

use std::path::Path;
use std::time::Duration;

use curator_core::pipeline::DEFAULT_TIMEOUT_S;
use curator_core::{Isolation, MemoryBudget, PipelineSpec, SpecError, memory_budget, validate_params};

use super::{PlannedStage, resolve};
use crate::registry::Registry;
use crate::wasm::DirGrant;

/// The stages of `spec` that resolve; a mistake in one is pushed to `errors` (with its path)
/// and the others are still checked.
pub(super) fn plan_stages(
    spec: &PipelineSpec,
    label: &str,
    base: &Path,
    registry: &Registry,
    errors: &mut Vec<SpecError>,
) -> Vec<PlannedStage> {
    let mut stages = Vec::new();
    for (i, s) in spec.stages.iter().enumerate() {
        let at = |field: &str| format!("stages[{i}].{field}");
        let Some(entry) = registry.get(&s.plugin) else {
            let known = registry.names();
            let hint = if known.is_empty() {
                format!("no plugins found in {}", registry.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))
            } else {
                format!("installed: {}", known.join(", "))
            };
            errors.push(SpecError::new(label, at("plugin"), format!("unknown stage {:?} ({hint})", s.plugin)));
            continue;
        };
        let m = &entry.manifest;
        for e in validate_params(&m.params_schema, &s.params, &at("params")) {
            errors.push(SpecError::new(label, e.path, e.message));
        }
        let resources = match &s.resources {
            Some(o) => m.resources.overridden_by(o),
            None => m.resources.clone(),
        };
        if let Err(e) = resources.validate() {
            errors.push(SpecError::new(label, at("resources"), e.to_string()));
        } else if resources.needs_gpu() && m.kind == curator_core::PluginKind::Wasm {
            errors.push(SpecError::new(
                label,
                at("resources"),
                format!("{:?} is a WASM stage and runs on CPU; gpus and gpu_memory_gb need a native plugin", s.plugin),
            ));
        }
        let mut grants = Vec::new();
        for (name, g) in &s.grants {
            match m.permissions.directories.iter().find(|d| &d.name == name) {
                None => {
                    let requested: Vec<&str> = m.permissions.directories.iter().map(|d| d.name.as_str()).collect();
                    errors.push(SpecError::new(
                        label,
                        at(&format!("grants.{name}")),
                        format!(
                            "plugin {:?} does not request a directory named {name:?} (it requests: {})",
                            s.plugin,
                            if requested.is_empty() { "none".to_string() } else { requested.join(", ") }
                        ),
                    ));
                }
                Some(req) => {
                    if g.writable() && !req.writable {
                        errors.push(SpecError::new(
                            label,
                            at(&format!("grants.{name}")),
                            "plugin asks for read-only access; a writable grant is refused",
                        ));
                    }
                    let host_path = resolve(base, g.path());
                    if !host_path.is_dir() {
                        errors.push(SpecError::new(
                            label,
                            at(&format!("grants.{name}")),
                            format!("{} is not a directory", host_path.display()),
                        ));
                    }
                    grants.push(DirGrant { name: name.clone(), host_path, writable: g.writable() });
                }
            }
        }
        for req in &m.permissions.directories {
            if !s.grants.contains_key(&req.name) {
                errors.push(SpecError::new(
                    label,
                    at("grants"),
                    format!("plugin {:?} requests directory {:?}; grant it with grants: {{{}: PATH}}", s.plugin, req.name, req.name),
                ));
            }
        }
        let isolation = match (m.kind, s.isolation) {
            (curator_core::PluginKind::Wasm, i) => i.unwrap_or(Isolation::InProcess),
            (_, Some(Isolation::InProcess)) => {
                errors.push(SpecError::new(label, at("isolation"), "a native stage always runs in a worker process (isolation: process)"));
                Isolation::Process
            }
            (_, _) => Isolation::Process,
        };
        let timeout_s = s.timeout_s.or(spec.timeout_s).unwrap_or(DEFAULT_TIMEOUT_S);
        let mut planned = PlannedStage {
            index: i,
            label: s.label().to_string(),
            plugin: entry.clone(),
            params: s.params.clone(),
            resources,
            batch_size: s.batch_size.or(m.batch_size),
            timeout: Duration::from_secs_f64(timeout_s),
            grants,
            isolation,
            memory: MemoryBudget { reserved_mb: 0, guest_cap_mb: None, process_mb: None },
            num_workers: s.num_workers,
            gpu: Vec::new(),
        };
        planned.memory = memory_budget(&planned.resources, planned.runs());
        stages.push(planned);
    }
    stages
}
