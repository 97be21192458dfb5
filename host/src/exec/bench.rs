//! `curator-host bench`: each stage of a pipeline timed on the pipeline's own input, in this
//! process, as the WASM component and (when a native build of the same stage is given) as a
//! native library, on identical batches. Stage k's input is what stages 0..k kept, so every
//! stage sees the documents it would see in a run. Timed: the call and the conversion of its
//! input and output (what a worker pays per batch); not timed: reading, writing, scheduling.

use std::path::Path;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use curator_core::PluginKind;

use super::Loaded;
use super::instance::{Placement, instance_limits, start_instance};
use crate::io::IoError;
use crate::plan::{Plan, PlannedStage};
use crate::stage::{StageCall, StageFailure, call_and_apply};
use crate::wasm::WasmRuntime;
use crate::worker::ffi::Library;

/// Why a bench could not finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Read(#[from] IoError),
    #[error("stage {label:?} (plugin {plugin}): {source}")]
    Stage { label: String, plugin: String, source: StageFailure },
}

/// One stage's timings.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StageBench {
    pub label: String,
    pub docs_in: u64,
    pub docs_out: u64,
    pub bytes_in: u64,
    /// Best of the repeats, seconds, WASM component.
    pub wasm_s: Option<f64>,
    /// Whether the WASM timing is of code without deadline checks (`isolation: process`).
    pub worker_process: bool,
    /// Best of the repeats, seconds, native library (in process: no worker transport).
    pub native_s: Option<f64>,
    /// The native build kept a different number of documents (a bug in one of the builds).
    pub outputs_differ: bool,
}

/// Read the plan's whole input (all partitions) in batches of the plan's batch size.
fn read_all(plan: &Plan) -> Result<Vec<RecordBatch>, BenchError> {
    read_sample(plan, usize::MAX)
}

/// The pipeline's input from the start, in its batch size, until `max_docs` documents.
pub fn read_sample(plan: &Plan, max_docs: usize) -> Result<Vec<RecordBatch>, BenchError> {
    Ok(plan.read_sample(max_docs)?)
}

fn stage_error(stage: &PlannedStage, source: impl Into<StageFailure>) -> BenchError {
    BenchError::Stage { label: stage.label.clone(), plugin: stage.plugin.path.display().to_string(), source: source.into() }
}

/// The best of `repeat` passes of `call` over `batches`, and the last pass's outputs. A
/// stage with a `text_field` sees that column as its text, as in a run (`run_stage`), and the
/// swap is timed with it.
fn best_of(
    stage: &PlannedStage,
    batches: &[RecordBatch],
    repeat: usize,
    mut call: impl FnMut(&RecordBatch) -> Result<RecordBatch, StageFailure>,
) -> Result<(Duration, Vec<RecordBatch>), BenchError> {
    let mut best = Duration::MAX;
    let mut outputs = Vec::new();
    for _ in 0..repeat.max(1) {
        outputs.clear();
        let t = Instant::now();
        for b in batches {
            let out = match &stage.text_field {
                Some(f) => crate::stage::input::swap_text(b, f).and_then(|b| call(&b)).and_then(|o| crate::stage::input::swap_text(&o, f)),
                None => call(b),
            };
            outputs.push(out.map_err(|e| stage_error(stage, e))?);
        }
        best = best.min(t.elapsed());
    }
    Ok((best, outputs))
}

/// Time `stage` as WASM over `batches`.
fn time_wasm(
    stage: &PlannedStage,
    runtime: &WasmRuntime,
    batches: &[RecordBatch],
    repeat: usize,
) -> Result<(Duration, Vec<RecordBatch>), BenchError> {
    // A stage run in worker processes is compiled as its workers compile it: without deadline
    // checks (timed here in process, without the worker's copies; one that never returns
    // hangs the bench, where a run would stop its worker).
    let compiled = if stage.isolation == curator_core::Isolation::Process {
        crate::worker::compile_wasm(&stage.plugin.path, stage.plugin.manifest.clone(), runtime)
    } else {
        runtime.load(&stage.plugin.path, stage.plugin.manifest.clone()).map_err(StageFailure::from)
    }
    .map_err(|e| stage_error(stage, e))?;
    let mut inst = compiled.instantiate(&stage.label, &stage.params, &instance_limits(stage)).map_err(|e| stage_error(stage, e))?;
    let wanted = &stage.columns_read();
    let timed = best_of(stage, batches, repeat, |b| call_and_apply(&mut inst, b, wanted));
    inst.teardown();
    timed
}

