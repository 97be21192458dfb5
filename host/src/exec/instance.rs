//! Stage instances for the executor: what a worker of a stage is given (placement, limits)
//! and how its instance starts, whichever back-end runs it. Planning uses the same path for
//! its throw-away setup check.

use crate::plan::PlannedStage;
use crate::stage::StageFailure;
use crate::wasm::InstanceLimits;
use crate::worker::{WasmWorkerSpec, WorkerLimits, WorkerPlugin, WorkerProcess};
use curator_core::placement::Assignment;
use curator_sdk::abi::WorkerContext;

use super::{Ctx, Loaded, RunError, warm};

pub(crate) use crate::stage::Instance;

/// Where worker `k` of a stage runs: its GPU assignment, if the stage needs one.
pub(crate) struct Placement {
    pub k: usize,
    pub gpu: Option<Assignment>,
}

/// The limits a worker process of `stage` runs under. Its memory budget is the stage's
/// reservation (`PlannedStage::memory`): reserved = enforced.
pub(crate) fn worker_limits(stage: &PlannedStage, allowed_cpus: &[usize], at: &Placement) -> WorkerLimits {
    WorkerLimits {
        memory_mb: stage.memory.process_mb.unwrap_or(stage.memory.reserved_mb),
        timeout: stage.timeout,
        cpus: curator_core::placement::cpu_share(allowed_cpus, at.k, stage.resources.cpus),
        cuda_visible_devices: at.gpu.as_ref().map(|a| a.devices.iter().map(|&d| crate::gpu::cuda_id(d)).collect::<Vec<_>>().join(",")),
        gpu_memory_budget_bytes: at.gpu.as_ref().map(|a| a.memory_budget_mb << 20),
    }
}

/// What a worker of `stage` is started with: its limits and the context its plugin gets.
fn start_of(
    stage: &PlannedStage,
    allowed_cpus: &[usize],
    cache_dir: Option<&std::path::Path>,
    at: &Placement,
    check_only: bool,
) -> (WorkerLimits, WorkerContext) {
    let limits = worker_limits(stage, allowed_cpus, at);
    let context = WorkerContext {
        worker: at.k,
        gpu_memory_budget_bytes: limits.gpu_memory_budget_bytes,
        cuda_visible_devices: limits.cuda_visible_devices.clone(),
        dirs: stage.grants.iter().map(|g| (g.name.clone(), g.host_path.display().to_string())).collect(),
        cache_dir: cache_dir.map(|d| d.display().to_string()),
        check_only,
        service: stage.service.clone(),
    };
    (limits, context)
}

/// Start an instance of `stage` (compiled as `loaded`) for worker `at`.
pub(crate) fn start_instance(
    stage: &PlannedStage,
    loaded: &Loaded,
    allowed_cpus: &[usize],
    cache_dir: Option<&std::path::Path>,
    at: &Placement,
    check_only: bool,
) -> Result<Instance, StageFailure> {
    let (limits, context) = start_of(stage, allowed_cpus, cache_dir, at, check_only);
    match loaded {
        Loaded::Wasm(plugin) => Ok(Box::new(plugin.instantiate(&stage.label, &stage.params, &instance_limits(stage))?)),
        Loaded::WasmWorker { .. } => {
            let l = instance_limits(stage);
            let spec = WasmWorkerSpec {
                label: stage.label.clone(),
                manifest: stage.plugin.manifest.clone(),
                memory_mb: l.memory_mb,
                grants: l.grants.iter().map(|g| (g.name.clone(), g.host_path.clone(), g.writable)).collect(),
                cache_dir: cache_dir.map(Into::into),
            };
            let w = WorkerProcess::spawn(&stage.label, &stage.plugin.path, WorkerPlugin::Wasm(&spec), &stage.params, &context, &limits)?;
            Ok(Box::new(w))
        }
        Loaded::RemoveIds(ids) => Ok(Box::new(crate::stage::remove_ids::RemoveIds { ids: ids.clone() })),
        Loaded::Native => {
            let w = WorkerProcess::spawn(&stage.label, &stage.plugin.path, WorkerPlugin::Native, &stage.params, &context, &limits)?;
            Ok(Box::new(w))
        }
    }
}

