//! Worker allocation: how many workers each stage gets out of the machine's capacity, from
//! what each stage cost over the last measurement window.
//!
//! With bounded queues between stages every stage moves at the pace of the slowest, so the
//! busy time a stage's workers spent over a window is proportional to its cost per input
//! document. Giving each new worker to the stage whose workers carry the most busy time each
//! (`busy_s / workers`) minimises the largest per-worker load, i.e. it raises the
//! bottleneck's throughput first. Fixed worker counts (`num_workers`) win; every stage keeps
//! at least one worker, even when that oversubscribes a small machine.

/// What the machine offers to workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// Cores available to workers (already scaled by `cpu_allocation_percentage`).
    pub cpus: f64,
    /// Memory available to workers, MiB (`None`: unknown, not a constraint).
    pub memory_mb: Option<u64>,
}

/// One stage as the allocator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct StageLoad {
    /// Cores one worker reserves.
    pub cpus: f64,
    /// Memory one worker reserves, MiB.
    pub memory_mb: u64,
    /// Seconds the stage's workers were busy over the last window; `None` before anything
    /// was measured (then every stage gets the same number of workers, as far as it fits).
    pub busy_s: Option<f64>,
    /// A fixed worker count from the pipeline: used as is.
    pub fixed: Option<usize>,
}

/// Workers per stage. The sum of `cpus × workers` stays within `capacity.cpus` (and of
/// `memory_mb × workers` within `capacity.memory_mb`) except where fixed counts or the
/// one-worker minimum ask for more. `max_per_stage` caps stages without a fixed count.
pub fn allocate(capacity: &Capacity, stages: &[StageLoad], max_per_stage: Option<usize>) -> Vec<usize> {
    let mut workers: Vec<usize> = stages.iter().map(|s| s.fixed.unwrap_or(1).max(1)).collect();
    let mut cpus_left = capacity.cpus - stages.iter().zip(&workers).map(|(s, n)| s.cpus * *n as f64).sum::<f64>();
    let mut mem_left =
        capacity.memory_mb.map(|m| m as i128 - stages.iter().zip(&workers).map(|(s, n)| (s.memory_mb * *n as u64) as i128).sum::<i128>());
    let measured = stages.iter().any(|s| s.busy_s.is_some_and(|b| b > 0.0));
    // Load that one more worker would share: measured busy seconds, or (before any
    // measurement) the same for every stage.
    let load = |s: &StageLoad| if measured { s.busy_s.unwrap_or(0.0).max(0.0) } else { 1.0 };
    const EPS: f64 = 1e-9;
    loop {
        let mut best: Option<(usize, f64)> = None;
        for (i, s) in stages.iter().enumerate() {
            if s.fixed.is_some() || max_per_stage.is_some_and(|m| workers[i] >= m) {
                continue;
            }
            if s.cpus > cpus_left + EPS || mem_left.is_some_and(|m| (s.memory_mb as i128) > m) {
                continue;
            }
            let per_worker = load(s) / workers[i] as f64;
            if per_worker <= 0.0 {
                continue;
            }
            if best.is_none_or(|(_, b)| per_worker > b) {
                best = Some((i, per_worker));
            }
        }
        let Some((i, _)) = best else { break };
        workers[i] += 1;
        cpus_left -= stages[i].cpus;
        if let Some(m) = mem_left.as_mut() {
            *m -= stages[i].memory_mb as i128;
        }
    }
    workers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(cpus: f64, busy: Option<f64>) -> StageLoad {
        StageLoad { cpus, memory_mb: 64, busy_s: busy, fixed: None }
    }
    const CPU16: Capacity = Capacity { cpus: 16.0, memory_mb: None };

    #[test]
    fn unmeasured_stages_share_evenly() {
        assert_eq!(allocate(&CPU16, &[stage(1.0, None), stage(1.0, None)], None), vec![8, 8]);
        assert_eq!(allocate(&CPU16, &[stage(1.0, None), stage(2.0, None)], None), vec![6, 5]);
    }

    #[test]
    fn bottleneck_gets_the_workers() {
        // Stage 0 costs 9× stage 1 per document.
        let w = allocate(&CPU16, &[stage(1.0, Some(9.0)), stage(1.0, Some(1.0))], None);
        assert_eq!(w, vec![14, 2]);
        let total: usize = w.iter().sum();
        assert_eq!(total, 16);
        // Unchanged capacity use when loads flip.
        assert_eq!(allocate(&CPU16, &[stage(1.0, Some(1.0)), stage(1.0, Some(9.0))], None), vec![2, 14]);
    }

    #[test]
    fn never_over_capacity_and_at_least_one_each() {
        let cap = Capacity { cpus: 1.9, memory_mb: None };
        assert_eq!(allocate(&cap, &[stage(1.0, Some(5.0)), stage(1.0, Some(1.0)), stage(1.0, Some(1.0))], None), vec![1, 1, 1]);
        let cap = Capacity { cpus: 4.0, memory_mb: None };
        let w = allocate(&cap, &[stage(0.5, Some(3.0)), stage(2.0, Some(3.0))], None);
        assert!(w.iter().zip([0.5, 2.0]).map(|(n, c)| *n as f64 * c).sum::<f64>() <= 4.0, "{w:?}");
        assert_eq!(w, vec![4, 1]);
    }

    #[test]
    fn fixed_counts_win_and_use_capacity() {
        let mut fixed = stage(1.0, Some(100.0));
        fixed.fixed = Some(3);
        assert_eq!(allocate(&CPU16, &[fixed, stage(1.0, Some(1.0))], None), vec![3, 13]);
    }

    #[test]
    fn memory_and_per_stage_caps() {
        let cap = Capacity { cpus: 16.0, memory_mb: Some(64 * 5) };
        assert_eq!(allocate(&cap, &[stage(1.0, None), stage(1.0, None)], None).iter().sum::<usize>(), 5);
        assert_eq!(allocate(&CPU16, &[stage(1.0, Some(9.0)), stage(1.0, Some(1.0))], Some(4)), vec![4, 4]);
        // A stage with no measured work gets only its minimum.
        assert_eq!(allocate(&CPU16, &[stage(1.0, Some(5.0)), stage(1.0, Some(0.0))], None), vec![15, 1]);
    }
}
