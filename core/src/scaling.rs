//! Worker allocation: how many workers each stage gets out of the machine's capacity, from
//! what each stage cost over the last measurement window.
//!
//! With bounded queues between stages every stage moves at the pace of the slowest, so the
//! CPU time a stage's workers spent over a window (busy seconds × `cpus`) is proportional to
//! its cost per input document. Throughput is highest when each stage gets the same share of
//! the cores as of that CPU time, so that is the target: stage i gets `cores × share_i`, in
//! whole workers rounded *up*. Rounding up matters on small machines: two stages on two cores
//! with a 70/30 split get 2 + 1 workers rather than 1 + 1, which would leave the slow stage at
//! one core. The sum of reservations may so exceed the capacity by less than one worker per
//! stage, while the busy cores expected from the measured shares stay within it. Fixed worker
//! counts (`num_workers`) win; every stage keeps at least one worker; a memory budget removes
//! workers from the least loaded stages first.

/// Share of the memory available to a run that stage workers may reserve; the rest is for
/// queued batches, readers and writers.
pub const WORKER_MEMORY_SHARE: f64 = 0.8;

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

/// Workers per stage: fixed counts as given; the others ⌈their share of the remaining cores
/// / `cpus`⌉, at least one, at most `max_per_stage`, then trimmed to `capacity.memory_mb`.
pub fn allocate(capacity: &Capacity, stages: &[StageLoad], max_per_stage: Option<usize>) -> Vec<usize> {
    const EPS: f64 = 1e-9;
    let fixed_cpus: f64 = stages.iter().filter_map(|s| s.fixed.map(|n| n as f64 * s.cpus)).sum();
    let free_cores = (capacity.cpus - fixed_cpus).max(0.0);
    let measured = stages.iter().any(|s| s.fixed.is_none() && s.busy_s.is_some_and(|b| b > 0.0));
    // CPU time each free stage needs; before any measurement, the same for every stage.
    let weight = |s: &StageLoad| if measured { s.busy_s.unwrap_or(0.0).max(0.0) * s.cpus } else { 1.0 };
    let total: f64 = stages.iter().filter(|s| s.fixed.is_none()).map(weight).sum();
    let mut workers: Vec<usize> = stages
        .iter()
        .map(|s| match s.fixed {
            Some(n) => n.max(1),
            None => {
                let cores = if total > 0.0 { free_cores * weight(s) / total } else { 0.0 };
                let n = ((cores / s.cpus) - EPS).ceil().max(1.0) as usize;
                max_per_stage.map_or(n, |m| n.min(m.max(1)))
            }
        })
        .collect();
    if let Some(budget) = capacity.memory_mb {
        let used = |w: &[usize]| stages.iter().zip(w).map(|(s, n)| s.memory_mb as u128 * *n as u128).sum::<u128>();
        while used(&workers) > budget as u128 {
            // Take a worker from the free stage whose workers carry the least load each.
            let victim = stages
                .iter()
                .enumerate()
                .filter(|(i, s)| s.fixed.is_none() && workers[*i] > 1)
                .min_by(|(i, a), (j, b)| (weight(a) / workers[*i] as f64).total_cmp(&(weight(b) / workers[*j] as f64)))
                .map(|(i, _)| i);
            let Some(i) = victim else { break };
            workers[i] -= 1;
        }
    }
    workers
}

