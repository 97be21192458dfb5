//! A stage's worker pool: threads that each own one instance of the stage, take batches from
//! the stage's input queue and pass results on. The autoscaler changes a pool's target; a
//! worker above target retires between batches, a missing one is spawned.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray};
use crossbeam_channel::{Receiver, RecvTimeoutError};

use curator_core::leak::LeakWatch;

use crate::plan::BranchKind;
use crate::stage::{FailureClass, StageFailure};

use super::instance::{Instance, Placement, instantiate, release};
use super::{Ctx, DeadLetter, Outlet, RunError, Task};

/// The workers of one stage.
pub(crate) struct Pool {
    /// Index of the stage in the plan.
    pub stage: usize,
    /// A fixed worker count from the pipeline (`num_workers`).
    pub fixed: Option<usize>,
    target: AtomicUsize,
    active: AtomicUsize,
    /// What a new worker needs: the input queue and where results go. Dropped once the
    /// input is exhausted, so that the next queue closes when the last worker leaves.
    kit: Mutex<Option<(Receiver<Task>, Outlet)>>,
    handles: Mutex<Vec<std::thread::JoinHandle<()>>>,
    spawned: AtomicUsize,
}

/// Where a first-allocation worker reports its setup: (its stage, whether it is set up; a
/// failure itself goes to `Ctx::fail`).
type Ready = mpsc::Sender<(usize, bool)>;

impl Pool {
    pub fn new(stage: usize, fixed: Option<usize>, input: Receiver<Task>, out: Outlet) -> Arc<Pool> {
        Arc::new(Pool {
            stage,
            fixed,
            target: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            kit: Mutex::new(Some((input, out))),
            handles: Mutex::new(Vec::new()),
            spawned: AtomicUsize::new(0),
        })
    }

    pub fn target(&self) -> usize {
        self.target.load(Ordering::Relaxed)
    }

    /// Set the worker count and start the missing workers (extra ones retire by themselves).
    /// Returns how many were started.
    pub fn scale_to(self: &Arc<Self>, ctx: &Arc<Ctx>, n: usize, ready: Option<&Ready>) -> usize {
        self.target.store(n.max(1), Ordering::Relaxed);
        let mut started = 0;
        while self.active.load(Ordering::Relaxed) < self.target() {
            if !self.spawn(ctx, ready.cloned()) {
                break;
            }
            started += 1;
        }
        started
    }

    fn spawn(self: &Arc<Self>, ctx: &Arc<Ctx>, ready: Option<Ready>) -> bool {
        let kit = match self.kit.lock() {
            Ok(k) => k,
            Err(_) => return false,
        };
        let Some((rx, out)) = kit.as_ref() else { return false };
        let (rx, out) = (rx.clone(), out.clone());
        self.active.fetch_add(1, Ordering::Relaxed);
        ctx.metrics.stages[self.stage].workers.fetch_add(1, Ordering::Relaxed);
        let n = self.spawned.fetch_add(1, Ordering::Relaxed);
        let (pool, ctx2) = (self.clone(), ctx.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("curator-s{}-w{n}", self.stage))
            .spawn(move || worker(&ctx2, &pool, n, rx, out, ready));
        match spawned {
            Ok(h) => {
                if let Ok(mut hs) = self.handles.lock() {
                    hs.push(h);
                }
                true
            }
            Err(e) => {
                self.active.fetch_sub(1, Ordering::Relaxed);
                ctx.metrics.stages[self.stage].workers.fetch_sub(1, Ordering::Relaxed);
                ctx.fail(RunError::Panic(format!("cannot start a worker: {e}")));
                false
            }
        }
    }

    /// Whether a worker should leave now because the pool is above its target.
    fn retire(&self) -> bool {
        loop {
            let a = self.active.load(Ordering::Relaxed);
            if a <= self.target().max(1) {
                return false;
            }
            if self.active.compare_exchange(a, a - 1, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                return true;
            }
        }
    }

    /// The input is exhausted (or the run failed to start): no more workers may start.
    pub fn close(&self) {
        if let Ok(mut k) = self.kit.lock() {
            *k = None;
        }
    }

    /// Wait for every worker (including those started while waiting).
    pub fn join(&self) {
        loop {
            let next = self.handles.lock().ok().and_then(|mut h| h.pop());
            let Some(h) = next else { break };
            let _ = h.join();
        }
    }
}

