//! Each stage of a pipeline resolved: its plugin found, params checked against the
//! manifest's schema, resources merged and validated, memory decided, grants matched.

use std::path::Path;
use std::time::Duration;

use curator_core::dedup::{Device, Shingle};
use curator_core::pipeline::DEFAULT_TIMEOUT_S;
use curator_core::pipeline::{DedupStep, Step};
use curator_core::{DedupMethod, Isolation, MemoryBudget, PipelineSpec, SpecError, StageSpec, memory_budget, validate_params};

use super::{PlannedStage, resolve};
use crate::io::Loc;
use crate::registry::Registry;
use crate::wasm::DirGrant;

/// The stages of `spec` that resolve, and where a dedup step's barrier falls (the number of
/// planned stages in front of it). A fuzzy dedup step adds the `minhash` stage in front of
/// its barrier; `remove_ids` steps become built-in stages. A mistake in one stage is pushed to
/// `errors` (with its path) and the others are still checked.
pub(super) fn plan_stages(
    spec: &PipelineSpec,
    label: &str,
    base: &Path,
    registry: &Registry,
    errors: &mut Vec<SpecError>,
) -> (Vec<PlannedStage>, Option<usize>) {
    let mut stages = Vec::new();
    let mut barrier = None;
    for (i, step) in spec.stages.iter().enumerate() {
        match step {
            Step::Plugin(s) => stages.extend(plan_plugin(spec, i, s, label, base, registry, errors)),
            Step::Dedup(d) => {
                if d.dedup.method == DedupMethod::Fuzzy {
                    if registry.get(MINHASH_PLUGIN).is_none() {
                        errors.push(SpecError::new(
                            label,
                            format!("stages[{i}].dedup"),
                            format!(
                                "method: fuzzy computes signatures with the {MINHASH_PLUGIN:?} plugin, which is not installed in {}",
                                registry.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    } else {
                        let s = minhash_stage(step.label(), d);
                        stages.extend(plan_plugin(spec, i, &s, label, base, registry, errors));
                    }
                }
                barrier = Some(stages.len());
            }
            Step::RemoveIds(r) => {
                let paths: Vec<Loc> = r
                    .remove_ids
                    .path
                    .as_vec()
                    .into_iter()
                    .filter_map(|p| match Loc::parse(p, base) {
                        Ok(Loc::Local(path)) if !path.exists() => {
                            errors.push(SpecError::new(
                                label,
                                format!("stages[{i}].remove_ids.path"),
                                format!("{} does not exist", path.display()),
                            ));
                            None
                        }
                        Ok(l) => Some(l),
                        Err(e) => {
                            errors.push(SpecError::new(label, format!("stages[{i}].remove_ids.path"), e.to_string()));
                            None
                        }
                    })
                    .collect();
                stages.push(remove_ids_stage(i, step.label(), paths, &r.remove_ids.field, spec));
            }
        }
    }
    (stages, barrier)
}

/// The plugin that computes MinHash signatures for fuzzy dedup.
pub const MINHASH_PLUGIN: &str = "minhash";

/// The planned stage of a `remove_ids` step at `stages[index]`.
fn remove_ids_stage(index: usize, label: &str, paths: Vec<Loc>, field: &str, spec: &curator_core::PipelineSpec) -> PlannedStage {
    let manifest = curator_core::Manifest::from_json(
        serde_json::json!({
            "name": "remove_ids", "version": env!("CARGO_PKG_VERSION"), "kind": "wasm",
            "abi": {"major": curator_core::ABI_MAJOR, "minor": curator_core::ABI_MINOR},
            "description": "drop documents whose id is listed",
            "resources": {"cpus": 1.0, "memory_mb": 256},
            "input_columns": [crate::io::ID],
            "params_schema": {"type": "object"}
        })
        .to_string()
        .as_bytes(),
    )
    .expect("the built-in manifest is valid");
    let resources = manifest.resources.clone();
    let mut s = PlannedStage {
        index,
        label: label.to_string(),
        plugin: crate::registry::PluginEntry {
            manifest,
            path: "(built in) remove_ids".into(),
            size: 0,
            standing: crate::trust::Standing::BuiltIn,
        },
        params: serde_json::json!({}),
        resources,
        batch_size: None,
        timeout: std::time::Duration::from_secs_f64(spec.timeout_s.unwrap_or(curator_core::pipeline::DEFAULT_TIMEOUT_S)),
        grants: Vec::new(),
        isolation: curator_core::Isolation::InProcess,
        memory: curator_core::MemoryBudget { reserved_mb: 0, guest_cap_mb: None, process_mb: None },
        num_workers: None,
        gpu: Vec::new(),
        builtin: Some(super::Builtin::RemoveIds { paths, field: field.to_string() }),
        service: None,
        text_field: None,
    };
    s.memory = curator_core::memory_budget(&s.resources, s.runs());
    s
}

/// The `minhash` stage a fuzzy dedup step runs in front of its barrier. With `device: auto`
/// it keeps the plugin's GPU request when this machine has a GPU and runs on the CPU
/// otherwise (the signatures are the same).
fn minhash_stage(label: &str, d: &DedupStep) -> StageSpec {
    let p = d.dedup.fuzzy();
    let (char_ngrams, word_ngrams) = match p.shingle {
        Shingle::Chars(n) => (n, 0),
        Shingle::Words(n) => (24, n),
    };
    let gpu = match d.dedup.device {
        Device::Cpu => false,
        Device::Gpu => true,
        Device::Auto => word_ngrams == 0 && !crate::gpu::discover().gpus.is_empty(),
    };
    let mut resources = d.resources.clone().unwrap_or_default();
    if !gpu && resources.gpus.is_none() && resources.gpu_memory_gb.is_none() {
        resources.gpu_memory_gb = Some(0.0);
    }
    StageSpec {
        plugin: MINHASH_PLUGIN.into(),
        name: Some(format!("{label}.minhash")),
        params: serde_json::json!({
            "char_ngrams": char_ngrams,
            "word_ngrams": word_ngrams,
            "num_hashes": p.num_hashes(),
            "seed": p.seed,
            "device": if gpu { "gpu" } else { "cpu" },
        }),
        resources: Some(resources),
        batch_size: d.dedup.batch_size,
        timeout_s: None,
        isolation: None,
        grants: Default::default(),
        num_workers: d.dedup.num_workers,
        service: None,
        text_field: None,
        rejected: None,
        tee: None,
    }
}

/// Why a stage name resolves to nothing: what is installed, or where nothing was found, and
/// what the trust check refused.
fn unknown_hint(registry: &Registry) -> String {
    let known = registry.names();
    let hint = if known.is_empty() {
        format!("no plugins found in {}", registry.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))
    } else {
        format!("installed: {}", known.join(", "))
    };
    let refused: Vec<String> = registry.refused.iter().map(|(p, why)| format!("{} {why}", p.display())).collect();
    if refused.is_empty() { hint } else { format!("{hint}; refused by the trust check: {}", refused.join("; ")) }
}

/// The directories `stages[i]` is granted, matched to what its manifest requests (read-only
/// unless both say writable); every mismatch goes to `errors`.
fn plan_grants(
    i: usize,
    s: &StageSpec,
    m: &curator_core::Manifest,
    label: &str,
    base: &Path,
    errors: &mut Vec<SpecError>,
) -> Vec<DirGrant> {
    let at = |field: &str| format!("stages[{i}].{field}");
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
                // A writable grant that does not exist yet is created once the plan holds
                // (`plan::create_writable_grants`), like an output directory.
                let to_create = g.writable() && !host_path.exists();
                if !host_path.is_dir() && !to_create {
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
    grants
}

/// One plugin stage resolved, or `None` (with its mistakes in `errors`).
fn plan_plugin(
    spec: &PipelineSpec,
    i: usize,
    s: &StageSpec,
    label: &str,
    base: &Path,
    registry: &Registry,
    errors: &mut Vec<SpecError>,
) -> Option<PlannedStage> {
    {
        let at = |field: &str| format!("stages[{i}].{field}");
        let entry = match registry.resolve(&s.plugin) {
            Some(Ok(e)) => Some(e),
            Some(Err(why)) => {
                errors.push(SpecError::new(label, at("plugin"), why));
                return None;
            }
            None => None,
        };
        let Some(entry) = entry else {
            errors.push(SpecError::new(label, at("plugin"), format!("unknown stage {:?} ({})", s.plugin, unknown_hint(registry))));
            return None;
        };
        if let Some(w) = entry.standing.warning() {
            tracing::warn!("{label}: {}: {} {w} (trust: any; `trust: signed` would refuse it)", at("plugin"), entry.path.display());
        }
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
        if s.service.is_some() && m.kind == curator_core::PluginKind::Wasm {
            errors.push(SpecError::new(
                label,
                at("service"),
                format!("{:?} is a WASM stage: its sandbox has no network, so only a native stage reaches a service", s.plugin),
            ));
        }
        if let Some(f) = &s.text_field
            && (f.is_empty() || f.starts_with('_') || f == "id")
        {
            errors.push(SpecError::new(label, at("text_field"), format!("{f:?} is not a column a stage may take as its text")));
        }
        let grants = plan_grants(i, s, m, label, base, errors);
        let isolation = match (m.kind, s.isolation) {
            (curator_core::PluginKind::Wasm, i) => i.unwrap_or(Isolation::InProcess),
            (_, Some(Isolation::InProcess)) => {
                errors.push(SpecError::new(label, at("isolation"), "a native stage always runs in a worker process (isolation: process)"));
                Isolation::Process
            }
            (_, _) => Isolation::Process,
        };
        // A stage written for a GPU that the pipeline runs on the CPU gets calls a CPU
        // finishes in time, unless the pipeline sizes them itself.
        let (batch_size, timeout_s) = curator_core::call_defaults(
            &m.resources,
            &resources,
            (m.batch_size, s.batch_size),
            s.timeout_s.or(spec.timeout_s),
            DEFAULT_TIMEOUT_S,
        );
        if curator_core::on_cpu_instead(&m.resources, &resources) {
            tracing::info!(
                "{label}: {}: {:?} is written for a GPU and runs on the CPU: {} document(s) a call, {timeout_s} s per call (batch_size and timeout_s change them)",
                at("resources"),
                s.label(),
                batch_size.map_or("every".to_string(), |b| b.to_string()),
            );
        }
        let mut planned = PlannedStage {
            index: i,
            label: s.label().to_string(),
            plugin: entry.clone(),
            params: s.params.clone(),
            resources,
            batch_size,
            timeout: Duration::from_secs_f64(timeout_s),
            grants,
            isolation,
            memory: MemoryBudget { reserved_mb: 0, guest_cap_mb: None, process_mb: None },
            num_workers: s.num_workers,
            gpu: Vec::new(),
            builtin: None,
            service: s.service.as_deref().map(|name| super::services::context(spec, name)),
            text_field: s.text_field.clone().filter(|f| f != "text"),
        };
        planned.memory = memory_budget(&planned.resources, planned.runs());
        Some(planned)
    }
}
