//! The checks that make a plan impossible before anything is read: an output directory in
//! use, GPUs that are not there, memory that is not there, a stage that refuses to start.

use curator_core::SpecError;
use curator_core::placement::{GpuRequest, GpuStage};

use super::PlannedStage;
use super::SetupCheck;
use crate::io::Loc;

/// What a directory holds that a run with `mode: error` must not mix with: `None` when it is
/// absent or holds no file (temp files of killed runs, empty folders and the spill directory
/// do not count).
pub(super) fn holds_outputs(dir: &Loc) -> Option<String> {
    match dir {
        Loc::Local(d) => {
            let mut found = Vec::new();
            let mut stack = vec![d.clone()];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let path = e.path();
                    if path.is_dir() {
                        if !super::workdirs::IN_OUTPUT_DIR.contains(&name.as_str()) {
                            stack.push(path);
                        }
                    } else {
                        // A spool's temp file, or a run lock, is not an output.
                        let spooling = name.starts_with('.') && name.contains(".tmp-");
                        if spooling || crate::io::run_lock::is_lock_file(&name) {
                            continue;
                        }
                        found.push(path.strip_prefix(d).unwrap_or(&path).display().to_string());
                    }
                }
            }
            found.sort();
            let first = found.first()?;
            Some(format!("{} file{} (e.g. {first})", found.len(), if found.len() == 1 { "" } else { "s" }))
        }
        other => other.join(crate::io::writer::OutputManifest::NAME).exists().then(|| "a _manifest.json of another run".to_string()),
    }
}

/// Place the GPU stages' workers and the GPU services' replicas on this machine's GPUs
/// (`core::placement::place_stages`), in one pass: a service's replicas are a fixed count
/// (default: one per card the request fits on), the stages as many as fit, or `num_workers`.
/// One error per stage or service that cannot be placed.
pub(super) fn place_gpu_stages(
    label: &str,
    stages: &mut [PlannedStage],
    services: &mut [super::services::PlannedService],
    cores: f64,
) -> Vec<SpecError> {
    enum Who {
        Stage(usize),
        Service(usize),
    }
    let mut wanted: Vec<(Who, GpuStage)> = Vec::new();
    let inventory_needed =
        stages.iter().any(|s| GpuRequest::from_resources(&s.resources).is_some()) || services.iter().any(|s| s.gpu_request().is_some());
    if !inventory_needed {
        return Vec::new();
    }
    let inventory = crate::gpu::discover();
    for (k, s) in services.iter().enumerate() {
        let Some(request) = s.gpu_request() else { continue };
        let fixed = s.spec.replicas.unwrap_or_else(|| curator_core::placement::max_workers(&inventory.gpus, request).max(1));
        wanted.push((
            Who::Service(k),
            GpuStage { stage: format!("service {}", s.name), request, fixed: Some(fixed), cpus: s.spec.resources.cpus },
        ));
    }
    for (k, s) in stages.iter().enumerate() {
        let Some(request) = GpuRequest::from_resources(&s.resources) else { continue };
        wanted.push((Who::Stage(k), GpuStage { stage: s.label.clone(), request, fixed: s.num_workers, cpus: s.resources.cpus }));
    }
    let requests: Vec<GpuStage> = wanted.iter().map(|(_, g)| g.clone()).collect();
    match curator_core::placement::place_stages(&inventory.gpus, &requests, cores) {
        Ok(assignments) => {
            for ((who, _), a) in wanted.iter().zip(assignments) {
                match who {
                    Who::Stage(k) => stages[*k].gpu = a,
                    Who::Service(k) => services[*k].replicas = a.into_iter().map(Some).collect(),
                }
            }
            Vec::new()
        }
        Err(e) => {
            let e = match e {
                curator_core::placement::PlacementError::NoGpus { stage, needs, .. } => {
                    curator_core::placement::PlacementError::NoGpus { stage, needs, detail: inventory.note.clone().unwrap_or_default() }
                }
                e => e,
            };
            let msg = e.to_string();
            if let Some(s) = services.iter().find(|s| msg.contains(&format!("service {}", s.name))) {
                return vec![SpecError::new(label, format!("services.{}.resources", s.name), msg)];
            }
            let first_stage = wanted.iter().find_map(|(w, _)| match w {
                Who::Stage(k) => Some(stages[*k].index),
                Who::Service(_) => None,
            });
            let at = stages.iter().find(|s| msg.contains(&format!("{:?}", s.label))).map(|s| s.index).or(first_stage).unwrap_or(0);
            vec![SpecError::new(label, format!("stages[{at}].resources"), msg)]
        }
    }
}

