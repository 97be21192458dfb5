//! `curator-host tune`: measure a GPU stage's batch size (its `max_batch_tokens`) on a sample
//! of the pipeline's own input, inside the stage's own worker process, and pick the size with
//! `curator_core::tune`. Each size runs in a fresh worker (so its peak is its own), with the
//! whole card allowed, while a thread samples the worker's GPU memory through NVML; the
//! choice then keeps the peak under the margin of the stage's budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use curator_core::tune::{Trial, pick, sizes, stop};
use curator_sdk::abi::WorkerContext;

use crate::exec::bench::read_sample;
use crate::exec::instance::{Placement, worker_limits};
use crate::plan::{Plan, PlannedStage};
use crate::stage::{StageCall, call_and_apply};
use crate::worker::{WorkerPlugin, WorkerProcess};

/// The param a tunable stage exposes: padded tokens per forward pass.
pub const TUNABLE: &str = "max_batch_tokens";

/// What `tune` is asked.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// The stage's label; default: every GPU stage with a [`TUNABLE`] param.
    pub stage: Option<String>,
    /// The budget to fit, GiB (default: the stage's `gpu_memory_gb`, or its cards).
    pub gpu_memory_gb: Option<f64>,
    /// Share of the budget the peak may reach.
    pub margin: f64,
    /// Documents of the pipeline's input to run at each size.
    pub sample_docs: usize,
    /// The smallest size tried.
    pub start: usize,
}

/// One stage's sweep.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StageTune {
    pub label: String,
    /// The stage's index in the pipeline file's `stages:` list.
    pub index: usize,
    pub budget_bytes: u64,
    pub margin: f64,
    pub current: Option<u64>,
    pub sample_docs: usize,
    #[serde(serialize_with = "ser_trials")]
    pub trials: Vec<Trial>,
    pub pick: Option<usize>,
}

fn ser_trials<S: serde::Serializer>(t: &[Trial], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(t.len()))?;
    for x in t {
        seq.serialize_element(
            &serde_json::json!({"size": x.size, "peak_bytes": x.peak_bytes, "docs_per_s": x.docs_per_s, "failed": x.failed}),
        )?;
    }
    seq.end()
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("{0}")]
    Stage(String),
    #[error(transparent)]
    Read(#[from] crate::exec::bench::BenchError),
}

/// The stages `opts` selects, each with why it can or cannot be tuned.
pub fn tunable_stages<'a>(plan: &'a Plan, opts: &TuneOptions) -> Result<Vec<&'a PlannedStage>, TuneError> {
    let has_knob = |s: &PlannedStage| s.plugin.manifest.params_schema.get("properties").and_then(|p| p.get(TUNABLE)).is_some();
    let on_gpu = |s: &PlannedStage| !s.gpu.is_empty();
    match &opts.stage {
        Some(label) => {
            let s = plan.stages.iter().find(|s| &s.label == label).ok_or_else(|| {
                TuneError::Stage(format!(
                    "no stage {label:?} in the pipeline (stages: {})",
                    plan.stages.iter().map(|s| s.label.as_str()).collect::<Vec<_>>().join(", ")
                ))
            })?;
            if !has_knob(s) {
                return Err(TuneError::Stage(format!("stage {label:?} has no `{TUNABLE}` param: nothing to tune")));
            }
            if !on_gpu(s) {
                return Err(TuneError::Stage(format!("stage {label:?} does not run on a GPU (no gpus or gpu_memory_gb)")));
            }
            Ok(vec![s])
        }
        None => {
            let found: Vec<&PlannedStage> = plan.stages.iter().filter(|s| has_knob(s) && on_gpu(s)).collect();
            if found.is_empty() {
                return Err(TuneError::Stage(format!("no GPU stage with a `{TUNABLE}` param in the pipeline")));
            }
            Ok(found)
        }
    }
}

/// Sweep `stage` on `sample`, with `card_bytes` of GPU memory allowed to the worker.
pub fn tune_stage(stage: &PlannedStage, sample: &[RecordBatch], card_bytes: u64, opts: &TuneOptions) -> Result<StageTune, TuneError> {
    let budget_bytes = match opts.gpu_memory_gb {
        Some(gb) => (gb * (1u64 << 30) as f64) as u64,
        None => stage.gpu.first().map(|a| a.memory_budget_mb << 20).unwrap_or(card_bytes),
    };
    // A stage with a `text_field` sees that column as its text, as in a run.
    let swapped: Vec<RecordBatch> = match &stage.text_field {
        Some(f) => sample
            .iter()
            .map(|b| crate::stage::input::swap_text(b, f))
            .collect::<Result<_, _>>()
            .map_err(|e| TuneError::Stage(format!("{}: {e}", stage.label)))?,
        None => sample.to_vec(),
    };
    let sample = &swapped[..];
    let mut trials: Vec<Trial> = Vec::new();
    for size in sizes(opts.start) {
        let t = trial(stage, sample, size, card_bytes);
        tracing::info!(stage = %stage.label, size, peak_mib = t.peak_bytes >> 20, docs_per_s = t.docs_per_s as u64, failed = ?t.failed, "tune trial");
        trials.push(t);
        if stop(&trials, budget_bytes, opts.margin) {
            break;
        }
    }
    Ok(StageTune {
        label: stage.label.clone(),
        index: stage.index,
        budget_bytes,
        margin: opts.margin,
        current: stage.params.get(TUNABLE).and_then(|v| v.as_u64()),
        sample_docs: sample.iter().map(|b| b.num_rows()).sum(),
        pick: pick(&trials, budget_bytes, opts.margin),
        trials,
    })
}

