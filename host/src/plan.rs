//! From a pipeline file to a checked plan: every stage resolved to a plugin, params checked
//! against its schema, resources merged and validated, grants matched to requests, inputs
//! listed and output names fixed. Nothing here reads documents.

use std::path::{Path, PathBuf};
use std::time::Duration;

use curator_core::partition::{Extent, FileInfo, Part, PartitionBy, Splittable, partition};
use curator_core::pipeline::{DEFAULT_MAX_LINE_BYTES, DEFAULT_TIMEOUT_S, Format, WriteMode};
use curator_core::placement::{Assignment, GpuRequest, GpuStage};
use curator_core::{
    Isolation, MemoryBudget, PipelineSpec, PluginKind, Resources, Runs, SinkSpec, SpecError, memory_budget, validate_params,
};

use crate::io::journal::Journal;
use crate::io::writer::{OutputManifest, WrittenFile};
use crate::io::{self, InputFile, IoError, Loc};
use crate::registry::{PluginEntry, Registry};
use crate::wasm::{DirGrant, WasmRuntime};

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
}

impl PlannedStage {
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
}

impl Plan {
    /// `file`, `file bytes a..b` or `file row groups a..b`, for messages and manifests.
    pub fn describe_part(&self, part: &Part) -> String {
        describe(&self.inputs, part)
    }

    /// Where a partition's documents came from.
    pub fn sources(&self, p: &PlannedPartition) -> Vec<String> {
        p.parts.iter().map(|part| self.describe_part(part)).collect()
    }

    pub fn max_line_bytes(&self) -> u64 {
        self.spec.source.max_line_bytes.as_ref().and_then(|s| s.bytes()).unwrap_or(DEFAULT_MAX_LINE_BYTES)
    }

    /// How the source's records are read (`strict`: stop at the first bad line).
    pub fn read_options(&self, strict: bool) -> crate::io::jsonl::ReadOptions {
        let src = &self.spec.source;
        crate::io::jsonl::ReadOptions {
            text_field: src.text_field.clone(),
            id_field: src.id_field.clone(),
            fields: src.fields.clone(),
            max_line_bytes: self.max_line_bytes(),
            strict,
        }
    }
}

fn describe(inputs: &[InputFile], part: &Part) -> String {
    let f = inputs[part.file].display();
    match part.extent {
        Extent::Whole => f,
        Extent::Bytes { start, end } => format!("{f} bytes {start}..{end}"),
        Extent::Units { start, end } => format!("{f} row groups {start}..{end}"),
    }
}

/// Base name of an input for outputs: compression and format extensions dropped.
fn base_name(rel: &str) -> String {
    let mut name = rel.to_string();
    for ext in [".gz", ".zst", ".zstd"] {
        if let Some(stripped) = name.strip_suffix(ext) {
            name = stripped.to_string();
        }
    }
    for ext in [".jsonl", ".json", ".ndjson", ".parquet", ".pq"] {
        if let Some(stripped) = name.strip_suffix(ext) {
            return stripped.to_string();
        }
    }
    name
}

