//! The pipeline file: a source, ordered stages and a sink, read from YAML.
//!
//! Every error names the file and the path inside it, e.g.
//! `pipeline.yaml: stages[2].params.min_words: expected an integer, found "ten"`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::io_spec::{
    Compression, DEFAULT_IMAGE_BATCH_BYTES, DEFAULT_MAX_LINE_BYTES, Format, OneOrMany, RetrySpec, SinkSpec, Size, SourceSpec, WriteMode,
};
pub use crate::spec_error::{SpecError, SpecErrors};
pub use crate::step::{DedupStep, Grant, Isolation, RemoveIdsSpec, RemoveIdsStep, StageSpec, Step};

/// Default documents per batch.
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// The largest batch the source reads because a GPU stage asks for it (not the pipeline).
pub const MAX_AUTO_BATCH_SIZE: usize = 8192;
/// Default wall-clock limit of one stage call, in seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;

/// A whole pipeline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// A label for logs and summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub source: SourceSpec,
    /// Stages in the order documents flow through them: plugin stages, at most one
    /// `dedup:` step (a barrier) and `remove_ids:` filters.
    #[serde(default)]
    pub stages: Vec<Step>,
    pub sink: SinkSpec,
    /// Documents per batch, unless a stage overrides it (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    /// Wall-clock limit per stage call in seconds, unless a stage overrides it (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// What happens when a stage fails on a batch.
    #[serde(default)]
    pub execution: ExecutionSpec,
    /// Which plugin files may run: `any` (default; unsigned ones and unknown keys are
    /// warned about), `signed` (a valid signature by a key of the trust store), or
    /// `{keys: [ID, ...]}` (signed by one of these key IDs). A signature that does not match
    /// its file is refused whatever this says.
    #[serde(default, skip_serializing_if = "crate::trust::TrustSpec::is_any")]
    pub trust: crate::trust::TrustSpec,
    /// Model servers run beside the stages (or reached at an endpoint), by name; a stage
    /// reaches one through its `service:` field.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub services: std::collections::BTreeMap<String, crate::service::ServiceSpec>,
}

/// Failure policy (names as in NeMo Curator's executor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSpec {
    /// Attempts per batch and stage before it counts as failed (default 1: no retry).
    /// A batch that runs out of memory is also split in half, down to single documents.
    #[serde(default = "default_attempts")]
    pub num_run_attempts: u32,
    /// `true`: failed documents go to `<output>/_dead_letter/` and the run goes on.
    /// `false` (default): the first failure stops the run.
    #[serde(default)]
    pub ignore_failures: bool,
    /// Stop a run with `ignore_failures` once more than this fraction of its documents has
    /// failed (checked after 1,000 documents; default 0.5).
    #[serde(default = "default_failed_fraction")]
    pub max_failed_fraction: f64,
    /// Seconds between status lines in the log (default 30).
    #[serde(default = "default_logging_interval")]
    pub logging_interval_s: f64,
    /// Share of this machine's cores given to workers; the rest is left to the host's
    /// readers and writer (default 0.95, as NeMo Curator's executor).
    #[serde(default = "default_cpu_share")]
    pub cpu_allocation_percentage: f64,
    /// Replace a worker's stage instances after this many batches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batches_per_worker: Option<u64>,
    /// Replace a worker's stage instances after this many minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_max_lifetime_m: Option<f64>,
    /// `streaming` (default): all stages run at once, batches flow through bounded queues.
    /// `batch`: one stage at a time over the whole input, through a spill directory.
    #[serde(default)]
    pub execution_mode: ExecutionMode,
    /// Seconds between worker re-allocations to the slowest stage (default 180, as NeMo
    /// Curator's executor). The first happens as soon as every stage has been measured.
    #[serde(default = "default_autoscale_interval")]
    pub autoscale_interval_s: f64,
    /// Most workers any one stage may get from autoscaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_workers_per_stage: Option<usize>,
    /// Where `batch` mode keeps the batches between stages (default: `_spill/` in a local
    /// output directory, else the system's temporary directory). Removed after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_dir: Option<String>,
}