/// Time the native build of the stage (`library`) in this process over `batches`.
fn time_native(
    stage: &PlannedStage,
    library: &Path,
    batches: &[RecordBatch],
    repeat: usize,
) -> Result<(Duration, Vec<RecordBatch>), BenchError> {
    let lib = Library::load(library).map_err(|e| stage_error(stage, e))?;
    let params = serde_json::to_string(&stage.params).unwrap_or_else(|_| "{}".into());
    let mut inst = lib.create(&params, &curator_sdk::abi::WorkerContext::default()).map_err(|e| stage_error(stage, e))?;
    let wanted = &stage.columns_read();
    best_of(stage, batches, repeat, |b| call_and_apply(&mut inst as &mut dyn StageCall, b, wanted))
}

/// Time a native stage as a run runs it: in a worker process of its own (started, and warmed
/// up on a slice of the first batch — kernels, allocator — before the clock starts).
fn time_in_worker(stage: &PlannedStage, batches: &[RecordBatch], repeat: usize) -> Result<(Duration, Vec<RecordBatch>), BenchError> {
    let at = Placement { k: 0, gpu: stage.gpu.first().cloned() };
    let cache = crate::os::default_cache_dir();
    let mut inst = start_instance(stage, &Loaded::Native, &crate::os::allowed_cpus(), cache.as_deref(), &at, false)
        .map_err(|e| stage_error(stage, e))?;
    let wanted = &stage.columns_read();
    if let Some(b) = batches.first() {
        call_and_apply(inst.as_mut(), &b.slice(0, b.num_rows().min(256)), wanted).map_err(|e| stage_error(stage, e))?;
    }
    let timed = best_of(stage, batches, repeat, |b| call_and_apply(inst.as_mut(), b, wanted));
    inst.teardown();
    timed
}

fn rows(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

fn text_bytes(batches: &[RecordBatch]) -> u64 {
    batches
        .iter()
        .filter_map(|b| b.column_by_name("text").and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>()))
        .map(|a| a.values().len() as u64)
        .sum()
}

/// Bench every stage of `plan` (WASM) and, where `native` has a plan whose stage of the same
/// index is a native library, that build too.
pub fn bench(plan: &Plan, native: Option<&Plan>, runtime: &WasmRuntime, repeat: usize) -> Result<Vec<StageBench>, BenchError> {
    // As in a worker process: large freed blocks are reused, not handed back to the OS (else
    // the native build pays a page fault per page of every batch copy, which its worker
    // process would not).
    crate::os::keep_large_allocations();
    let mut batches = read_all(plan)?;
    let mut out = Vec::with_capacity(plan.stages.len());
    for (i, stage) in plan.stages.iter().enumerate() {
        let docs_in = rows(&batches);
        let bytes_in = text_bytes(&batches);
        let (wasm_s, outputs) = if stage.plugin.manifest.kind == PluginKind::Wasm {
            let (d, o) = time_wasm(stage, runtime, &batches, repeat)?;
            (Some(d.as_secs_f64()), Some(o))
        } else {
            (None, None)
        };
        let native_stage = native.and_then(|n| n.stages.get(i)).filter(|s| s.plugin.manifest.kind == PluginKind::Native);
        let (native_s, native_out) = match native_stage {
            Some(ns) => {
                let (d, o) = time_native(stage, &ns.plugin.path, &batches, repeat)?;
                (Some(d.as_secs_f64()), Some(o))
            }
            // The pipeline's own native stage (a GPU model, say): its output feeds the next.
            None if stage.plugin.manifest.kind == PluginKind::Native => {
                let (d, o) = time_in_worker(stage, &batches, repeat)?;
                (Some(d.as_secs_f64()), Some(o))
            }
            None => (None, None),
        };
        let outputs_differ = matches!((&outputs, &native_out), (Some(a), Some(b)) if rows(a) != rows(b));
        let next = outputs.or(native_out).unwrap_or_default();
        let worker_process = stage.isolation == curator_core::Isolation::Process;
        out.push(StageBench {
            label: stage.label.clone(),
            docs_in,
            docs_out: rows(&next),
            bytes_in,
            wasm_s,
            worker_process,
            native_s,
            outputs_differ,
        });
        batches = next.into_iter().filter(|b| b.num_rows() > 0).collect();
    }
    Ok(out)
}
