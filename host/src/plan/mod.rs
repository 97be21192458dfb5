//! From a pipeline file to a checked plan: every stage resolved to a plugin, params checked
//! against its schema, resources merged and validated, grants matched to requests, inputs
//! listed and output names fixed. Nothing here reads documents.

pub mod capacity;
mod checks;
mod dedup_step;
pub mod lock;
mod outputs;
mod partitions;
pub mod report;
mod sample;
pub mod services;
mod stages;
pub mod workdirs;

pub use dedup_step::PlannedDedup;
pub use outputs::{merged_manifest, partition_output_name};

use checks::{check_memory, place_gpu_stages};
use outputs::{describe, plan_branches};

use std::path::{Path, PathBuf};
use std::time::Duration;

use curator_core::partition::Part;
use curator_core::pipeline::{DEFAULT_IMAGE_BATCH_BYTES, DEFAULT_MAX_LINE_BYTES, WriteMode};
use curator_core::placement::Assignment;
use curator_core::{Isolation, MemoryBudget, PipelineSpec, PluginKind, Resources, Runs, SinkSpec, SpecError};

use crate::io::journal::Journal;
use crate::io::writer::{OutputManifest, WrittenFile};
use crate::io::{self, InputFile, IoError, Loc};
use crate::registry::{PluginEntry, Registry};
use crate::wasm::DirGrant;

/// One stage, ready to compile and instantiate.
#[derive(Debug, Clone)]
pub struct PlannedStage {
    pub index: usize,
    pub label: String,
    pub plugin: PluginEntry,
    pub params: serde_json::Value,
    pub resources: Resources,
    pub batch_size: Option<usize>,
    pub timeout: Duration,
    pub grants: Vec<DirGrant>,
    /// Where its instances run (native stages: always [`Isolation::Process`]).
    pub isolation: Isolation,
    /// Memory per worker: reserved by the scheduler, enforced on the worker (one number).
    pub memory: MemoryBudget,
    /// `num_workers` from the pipeline.
    pub num_workers: Option<usize>,
    /// GPU stages: one assignment per worker, placed at planning (the worker count).
    pub gpu: Vec<Assignment>,
    /// A stage the host itself carries out (no plugin file).
    pub builtin: Option<Builtin>,
    /// `text_field` of the pipeline's entry: the column its calls see as `text` (none: the
    /// document's text).
    pub text_field: Option<String>,
    /// The service (of `services:`) its workers may send requests to: an endpoint's URL, or
    /// none until the run starts the service (`exec::services`).
    pub service: Option<curator_sdk::abi::ServiceContext>,
}

/// Stages the host carries out itself.
#[derive(Debug, Clone)]
pub enum Builtin {
    /// Drop documents whose id is in the files at `paths` (column or field `field`).
    RemoveIds { paths: Vec<Loc>, field: String },
}

impl PlannedStage {
    /// The columns its calls are given: the manifest's `input_columns` and the columns its
    /// `input_params` name with this stage's params.
    pub fn columns_read(&self) -> Vec<String> {
        self.plugin.manifest.columns_read(&self.params)
    }

    /// A worker count nobody may change: `num_workers`, or what GPU placement decided.
    pub fn fixed_workers(&self) -> Option<usize> {
        self.num_workers.or((!self.gpu.is_empty()).then_some(self.gpu.len()))
    }

    /// Where its instances run, for the memory policy.
    pub fn runs(&self) -> Runs {
        match (self.plugin.manifest.kind, self.isolation) {
            (PluginKind::Native, _) => Runs::NativeWorker,
            (PluginKind::Wasm, Isolation::Process) => Runs::WasmWorker,
            (PluginKind::Wasm, Isolation::InProcess) => Runs::WasmInProcess,
        }
    }
}

/// A partition and where its kept documents go.
#[derive(Debug, Clone)]
pub struct PlannedPartition {
    pub index: usize,
    pub parts: Vec<Part>,
    /// Output file name, relative to the output directory.
    pub output_rel: String,
    pub output: Loc,
}

/// Which documents of a stage a branch takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BranchKind {
    /// The documents the stage dropped (not those that failed: they are dead-lettered).
    Rejected,
    /// A copy of the documents the stage kept.
    Tee,
}