/// One worker: set up an instance, then process batches until the input closes or the pool
/// shrinks. Replaces its instance after `max_batches_per_worker` / `worker_max_lifetime_m`
/// and when its memory keeps growing (leak detection).
fn worker(ctx: &Ctx, pool: &Pool, k: usize, rx: Receiver<Task>, out: Outlet, ready: Option<Ready>) {
    let started = Instant::now();
    let i = pool.stage;
    let stage = &ctx.plan.stages[i];
    let counters = &ctx.metrics.stages[i];
    let policy = &ctx.plan.spec.execution;
    let gpu = ctx.gpu_slots[i].lock().ok().and_then(|mut s| s.pop());
    let at = Placement { k, gpu };
    // Every way out: the pool's count (unless `retire` already took it), the gauge, the
    // worker's lifetime, and its GPU share back to the stage.
    let leave = |at: Placement, retired: bool| {
        if !retired {
            pool.active.fetch_sub(1, Ordering::Relaxed);
        }
        counters.workers.fetch_sub(1, Ordering::Relaxed);
        counters.alive_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if let (Some(a), Ok(mut slots)) = (at.gpu, ctx.gpu_slots[i].lock()) {
            slots.push(a);
        }
    };
    let mut inst = match instantiate(ctx, i, &at) {
        Ok(inst) => inst,
        Err(e) => {
            // The run's failure is recorded here, before this thread ends, whether the run is
            // still waiting for its workers or has started (a late setup error).
            ctx.fail(e);
            if let Some(r) = ready {
                let _ = r.send((i, false));
            }
            leave(at, false);
            return;
        }
    };
    if let Some(r) = ready {
        let _ = r.send((i, true));
    }
    let mut born = Instant::now();
    let mut batches = 0u64;
    let mut leaks = LeakWatch::new(inst.leak_rule(), inst.memory_bytes() as u64);
    let retired = loop {
        if pool.retire() {
            break true;
        }
        let task = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(t) => t,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                pool.close();
                break false;
            }
        };
        counters.queued.fetch_sub(1, Ordering::Relaxed);
        if ctx.cancelled() {
            continue; // drain, so that nothing upstream stays blocked
        }
        match run_stage(ctx, i, &mut inst, &at, task) {
            Ok(t) => {
                // Fails only when everything downstream has gone (after a failure).
                let _ = out.send(t, &ctx.metrics);
            }
            Err(e) => ctx.fail(e),
        }
        batches += 1;
        let lifetime_over = policy.worker_max_lifetime_m.is_some_and(|m| born.elapsed().as_secs_f64() > m * 60.0);
        let batches_over = policy.max_batches_per_worker.is_some_and(|n| batches >= n);
        let mut recycle = false;
        if lifetime_over || batches_over {
            tracing::info!(stage = %stage.label, "recycling a worker after {batches} batches and {:.0}s", born.elapsed().as_secs_f64());
            recycle = true;
        } else if let Some(why) = leaks.observe(inst.memory_bytes() as u64) {
            tracing::warn!(stage = %stage.label, "{why}: recycling the instance (leak?)");
            recycle = true;
        }
        if recycle {
            // The old instance goes first: a native worker may hold the GPU share.
            inst.teardown();
            match instantiate(ctx, i, &at) {
                Ok(fresh) => {
                    inst = fresh;
                    leaks = LeakWatch::new(inst.leak_rule(), inst.memory_bytes() as u64);
                    born = Instant::now();
                    batches = 0;
                }
                Err(e) => {
                    ctx.fail(e);
                    leave(at, false);
                    return;
                }
            }
        }
    };
    release(ctx, i, &at, inst);
    leave(at, retired);
}

/// Inputs and outputs of successful calls; inputs and errors of failed ones.
#[derive(Default)]
struct Calls {
    ok: Vec<(RecordBatch, RecordBatch)>,
    failed: Vec<(RecordBatch, StageFailure)>,
    /// Whether an answer replaced a source column (`StageOutput::keeps_source_columns`).
    replaced_source: bool,
}

