//! What the machine offers a run's stage workers (capacity) and the first allocation, before
//! anything is measured. The policy is `curator_core::scaling::allocate`; the executor's
//! autoscaler re-applies it with measured busy times.

use curator_core::scaling::{Capacity, StageLoad, allocate};

use super::{Plan, PlannedStage};

/// What the machine offers the stage workers of a run.
/// `workers`: cores given to stage workers (`--workers`); default: this machine's usable
/// cores × `cpu_allocation_percentage`.
pub fn capacity(plan: &Plan, workers: Option<usize>) -> Capacity {
    // The cores and memory the run's own model servers hold are not the workers'.
    let services_cpus: f64 = plan.services.iter().map(|s| s.cpus()).sum();
    let services_mb: u64 = plan.services.iter().map(|s| s.spec.resources.memory_mb.unwrap_or(0) * s.replicas.len() as u64).sum();
    let cpus = match workers {
        Some(n) => n.max(1) as f64,
        None => (crate::os::available_cores() as f64 * plan.spec.execution.cpu_allocation_percentage - services_cpus).max(1.0),
    };
    let memory_mb = crate::os::available_memory_mb()
        .map(|m| ((m as f64 * curator_core::scaling::WORKER_MEMORY_SHARE) as u64).saturating_sub(services_mb));
    Capacity { cpus, memory_mb }
}

/// What the allocation policy needs to know of a stage: its reservation per worker (the
/// memory its workers are allowed), and its measured busy time.
pub fn load(stage: &PlannedStage, busy_s: Option<f64>) -> StageLoad {
    StageLoad { cpus: stage.resources.cpus, memory_mb: stage.memory.reserved_mb, busy_s, fixed: stage.fixed_workers() }
}

/// Workers per stage before anything is measured (streaming mode).
pub fn initial_workers(plan: &Plan, workers: Option<usize>) -> Vec<usize> {
    let loads: Vec<StageLoad> = plan.stages.iter().map(|s| load(s, None)).collect();
    allocate(&capacity(plan, workers), &loads, plan.spec.execution.max_workers_per_stage)
}