/// Deterministic output name of a partition, from its source files and index: the input's
/// name for a whole file, `<name>.<piece>` for a piece of a split file, and
/// `part-<index>-<hash of the sources>` for a group of files.
pub fn partition_output_name(inputs: &[InputFile], parts: &[Part], index: usize, ext: &str) -> String {
    match parts {
        [one] if one.piece.1 <= 1 => format!("{}{ext}", base_name(&inputs[one.file].rel)),
        [one] => format!("{}.{:05}{ext}", base_name(&inputs[one.file].rel), one.piece.0),
        many => {
            let key: Vec<String> = many.iter().map(|p| format!("{}:{:?}", inputs[p.file].rel, p.extent)).collect();
            let hash = xxhash_rust::xxh3::xxh3_64(key.join("\n").as_bytes());
            format!("part-{index:05}-{:08x}{ext}", hash as u32)
        }
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

/// How far planning goes.
#[derive(Clone, Copy, Default)]
pub struct PlanOptions<'a> {
    /// Ignore (and delete) the journal of an interrupted earlier run.
    pub restart: bool,
    /// Start each stage once in a throw-away instance (or worker) to check that its `setup`
    /// accepts the params: a stage that would refuse them fails the plan, not the run.
    pub check_setup: Option<&'a WasmRuntime>,
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() { p.to_path_buf() } else { base.join(p) }
}

/// Read, parse and check a pipeline file against the registry.
pub fn plan_file(path: &Path, registry: &Registry, opts: PlanOptions<'_>) -> Result<Plan, PlanError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| IoError::Open { path: label.clone(), source })?;
    let spec = PipelineSpec::from_yaml(&label, &text)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    plan_spec(spec, &label, &base, registry, opts)
}

/// Check a parsed spec. Relative paths resolve against `base`. Every mistake found is
/// reported at once, each with its path in the file; nothing is created or read but the
/// listing of the inputs (and, with `check_setup`, a throw-away instance per stage).
pub fn plan_spec(spec: PipelineSpec, label: &str, base: &Path, registry: &Registry, opts: PlanOptions<'_>) -> Result<Plan, PlanError> {
    let restart = opts.restart;
    let mut errors = Vec::new();
    let mut stages = Vec::new();
    for (i, s) in spec.stages.iter().enumerate() {
        let at = |field: &str| format!("stages[{i}].{field}");
        let Some(entry) = registry.get(&s.plugin) else {
            let known = registry.names();
            let hint = if known.is_empty() {
                format!("no plugins found in {}", registry.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))
            } else {
                format!("installed: {}", known.join(", "))
            };
            errors.push(SpecError::new(label, at("plugin"), format!("unknown stage {:?} ({hint})", s.plugin)));
            continue;
        };
        let m = &entry.manifest;
        for e in validate_params(&m.params_schema, &s.params, &at("params")) {
            errors.push(SpecError::new(label, e.path, e.message));
        }
        let resources = match &s.resources {
            Some(o) => m.resources.overridden_by(o),
            None => m.resources.clone(),
        };
        if let Err(e) = resources.validate() {
            errors.push(SpecError::new(label, at("resources"), e.to_string()));
        } else if resources.needs_gpu() && m.kind == curator_core::PluginKind::Wasm {
            errors.push(SpecError::new(
                label,
                at("resources"),
                format!("{:?} is a WASM stage and runs on CPU; gpus and gpu_memory_gb need a native plugin", s.plugin),
            ));
        }
        let mut grants = Vec::new();
        for (name, g) in &s.grants {
            match m.permissions.directories.iter().find(|d| &d.name == name) {
                None => {
                    let requested: Vec<&str> = m.permissions.directories.iter().map(|d| d.name.as_str()).collect();
                    errors.push(SpecError::new(
                        label,
                        at(&format!("grants.{name}")),
                        format!(
                            "plugin {:?} does not request a directory named {name:?} (it requests: {})",
                            s.plugin,
                            if requested.is_empty() { "none".to_string() } else { requested.join(", ") }
                        ),
                    ));
                }
                Some(req) => {
                    if g.writable() && !req.writable {
                        errors.push(SpecError::new(
                            label,
                            at(&format!("grants.{name}")),
                            "plugin asks for read-only access; a writable grant is refused",
                        ));
                    }
                    let host_path = resolve(base, g.path());
                    if !host_path.is_dir() {
                        errors.push(SpecError::new(
                            label,
                            at(&format!("grants.{name}")),
                            format!("{} is not a directory", host_path.display()),
                        ));
                    }
                    grants.push(DirGrant { name: name.clone(), host_path, writable: g.writable() });
                }
            }
        }
        for req in &m.permissions.directories {
            if !s.grants.contains_key(&req.name) {
                errors.push(SpecError::new(
                    label,
                    at("grants"),
                    format!("plugin {:?} requests directory {:?}; grant it with grants: {{{}: PATH}}", s.plugin, req.name, req.name),
                ));
            }
        }
        let isolation = match (m.kind, s.isolation) {
            (curator_core::PluginKind::Wasm, i) => i.unwrap_or(Isolation::InProcess),
            (_, Some(Isolation::InProcess)) => {
                errors.push(SpecError::new(label, at("isolation"), "a native stage always runs in a worker process (isolation: process)"));
                Isolation::Process
            }
            (_, _) => Isolation::Process,
        };
        let timeout_s = s.timeout_s.or(spec.timeout_s).unwrap_or(DEFAULT_TIMEOUT_S);
        let mut planned = PlannedStage {
            index: i,
            label: s.label().to_string(),
            plugin: entry.clone(),
            params: s.params.clone(),
            resources,
            batch_size: s.batch_size.or(m.batch_size),
            timeout: Duration::from_secs_f64(timeout_s),
            grants,
            isolation,
            memory: MemoryBudget { reserved_mb: 0, guest_cap_mb: None, process_mb: None },
            num_workers: s.num_workers,
            gpu: Vec::new(),
        };
        planned.memory = memory_budget(&planned.resources, planned.runs());
        stages.push(planned);
    }
    // Only stages that resolved cleanly are placed and started; the others already failed.
    let clean = errors.is_empty();
    if clean {
        errors.extend(place_gpu_stages(label, &mut stages));
        errors.extend(check_memory(label, &stages));
    }
    if let Some(runtime) = opts.check_setup {
        for st in &stages {
            let gpu_needed_but_unplaced = st.resources.needs_gpu() && st.gpu.is_empty();
            if gpu_needed_but_unplaced || errors.iter().any(|e| e.path.starts_with(&format!("stages[{}]", st.index))) {
                continue;
            }
            if let Err(e) = crate::exec::check_setup(st, runtime) {
                let (path, message) = match e {
                    crate::stage::StageFailure::InvalidParams(m) => {
                        ("params", format!("plugin {:?} rejected its params: {m}", st.plugin.manifest.name))
                    }
                    e => ("plugin", format!("plugin {:?} cannot start: {e}", st.plugin.manifest.name)),
                };
                errors.push(SpecError::new(label, format!("stages[{}].{path}", st.index), message));
            }
        }
    }

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
    let inputs = if errors.iter().any(|e| e.path == "source.path") {
        Vec::new()
    } else {
        match io::discover(&sources, spec.source.file_extensions.as_deref(), spec.source.format) {
            Ok(i) => i,
            Err(e) => {
                errors.push(SpecError::new(label, "source.path", e.to_string()));
                Vec::new()
            }
        }
    };
    let journal_present = !restart && output_dir.as_ref().is_some_and(|d| Journal::load(d).is_some());
    if spec.sink.mode == WriteMode::Error
        && !journal_present
        && let Some(d) = &output_dir
        && let Some(why) = holds_outputs(d)
    {
        errors.push(SpecError::new(
            label,
            "sink.path",
            format!("{} already holds {why}; with sink.mode: error a run writes only into an empty directory (choose another, or set mode: overwrite, append or ignore)", d.display()),
        ));
    }
    let Some(output_dir) = output_dir.filter(|_| errors.is_empty()) else {
        return Err(PlanError::Spec(errors));
    };
    let by = match (spec.source.files_per_partition, spec.source.blocksize.as_ref().and_then(|b| b.bytes())) {
        (_, Some(bytes)) => PartitionBy::Bytes(bytes),
        (Some(n), None) => PartitionBy::Files(n),
        (None, None) => PartitionBy::Files(1),
    };
    let mut infos = Vec::with_capacity(inputs.len());
    for f in &inputs {
        let split = match (f.format, f.compressed, by) {
            (_, _, PartitionBy::Files(_)) => Splittable::No,
            (Format::Parquet, _, _) => Splittable::Units(io::parquet::row_group_sizes(f)?),
            (Format::Jsonl, true, _) => Splittable::No,
            (Format::Jsonl, false, _) => Splittable::Bytes,
        };
        infos.push(FileInfo { size: f.size, split });
    }
    let ext = sink_ext(&spec.sink);
    let prior_manifest = OutputManifest::load(&output_dir);
    let journal = if restart {
        Journal::remove(&output_dir);
        None
    } else {
        Journal::load(&output_dir)
    };
    let resuming = journal.is_some();
    let journal = journal.unwrap_or_default();
    let mut resumed = Vec::new();
    let mut resumed_branches: Vec<Vec<WrittenFile>> = Vec::new();
    let mut partitions: Vec<PlannedPartition> = Vec::new();
    let mut skipped = 0;
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    for p in partition(&infos, by) {
        let mut output_rel = partition_output_name(&inputs, &p.parts, p.index, &ext);
        if let Some(other) = partitions.iter().find(|q| q.output_rel == output_rel) {
            return Err(IoError::Collision {
                a: inputs[other.parts[0].file].display(),
                b: inputs[p.parts[0].file].display(),
                out: output_dir.join(&output_rel).display(),
            }
            .into());
        }
        let mut output = output_dir.join(&output_rel);
        let sources: Vec<String> = p.parts.iter().map(|part| describe(&inputs, part)).collect();
        if let Some(done) =
            journal.iter().find(|j| j.file.sources == sources && (j.file.is_empty() || output_dir.join(&j.file.path).exists()))
        {
            resumed.push(done.file.clone());
            resumed_branches.push(done.branches.clone());
            taken.insert(done.file.path.clone());
            continue;
        }
        // Resuming: an output not in the journal is from the interrupted run; redo it.
        if output.exists() && !resuming {
            match spec.sink.mode {
                WriteMode::Error => return Err(IoError::Exists { path: output.display() }.into()),
                WriteMode::Ignore => {
                    skipped += 1;
                    continue;
                }
                WriteMode::Append => {
                    let stem = output_rel.strip_suffix(&ext).unwrap_or(&output_rel).to_string();
                    for k in 1.. {
                        let candidate = format!("{stem}.{k}{ext}");
                        let loc = output_dir.join(&candidate);
                        if !taken.contains(&candidate) && !loc.exists() {
                            output_rel = candidate;
                            output = loc;
                            break;
                        }
                    }
                }
                WriteMode::Overwrite => {}
            }
        }
        taken.insert(output_rel.clone());
        partitions.push(PlannedPartition { index: p.index, parts: p.parts, output_rel, output });
    }
    let branches = plan_branches(&spec, label, base, &inputs, &partitions, &resumed_branches, resuming)?;
    Ok(Plan { spec, file_label: label.to_string(), stages, inputs, partitions, skipped, output_dir, prior_manifest, resumed, branches })
}