/// How stages are scheduled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMode {
    #[default]
    Streaming,
    Batch,
}

impl Default for ExecutionSpec {
    fn default() -> Self {
        ExecutionSpec {
            num_run_attempts: default_attempts(),
            ignore_failures: false,
            max_failed_fraction: default_failed_fraction(),
            logging_interval_s: default_logging_interval(),
            cpu_allocation_percentage: default_cpu_share(),
            max_batches_per_worker: None,
            worker_max_lifetime_m: None,
            execution_mode: ExecutionMode::Streaming,
            autoscale_interval_s: default_autoscale_interval(),
            max_workers_per_stage: None,
            spill_dir: None,
        }
    }
}

fn default_attempts() -> u32 {
    1
}
fn default_failed_fraction() -> f64 {
    0.5
}
fn default_logging_interval() -> f64 {
    30.0
}
fn default_cpu_share() -> f64 {
    0.95
}
fn default_autoscale_interval() -> f64 {
    180.0
}

impl PipelineSpec {
    /// Parse a pipeline from YAML text. `file` names the file in errors.
    #[cfg(feature = "yaml")]
    pub fn from_yaml(file: &str, text: &str) -> Result<PipelineSpec, SpecErrors> {
        let mut value: serde_json::Value =
            serde_saphyr::from_str(text).map_err(|e| SpecError::new(file, "", format!("not valid YAML: {e}")))?;
        let Some(map) = value.as_object_mut() else {
            return Err(SpecError::new(file, "", "expected a mapping with source, stages and sink").into());
        };
        // Stages are read one by one so that an error names `stages[i]` and the path in it.
        let stages = map.remove("stages");
        let mut spec: PipelineSpec =
            serde_path_to_error::deserialize(value).map_err(|e| SpecError::new(file, e.path().to_string(), e.inner().to_string()))?;
        match stages {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Array(items)) => {
                let mut errors = Vec::new();
                for (i, item) in items.into_iter().enumerate() {
                    match Step::from_value(item) {
                        Ok(s) => spec.stages.push(s),
                        Err((path, msg)) => {
                            let at = if path.is_empty() || path == "." { format!("stages[{i}]") } else { format!("stages[{i}].{path}") };
                            errors.push(SpecError::new(file, at, msg));
                        }
                    }
                }
                if !errors.is_empty() {
                    return Err(SpecErrors(errors));
                }
            }
            Some(other) => {
                return Err(SpecError::new(file, "stages", format!("expected a list, found {}", crate::params::describe(&other))).into());
            }
        }
        spec.validate(file)?;
        Ok(spec)
    }

    /// Checks that need no plugin registry.
    pub fn validate(&self, file: &str) -> Result<(), SpecErrors> {
        let mut errors = Vec::new();
        if self.batch_size == Some(0) {
            errors.push(SpecError::new(file, "batch_size", "must be > 0"));
        }
        if let Some(t) = self.timeout_s.filter(|t| !(t.is_finite() && *t > 0.0)) {
            errors.push(SpecError::new(file, "timeout_s", format!("must be a positive number of seconds, found {t}")));
        }
        self.check_source(file, &mut errors);
        self.check_execution(file, &mut errors);
        self.check_sink(file, &mut errors);
        self.check_steps(file, &mut errors);
        for (name, service) in &self.services {
            service.check(file, name, &mut errors);
        }
        for (i, stage) in self.plugin_stages() {
            self.check_stage(file, i, stage, &mut errors);
        }
        if errors.is_empty() { Ok(()) } else { Err(SpecErrors(errors)) }
    }

    /// `source:`: paths, partitioning, sizes.
    fn check_source(&self, file: &str, errors: &mut Vec<SpecError>) {
        if self.source.path.as_vec().is_empty() {
            errors.push(SpecError::new(file, "source.path", "names no file"));
        }
        if self.source.files_per_partition.is_some() && self.source.blocksize.is_some() {
            errors.push(SpecError::new(file, "source", "files_per_partition and blocksize are both set; set only one"));
        }
        if self.source.files_per_partition == Some(0) {
            errors.push(SpecError::new(file, "source.files_per_partition", "must be > 0"));
        }
        for (field, size) in [
            ("blocksize", &self.source.blocksize),
            ("max_line_bytes", &self.source.max_line_bytes),
            ("image_batch_bytes", &self.source.image_batch_bytes),
        ] {
            if let Some(s) = size.as_ref().filter(|s| s.bytes().is_none()) {
                let shown = match s {
                    Size::Bytes(b) => b.to_string(),
                    Size::Text(t) => format!("{t:?}"),
                };
                errors.push(SpecError::new(
                    file,
                    format!("source.{field}"),
                    format!("expected a size such as 64MB or 1048576, found {shown}"),
                ));
            }
        }
    }

    /// `execution:`: attempts, shares, intervals, fractions.
    fn check_execution(&self, file: &str, errors: &mut Vec<SpecError>) {
        if self.execution.num_run_attempts == 0 {
            errors.push(SpecError::new(file, "execution.num_run_attempts", "must be at least 1"));
        }
        let c = self.execution.cpu_allocation_percentage;
        if !(c > 0.0 && c <= 1.0) {
            errors.push(SpecError::new(file, "execution.cpu_allocation_percentage", format!("must be in (0, 1], found {c}")));
        }
        let a = self.execution.autoscale_interval_s;
        if !(a.is_finite() && a > 0.0) {
            errors.push(SpecError::new(file, "execution.autoscale_interval_s", format!("must be a positive number of seconds, found {a}")));
        }
        if self.execution.max_workers_per_stage == Some(0) {
            errors.push(SpecError::new(file, "execution.max_workers_per_stage", "must be > 0"));
        }
        let f = self.execution.max_failed_fraction;
        if !(0.0..=1.0).contains(&f) {
            errors.push(SpecError::new(file, "execution.max_failed_fraction", format!("must be between 0 and 1, found {f}")));
        }
    }

    /// `sink:`: retries, row groups, the format.
    fn check_sink(&self, file: &str, errors: &mut Vec<SpecError>) {
        let retry = self.sink.retry();
        for (field, secs) in [("retry_timeout_s", retry.retry_timeout_s), ("max_backoff_s", retry.max_backoff_s)] {
            if !(secs.is_finite() && secs >= 0.0) {
                errors.push(SpecError::new(file, format!("sink.retry.{field}"), format!("must be a number of seconds >= 0, found {secs}")));
            }
        }
        if self.sink.row_group_size == Some(0) {
            errors.push(SpecError::new(file, "sink.row_group_size", "must be > 0"));
        }
    }

    /// The steps: one dedup step at most, each dedup and `remove_ids` step on its own.
    fn check_steps(&self, file: &str, errors: &mut Vec<SpecError>) {
        let dedups: Vec<usize> = self.stages.iter().enumerate().filter(|(_, s)| matches!(s, Step::Dedup(_))).map(|(i, _)| i).collect();
        for &i in dedups.iter().skip(1) {
            errors.push(SpecError::new(
                file,
                format!("stages[{i}].dedup"),
                format!("a pipeline holds one dedup step (stages[{}] is the first); run a second pipeline on this one's output", dedups[0]),
            ));
        }
        for (i, step) in self.stages.iter().enumerate() {
            match step {
                Step::Dedup(d) => errors.extend(d.dedup.validate(file, &format!("stages[{i}].dedup"))),
                Step::RemoveIds(r) => {
                    if r.remove_ids.path.as_vec().is_empty() {
                        errors.push(SpecError::new(file, format!("stages[{i}].remove_ids.path"), "names no file"));
                    }
                }
                Step::Plugin(_) => {}
            }
        }
    }

    /// Plugin stage `stages[i]`: sizes, limits, params, resources, its branch sinks.
    fn check_stage(&self, file: &str, i: usize, stage: &StageSpec, errors: &mut Vec<SpecError>) {
        let at = |field: &str| format!("stages[{i}].{field}");
        if stage.batch_size == Some(0) {
            errors.push(SpecError::new(file, at("batch_size"), "must be > 0"));
        }
        if stage.num_workers == Some(0) {
            errors.push(SpecError::new(file, at("num_workers"), "must be > 0"));
        }
        if let Some(name) = &stage.service
            && !self.services.contains_key(name)
        {
            let known: Vec<&str> = self.services.keys().map(String::as_str).collect();
            let known =
                if known.is_empty() { "the pipeline has no services:".to_string() } else { format!("services: {}", known.join(", ")) };
            errors.push(SpecError::new(file, at("service"), format!("{name:?} is not a service of this pipeline ({known})")));
        }
        for (field, branch) in [("rejected", &stage.rejected), ("tee", &stage.tee)] {
            let Some(b) = branch else { continue };
            let normal = |p: &str| p.trim_end_matches('/').to_string();
            let clash = normal(&b.path) == normal(&self.sink.path)
                || self
                    .plugin_stages()
                    .flat_map(|(_, o)| [&o.rejected, &o.tee])
                    .flatten()
                    .filter(|o| normal(&o.path) == normal(&b.path))
                    .count()
                    > 1;
            if clash {
                errors.push(SpecError::new(
                    file,
                    at(&format!("{field}.path")),
                    format!("{:?} is already another sink's directory", b.path),
                ));
            }
            if b.retry.is_some() {
                errors.push(SpecError::new(
                    file,
                    at(&format!("{field}.retry")),
                    "object-store retries are run-wide (every store the run reads or writes): set them once, as sink.retry",
                ));
            }
            if b.row_group_size == Some(0) {
                errors.push(SpecError::new(file, at(&format!("{field}.row_group_size")), "must be > 0"));
            }
        }
        if let Some(t) = stage.timeout_s.filter(|t| !(t.is_finite() && *t > 0.0)) {
            errors.push(SpecError::new(file, at("timeout_s"), format!("must be a positive number of seconds, found {t}")));
        }
        if !stage.params.is_object() {
            errors.push(SpecError::new(
                file,
                at("params"),
                format!("expected a mapping, found {}", crate::params::describe(&stage.params)),
            ));
        }
        if let Some(o) = &stage.resources
            && let (Some(g), Some(m)) = (o.gpus, o.gpu_memory_gb)
        {
            errors.push(SpecError::new(file, at("resources"), format!("gpus and gpu_memory_gb are both set ({g} and {m}); set only one")));
        }
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size.unwrap_or(DEFAULT_BATCH_SIZE)
    }

    /// Documents per batch the source reads, given the batch sizes of the stages that run on
    /// a GPU (each one's pipeline `batch_size:` or its manifest's): the pipeline's `batch_size`
    /// when set; else the largest of those, at least [`DEFAULT_BATCH_SIZE`] and at most
    /// [`MAX_AUTO_BATCH_SIZE`]. A stage only ever cuts batches smaller, so reading small
    /// batches would hold back a GPU stage that asks for big ones (8,192 documents a call),
    /// while the cap bounds what the queues hold.
    pub fn read_batch_size(&self, gpu_stage_sizes: impl IntoIterator<Item = Option<usize>>) -> usize {
        self.batch_size
            .unwrap_or_else(|| gpu_stage_sizes.into_iter().flatten().fold(DEFAULT_BATCH_SIZE, usize::max).min(MAX_AUTO_BATCH_SIZE))
    }

    /// The plugin stages with their index in `stages`.
    pub fn plugin_stages(&self) -> impl Iterator<Item = (usize, &StageSpec)> {
        self.stages.iter().enumerate().filter_map(|(i, s)| s.plugin().map(|p| (i, p)))
    }

    /// The dedup step and its index in `stages`, if there is one.
    pub fn dedup(&self) -> Option<(usize, &DedupStep)> {
        self.stages.iter().enumerate().find_map(|(i, s)| match s {
            Step::Dedup(d) => Some((i, d)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Billion laughs": nine aliases of nine aliases, eleven levels deep (9^12 nodes once
    /// expanded) is refused by the parser's node budget, in bounded memory.
    #[test]
    fn alias_bombs_are_refused() {
        let mut yaml = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (prev, name) in ('a'..='k').zip('b'..='l') {
            let refs = vec![format!("*{prev}"); 9].join(", ");
            yaml.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        yaml.push_str("source: {path: in}\nsink: {path: out}\n");
        let e = PipelineSpec::from_yaml("bomb.yaml", &yaml).unwrap_err().to_string();
        assert!(e.contains("bomb.yaml") && e.contains("budget"), "{e}");
    }

    const GOOD: &str = r#"
name: demo
source:
  path: data/
sink:
  path: out/
  compression: zstd
  mode: overwrite
batch_size: 500
stages:
  - plugin: word_count_filter
    params: {min_words: 5}
  - plugin: unicode_normalize
    resources: {cpus: 0.5, memory_mb: 128}
    grants:
      models: ./models
      scratch: {path: /tmp/x, writable: true}
"#;

    #[test]
    fn the_source_reads_batches_as_big_as_the_biggest_stage_asks() {
        let p = PipelineSpec::from_yaml("p.yaml", "source: {path: in}\nsink: {path: out}\nstages: []\n").unwrap();
        assert_eq!(p.read_batch_size([None, None]), DEFAULT_BATCH_SIZE);
        assert_eq!(p.read_batch_size([Some(100), None]), DEFAULT_BATCH_SIZE, "never smaller than the default");
        assert_eq!(p.read_batch_size([Some(100), Some(8192)]), 8192);
        assert_eq!(p.read_batch_size([Some(16384)]), MAX_AUTO_BATCH_SIZE, "capped");
    }

    #[test]
    fn parses_good_pipeline() {
        let p = PipelineSpec::from_yaml("p.yaml", GOOD).unwrap();
        assert_eq!(p.stages.len(), 2);
        assert_eq!(p.source.text_field, "text");
        assert_eq!(p.sink.compression, Some(Compression::Zstd));
        assert_eq!(p.batch_size(), 500);
        // An explicit batch size is what the source reads, whatever the stages ask.
        assert_eq!(p.read_batch_size([Some(8192), None]), 500);
        let s1 = p.stages[1].plugin().unwrap();
        assert_eq!(s1.grants["models"].path(), "./models");
        assert!(s1.grants["scratch"].writable());
        assert!(!s1.grants["models"].writable());
    }

    #[test]
    fn unknown_field_named_with_path() {
        let bad = GOOD.replace("    params: {min_words: 5}", "    params: {min_words: 5}\n    parms: 3");
        let e = PipelineSpec::from_yaml("p.yaml", &bad).unwrap_err().to_string();
        assert!(e.starts_with("p.yaml: stages[0].parms: unknown field `parms`"), "{e}");
    }

    #[test]
    fn both_gpu_kinds_in_override() {
        let bad = GOOD.replace("{cpus: 0.5, memory_mb: 128}", "{gpus: 1, gpu_memory_gb: 8}");
        let e = PipelineSpec::from_yaml("p.yaml", &bad).unwrap_err().to_string();
        assert!(e.starts_with("p.yaml: stages[1].resources: gpus and gpu_memory_gb are both set"), "{e}");
    }

    #[test]
    fn wrong_types_named() {
        let bad = GOOD.replace("batch_size: 500", "batch_size: lots");
        let e = PipelineSpec::from_yaml("p.yaml", &bad).unwrap_err().to_string();
        assert!(e.starts_with("p.yaml: batch_size: invalid type: string \"lots\""), "{e}");
        let bad = GOOD.replace("mode: overwrite", "mode: clobber");
        let e = PipelineSpec::from_yaml("p.yaml", &bad).unwrap_err().to_string();
        assert!(e.starts_with("p.yaml: sink.mode: unknown variant `clobber`"), "{e}");
    }

    #[test]
    fn not_yaml_or_not_mapping() {
        assert!(PipelineSpec::from_yaml("p.yaml", "source: [").unwrap_err().to_string().starts_with("p.yaml: not valid YAML"));
        assert!(PipelineSpec::from_yaml("p.yaml", "- 1").unwrap_err().to_string().contains("expected a mapping"));
    }

    #[test]
    fn partitioning_options() {
        let both = GOOD.replace("  path: data/\n", "  path: data/\n  files_per_partition: 2\n  blocksize: 64MB\n");
        assert_eq!(
            PipelineSpec::from_yaml("p.yaml", &both).unwrap_err().to_string(),
            "p.yaml: source: files_per_partition and blocksize are both set; set only one"
        );
        let bad = GOOD.replace("  path: data/\n", "  path: data/\n  blocksize: huge\n");
        assert_eq!(
            PipelineSpec::from_yaml("p.yaml", &bad).unwrap_err().to_string(),
            "p.yaml: source.blocksize: expected a size such as 64MB or 1048576, found \"huge\""
        );
        let ok = GOOD.replace("  path: data/\n", "  path: data/\n  blocksize: 64MB\n  max_line_bytes: 1048576\n");
        let p = PipelineSpec::from_yaml("p.yaml", &ok).unwrap();
        assert_eq!(p.source.blocksize.unwrap().bytes(), Some(64 << 20));
        assert_eq!(p.source.max_line_bytes.unwrap().bytes(), Some(1 << 20));
    }

    #[test]
    fn a_format_is_its_name_in_the_pipeline_file() {
        let source = GOOD.replace("  path: data/\n", "  path: data/\n  format: warc\n");
        let p = PipelineSpec::from_yaml("p.yaml", &source).unwrap();
        assert_eq!(p.source.format, Some(Format::named("warc")));
        assert_eq!(p.sink.format, Format::JSONL, "the default");
        assert_eq!(serde_json::to_value(Format::named("parquet")).unwrap(), "parquet");
    }

    #[test]
    fn zero_batch_size_refused() {
        let bad = GOOD.replace("batch_size: 500", "batch_size: 0");
        assert_eq!(PipelineSpec::from_yaml("p.yaml", &bad).unwrap_err().to_string(), "p.yaml: batch_size: must be > 0");
    }

    #[test]
    fn retry_is_set_once_on_the_main_sink() {
        let main = GOOD.replace("sink:\n", "sink:\n  retry: {max_retries: 3}\n");
        let spec = PipelineSpec::from_yaml("p.yaml", &main).unwrap();
        assert_eq!(spec.sink.retry().max_retries, 3);
        assert_eq!(PipelineSpec::from_yaml("p.yaml", GOOD).unwrap().sink.retry(), RetrySpec::default());
        let branch = GOOD.replace(
            "  - plugin: unicode_normalize\n",
            "  - plugin: unicode_normalize\n    rejected: {path: rej, retry: {max_retries: 3}}\n",
        );
        let err = PipelineSpec::from_yaml("p.yaml", &branch).unwrap_err().to_string();
        assert!(err.contains("stages[1].rejected.retry: object-store retries are run-wide"), "{err}");
    }

    #[test]
    fn dedup_and_remove_ids_steps() {
        let y = GOOD.replace(
            "  - plugin: unicode_normalize\n",
            "  - dedup: {method: fuzzy, word_ngrams: 5, action: mark}\n  - remove_ids: {path: old/_duplicates}\n  - plugin: unicode_normalize\n",
        );
        let p = PipelineSpec::from_yaml("p.yaml", &y).unwrap();
        assert_eq!(p.stages.len(), 4);
        let (i, d) = p.dedup().unwrap();
        assert_eq!((i, d.dedup.action), (1, crate::dedup::DedupAction::Mark));
        assert!(matches!(&p.stages[2], Step::RemoveIds(r) if r.remove_ids.field == "id"));
        assert_eq!(p.plugin_stages().map(|(i, _)| i).collect::<Vec<_>>(), [0, 3]);
        let bad = y.replace("action: mark", "action: mark, bands: 3");
        let e = PipelineSpec::from_yaml("p.yaml", &bad).unwrap_err().to_string();
        assert!(e.starts_with("p.yaml: stages[1].dedup.bands: unknown field `bands`"), "{e}");
        let two = y.replace("  - remove_ids: {path: old/_duplicates}\n", "  - dedup: {method: exact}\n");
        let e = PipelineSpec::from_yaml("p.yaml", &two).unwrap_err().to_string();
        assert!(e.contains("stages[2].dedup: a pipeline holds one dedup step"), "{e}");
    }
}