/// Run the sample at one size in a fresh worker; a failure is a result, not an error.
fn trial(stage: &PlannedStage, sample: &[RecordBatch], size: usize, card_bytes: u64) -> Trial {
    let mut params = stage.params.clone();
    if let Some(map) = params.as_object_mut() {
        map.insert(TUNABLE.into(), serde_json::json!(size));
    }
    let at = Placement { k: 0, gpu: stage.gpu.first().cloned() };
    let mut limits = worker_limits(stage, &crate::os::allowed_cpus(), &at);
    limits.cpus.clear();
    limits.gpu_memory_budget_bytes = Some(card_bytes);
    let context = WorkerContext {
        worker: 0,
        gpu_memory_budget_bytes: Some(card_bytes),
        cuda_visible_devices: limits.cuda_visible_devices.clone(),
        dirs: stage.grants.iter().map(|g| (g.name.clone(), g.host_path.display().to_string())).collect(),
        cache_dir: crate::os::default_cache_dir().map(|d| d.display().to_string()),
        check_only: false,
        service: stage.service.clone(),
    };
    let failed = |why: String| Trial { size, peak_bytes: 0, docs_per_s: 0.0, failed: Some(why) };
    let worker = match WorkerProcess::spawn(&stage.label, &stage.plugin.path, WorkerPlugin::Native, &params, &context, &limits) {
        Ok(w) => w,
        Err(e) => return failed(e.to_string()),
    };
    let pid = worker.pid();
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            let Ok(nvml) = nvml_wrapper::Nvml::init() else { return };
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(crate::worker::gpu_used_by(&nvml, pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
            peak.fetch_max(crate::worker::gpu_used_by(&nvml, pid), Ordering::Relaxed);
        })
    };
    let mut worker: Box<dyn StageCall> = Box::new(worker);
    let wanted = &stage.columns_read();
    // Warm-up (kernels, cuBLAS heuristics, the allocator) on a slice, not timed.
    let result = sample
        .first()
        .map_or(Ok(()), |b| call_and_apply(worker.as_mut(), &b.slice(0, b.num_rows().min(256)), wanted).map(|_| ()))
        .and_then(|_| {
            let t = Instant::now();
            let mut docs = 0;
            for b in sample {
                call_and_apply(worker.as_mut(), b, wanted)?;
                docs += b.num_rows();
            }
            Ok(docs as f64 / t.elapsed().as_secs_f64().max(1e-9))
        });
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    worker.teardown();
    match result {
        Ok(docs_per_s) => Trial { size, peak_bytes: peak.load(Ordering::Relaxed), docs_per_s, failed: None },
        Err(e) => Trial { size, peak_bytes: peak.load(Ordering::Relaxed), docs_per_s: 0.0, failed: Some(e.to_string()) },
    }
}

/// Read the sample and sweep every selected stage.
pub fn tune(plan: &Plan, opts: &TuneOptions, card_bytes: u64) -> Result<Vec<StageTune>, TuneError> {
    let stages = tunable_stages(plan, opts)?;
    let sample = read_sample(plan, opts.sample_docs)?;
    stages.into_iter().map(|s| tune_stage(s, &sample, card_bytes, opts)).collect()
}

/// One stage's sweep for people: the card and budget, the table, the recommendation.
pub fn report(t: &StageTune, card: &str, card_mb: u64) -> String {
    let pick = match t.pick {
        Some(p) => format!("recommendation: {TUNABLE}: {p} (now {})", t.current.map_or("the default".into(), |c| c.to_string())),
        None => "recommendation: none: no size stayed under the margin; raise the stage's gpu_memory_gb".into(),
    };
    format!(
        "stage {} on {card} ({card_mb} MiB), budget {} MiB × margin {:.2}, {} documents per size:\n{}\n{pick}\n",
        t.label,
        t.budget_bytes >> 20,
        t.margin,
        t.sample_docs,
        render(t)
    )
}

