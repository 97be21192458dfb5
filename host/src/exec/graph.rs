//! One scheduling step: sources, one pool of workers per stage, sinks, bounded queues between
//! them, and (streaming, several stages) the autoscaler. `run.rs` calls it once (streaming)
//! or once per stage (batch mode, through spill directories).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::bounded;

use curator_core::pipeline::ExecutionMode;
use curator_core::placement::start_waves;
use curator_core::scaling::{StageLoad, allocate};

use super::Schedule;
use super::autoscale::{autoscaler, record_scaling};
use super::stage::Pool;
use super::write::{self, Written};
use super::{Ctx, Outlet, RunError, Task, read};
use crate::io::journal::Journal;
use crate::plan::capacity::load;
use crate::task::{Rejoin, Replay, SpillDir};

/// Where the tasks of one scheduling step come from and go to.
pub(crate) enum Source<'a> {
    Read,
    /// The source read a second time, each batch rejoined with what an earlier step kept.
    ReadAgain(&'a dyn Rejoin),
    /// Tasks kept on disk by an earlier step, replayed in order.
    Replay(&'a dyn Replay),
}

pub(crate) enum Sink<'a> {
    Write(&'a Mutex<Option<Journal>>),
    Spill(&'a SpillDir),
}

/// Run `stages` (indices into the plan) from `source` to `sink`: sources, one pool per
/// stage, sinks, bounded queues between them, and (streaming, several stages) the autoscaler.
pub(crate) fn run_graph(
    ctx: &Arc<Ctx>,
    source: Source,
    stages: &[usize],
    sink: Sink,
    sched: &mut Schedule<'_>,
) -> Result<((u64, u64), Written), RunError> {
    let plan = &ctx.plan;
    let cores = sched.capacity.cpus.ceil().max(1.0) as usize;
    let parallel_parts = plan.partitions.len().max(1);
    let sinks = cores.min(parallel_parts).max(1);
    let mut sink_txs = Vec::with_capacity(sinks);
    let mut sink_rxs = Vec::with_capacity(sinks);
    for _ in 0..sinks {
        let (tx, rx) = bounded::<Task>(ctx.queue_capacity);
        sink_txs.push(tx);
        sink_rxs.push(rx);
    }
    // Pools from the last stage back, each sending to the next one's queue.
    let mut next = Outlet::Sinks(Arc::new(super::route::SinkRoutes::new(sink_txs)));
    let mut pools: Vec<Arc<Pool>> = Vec::with_capacity(stages.len());
    for &i in stages.iter().rev() {
        let (tx, rx) = bounded::<Task>(ctx.queue_capacity);
        pools.push(Pool::new(i, plan.stages[i].fixed_workers(), rx, next));
        next = Outlet::Stage(i, tx);
    }
    pools.reverse();
    let first = next;
    if let Err(e) = start_workers(ctx, &pools, sched) {
        // Nothing has been read: close every pool (the workers that did start see their
        // input close and leave) and report the first error.
        ctx.fail(e);
        for p in &pools {
            p.close();
        }
        drop(first);
        drop(sink_rxs);
        for p in &pools {
            p.join();
        }
        return Err(ctx.take_failure().unwrap_or_else(|| RunError::Panic("a worker failed to start".into())));
    }
    // Partitions are independent: several readers take them in turn. A `limit` needs the
    // documents in input order, so it reads with one.
    let readers = if plan.spec.source.limit.is_some() { 1 } else { cores.min(parallel_parts).max(1) };
    let next_item = AtomicUsize::new(0);
    let stop_scaler = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let sink_handles: Vec<_> = sink_rxs.into_iter().enumerate().filter_map(|(k, rx)| spawn_sink(scope, ctx, &sink, k, rx)).collect();
        let source_handles: Vec<_> = (0..readers).filter_map(|r| spawn_source(scope, ctx, &source, r, &first, &next_item)).collect();
        drop(first);
        let autoscale =
            plan.spec.execution.execution_mode == ExecutionMode::Streaming && pools.iter().filter(|p| p.fixed.is_none()).count() > 1;
        let scaler = autoscale
            .then(|| {
                let (pools, stop, capacity, t0) = (&pools, &stop_scaler, &sched.capacity, sched.started);
                std::thread::Builder::new()
                    .name("curator-autoscaler".into())
                    .spawn_scoped(scope, move || autoscaler(ctx, pools, capacity, t0, stop))
                    .ok()
            })
            .flatten();

        let mut read: (u64, u64) = (0, 0);
        for h in source_handles {
            match h.join() {
                Ok((a, b)) => {
                    read.0 += a;
                    read.1 += b;
                }
                Err(_) => ctx.fail(RunError::Panic("a reader thread panicked".into())),
            }
        }
        let mut written = Written::default();
        for h in sink_handles {
            match h.join() {
                Ok(w) => {
                    written.entries.extend(w.entries);
                    written.docs_out += w.docs_out;
                }
                Err(_) => ctx.fail(RunError::Panic("a writer thread panicked".into())),
            }
        }
        tracing::debug!("writers finished {:.2}s after the run started", ctx.started.elapsed().as_secs_f64());
        stop_scaler.store(true, Ordering::Relaxed);
        if let Some(h) = &scaler {
            h.thread().unpark();
        }
        if let Some(h) = scaler
            && let Ok(events) = h.join()
        {
            sched.scaling.extend(events);
        }
        for p in &pools {
            p.join();
        }
        tracing::debug!("workers gone {:.2}s after the run started", ctx.started.elapsed().as_secs_f64());
        match ctx.take_failure() {
            Some(e) => Err(e),
            None => Ok((read, written)),
        }
    })
}

