//! Worker counts: what the machine offers (capacity), the first allocation, and the
//! autoscaler thread that moves workers to the stages that needed the most busy time. The
//! policy itself is `curator_core::scaling::allocate`; this file only measures and applies.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use curator_core::scaling::{Capacity, StageLoad, allocate};

use crate::plan::capacity::load;

use super::Ctx;
use super::stage::Pool;
use super::summary::ScaleEvent;

pub(crate) fn record_scaling(ctx: &Ctx, scaling: &mut Vec<ScaleEvent>, t0: Instant, pools: &[Arc<Pool>], counts: &[usize], why: &str) {
    let mut workers = vec![0; ctx.plan.stages.len()];
    for (p, n) in pools.iter().zip(counts) {
        workers[p.stage] = *n;
    }
    let shown: Vec<String> = pools.iter().zip(counts).map(|(p, n)| format!("{} {n}", ctx.plan.stages[p.stage].label)).collect();
    if !shown.is_empty() {
        tracing::info!("workers ({why}): {}", shown.join(", "));
    }
    scaling.push(ScaleEvent { at_s: t0.elapsed().as_secs_f64(), workers });
}

/// Every `autoscale_interval_s` (and once as soon as every stage has been measured), give
/// the workers to the stages by the busy time each needed since the last change.
pub(crate) fn autoscaler(ctx: &Arc<Ctx>, pools: &[Arc<Pool>], capacity: &Capacity, t0: Instant, stop: &AtomicBool) -> Vec<ScaleEvent> {
    let plan = &ctx.plan;
    let interval = Duration::from_secs_f64(plan.spec.execution.autoscale_interval_s);
    let busy = |p: &Pool| ctx.metrics.stages[p.stage].busy_ns.load(Ordering::Relaxed);
    let batches = |p: &Pool| ctx.metrics.stages[p.stage].batches.load(Ordering::Relaxed);
    let mut last_busy: Vec<u64> = pools.iter().map(|p| busy(p)).collect();
    let mut last = Instant::now();
    let mut measured_once = false;
    let mut events = Vec::new();
    while !stop.load(Ordering::Relaxed) && !ctx.cancelled() {
        // Woken early when the run stops it (it is joined at the end of every run).
        std::thread::park_timeout(Duration::from_millis(50));
        let due = if measured_once {
            last.elapsed() >= interval
        } else {
            // The first change: as soon as every stage has a few batches behind it.
            (pools.iter().all(|p| batches(p) >= 4) && last.elapsed() >= Duration::from_millis(200)) || last.elapsed() >= interval
        };
        if !due {
            continue;
        }
        let now: Vec<u64> = pools.iter().map(|p| busy(p)).collect();
        let loads: Vec<StageLoad> = pools
            .iter()
            .zip(now.iter().zip(&last_busy))
            .map(|(p, (n, l))| load(&plan.stages[p.stage], Some(n.saturating_sub(*l) as f64 / 1e9)))
            .collect();
        last_busy = now;
        last = Instant::now();
        measured_once = true;
        let counts = allocate(capacity, &loads, plan.spec.execution.max_workers_per_stage);
        if pools.iter().zip(&counts).all(|(p, n)| p.target() == *n) {
            continue;
        }
        for (p, n) in pools.iter().zip(&counts) {
            p.scale_to(ctx, *n, None);
        }
        record_scaling(ctx, &mut events, t0, pools, &counts, "autoscaler");
    }
    events
}