/// The sweep as a table: size, peak MiB, % of budget, docs/s, and what the size means.
pub fn render(t: &StageTune) -> String {
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::NOTHING).set_header(vec![TUNABLE, "peak MiB", "% of budget", "docs/s", ""]);
    for x in &t.trials {
        let note = match (x.fit(t.budget_bytes, t.margin), t.pick == Some(x.size)) {
            (_, true) => "<- pick".to_string(),
            (curator_core::tune::Fit::Fits, _) => String::new(),
            (curator_core::tune::Fit::OverMargin, _) => format!("over {:.0} % of the budget", t.margin * 100.0),
            (curator_core::tune::Fit::Failed, _) => format!("failed: {}", x.failed.as_deref().unwrap_or("")).chars().take(100).collect(),
        };
        table.add_row(vec![
            x.size.to_string(),
            (x.peak_bytes >> 20).to_string(),
            format!("{:.0}", 100.0 * x.peak_bytes as f64 / t.budget_bytes.max(1) as f64),
            format!("{:.0}", x.docs_per_s),
            note,
        ]);
    }
    for c in table.column_iter_mut() {
        c.set_padding((0, 2));
    }
    table.trim_fmt()
}

/// Write each pick into the pipeline file at `path` (comments and layout kept) after copying
/// the file to `<path>.backup`; the edited text is parsed back and must differ from the
/// original in exactly those params. Returns the backup's path.
pub fn apply(path: &std::path::Path, results: &[StageTune]) -> Result<std::path::PathBuf, TuneError> {
    let io = |e: std::io::Error| TuneError::Stage(format!("{}: {e}", path.display()));
    let original = std::fs::read_to_string(path).map_err(io)?;
    let mut text = original.clone();
    for t in results {
        if let Some(size) = t.pick {
            text = curator_core::pipeline_edit::set_stage_param(&text, t.index, TUNABLE, &size.to_string())
                .map_err(|e| TuneError::Stage(format!("{}: {e}", path.display())))?;
        }
    }
    // Check: the same pipeline but for the picked params.
    let label = path.display().to_string();
    let parse = |s: &str| {
        curator_core::PipelineSpec::from_yaml(&label, s).map_err(|e| TuneError::Stage(format!("the edited file does not parse: {e}")))
    };
    let (mut before, after) = (parse(&original)?, parse(&text)?);
    for t in results {
        if let (Some(size), Some(curator_core::Step::Plugin(s))) = (t.pick, before.stages.get_mut(t.index))
            && let Some(map) = s.params.as_object_mut()
        {
            map.insert(TUNABLE.into(), serde_json::json!(size));
        }
    }
    if before != after {
        return Err(TuneError::Stage(format!("editing {} would change more than {TUNABLE}; set it by hand", path.display())));
    }
    let backup = std::path::PathBuf::from(format!("{}.backup", path.display()));
    std::fs::write(&backup, &original).map_err(io)?;
    std::fs::write(path, text).map_err(io)?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(index: usize, pick: Option<usize>) -> StageTune {
        StageTune {
            label: "embedder".into(),
            index,
            budget_bytes: 4 << 30,
            margin: 0.85,
            current: None,
            sample_docs: 10,
            trials: Vec::new(),
            pick,
        }
    }

    const FILE: &str = "# tuned by hand in May\nsource: {path: in}\nstages:\n  - plugin: word_count_filter  # cheap first\n  - plugin: embedder\n    params:\n      model: /models/m   # fp16 copy\n      max_batch_tokens: 4096\n    resources: {gpu_memory_gb: 4}\n    grants: {models: /data/models}\nsink: {path: out, format: parquet}\n";

    #[test]
    fn apply_writes_the_pick_keeps_comments_and_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.yaml");
        std::fs::write(&path, FILE).unwrap();
        let backup = apply(&path, &[result(1, Some(32768))]).unwrap();
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), FILE);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), FILE.replace("max_batch_tokens: 4096", "max_batch_tokens: 32768"));
        // No pick: nothing changes but the backup is still written.
        std::fs::write(&path, FILE).unwrap();
        apply(&path, &[result(1, None)]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), FILE);
    }

    #[test]
    fn apply_refuses_an_edit_that_would_change_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.yaml");
        // A multi-line flow mapping is not edited; the file is left alone.
        let odd = FILE.replace(
            "    params:\n      model: /models/m   # fp16 copy\n      max_batch_tokens: 4096\n",
            "    params: {model: /models/m,\n      max_batch_tokens: 4096}\n",
        );
        std::fs::write(&path, &odd).unwrap();
        assert!(apply(&path, &[result(1, Some(8192))]).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), odd);
        assert!(!dir.path().join("p.yaml.backup").exists());
    }
}