/// The least loaded of several (`load[k]`: what each holds now, compared as given, e.g.
/// (partitions open, batches queued)); the first of equals.
pub fn least_loaded<L: Ord>(load: &[L]) -> usize {
    load.iter().enumerate().min_by_key(|&(k, l)| (l, k)).map_or(0, |(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(cpus: f64, busy: Option<f64>) -> StageLoad {
        StageLoad { cpus, memory_mb: 64, busy_s: busy, fixed: None }
    }
    const CPU16: Capacity = Capacity { cpus: 16.0, memory_mb: None };

    /// Expected busy cores: each stage's share of the CPU time, which the allocation must cover.
    fn covers_shares(cap: f64, stages: &[StageLoad], w: &[usize]) -> bool {
        let total: f64 = stages.iter().map(|s| s.busy_s.unwrap_or(0.0) * s.cpus).sum();
        stages.iter().zip(w).all(|(s, n)| *n as f64 * s.cpus + 1e-9 >= cap * s.busy_s.unwrap_or(0.0) * s.cpus / total)
    }

    #[test]
    fn unmeasured_stages_share_evenly() {
        assert_eq!(allocate(&CPU16, &[stage(1.0, None), stage(1.0, None)], None), vec![8, 8]);
        // Same cores each: 8 one-core workers, 4 two-core workers.
        assert_eq!(allocate(&CPU16, &[stage(1.0, None), stage(2.0, None)], None), vec![8, 4]);
        // A single stage on 2 cores × 0.95 gets both.
        assert_eq!(allocate(&Capacity { cpus: 1.9, memory_mb: None }, &[stage(1.0, None)], None), vec![2]);
    }

    #[test]
    fn bottleneck_gets_the_workers() {
        // Stage 0 costs 9× stage 1 per document: 14.4 and 1.6 cores, rounded up.
        let loads = [stage(1.0, Some(9.0)), stage(1.0, Some(1.0))];
        let w = allocate(&CPU16, &loads, None);
        assert_eq!(w, vec![15, 2]);
        assert!(covers_shares(16.0, &loads, &w));
        let flipped = [stage(1.0, Some(1.0)), stage(1.0, Some(9.0))];
        assert_eq!(allocate(&CPU16, &flipped, None), vec![2, 15]);
    }

    #[test]
    fn small_machines_round_up_and_keep_one_each() {
        // Two cores, 70/30: the slow stage gets two workers, not one.
        let cap = Capacity { cpus: 1.9, memory_mb: None };
        assert_eq!(allocate(&cap, &[stage(1.0, Some(7.0)), stage(1.0, Some(3.0))], None), vec![2, 1]);
        assert_eq!(allocate(&cap, &[stage(1.0, Some(5.0)), stage(1.0, Some(1.0)), stage(1.0, Some(1.0))], None), vec![2, 1, 1]);
        // Multi-core workers: shares are in cores (busy × cpus).
        let cap = Capacity { cpus: 4.0, memory_mb: None };
        let loads = [stage(0.5, Some(3.0)), stage(2.0, Some(3.0))];
        let w = allocate(&cap, &loads, None);
        assert_eq!(w, vec![2, 2]);
        assert!(covers_shares(4.0, &loads, &w));
    }

    #[test]
    fn fixed_counts_win_and_the_rest_is_shared() {
        let mut fixed = stage(1.0, Some(100.0));
        fixed.fixed = Some(3);
        assert_eq!(allocate(&CPU16, &[fixed, stage(1.0, Some(1.0))], None), vec![3, 13]);
    }

    #[test]
    fn memory_and_per_stage_caps() {
        let cap = Capacity { cpus: 16.0, memory_mb: Some(64 * 5) };
        let w = allocate(&cap, &[stage(1.0, Some(4.0)), stage(1.0, Some(1.0))], None);
        assert_eq!(w.iter().sum::<usize>(), 5);
        assert!(w[0] > w[1], "{w:?}");
        assert_eq!(allocate(&CPU16, &[stage(1.0, Some(9.0)), stage(1.0, Some(1.0))], Some(4)), vec![4, 2]);
        // A stage with no measured work keeps only its minimum.
        assert_eq!(allocate(&CPU16, &[stage(1.0, Some(5.0)), stage(1.0, Some(0.0))], None), vec![16, 1]);
    }

    #[test]
    fn the_least_loaded_is_the_first_of_the_smallest() {
        assert_eq!(least_loaded(&[2, 1, 1]), 1);
        assert_eq!(least_loaded(&[(1, 5), (1, 2), (2, 0)]), 1);
        assert_eq!(least_loaded::<usize>(&[]), 0);
    }
}