/// Start `stage` once in a throw-away instance (or worker), as its first worker would, and
/// stop it: whether its `setup` accepts the params and its plugin starts at all. Planning
/// calls it so that such mistakes stop a pipeline before anything is read or written.
pub fn check_setup(stage: &PlannedStage, runtime: &crate::wasm::WasmRuntime) -> Result<(), StageFailure> {
    if stage.builtin.is_some() {
        return Ok(());
    }
    let loaded = match (stage.plugin.manifest.kind, stage.isolation) {
        (curator_core::PluginKind::Native, _) => Loaded::Native,
        (_, curator_core::Isolation::Process) => Loaded::WasmWorker {
            from_cache: crate::worker::compile_wasm(&stage.plugin.path, stage.plugin.manifest.clone(), runtime)?.from_cache,
        },
        _ => Loaded::Wasm(Box::new(runtime.load(&stage.plugin.path, stage.plugin.manifest.clone())?)),
    };
    let at = Placement { k: 0, gpu: stage.gpu.first().cloned() };
    start_instance(stage, &loaded, &crate::os::allowed_cpus(), runtime.cache_dir(), &at, true)?.teardown();
    Ok(())
}

/// Start an instance of stage `i` for a worker of this run: one a serving host kept from an
/// earlier run when it was started exactly so, else a new one.
pub(crate) fn instantiate(ctx: &Ctx, i: usize, at: &Placement) -> Result<Instance, RunError> {
    let stage = &ctx.plan.stages[i];
    if let Some((pool, key)) = kept_key(ctx, i, at)
        && let Some(inst) = pool.take(&key)
    {
        tracing::debug!(stage = %stage.label, worker = at.k, "a kept instance");
        return Ok(inst);
    }
    start_instance(stage, &ctx.compiled[i], &ctx.allowed_cpus, ctx.cache_dir.as_deref(), at, false).map_err(|e| RunError::start(stage, e))
}

/// A worker of stage `i` is done with `inst`: a serving host keeps it for its next run when
/// this run has not failed; otherwise it is stopped.
pub(crate) fn release(ctx: &Ctx, i: usize, at: &Placement, inst: Instance) {
    match kept_key(ctx, i, at) {
        Some((pool, key)) if !ctx.cancelled() => pool.keep(warm::stage_key(&ctx.plan.stages[i]), key, ctx.run_number, inst),
        _ => inst.teardown(),
    }
}

/// The pool and the key of worker `at`'s instance of stage `i`, when this run keeps
/// instances (the host serves runs) and the stage's can be kept (not the host's own stages).
fn kept_key<'a>(ctx: &'a Ctx, i: usize, at: &Placement) -> Option<(&'a warm::WarmPool, String)> {
    let pool = ctx.warm.as_deref()?;
    let stage = &ctx.plan.stages[i];
    if stage.builtin.is_some() {
        return None;
    }
    Some((pool, start_key(stage, &ctx.allowed_cpus, ctx.cache_dir.as_deref(), at)))
}

/// What a kept instance of `stage` must have been started with to serve worker `at`: the
/// stage, the sandbox and memory limits, the GPU assignment and budget, the grants. Not the
/// worker's index or its share of the CPUs: workers take their GPU assignments in the order
/// their threads start, so an instance started as one worker of a stage may serve another
/// with the same assignment (it keeps the context and CPU share it was started with).
fn start_key(stage: &PlannedStage, allowed_cpus: &[usize], cache_dir: Option<&std::path::Path>, at: &Placement) -> String {
    let (limits, context) = start_of(stage, allowed_cpus, cache_dir, at, false);
    let limits = WorkerLimits { cpus: Vec::new(), ..limits };
    let context = WorkerContext { worker: 0, ..context };
    format!("{}|{limits:?}|{context:?}|{:?}", warm::stage_key(stage), instance_limits(stage))
}

/// What a run of `plan` asks a serving host's pool for, per stage: its [`warm::stage_key`]
/// and, for a GPU stage (whose workers are placed at planning), the start of each of its
/// workers; kept instances of a GPU stage started otherwise hold card memory this run's
/// workers may need, and are stopped before it starts.
pub(crate) fn wanted(plan: &crate::plan::Plan, allowed_cpus: &[usize], cache_dir: Option<&std::path::Path>) -> Vec<warm::Wanted> {
    plan.stages
        .iter()
        .map(|s| warm::Wanted {
            stage: warm::stage_key(s),
            gpu_starts: (!s.gpu.is_empty())
                .then(|| s.gpu.iter().map(|a| start_key(s, allowed_cpus, cache_dir, &Placement { k: 0, gpu: Some(a.clone()) })).collect()),
        })
        .collect()
}