fn sink_ext(sink: &SinkSpec) -> String {
    match sink.format {
        Format::Jsonl => format!(".jsonl{}", sink.compression().suffix()),
        Format::Parquet => ".parquet".to_string(),
    }
}

/// What a directory holds that a run with `mode: error` must not mix with: `None` when it is
/// absent or empty (temp files of killed runs and an empty spill directory do not count).
fn holds_outputs(dir: &Loc) -> Option<String> {
    match dir {
        Loc::Local(d) => {
            let entries = std::fs::read_dir(d).ok()?;
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !(n.starts_with('.') && n.contains(".tmp-")) && n != "_spill")
                .collect();
            names.sort();
            let first = names.first()?;
            Some(format!("{} entr{} (e.g. {first})", names.len(), if names.len() == 1 { "y" } else { "ies" }))
        }
        other => other.join(crate::io::writer::OutputManifest::NAME).exists().then(|| "a _manifest.json of another run".to_string()),
    }
}

/// Place the GPU stages' workers on this machine's GPUs (`core::placement::place_stages`):
/// as many as fit, or `num_workers`. One error per stage that cannot be placed.
fn place_gpu_stages(label: &str, stages: &mut [PlannedStage]) -> Vec<SpecError> {
    let wanted: Vec<(usize, GpuStage)> = stages
        .iter()
        .enumerate()
        .filter_map(|(k, s)| {
            let request = GpuRequest::from_resources(&s.resources)?;
            Some((k, GpuStage { stage: s.label.clone(), request, fixed: s.num_workers }))
        })
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let inventory = crate::gpu::discover();
    let requests: Vec<GpuStage> = wanted.iter().map(|(_, g)| g.clone()).collect();
    match curator_core::placement::place_stages(&inventory.gpus, &requests) {
        Ok(assignments) => {
            for ((k, _), a) in wanted.iter().zip(assignments) {
                stages[*k].gpu = a;
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
            let at = stages.iter().find(|s| e.to_string().contains(&format!("{:?}", s.label))).map(|s| s.index).unwrap_or(wanted[0].0);
            vec![SpecError::new(label, format!("stages[{at}].resources"), e.to_string())]
        }
    }
}

/// One worker of every stage must fit in the memory this machine can give workers.
fn check_memory(label: &str, stages: &[PlannedStage]) -> Vec<SpecError> {
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

/// Output places of the `rejected:` and `tee:` sinks of stages.
fn plan_branches(
    spec: &PipelineSpec,
    label: &str,
    base: &Path,
    inputs: &[InputFile],
    partitions: &[PlannedPartition],
    resumed: &[Vec<WrittenFile>],
    resuming: bool,
) -> Result<Vec<PlannedBranch>, PlanError> {
    let mut branches = Vec::new();
    for (i, s) in spec.stages.iter().enumerate() {
        for (kind, field, sink) in [(BranchKind::Rejected, "rejected", &s.rejected), (BranchKind::Tee, "tee", &s.tee)] {
            let Some(sink) = sink else { continue };
            if matches!(sink.mode, WriteMode::Append | WriteMode::Ignore) {
                return Err(SpecError::new(
                    label,
                    format!("stages[{i}].{field}.mode"),
                    "a branch sink is written with its main sink: use error or overwrite",
                )
                .into());
            }
            let dir = Loc::parse(&sink.path, base)?;
            if sink.mode == WriteMode::Error
                && !resuming
                && let Some(why) = holds_outputs(&dir)
            {
                return Err(SpecError::new(
                    label,
                    format!("stages[{i}].{field}.path"),
                    format!("{} already holds {why}; with mode: error a branch writes only into an empty directory", dir.display()),
                )
                .into());
            }
            let ext = sink_ext(sink);
            let mut outputs = Vec::with_capacity(partitions.len());
            for p in partitions {
                let rel = partition_output_name(inputs, &p.parts, p.index, &ext);
                let loc = dir.join(&rel);
                if sink.mode == WriteMode::Error && !resuming && loc.exists() {
                    return Err(IoError::Exists { path: loc.display() }.into());
                }
                outputs.push((rel, loc));
            }
            let b = branches.len();
            let resumed = resumed.iter().filter_map(|r| r.get(b).cloned()).collect();
            branches.push(PlannedBranch {
                stage: i,
                kind,
                sink: sink.clone(),
                prior_manifest: OutputManifest::load(&dir),
                dir,
                outputs,
                resumed,
            });
        }
    }
    Ok(branches)
}

/// The output manifest after a run (previous entries that still stand, plus the new files),
/// and the previous files that `overwrite` mode should now delete.
pub fn merged_manifest(prior: &OutputManifest, mode: WriteMode, written: Vec<WrittenFile>) -> (OutputManifest, Vec<String>) {
    let new_paths: std::collections::HashSet<String> = written.iter().map(|w| w.path.clone()).collect();
    let mut stale = Vec::new();
    let mut files: Vec<WrittenFile> = Vec::new();
    for old in &prior.files {
        if new_paths.contains(&old.path) {
            continue;
        }
        match mode {
            WriteMode::Overwrite => stale.push(old.path.clone()),
            _ => files.push(old.clone()),
        }
    }
    files.extend(written);
    (OutputManifest { files }, stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(rel: &str) -> InputFile {
        let (format, compressed) = io::sniff_name(rel, None);
        InputFile { loc: Loc::Local(PathBuf::from(rel)), rel: rel.into(), size: 1, format, compressed }
    }

    #[test]
    fn output_names() {
        let inputs = vec![input("a.jsonl.zst"), input("sub/b.json.gz"), input("c.txt"), input("d.parquet")];
        let whole = |file| Part { file, extent: Extent::Whole, piece: (0, 1) };
        assert_eq!(partition_output_name(&inputs, &[whole(0)], 0, ".jsonl"), "a.jsonl");
        assert_eq!(partition_output_name(&inputs, &[whole(1)], 1, ".jsonl.zst"), "sub/b.jsonl.zst");
        assert_eq!(partition_output_name(&inputs, &[whole(2)], 2, ".jsonl.gz"), "c.txt.jsonl.gz");
        assert_eq!(partition_output_name(&inputs, &[whole(3)], 3, ".parquet"), "d.parquet");
        let piece = Part { file: 0, extent: Extent::Bytes { start: 0, end: 9 }, piece: (3, 16) };
        assert_eq!(partition_output_name(&inputs, &[piece], 7, ".jsonl"), "a.00003.jsonl");
        let group = partition_output_name(&inputs, &[whole(0), whole(2)], 4, ".jsonl");
        assert!(group.starts_with("part-00004-") && group.ends_with(".jsonl"), "{group}");
        assert_eq!(group, partition_output_name(&inputs, &[whole(0), whole(2)], 4, ".jsonl"), "not deterministic");
        assert_ne!(group, partition_output_name(&inputs, &[whole(0), whole(1)], 4, ".jsonl"));
    }
}
