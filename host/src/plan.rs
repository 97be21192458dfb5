//! From a pipeline file to a checked plan: every stage resolved to a plugin, params checked
//! against its schema, resources merged and validated, grants matched to requests, inputs
//! listed and output names fixed. Nothing here reads documents.

use std::path::{Path, PathBuf};
use std::time::Duration;

use curator_core::pipeline::{DEFAULT_TIMEOUT_S, WriteMode};
use curator_core::{PipelineSpec, Resources, SpecError, validate_params};

use crate::io::{self, InputFile, IoError};
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
}

/// An input file and where its kept documents go.
#[derive(Debug, Clone)]
pub struct PlannedFile {
    pub input: InputFile,
    pub output: PathBuf,
}

/// A checked pipeline.
#[derive(Debug, Clone)]
pub struct Plan {
    pub spec: PipelineSpec,
    pub file_label: String,
    pub stages: Vec<PlannedStage>,
    pub files: Vec<PlannedFile>,
    pub output_dir: PathBuf,
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

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The output file name for an input: compression suffix dropped, `.jsonl` kept or added, the
/// sink's compression suffix appended.
pub fn output_name(rel: &Path, suffix: &str) -> PathBuf {
    let mut name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for ext in [".gz", ".zst", ".zstd"] {
        if let Some(stripped) = name.strip_suffix(ext) {
            name = stripped.to_string();
        }
    }
    for ext in [".json", ".ndjson"] {
        if let Some(stripped) = name.strip_suffix(ext) {
            name = format!("{stripped}.jsonl");
        }
    }
    if !name.ends_with(".jsonl") {
        name.push_str(".jsonl");
    }
    rel.with_file_name(format!("{name}{suffix}"))
}

/// Read, parse and check a pipeline file against the registry.
pub fn plan_file(path: &Path, registry: &Registry) -> Result<Plan, PlanError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| IoError::Open {
        path: label.clone(),
        source,
    })?;
    let spec = PipelineSpec::from_yaml(&label, &text)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    plan_spec(spec, &label, &base, registry)
}

/// Check a parsed spec. Relative paths resolve against `base`.
pub fn plan_spec(
    spec: PipelineSpec,
    label: &str,
    base: &Path,
    registry: &Registry,
) -> Result<Plan, PlanError> {
    let mut errors = Vec::new();
    let mut stages = Vec::new();
    for (i, s) in spec.stages.iter().enumerate() {
        let at = |field: &str| format!("stages[{i}].{field}");
        let Some(entry) = registry.get(&s.plugin) else {
            let known = registry.names();
            let hint = if known.is_empty() {
                format!(
                    "no plugins found in {}",
                    registry
                        .dirs
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                format!("installed: {}", known.join(", "))
            };
            errors.push(SpecError::new(
                label,
                at("plugin"),
                format!("unknown stage {:?} ({hint})", s.plugin),
            ));
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
        } else if resources.needs_gpu() {
            errors.push(SpecError::new(label, at("resources"), format!("{:?} is a WASM stage and runs on CPU; gpus and gpu_memory_gb need a native plugin", s.plugin)));
        }
        let mut grants = Vec::new();
        for (name, g) in &s.grants {
            match m.permissions.directories.iter().find(|d| &d.name == name) {
                None => {
                    let requested: Vec<&str> = m
                        .permissions
                        .directories
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect();
                    errors.push(SpecError::new(label, at(&format!("grants.{name}")), format!(
                        "plugin {:?} does not request a directory named {name:?} (it requests: {})",
                        s.plugin,
                        if requested.is_empty() { "none".to_string() } else { requested.join(", ") }
                    )));
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
                    grants.push(DirGrant {
                        name: name.clone(),
                        host_path,
                        writable: g.writable(),
                    });
                }
            }
        }
        for req in &m.permissions.directories {
            if !s.grants.contains_key(&req.name) {
                errors.push(SpecError::new(
                    label,
                    at("grants"),
                    format!(
                        "plugin {:?} requests directory {:?}; grant it with grants: {{{}: PATH}}",
                        s.plugin, req.name, req.name
                    ),
                ));
            }
        }
        let timeout_s = s.timeout_s.or(spec.timeout_s).unwrap_or(DEFAULT_TIMEOUT_S);
        stages.push(PlannedStage {
            index: i,
            label: s.label().to_string(),
            plugin: entry.clone(),
            params: s.params.clone(),
            resources,
            batch_size: s.batch_size.or(m.batch_size),
            timeout: Duration::from_secs_f64(timeout_s),
            grants,
        });
    }
    if !errors.is_empty() {
        return Err(PlanError::Spec(errors));
    }

    let sources: Vec<PathBuf> = spec
        .source
        .path
        .as_vec()
        .iter()
        .map(|p| resolve(base, p))
        .collect();
    let inputs = io::discover(&sources, spec.source.file_extensions.as_deref())?;
    let output_dir = resolve(base, &spec.sink.path);
    let mut files: Vec<PlannedFile> = Vec::new();
    for input in inputs {
        let output = output_dir.join(output_name(&input.rel, spec.sink.compression.suffix()));
        if let Some(other) = files.iter().find(|f| f.output == output) {
            return Err(IoError::Collision {
                a: other.input.display(),
                b: input.display(),
                out: output.display().to_string(),
            }
            .into());
        }
        if spec.sink.mode == WriteMode::Error && output.exists() {
            return Err(IoError::Exists {
                path: output.display().to_string(),
            }
            .into());
        }
        files.push(PlannedFile { input, output });
    }
    Ok(Plan {
        spec,
        file_label: label.to_string(),
        stages,
        files,
        output_dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names() {
        assert_eq!(
            output_name(Path::new("a.jsonl.zst"), ""),
            PathBuf::from("a.jsonl")
        );
        assert_eq!(
            output_name(Path::new("sub/b.json.gz"), ".zst"),
            PathBuf::from("sub/b.jsonl.zst")
        );
        assert_eq!(
            output_name(Path::new("c.txt"), ".gz"),
            PathBuf::from("c.txt.jsonl.gz")
        );
        assert_eq!(
            output_name(Path::new("d.jsonl"), ""),
            PathBuf::from("d.jsonl")
        );
    }
}