/// A second sink fed by one stage: one output file per partition, named as the main sink's.
#[derive(Debug, Clone)]
pub struct PlannedBranch {
    pub stage: usize,
    pub kind: BranchKind,
    pub sink: SinkSpec,
    pub dir: Loc,
    /// Per planned partition (same order as `Plan::partitions`): name relative to `dir`, and place.
    pub outputs: Vec<(String, Loc)>,
    pub prior_manifest: OutputManifest,
    /// Files an interrupted earlier run finished for this branch.
    pub resumed: Vec<WrittenFile>,
}

/// A checked pipeline.
#[derive(Debug, Clone)]
pub struct Plan {
    pub spec: PipelineSpec,
    pub file_label: String,
    pub stages: Vec<PlannedStage>,
    pub inputs: Vec<InputFile>,
    /// Partitions to process (in `ignore` mode, those whose output exists are left out).
    pub partitions: Vec<PlannedPartition>,
    /// Partitions skipped because their output exists (`ignore` mode).
    pub skipped: usize,
    pub output_dir: Loc,
    /// The output manifest found in the output directory before the run.
    pub prior_manifest: OutputManifest,
    /// Partitions an interrupted earlier run finished (from its journal); not run again.
    pub resumed: Vec<WrittenFile>,
    /// Side sinks (`rejected:` and `tee:` of stages), in stage order.
    pub branches: Vec<PlannedBranch>,
    /// The dedup step, if the pipeline has one.
    pub dedup: Option<PlannedDedup>,
    /// The shard this run is (`--shard I/N`): `partitions` holds only the ones it owns.
    pub shard: Option<curator_core::shard::Shard>,
    /// The run's hold on its output (with `PlanOptions::hold_output`), released when the
    /// last clone of the plan is dropped.
    pub run_lock: Option<std::sync::Arc<crate::io::run_lock::RunLock>>,
    /// The one phase of the dedup step this run is (`--phase`), with its shard (0 of 1 when
    /// none was given).
    pub phase: Option<(curator_core::shard::Phase, curator_core::shard::Shard)>,
    /// What the outputs depend on (the pipeline and its input listing), so that shards of
    /// different plans are never merged.
    pub fingerprint: String,
    /// Where the run works besides its outputs (`workdirs.rs`: decided here, once).
    pub workdirs: workdirs::WorkDirs,
    /// The pipeline's `services:`, placed (`services.rs`).
    pub services: Vec<services::PlannedService>,
}

impl Plan {
    /// Documents per batch the source reads ([`PipelineSpec::read_batch_size`] over the
    /// resolved batch sizes of the stages placed on a GPU).
    pub fn read_batch_size(&self) -> usize {
        self.spec.read_batch_size(self.stages.iter().filter(|s| !s.gpu.is_empty()).map(|s| s.batch_size))
    }

    /// `file`, `file bytes a..b` or `file row groups a..b`, for messages and manifests.
    pub fn describe_part(&self, part: &Part) -> String {
        describe(&self.inputs, part)
    }

    /// Where a partition's documents came from.
    pub fn sources(&self, p: &PlannedPartition) -> Vec<String> {
        p.parts.iter().map(|part| self.describe_part(part)).collect()
    }

    /// This run's journal file name (one per shard).
    pub fn journal_name(&self) -> String {
        Journal::name(self.shard)
    }

    pub fn max_line_bytes(&self) -> u64 {
        self.spec.source.max_line_bytes.as_ref().and_then(|s| s.bytes()).unwrap_or(DEFAULT_MAX_LINE_BYTES)
    }

    /// How the source's records are read (`strict`: stop at the first bad line).
    pub fn read_options(&self, strict: bool) -> crate::io::records::ReadOptions {
        let src = &self.spec.source;
        crate::io::records::ReadOptions {
            text_field: src.text_field.clone(),
            id_field: src.id_field.clone(),
            fields: src.fields.clone(),
            max_line_bytes: self.max_line_bytes(),
            image_batch_bytes: usize::try_from(src.image_batch_bytes.as_ref().and_then(|s| s.bytes()).unwrap_or(DEFAULT_IMAGE_BATCH_BYTES))
                .unwrap_or(usize::MAX),
            strict,
            vectors: self.spec.dedup().and_then(|(_, d)| d.dedup.vector_field()).into_iter().collect(),
            typed: self.columns_stages_read(),
        }
    }