/// Run a stage on `batch` with retries; a batch that runs out of memory is split in half and
/// retried, down to single documents.
fn call_resilient(
    ctx: &Ctx,
    i: usize,
    slot: &mut Instance,
    at: &Placement,
    batch: RecordBatch,
    attempts: u32,
    calls: &mut Calls,
) -> Result<(), RunError> {
    let stage = &ctx.plan.stages[i];
    let wanted = &stage.columns_read();
    let mut tries = 0;
    loop {
        let cpu0 = crate::os::thread_cpu_time();
        let result = crate::stage::call_and_apply_kept(slot.as_mut(), &batch, wanted);
        let cpu = slot.last_call_cpu().unwrap_or_else(|| crate::os::thread_cpu_time().saturating_sub(cpu0));
        ctx.metrics.stages[i].cpu_ns.fetch_add(cpu.as_nanos() as u64, Ordering::Relaxed);
        let err = match result {
            Ok((b, kept)) => {
                calls.replaced_source |= !kept;
                match take_row_errors(batch.clone(), b) {
                    Ok((input, output, failed)) => {
                        calls.ok.push((input, output));
                        calls.failed.extend(failed);
                    }
                    Err(e) => calls.failed.push((batch, StageFailure::InvalidOutput(e.to_string()))),
                }
                return Ok(());
            }
            Err(e) => e,
        };
        if err.instance_lost() {
            let what = if slot.is_worker_process() { "a worker process" } else { "an instance" };
            tracing::warn!(stage = %stage.label, "{what} was lost: {err}; starting a new one");
            let old = std::mem::replace(slot, instantiate(ctx, i, at)?);
            old.teardown();
        }
        let n = batch.num_rows();
        if err.class() == FailureClass::OutOfMemory && n > 1 {
            tracing::warn!(stage = %stage.label, "a batch of {n} documents ran out of memory; retrying it as two halves");
            let half = n / 2;
            call_resilient(ctx, i, slot, at, batch.slice(0, half), attempts, calls)?;
            return call_resilient(ctx, i, slot, at, batch.slice(half, n - half), attempts, calls);
        }
        tries += 1;
        if tries < attempts && err.class() != FailureClass::Fatal {
            tracing::warn!(stage = %stage.label, "attempt {tries} of {attempts} failed: {err}; retrying");
            continue;
        }
        calls.failed.push((batch, err));
        return Ok(());
    }
}

/// The documents a stage marked failed in its `_error` column (`curator_sdk::ROW_ERROR_COLUMN`),
/// taken out of the call's input and output, each with its reason; the column itself is
/// dropped. Without the column, the call as it is.
#[allow(clippy::type_complexity)]
fn take_row_errors(
    input: RecordBatch,
    output: RecordBatch,
) -> Result<(RecordBatch, RecordBatch, Vec<(RecordBatch, StageFailure)>), arrow_schema::ArrowError> {
    let Ok(at) = output.schema().index_of(curator_sdk::ROW_ERROR_COLUMN) else { return Ok((input, output, Vec::new())) };
    let mut output = output;
    let reasons = output.remove_column(at);
    let reasons = reasons.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
        arrow_schema::ArrowError::InvalidArgumentError(format!("the {:?} column must be utf8", curator_sdk::ROW_ERROR_COLUMN))
    })?;
    if reasons.null_count() == reasons.len() {
        return Ok((input, output, Vec::new()));
    }
    let failed: Vec<(RecordBatch, StageFailure)> = (0..reasons.len())
        .filter(|&i| reasons.is_valid(i))
        .map(|i| (output.slice(i, 1), StageFailure::Failed(reasons.value(i).to_string())))
        .collect();
    let ok_mask = BooleanArray::from_iter((0..reasons.len()).map(|i| Some(reasons.is_null(i))));
    let output = arrow_select::filter::filter_record_batch(&output, &ok_mask)?;
    let failed_rows: std::collections::HashSet<i64> = failed.iter().filter_map(|(b, _)| row_numbers(b).map(|r| r.value(0))).collect();
    let input = match row_numbers(&input) {
        Some(rows) => {
            let mask = BooleanArray::from_iter(rows.values().iter().map(|r| Some(!failed_rows.contains(r))));
            arrow_select::filter::filter_record_batch(&input, &mask)?
        }
        None => input,
    };
    Ok((input, output, failed))
}

/// Add the totals of the int64 columns `names` (the manifest's `sums`) of a stage's output.
fn add_sums(names: &[String], out: &RecordBatch, totals: &Mutex<std::collections::BTreeMap<String, i64>>) {
    if names.is_empty() {
        return;
    }
    let mut totals = totals.lock().unwrap_or_else(|e| e.into_inner());
    for name in names {
        if let Some(v) = out.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<Int64Array>()) {
            *totals.entry(name.clone()).or_default() += v.iter().flatten().sum::<i64>();
        }
    }
}

/// Rows `[min, max + 1)` of the `_row` column, and the ids, of a failed part.
fn failed_rows(batch: &RecordBatch) -> (Option<[u64; 2]>, Vec<String>) {
    let rows = row_numbers(batch).and_then(|r| {
        let (lo, hi) = (r.values().iter().min()?, r.values().iter().max()?);
        Some([*lo as u64, *hi as u64 + 1])
    });
    let ids = batch
        .column_by_name(crate::io::ID)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .map(|a| (0..a.len()).map(|i| a.value(i).to_string()).collect())
        .unwrap_or_default();
    (rows, ids)
}

fn row_numbers(batch: &RecordBatch) -> Option<&Int64Array> {
    batch.column_by_name(crate::io::ROW).and_then(|c| c.as_any().downcast_ref::<Int64Array>())
}

