//! `curator-host new | merge | megatron-merge | gpus | schema`, and the subcommands the host starts itself
//! (`worker`, `dedup-gpu`): the ones that take no pipeline file. The work is in the library;
//! this file parses, calls and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::{EXIT_FAILED, EXIT_INVALID, SchemaKind};

/// `new stage NAME`: a stage crate outside this workspace, or a Python stage.
pub(crate) fn new_stage(
    name: &str,
    native: bool,
    lang: &str,
    kind: &str,
    dir: &Path,
    sdk: Option<PathBuf>,
    sdk_git: Option<String>,
) -> Result<ExitCode> {
    use curator_host::scaffold::{Form, Kind, Sdk, new_stage};
    let sdk = match (sdk, sdk_git) {
        (Some(p), _) => Sdk::Path(std::path::absolute(&p).unwrap_or(p)),
        (None, Some(url)) => Sdk::Git(url),
        (None, None) => Sdk::default_for_this_host(),
    };
    let kind = Kind::parse(kind).unwrap_or(Kind::Filter);
    let form = match (lang, native) {
        ("python", _) => Form::Python,
        (_, true) => Form::RustNative,
        _ => Form::RustWasm,
    };
    match new_stage(dir, name, kind, form, &sdk) {
        Ok(s) => {
            out!("created {} ({} files)", s.dir.display(), s.files.len());
            out!("  cd {} && {}    # builds {}", s.dir.display(), s.build, s.artifact);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(EXIT_INVALID))
        }
    }
}

/// `megatron-merge`: Megatron datasets joined into one.
#[cfg(feature = "tokens")]
pub(crate) fn megatron_merge(input: Option<&Path>, prefixes: &[PathBuf], output: &Path) -> Result<ExitCode> {
    use curator_host::io::tokens::megatron;
    let inputs = match input {
        Some(dir) => megatron::prefixes(dir)?,
        None => prefixes.to_vec(),
    };
    match megatron::merge(&inputs, output) {
        Ok(m) => {
            out!("merged {} dataset(s) into {}.bin/.idx: {} documents, {} tokens", m.prefixes, output.display(), m.documents, m.tokens);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(EXIT_FAILED))
        }
    }
}

/// `merge OUTPUT`: the shards' records into each sink's manifest; then the dedup step's
/// work in `OUTPUT/_dedup_work` is removed.
pub(crate) fn merge(output: &str) -> Result<ExitCode> {
    let loc = curator_host::io::Loc::parse(output, &std::env::current_dir().unwrap_or_default())?;
    match curator_host::io::shards::merge(&loc) {
        Ok(m) => {
            out!(
                "merged {} shard(s) of {}: {} file(s), read {} documents, wrote {}, rejected {}, dead-lettered {}",
                m.shards,
                loc.display(),
                m.files,
                m.documents_in,
                m.documents_out,
                m.rejected,
                m.failed
            );
            // Every shard wrote its output: a dedup step's work in its default place
            // (`OUTPUT/_dedup_work`, on disk or in the object store) has served, as a run on
            // one machine removes its own at the end.
            let work = loc.join(curator_host::plan::workdirs::DEDUP_WORK);
            match work.remove_all() {
                Ok(0) => {}
                Ok(n) => out!("removed the dedup step's work, {} ({n} file(s))", work.display()),
                Err(e) => eprintln!("warning: could not remove {}: {e}", work.display()),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(EXIT_FAILED))
        }
    }
}

/// `gpus`: the GPUs NVML sees (narrowed by `CUDA_VISIBLE_DEVICES`).
pub(crate) fn gpus(json: bool) -> Result<ExitCode> {
    let inv = curator_host::gpu::discover();
    if json {
        out!("{}", serde_json::to_string_pretty(&inv)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(d) = &inv.driver {
        out!("driver {d}");
    }
    if inv.gpus.is_empty() {
        out!("no GPUs{}", inv.note.as_deref().map(|n| format!(": {n}")).unwrap_or_default());
    }
    for g in &inv.gpus {
        out!("{:>3}  {:<28} {:>8} MiB total {:>8} MiB free  {}", g.index, g.name, g.memory_total_mb, g.memory_free_mb, g.uuid);
    }
    Ok(ExitCode::SUCCESS)
}

/// `schema manifest | pipeline`: the JSON Schema of a plugin manifest or a pipeline file (its
/// formats' names, which core carries as strings, from the host's registry of formats).
pub(crate) fn schema(what: SchemaKind) -> Result<ExitCode> {
    let schema = match what {
        SchemaKind::Manifest => schemars::schema_for!(curator_core::Manifest),
        SchemaKind::Pipeline => {
            let mut schema = schemars::schema_for!(curator_core::PipelineSpec);
            if let Some(format) = schema.get_mut("$defs").and_then(|d| d.get_mut("Format")).and_then(|f| f.as_object_mut()) {
                format.insert("enum".into(), curator_host::io::formats::SOURCES.iter().map(|f| f.name()).collect());
            }
            schema
        }
    };
    out!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(ExitCode::SUCCESS)
}

/// `dedup-gpu WORK`: a semantic dedup step's k-means and pairwise phases on the GPU (started
/// by `run` in its own process, so CUDA never loads into the host).
pub(crate) fn dedup_gpu(work: &Path, docs: u64, dim: usize, spec: &str) -> Result<ExitCode> {
    let spec: curator_core::DedupSpec = serde_json::from_str(spec).context("--spec is not a dedup step")?;
    curator_host::dedup::semantic::gpu_phases(work, docs, dim, &spec.semantic())?;
    Ok(ExitCode::SUCCESS)
}

/// `worker PLUGIN`: serve one plugin to the host over stdin/stdout and two shared-memory
/// arenas (started by `run`).
pub(crate) fn worker(plugin: &Path, params: &str, context: &str, cpus: &[usize], wasm: Option<String>, shm: &[i32]) -> Result<ExitCode> {
    let context = serde_json::from_str(context).context("--context is not a worker context")?;
    let spec: Option<curator_host::worker::WasmWorkerSpec> =
        wasm.map(|w| serde_json::from_str(&w)).transpose().context("--wasm is not a WASM worker spec")?;
    let [input, output] = shm[..] else { anyhow::bail!("--shm needs the input and output arena descriptors") };
    let args =
        curator_host::worker::serve::WorkerArgs { plugin, params, context: &context, cpus, shm: (input, output), wasm: spec.as_ref() };
    Ok(ExitCode::from(curator_host::worker::serve::serve(&args).clamp(0, 255) as u8))
}