/// Start the first allocation's workers and return once every stage has one set up, so that
/// reading starts while the others are still loading. A GPU stage starts one worker per card
/// first and the rest once one is set up (`placement::start_waves`: the driver creates CUDA
/// contexts one after another, and processes that ask together all wait for the last).
/// Returns the first setup error when one came before every stage had a worker; a worker
/// that fails to set up later fails the run (`stage::worker` records every setup error with
/// `Ctx::fail` before its thread ends).
fn start_workers(ctx: &Arc<Ctx>, pools: &[Arc<Pool>], sched: &mut Schedule<'_>) -> Result<(), RunError> {
    let plan = &ctx.plan;
    let loads: Vec<StageLoad> = pools.iter().map(|p| load(&plan.stages[p.stage], None)).collect();
    let counts = allocate(&sched.capacity, &loads, plan.spec.execution.max_workers_per_stage);
    record_scaling(ctx, &mut sched.scaling, sched.started, pools, &counts, "initial allocation");
    let first_wave = |pool: &Pool, n: usize| match &plan.stages[pool.stage].gpu {
        gpu if gpu.is_empty() => n,
        gpu => start_waves(gpu).1.clamp(1, n.max(1)),
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut waiting = std::collections::BTreeSet::new();
    let mut expected = 0;
    for (pool, n) in pools.iter().zip(&counts) {
        let started = pool.scale_to(ctx, first_wave(pool, *n), Some(&ready_tx));
        if started > 0 {
            waiting.insert(pool.stage);
        }
        expected += started;
    }
    drop(ready_tx);
    // Until every stage has a worker set up; after a failure, until every worker has reported
    // (the caller then closes the pools, which they all see).
    let mut failed = false;
    while expected > 0 && (failed || !waiting.is_empty()) {
        expected -= 1;
        match ready_rx.recv() {
            Ok((stage, true)) => {
                waiting.remove(&stage);
            }
            Ok((_, false)) => failed = true,
            Err(_) => {
                ctx.fail(RunError::Panic("a worker exited during setup".into()));
                failed = true;
                expected = 0;
            }
        }
    }
    if failed {
        return Err(ctx.take_failure().unwrap_or_else(|| RunError::Panic("a worker failed to start".into())));
    }
    for (pool, n) in pools.iter().zip(&counts) {
        if first_wave(pool, *n) < *n {
            pool.scale_to(ctx, *n, None);
        }
    }
    Ok(())
}

/// Sink thread `k`: writes (or spills) the partitions sent to its queue.
fn spawn_sink<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    ctx: &'s Ctx,
    sink: &'s Sink<'s>,
    k: usize,
    rx: crossbeam_channel::Receiver<Task>,
) -> Option<std::thread::ScopedJoinHandle<'s, Written>> {
    let h = match sink {
        Sink::Write(journal) => {
            std::thread::Builder::new().name(format!("curator-writer-{k}")).spawn_scoped(scope, move || write::write_loop(ctx, rx, journal))
        }
        Sink::Spill(dir) => {
            std::thread::Builder::new().name(format!("curator-spill-{k}")).spawn_scoped(scope, move || write::spill_loop(ctx, rx, dir))
        }
    };
    h.map_err(|e| ctx.fail(RunError::Panic(format!("cannot start a writer: {e}")))).ok()
}

/// Source thread `r`: reads partitions (or replays items) in turn, taking the next index
/// from `next_item`; (documents read, lines rejected).
fn spawn_source<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    ctx: &'s Ctx,
    source: &'s Source<'s>,
    r: usize,
    first: &Outlet,
    next_item: &'s AtomicUsize,
) -> Option<std::thread::ScopedJoinHandle<'s, (u64, u64)>> {
    let out = first.clone();
    let h = match source {
        Source::Read => std::thread::Builder::new().name(format!("curator-reader-{r}")).spawn_scoped(scope, move || {
            read::read_partitions(ctx, next_item, out, None).unwrap_or_else(|e| {
                ctx.fail_source(e);
                (0, 0)
            })
        }),
        Source::ReadAgain(again) => std::thread::Builder::new().name(format!("curator-reader-{r}")).spawn_scoped(scope, move || {
            read::read_partitions(ctx, next_item, out, Some(*again)).unwrap_or_else(|e| {
                ctx.fail_source(e);
                (0, 0)
            })
        }),
        Source::Replay(items) => std::thread::Builder::new().name(format!("curator-unspill-{r}")).spawn_scoped(scope, move || {
            replay_items(ctx, *items, next_item, &out);
            (0, 0)
        }),
    };
    h.map_err(|e| ctx.fail(RunError::Panic(format!("cannot start a reader: {e}")))).ok()
}

/// Replay items in turn until they run out, sources stop or nobody receives.
fn replay_items(ctx: &Ctx, items: &dyn Replay, next_item: &AtomicUsize, out: &Outlet) {
    loop {
        let i = next_item.fetch_add(1, Ordering::Relaxed);
        if i >= items.len() || ctx.sources_stopped() {
            return;
        }
        match items.task(i) {
            Ok(Some(task)) => {
                if out.send(task, &ctx.metrics).is_err() {
                    return;
                }
            }
            Ok(None) => {}
            Err(e) => {
                ctx.fail_source(e.into());
                return;
            }
        }
    }
}