/// One worker of every stage must fit in the memory this machine can give workers.
pub(super) fn check_memory(label: &str, stages: &[PlannedStage]) -> Vec<SpecError> {
    let Some(available) = crate::os::available_memory_mb() else { return Vec::new() };
    let share = curator_core::scaling::WORKER_MEMORY_SHARE;
    let budget = (available as f64 * share) as u64;
    let reserved: u64 = stages.iter().map(|s| s.memory.reserved_mb).sum();
    if reserved <= budget {
        return Vec::new();
    }
    let largest = stages.iter().max_by_key(|s| s.memory.reserved_mb).map(|s| s.index).unwrap_or(0);
    vec![SpecError::new(
        label,
        format!("stages[{largest}].resources.memory_mb"),
        format!(
            "one worker per stage needs {reserved} MiB but this machine can give workers {budget} MiB ({:.0} % of {available} MiB available); lower memory_mb",
            share * 100.0
        ),
    )]
}

/// `sink.mode: error` writes only into an empty directory: an error when `dir` holds outputs,
/// unless they are an interrupted run's (its journal `journal_name` is there, and `restart`
/// is not asked).
pub(super) fn check_output_empty(label: &str, dir: &Loc, restart: bool, journal_name: &str) -> Option<SpecError> {
    if !restart && crate::io::journal::Journal::load(dir, journal_name).is_some() {
        return None;
    }
    let why = holds_outputs(dir)?;
    Some(SpecError::new(
        label,
        "sink.path",
        format!(
            "{} already holds {why}; with sink.mode: error a run writes only into an empty directory (choose another, or set mode: overwrite, append or ignore)",
            dir.display()
        ),
    ))
}

/// Start each stage that planned cleanly once, in a throw-away instance or worker
/// (`check`, the executor's `exec::check_setup`): its own setup's refusal becomes a plan error
/// at `stages[i].params`.
pub(super) fn check_setups(label: &str, stages: &[PlannedStage], failed: &[SpecError], check: &SetupCheck<'_>) -> Vec<SpecError> {
    let mut errors = Vec::new();
    for st in stages {
        let gpu_needed_but_unplaced = st.resources.needs_gpu() && st.gpu.is_empty();
        if gpu_needed_but_unplaced || failed.iter().any(|e| e.path.starts_with(&format!("stages[{}]", st.index))) {
            continue;
        }
        if let Err(e) = check(st) {
            let (path, message) = match e {
                crate::stage::StageFailure::InvalidParams(m) => {
                    ("params", format!("plugin {:?} rejected its params: {m}", st.plugin.manifest.name))
                }
                e => ("plugin", format!("plugin {:?} cannot start: {e}", st.plugin.manifest.name)),
            };
            errors.push(SpecError::new(label, format!("stages[{}].{path}", st.index), message));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_files_make_a_directory_used() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Loc::Local(tmp.path().join("out"));
        assert_eq!(holds_outputs(&dir), None, "absent");
        std::fs::create_dir_all(tmp.path().join("out/_rejected")).unwrap();
        std::fs::create_dir_all(tmp.path().join("out/_spill/stage-000")).unwrap();
        std::fs::write(tmp.path().join("out/_spill/stage-000/x.arrow"), b"x").unwrap();
        std::fs::write(tmp.path().join("out/.a.jsonl.tmp-123-0"), b"partial").unwrap();
        assert_eq!(holds_outputs(&dir), None, "a killed run's leftovers");
        std::fs::write(tmp.path().join("out/_rejected/a.jsonl"), b"{}").unwrap();
        assert_eq!(holds_outputs(&dir).unwrap(), "1 file (e.g. _rejected/a.jsonl)");
    }
}