/// The documents of `input` that are not in `output` (matched by `_row`); `None` when the
/// output lost the row numbers (a stage that built a new batch).
fn dropped_rows(input: &RecordBatch, output: &RecordBatch) -> Option<RecordBatch> {
    if output.num_rows() == input.num_rows() {
        return Some(input.slice(0, 0));
    }
    let kept: std::collections::HashSet<i64> = row_numbers(output)?.values().iter().copied().collect();
    let rows = row_numbers(input)?;
    let mask = BooleanArray::from_iter(rows.values().iter().map(|r| Some(!kept.contains(r))));
    arrow_select::filter::filter_record_batch(input, &mask).ok()
}

fn concat(batches: &[RecordBatch], empty: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    match batches {
        [] => Ok(empty.slice(0, 0)),
        [one] => Ok(one.clone()),
        many => arrow_select::concat::concat_batches(&many[0].schema(), many),
    }
}

/// Run stage `i` on a task: chunks of the stage's batch size, retries and OOM splits, failed
/// parts dead-lettered (or the run failed), branch outputs attached.
pub(crate) fn run_stage(ctx: &Ctx, i: usize, inst: &mut Instance, at: &Placement, mut task: Task) -> Result<Task, RunError> {
    let stage = &ctx.plan.stages[i];
    let c = &ctx.metrics.stages[i];
    let empty = RecordBatch::new_empty(task.batch.schema());
    let batch = std::mem::replace(&mut task.batch, empty);
    let rows = batch.num_rows();
    if rows == 0 {
        task.batch = batch;
        return Ok(task);
    }
    let started = Instant::now();
    c.bytes_in.fetch_add(super::text_bytes(&batch), Ordering::Relaxed);
    // A stage with a `text_field` sees that column as `text`; the names go back once it answers.
    let batch = match &stage.text_field {
        Some(f) => crate::stage::input::swap_text(&batch, f).map_err(|e| RunError::stage(stage, &task.meta, e))?,
        None => batch,
    };
    let unswap = |b: RecordBatch| -> Result<RecordBatch, RunError> {
        let Some(f) = &stage.text_field else { return Ok(b) };
        crate::stage::input::swap_text(&b, f).map_err(|_| {
            let why = format!(
                "run with text_field {f:?}, the stage returned a batch without the document's text (its {f:?} column as the stage saw it): \
                 a stage that returns whole batches must take and keep every column"
            );
            RunError::stage(stage, &task.meta, StageFailure::InvalidOutput(why))
        })
    };
    let chunk = stage.batch_size.unwrap_or(rows).max(1);
    let mut calls = Calls::default();
    for start in (0..rows).step_by(chunk) {
        let part = batch.slice(start, chunk.min(rows - start));
        call_resilient(ctx, i, inst, at, part, ctx.plan.spec.execution.num_run_attempts, &mut calls)?;
    }
    let mut failed_docs = 0u64;
    for (part, err) in calls.failed {
        let (range, ids) = failed_rows(&part);
        if !ctx.plan.spec.execution.ignore_failures {
            let mut meta = task.meta.clone();
            if let Some([a, b]) = range {
                meta.first_row = a;
                meta.num_rows = b - a;
            }
            return Err(RunError::stage(stage, &meta, err));
        }
        failed_docs += part.num_rows() as u64;
        task.dead.push(DeadLetter {
            stage: stage.label.clone(),
            plugin: stage.plugin.path.display().to_string(),
            source: task.meta.source.clone(),
            rows: range,
            documents: part.num_rows() as u64,
            error: err.to_string(),
            ids,
        });
    }
    let schema_error = |e: arrow_schema::ArrowError| {
        RunError::stage(stage, &task.meta, StageFailure::InvalidOutput(format!("chunks disagree on schema: {e}")))
    };
    let outputs: Vec<RecordBatch> = calls.ok.iter().map(|(_, o)| o.clone()).collect();
    let out = unswap(concat(&outputs, &batch).map_err(schema_error)?)?;
    for &(b, kind) in &ctx.branches_of[i] {
        let side = match kind {
            BranchKind::Tee => out.clone(),
            BranchKind::Rejected => {
                let dropped: Vec<RecordBatch> = calls.ok.iter().filter_map(|(input, output)| dropped_rows(input, output)).collect();
                unswap(concat(&dropped, &batch).map_err(schema_error)?)?
            }
        };
        task.side.push((b, side));
    }
    add_sums(&stage.plugin.manifest.sums, &out, &c.sums);
    c.docs_in.fetch_add(rows as u64, Ordering::Relaxed);
    c.docs_out.fetch_add(out.num_rows() as u64, Ordering::Relaxed);
    c.failed.fetch_add(failed_docs, Ordering::Relaxed);
    c.batches.fetch_add(1, Ordering::Relaxed);
    c.busy_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    task.batch = out;
    task.source_columns &= !calls.replaced_source;
    Ok(task)
}