/// The sandbox limits of a WASM instance of `stage`.
pub(crate) fn instance_limits(stage: &PlannedStage) -> InstanceLimits {
    InstanceLimits {
        memory_mb: stage.memory.guest_cap_mb.unwrap_or(stage.memory.reserved_mb),
        timeout: stage.timeout,
        grants: stage.grants.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::PluginEntry;
    use curator_core::{Isolation, Manifest, PluginKind, memory_budget};

    fn stage(kind: PluginKind, isolation: Isolation) -> PlannedStage {
        let kind_name = if kind == PluginKind::Native { "native" } else { "wasm" };
        let manifest = Manifest::from_json(
            serde_json::json!({
                "name": "s", "version": "1.0.0", "kind": kind_name,
                "abi": {"major": curator_core::ABI_MAJOR, "minor": curator_core::ABI_MINOR},
                "params_schema": {"type": "object"}
            })
            .to_string()
            .as_bytes(),
        )
        .unwrap();
        let mut s = PlannedStage {
            index: 0,
            label: "s".into(),
            resources: manifest.resources.clone(),
            plugin: PluginEntry { manifest, path: "s".into(), size: 0, standing: crate::trust::Standing::Unsigned },
            params: serde_json::json!({}),
            batch_size: None,
            timeout: std::time::Duration::from_secs(1),
            grants: Vec::new(),
            isolation,
            memory: curator_core::MemoryBudget { reserved_mb: 0, guest_cap_mb: None, process_mb: None },
            num_workers: None,
            gpu: Vec::new(),
            builtin: None,
            service: None,
            text_field: None,
        };
        s.memory = memory_budget(&s.resources, s.runs());
        s
    }

    #[test]
    fn a_stage_without_memory_mb_is_reserved_exactly_what_its_worker_is_allowed() {
        let at = Placement { k: 0, gpu: None };
        for (kind, isolation) in [(PluginKind::Native, Isolation::Process), (PluginKind::Wasm, Isolation::Process)] {
            let s = stage(kind, isolation);
            assert_eq!(s.resources.memory_mb, None);
            let reserved = crate::plan::capacity::load(&s, None).memory_mb;
            let allowed = worker_limits(&s, &[0], &at).memory_mb;
            assert_eq!(reserved, allowed, "{kind:?} {isolation:?}");
        }
        let s = stage(PluginKind::Wasm, Isolation::InProcess);
        assert_eq!(crate::plan::capacity::load(&s, None).memory_mb, instance_limits(&s).memory_mb);
    }

    #[test]
    fn a_kept_instance_is_known_by_its_plugin_file_params_and_grants() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.wasm");
        std::fs::write(&file, b"one").unwrap();
        let mut s = stage(PluginKind::Wasm, Isolation::InProcess);
        s.plugin.path = file.clone();
        let key = warm::stage_key(&s);
        assert_eq!(key, warm::stage_key(&s.clone()), "the same stage, the same key");
        let mut other = s.clone();
        other.params = serde_json::json!({"min_words": 3});
        assert_ne!(warm::stage_key(&other), key, "other params");
        let mut granted = s.clone();
        granted.grants.push(crate::wasm::DirGrant { name: "models".into(), host_path: dir.path().into(), writable: false });
        assert_ne!(warm::stage_key(&granted), key, "another grant");
        // The plugin file replaced (another inode, size, times): its old instances are stale.
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, b"two, longer").unwrap();
        assert_ne!(warm::stage_key(&s), key, "the plugin file changed");
    }

    #[test]
    fn a_kept_gpu_worker_serves_any_worker_index_with_its_card_and_budget() {
        let s = stage(PluginKind::Native, Isolation::Process);
        let card = |d: u32| Assignment { devices: vec![d], share: 0.5, memory_budget_mb: 8192 };
        let key = |k, d| start_key(&s, &[0, 1, 2, 3], None, &Placement { k, gpu: Some(card(d)) });
        assert_eq!(key(0, 1), key(1, 1), "workers take their cards in the order their threads start");
        assert_ne!(key(0, 0), key(0, 1), "another card");
        let other_budget =
            start_key(&s, &[0, 1, 2, 3], None, &Placement { k: 0, gpu: Some(Assignment { memory_budget_mb: 4096, ..card(1) }) });
        assert_ne!(other_budget, key(0, 1), "another budget");
    }
}