    /// Every column a stage's calls are given, once each (`*` left out).
    pub fn columns_stages_read(&self) -> Vec<String> {
        let mut all: Vec<String> = self.stages.iter().flat_map(|s| s.columns_read()).filter(|c| c != "*").collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Why a pipeline cannot run. Every line names the file and the path in it.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Spec(Vec<SpecError>),
    #[error(transparent)]
    Io(#[from] IoError),
}

impl From<SpecError> for PlanError {
    fn from(e: SpecError) -> Self {
        PlanError::Spec(vec![e])
    }
}

impl From<curator_core::SpecErrors> for PlanError {
    fn from(e: curator_core::SpecErrors) -> Self {
        PlanError::Spec(e.0)
    }
}

/// Starts a planned stage once in a throw-away instance or worker and says whether its own
/// `setup` accepts its params.
pub type SetupCheck<'a> = dyn Fn(&PlannedStage) -> Result<(), crate::stage::StageFailure> + 'a;

/// How far planning goes.
#[derive(Clone, Copy, Default)]
pub struct PlanOptions<'a> {
    /// Ignore (and delete) the journal of an interrupted earlier run.
    pub restart: bool,
    /// Start each stage once in a throw-away instance (or worker) to check that its `setup`
    /// accepts the params: a stage that would refuse them fails the plan, not the run.
    /// The check itself is the executor's (`exec::check_setup`), passed in by the caller: the
    /// planner sits below the executor and never calls up into it.
    pub check_setup: Option<&'a SetupCheck<'a>>,
    /// Plan a dedup step for this much memory instead of this machine's available memory.
    pub memory_bytes: Option<u64>,
    /// Run a dedup step even when its planned memory exceeds the machine's.
    pub ignore_memory_plan: bool,
    /// Run only the partitions this shard owns (`curator_core::shard::owners`), or, with a
    /// `phase` that is not sharded over partitions, this shard of the phase's work.
    pub shard: Option<curator_core::shard::Shard>,
    /// Run one phase of the pipeline's dedup step (`run --phase`).
    pub phase: Option<curator_core::shard::Phase>,
    /// Do not check the plugins against the pipeline's lock file (`curator-host lock`,
    /// which writes it).
    pub skip_lock: bool,
    /// Hold the output for a run ([`crate::io::run_lock`]): refuse the plan while another
    /// run writes there. `run` sets it; `plan`, `validate` and dry runs do not.
    pub hold_output: bool,
}

/// A path from the pipeline file: absolute as it is, `~/…` under the home directory (as a
/// shell would), anything else relative to the file's directory.
fn resolve(base: &Path, p: &str) -> PathBuf {
    if let (Some(rest), Some(home)) = (p.strip_prefix("~/"), std::env::home_dir()) {
        return home.join(rest);
    }
    let p = Path::new(p);
    if p.is_absolute() { p.to_path_buf() } else { base.join(p) }
}

/// Read, parse and check a pipeline file against the registry.
pub fn plan_file(path: &Path, registry: &Registry, opts: PlanOptions<'_>) -> Result<Plan, PlanError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| IoError::Open { path: label.clone(), source })?;
    let spec = PipelineSpec::from_yaml(&label, &text)?;
    // A bare file name's parent is "": the current directory (a service's working directory
    // must name it; `current_dir("")` fails as if the command were missing).
    let base = path.parent().filter(|p| !p.as_os_str().is_empty()).map_or_else(|| std::path::PathBuf::from("."), Path::to_path_buf);
    let lock_file = lock::lock_path(path);
    let locked = if opts.skip_lock { None } else { lock::load(&lock_file)? };
    plan_locked(spec, &label, &base, registry, opts, locked.as_ref().map(|l| (lock_file.as_path(), l)))
}

/// Plan a parsed pipeline.
pub fn plan_spec(spec: PipelineSpec, label: &str, base: &Path, registry: &Registry, opts: PlanOptions<'_>) -> Result<Plan, PlanError> {
    plan_locked(spec, label, base, registry, opts, None)
}

/// Create the directories of writable grants that do not exist yet (a stage's output
/// directory, such as `clip_writer`'s `clips`), once every stage resolved cleanly.
fn create_writable_grants(label: &str, stages: &[PlannedStage]) -> Vec<SpecError> {
    let mut errors = Vec::new();
    for s in stages {
        for g in s.grants.iter().filter(|g| g.writable && !g.host_path.exists()) {
            if let Err(e) = std::fs::create_dir_all(&g.host_path) {
                errors.push(SpecError::new(
                    label,
                    format!("stages[{}].grants.{}", s.index, g.name),
                    format!("cannot create {}: {e}", g.host_path.display()),
                ));
            }
        }
    }
    errors
}

/// Check a parsed spec. Relative paths resolve against `base`. Every mistake found is
/// reported at once, each with its path in the file; nothing is created or read but the
/// listing of the inputs (and, with `check_setup`, a throw-away instance per stage), except
/// the missing directories of writable grants once the stages resolved cleanly.
fn plan_locked(
    spec: PipelineSpec,
    label: &str,
    base: &Path,
    registry: &Registry,
    opts: PlanOptions<'_>,
    locked: Option<(&Path, &lock::LockFile)>,
) -> Result<Plan, PlanError> {
    let mut spec = spec;
    let mut errors = Vec::new();
    prepare_sink(&mut spec.sink, label, "sink", base, &mut errors);
    let (stages, services, barrier) = checked_stages(&spec, label, base, registry, opts, locked, &mut errors);
    crate::io::remote::configure_retry(&spec.sink.retry());
    let located = locate(&spec, label, base, &mut errors);
    // The shard that cuts partitions (a buckets or components phase reads all of them).
    let part_shard = opts.shard.filter(|_| opts.phase.is_none_or(|p| p.over_partitions()));
    let journal_name = Journal::name(part_shard);
    // Only a plan that is otherwise sound takes the lock (a refused plan creates nothing).
    let run_lock = match (&located.output_dir, opts.hold_output && errors.is_empty()) {
        (Some(d), true) => hold_output(d, label, opts, &mut errors),
        _ => None,
    };
    if spec.sink.mode == WriteMode::Error
        && opts.shard.is_none()
        && opts.phase.is_none()
        && let Some(d) = &located.output_dir
    {
        errors.extend(checks::check_output_empty(label, d, opts.restart, &journal_name));
    }
    let (Some(output_dir), true) = (located.output_dir, errors.is_empty()) else {
        return Err(PlanError::Spec(errors));
    };
    let inputs = located.inputs;
    let parts = partitions::plan_partitions(&spec, &inputs, &output_dir, &journal_name, opts.restart, part_shard, barrier.is_some())?;
    let branches =
        plan_branches(&spec, label, &stages, base, &inputs, &parts.planned, &parts.resumed_branches, parts.resuming, part_shard.is_some())?;
    let dedup = match barrier {
        Some(before) => dedup_step::plan_dedup_step(&spec, label, before, parts.all, &inputs, &output_dir, opts)?,
        None => None,
    };
    dedup_step::check_phase(label, dedup.as_ref(), opts)?;
    let fingerprint = crate::dedup::work::fingerprint(&spec, spec.stages.len().saturating_sub(1), &inputs);
    let workdirs = workdirs::WorkDirs::plan(&spec, &output_dir).map_err(|e| SpecError::new(label, "execution.spill_dir", e.to_string()))?;
    Ok(Plan {
        spec,
        file_label: label.to_string(),
        stages,
        inputs,
        partitions: parts.planned,
        skipped: parts.skipped,
        output_dir,
        prior_manifest: parts.prior_manifest,
        resumed: parts.resumed,
        branches,
        dedup,
        shard: part_shard,
        phase: opts.phase.map(|p| (p, opts.shard.unwrap_or(curator_core::shard::Shard { index: 0, count: 1 }))),
        fingerprint,
        workdirs,
        run_lock,
        services,
    })
}

/// Take the run's lock on its output (one per shard or phase; see `io::run_lock`), or
/// record who holds it.
fn hold_output(
    dir: &Loc,
    label: &str,
    opts: PlanOptions<'_>,
    errors: &mut Vec<SpecError>,
) -> Option<std::sync::Arc<crate::io::run_lock::RunLock>> {
    use crate::io::run_lock::{RunLock, lock_name};
    let tag = match (opts.phase, opts.shard) {
        (None, None) => None,
        (None, Some(s)) => Some(s.tag()),
        (Some(p), None) => Some(p.name().to_string()),
        (Some(p), Some(s)) => Some(format!("{}.{}", p.name(), s.tag())),
    };
    match RunLock::acquire(dir, &lock_name(tag.as_deref()), label) {
        Ok(l) => Some(std::sync::Arc::new(l)),
        Err(e) => {
            errors.push(SpecError::new(label, "sink.path", e.to_string()));
            None
        }
    }
}

/// Every stage resolved, checked against the lock file, placed and (with `check_setup`)
/// started once; also where the dedup barrier falls. Problems go to `errors`.
fn checked_stages(
    spec: &PipelineSpec,
    label: &str,
    base: &Path,
    registry: &Registry,
    opts: PlanOptions<'_>,
    locked: Option<(&Path, &lock::LockFile)>,
    errors: &mut Vec<SpecError>,
) -> (Vec<PlannedStage>, Vec<services::PlannedService>, Option<usize>) {
    let (mut stages, barrier) = stages::plan_stages(spec, label, base, registry, errors);
    let mut services = services::plan_services(spec, base);
    // Before anything starts a plugin: each must be the file the lock pins.
    if let Some((file, lock)) = locked {
        errors.extend(lock::check(label, file, &stages, lock));
    }
    // Only stages that resolved cleanly are placed and started; the others already failed.
    if errors.is_empty() {
        let cores = crate::os::available_cores() as f64 * spec.execution.cpu_allocation_percentage;
        errors.extend(place_gpu_stages(label, &mut stages, &mut services, cores));
        errors.extend(check_memory(label, &stages));
    }
    if let Some(check) = opts.check_setup {
        // Only a plan that starts stages (run, not `plan`) creates their directories.
        if errors.is_empty() {
            errors.extend(create_writable_grants(label, &stages));
        }
        let failed = errors.clone();
        errors.extend(checks::check_setups(label, &stages, &failed, check));
    }
    (stages, services, barrier)
}

/// The sink format's own checks of its settings (a tokenizer that loads, a width its
/// vocabulary fits), its paths resolved against `base`; problems go to `errors` under `at`.
pub(crate) fn prepare_sink(sink: &mut curator_core::SinkSpec, label: &str, at: &str, base: &Path, errors: &mut Vec<SpecError>) {
    let Ok(format) = io::formats::sink(&sink.format) else { return };
    let mut problems = format.prepare(sink, base).err().unwrap_or_default();
    // The format's own word on its compression (why it takes none) comes first.
    if let Some(c) = sink.compression
        && !format.compressions().contains(&c)
        && !problems.iter().any(|(field, _)| *field == "compression")
    {
        let name = |c: &curator_core::pipeline::Compression| format!("{c:?}").to_lowercase();
        let names: Vec<String> = format.compressions().iter().map(name).collect();
        problems.push(("compression", format!("format {} writes {} (not {})", format.name(), names.join(", "), name(&c))));
    }
    errors.extend(problems.into_iter().map(|(field, message)| SpecError::new(label, format!("{at}.{field}"), message)));
}

/// Where the pipeline reads from and writes to.
struct Located {
    output_dir: Option<Loc>,
    inputs: Vec<InputFile>,
}

/// The source paths listed and the sink's directory parsed; problems go to `errors`.
fn locate(spec: &PipelineSpec, label: &str, base: &Path, errors: &mut Vec<SpecError>) -> Located {
    let mut sources = Vec::new();
    for p in spec.source.path.as_vec() {
        match Loc::parse(p, base) {
            Ok(Loc::Local(path)) if !path.exists() => {
                errors.push(SpecError::new(label, "source.path", format!("{} does not exist", path.display())));
            }
            Ok(l) => sources.push(l),
            Err(e) => errors.push(SpecError::new(label, "source.path", e.to_string())),
        }
    }
    let output_dir = match Loc::parse(&spec.sink.path, base) {
        Ok(l) => Some(l),
        Err(e) => {
            errors.push(SpecError::new(label, "sink.path", e.to_string()));
            None
        }
    };
    if let Err(message) = io::formats::sink(&spec.sink.format) {
        errors.push(SpecError::new(label, "sink.format", message));
    }
    let format = match spec.source.format.as_ref().map(io::formats::source).transpose() {
        Ok(f) => f,
        Err(message) => {
            errors.push(SpecError::new(label, "source.format", message));
            None
        }
    };
    let inputs = if errors.iter().any(|e| e.path == "source.path" || e.path == "source.format") {
        Vec::new()
    } else {
        match io::discover(&sources, spec.source.file_extensions.as_deref(), format) {
            Ok(i) => i,
            Err(e) => {
                errors.push(SpecError::new(label, "source.path", e.to_string()));
                Vec::new()
            }
        }
    };
    Located { output_dir, inputs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_against_the_file_or_the_home_directory() {
        let base = Path::new("/pipelines");
        assert_eq!(resolve(base, "data"), PathBuf::from("/pipelines/data"));
        assert_eq!(resolve(base, "/abs/data"), PathBuf::from("/abs/data"));
        if let Some(home) = std::env::home_dir() {
            assert_eq!(resolve(base, "~/models"), home.join("models"));
        }
        assert_eq!(resolve(base, "~models"), PathBuf::from("/pipelines/~models"));
    }
}
