//! `curator-host`: run curation pipelines made of sandboxed WASM stages.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use curator_host::exec::{self, RunOptions};
use curator_host::io::writer::Spool;
use curator_host::plan::{self, PlanError};
use curator_host::registry::{self, Registry};
use curator_host::wasm::{WasmRuntime, default_cache_dir};

/// Exit code when the pipeline or configuration is invalid (nothing was read).
const EXIT_INVALID: u8 = 2;
/// Exit code when the run started and failed.
const EXIT_FAILED: u8 = 1;

#[derive(Parser)]
#[command(name = "curator-host", version, about = "Curate LLM training data with sandboxed WASM stages")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct PluginDirs {
    /// Plugin directory (repeatable). Searched before $CURATOR_PLUGINS and ./plugins.
    #[arg(long = "plugins", value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Directory of trusted public keys (repeatable). Searched before $CURATOR_TRUST_DIR and
    /// ~/.config/curator/trust.
    #[arg(long = "trust-dir", value_name = "DIR")]
    trust_dirs: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum NewCommand {
    /// A stage crate outside this workspace, built the way curator's own plugins are, with
    /// a unit test, a README with the commands to build and try it, and a sample pipeline.
    Stage {
        /// The stage's name (lowercase, digits, `_` or `-`): the crate and the plugin.
        name: String,
        /// A native (C ABI) library instead of a WASM component (for GPU stages and
        /// anything that needs the machine).
        #[arg(long)]
        native: bool,
        /// The SDK trait to start from.
        #[arg(long, default_value = "filter", value_parser = ["filter", "map", "score", "stage"])]
        kind: String,
        /// Where to create the crate's folder (default: here).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// Depend on the SDK at this path (default: the SDK this host was built from, when
        /// its sources are there; else the published version).
        #[arg(long, conflicts_with = "sdk_git")]
        sdk: Option<PathBuf>,
        /// Depend on the SDK from this git repository.
        #[arg(long)]
        sdk_git: Option<String>,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline file.
    Run {
        pipeline: PathBuf,
        #[command(flatten)]
        plugins: PluginDirs,
        /// Cores for stage workers (default: usable cores × cpu_allocation_percentage).
        #[arg(long)]
        workers: Option<usize>,
        /// Do not read or write the compiled-plugin cache.
        #[arg(long)]
        no_cache: bool,
        /// Check the pipeline and print the plan without reading data.
        #[arg(long)]
        dry_run: bool,
        /// Stop at the first bad input line (default: quarantine it under <output>/_rejected/).
        #[arg(long)]
        strict: bool,
        /// Ignore the journal of an interrupted earlier run and start from scratch.
        #[arg(long)]
        restart: bool,
        /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464) during the run.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        /// Run a dedup step even when `plan` estimates it needs more memory than this machine has.
        #[arg(long)]
        ignore_memory_plan: bool,
        /// Run only shard I of N (0-based) of the partitions, as one job of a cluster array;
        /// `curator-host merge OUTPUT` then writes the run's manifest.
        #[arg(long, value_name = "I/N", conflicts_with = "shard_from_env")]
        shard: Option<String>,
        /// The shard from a job array's environment: SLURM_ARRAY_TASK_ID/_COUNT (less
        /// SLURM_ARRAY_TASK_MIN), or JOB_COMPLETION_INDEX with CURATOR_SHARD_COUNT (Kubernetes).
        #[arg(long)]
        shard_from_env: bool,
        /// Run one phase of the pipeline's dedup step, so that a cluster can run the step
        /// across machines: docs (sharded over partitions), buckets (sharded over LSH passes),
        /// components (one job), output (sharded over partitions); then `merge`.
        #[arg(long, value_name = "PHASE", value_parser = ["docs", "buckets", "components", "output"])]
        phase: Option<String>,
    },
    /// Pin the plugins a pipeline runs with: writes PIPELINE.lock (each plugin's name,
    /// version, ABI and sha256) beside it; later plans refuse a plugin whose file differs.
    Lock {
        pipeline: PathBuf,
        #[command(flatten)]
        plugins: PluginDirs,
    },
    /// Start something new: `new stage NAME` writes a stage crate of its own.
    New {
        #[command(subcommand)]
        what: NewCommand,
    },
    /// Check that every shard of a sharded run finished in OUTPUT and write the run's
    /// `_manifest.json` and `_summary.json`.
    Merge {
        /// The output directory (or object-store URL) the shards wrote to.
        output: String,
    },
    /// Estimate a pipeline without running it: documents and bytes (from file sizes and a
    /// sample), each stage's workers and GPUs, and each dedup phase's memory and spill disk,
    /// with the bands per iteration that fit this machine (or --memory).
    Plan {
        pipeline: PathBuf,
        #[command(flatten)]
        plugins: PluginDirs,
        /// Plan for this much memory (e.g. 64GB, 512GiB) instead of this machine's available memory.
        #[arg(long, value_name = "SIZE")]
        memory: Option<String>,
        /// Cores for stage workers (default: usable cores × cpu_allocation_percentage).
        #[arg(long)]
        workers: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Time each stage of a pipeline on its input, in process: as WASM and, with
    /// --native-plugins, as native builds of the same stages. Prints a table; writes nothing.
    Bench {
        pipeline: PathBuf,
        #[command(flatten)]
        plugins: PluginDirs,
        /// Directory of native builds of the pipeline's stages (same names).
        #[arg(long, value_name = "DIR")]
        native_plugins: Option<PathBuf>,
        /// Passes per stage; the best is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Measure a GPU stage's batch size (max_batch_tokens) on a sample of the pipeline's input,
    /// inside its worker: peak GPU memory (NVML) and docs/s at growing sizes; pick the largest
    /// that stays under the margin of the stage's budget and is within 5 % of the best docs/s.
    /// Without a GPU it says so and changes nothing.
    Tune {
        pipeline: PathBuf,
        #[command(flatten)]
        plugins: PluginDirs,
        /// The stage's label (default: every GPU stage with a max_batch_tokens param).
        #[arg(long)]
        stage: Option<String>,
        /// Fit this budget in GiB instead of the stage's gpu_memory_gb (or its cards).
        #[arg(long, value_name = "GB")]
        gpu_memory: Option<f64>,
        /// Share of the budget the measured peak may reach.
        #[arg(long, default_value_t = 0.85)]
        margin: f64,
        /// Documents of the input to run at each size.
        #[arg(long, default_value_t = 20_000)]
        sample: usize,
        /// The smallest size tried (sizes double from here).
        #[arg(long, default_value_t = 2048)]
        start: usize,
        /// Write the pick into the pipeline file (comments kept; the old file saved as .backup).
        #[arg(long)]
        apply: bool,
        #[arg(long)]
        json: bool,
    },
    /// Inspect installed plugins.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Print the JSON Schema of a file format.
    Schema { what: SchemaKind },
    /// List the GPUs (NVML). Without a driver or GPU the list is empty and the exit code 0.
    Gpus {
        #[arg(long)]
        json: bool,
    },
    /// Run a semantic dedup step's k-means and pairwise phases on the GPU over its work
    /// directory (started by `run`, so a CUDA fault costs this process, not the run).
    #[command(hide = true)]
    DedupGpu {
        work: PathBuf,
        #[arg(long)]
        docs: u64,
        #[arg(long)]
        dim: usize,
        /// The dedup step as JSON.
        #[arg(long)]
        spec: String,
    },
    /// Serve one native plugin to the host over stdin/stdout (started by `run`).
    #[command(hide = true)]
    Worker {
        plugin: PathBuf,
        #[arg(long, default_value = "{}")]
        params: String,
        /// WorkerContext JSON (GPU budget, visible devices).
        #[arg(long, default_value = "{}")]
        context: String,
        /// CPUs to pin the worker to.
        #[arg(long, value_delimiter = ',')]
        cpus: Vec<usize>,
        /// Print the plugin's manifest and exit.
        #[arg(long)]
        manifest: bool,
        /// Serve a WASM plugin (`isolation: process`): the instance's limits as JSON.
        #[arg(long)]
        wasm: Option<String>,
        /// The batch arenas' descriptors (input, output), inherited from the host.
        #[arg(long, value_delimiter = ',')]
        shm: Vec<i32>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum SchemaKind {
    Manifest,
    Pipeline,
}

/// `println!` for what a command prints: when stdout is closed early (`curator-host plugin
/// list | head`) the command ends quietly instead of panicking; another write error ends it
/// with the failure code. (SIGPIPE stays ignored: the host writes to its workers' pipes.)
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                eprintln!("error: cannot write to stdout: {e}");
                std::process::exit(i32::from(EXIT_FAILED));
            }
            std::process::exit(0);
        }
    }};
}

// The binary's subcommands that have a file of their own (after `out!`, which they use).
#[path = "cli/plugin.rs"]
mod plugin_cli;
use plugin_cli::PluginCommand;

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CURATOR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,curator_host=info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt().with_ansi(ansi).with_env_filter(filter).with_writer(std::io::stderr).with_target(false).init();
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Run {
            pipeline,
            plugins,
            workers,
            no_cache,
            dry_run,
            strict,
            restart,
            metrics,
            ignore_memory_plan,
            shard,
            shard_from_env,
            phase,
        } => {
            let shard = match (shard, shard_from_env) {
                (Some(s), _) => Some(curator_core::shard::Shard::parse(&s)),
                (None, true) => Some(curator_core::shard::Shard::from_env(|k| std::env::var(k).ok())),
                (None, false) => None,
            };
            let shard = match shard.transpose() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
            };
            let phase = match phase.as_deref().map(curator_core::shard::Phase::parse).transpose() {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
            };
            let flags = RunFlags { no_cache, dry_run, restart, ignore_memory_plan, shard, phase };
            run(&pipeline, &plugins, RunOptions { workers, strict, metrics_addr: metrics }, flags)
        }
        Command::Plan { pipeline, plugins, memory, workers, json } => plan_command(&pipeline, &plugins, memory.as_deref(), workers, json),
        Command::DedupGpu { work, docs, dim, spec } => {
            let spec: curator_core::DedupSpec = serde_json::from_str(&spec).context("--spec is not a dedup step")?;
            curator_host::dedup::semantic::gpu_phases(&work, docs, dim, &spec.semantic())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tune { pipeline, plugins, stage, gpu_memory, margin, sample, start, apply, json } => {
            let opts = curator_host::tune::TuneOptions { stage, gpu_memory_gb: gpu_memory, margin, sample_docs: sample, start };
            tune_command(&pipeline, &plugins, &opts, apply, json)
        }
        Command::Lock { pipeline, plugins } => {
            let opts = plan::PlanOptions { skip_lock: true, ..Default::default() };
            let plan = match plan::plan_file(&pipeline, &scan_for(&pipeline, &plugins), opts) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
            };
            let lock = plan::lock::build(&plan.stages)?;
            let path = plan::lock::lock_path(&pipeline);
            std::fs::write(&path, serde_json::to_vec_pretty(&lock)?).with_context(|| format!("cannot write {}", path.display()))?;
            for p in &lock.plugins {
                out!("{} {} (ABI {}, {}) sha256 {}", p.name, p.version, p.abi, p.kind, p.sha256);
            }
            out!("wrote {} ({} plugin(s))", path.display(), lock.plugins.len());
            Ok(ExitCode::SUCCESS)
        }
        Command::New { what: NewCommand::Stage { name, native, kind, dir, sdk, sdk_git } } => {
            use curator_host::scaffold::{Kind, Sdk, new_stage};
            let sdk = match (sdk, sdk_git) {
                (Some(p), _) => Sdk::Path(std::path::absolute(&p).unwrap_or(p)),
                (None, Some(url)) => Sdk::Git(url),
                (None, None) => Sdk::default_for_this_host(),
            };
            let kind = Kind::parse(&kind).unwrap_or(Kind::Filter);
            match new_stage(&dir, &name, kind, native, &sdk) {
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
        Command::Merge { output } => {
            let loc = curator_host::io::Loc::parse(&output, &std::env::current_dir().unwrap_or_default())?;
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
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::from(EXIT_FAILED))
                }
            }
        }
        Command::Bench { pipeline, plugins, native_plugins, repeat, json } => bench(&pipeline, &plugins, native_plugins, repeat, json),
        Command::Plugin { command } => plugin_cli::run(command),
        Command::Worker { plugin, manifest: true, .. } => {
            Ok(ExitCode::from(curator_host::worker::serve::serve_manifest(&plugin).clamp(0, 255) as u8))
        }
        Command::Worker { plugin, params, context, cpus, wasm, shm, .. } => {
            let context = serde_json::from_str(&context).context("--context is not a worker context")?;
            let spec: Option<curator_host::worker::WasmWorkerSpec> =
                wasm.map(|w| serde_json::from_str(&w)).transpose().context("--wasm is not a WASM worker spec")?;
            let [input, output] = shm[..] else { anyhow::bail!("--shm needs the input and output arena descriptors") };
            let args = curator_host::worker::serve::WorkerArgs {
                plugin: &plugin,
                params: &params,
                context: &context,
                cpus: &cpus,
                shm: (input, output),
                wasm: spec.as_ref(),
            };
            Ok(ExitCode::from(curator_host::worker::serve::serve(&args).clamp(0, 255) as u8))
        }
        Command::Gpus { json } => {
            let inv = curator_host::gpu::discover();
            if json {
                out!("{}", serde_json::to_string_pretty(&inv)?);
            } else {
                if let Some(d) = &inv.driver {
                    out!("driver {d}");
                }
                if inv.gpus.is_empty() {
                    out!("no GPUs{}", inv.note.as_deref().map(|n| format!(": {n}")).unwrap_or_default());
                }
                for g in &inv.gpus {
                    out!("{:>3}  {:<28} {:>8} MiB total {:>8} MiB free  {}", g.index, g.name, g.memory_total_mb, g.memory_free_mb, g.uuid);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { what } => {
            let schema = match what {
                SchemaKind::Manifest => schemars::schema_for!(curator_core::Manifest),
                SchemaKind::Pipeline => schemars::schema_for!(curator_core::PipelineSpec),
            };
            out!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn scan(dirs: &PluginDirs) -> Registry {
    let reg = Registry::scan(&registry::search_path(&dirs.dirs));
    for p in &reg.problems {
        tracing::warn!("{p}");
    }
    reg
}

/// The registry for running `pipeline`: every plugin file checked against the pipeline's
/// `trust:` setting and the trust store before it is read or loaded.
fn scan_for(pipeline: &Path, dirs: &PluginDirs) -> Registry {
    use curator_host::trust;
    let policy = std::fs::read_to_string(pipeline)
        .ok()
        .and_then(|t| curator_core::PipelineSpec::from_yaml(&pipeline.display().to_string(), &t).ok())
        .map(|s| s.trust)
        .unwrap_or_default();
    let (store, problems) = trust::TrustStore::load(&trust::TrustStore::default_dirs(&dirs.trust_dirs));
    for p in problems {
        tracing::warn!("trust store: {p}");
    }
    let gate = |path: &Path| trust::check(path, &policy, &store);
    let reg = Registry::scan_gated(&registry::search_path(&dirs.dirs), &gate);
    for p in &reg.problems {
        tracing::warn!("{p}");
    }
    reg
}

fn fmt_resources(r: &curator_core::Resources) -> String {
    let mut s = format!("cpus={}", r.cpus);
    if let Some(g) = r.gpus {
        s.push_str(&format!(" gpus={g}"));
    }
    if let Some(g) = r.gpu_memory_gb {
        s.push_str(&format!(" gpu_memory_gb={g}"));
    }
    match r.memory_mb {
        Some(m) => s.push_str(&format!(" memory_mb={m}")),
        None => s.push_str(" memory_mb=default"),
    }
    s
}

/// A table for the terminal: columns as wide as their widest cell, no borders.
fn plain_table(header: &[&str]) -> comfy_table::Table {
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::NOTHING).set_header(header.to_vec());
    table
}

/// The table as text: two spaces between columns, no trailing blanks.
fn render(mut table: comfy_table::Table) -> String {
    for c in table.column_iter_mut() {
        c.set_padding((0, 2));
    }
    table.trim_fmt()
}

fn bench(pipeline: &Path, dirs: &PluginDirs, native_dir: Option<PathBuf>, repeat: usize, json: bool) -> Result<ExitCode> {
    let plan = match plan::plan_file(pipeline, &scan_for(pipeline, dirs), plan::PlanOptions::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let native = match native_dir {
        Some(d) => match plan::plan_file(
            pipeline,
            &scan_for(pipeline, &PluginDirs { dirs: vec![d], trust_dirs: dirs.trust_dirs.clone() }),
            plan::PlanOptions::default(),
        ) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("error: with --native-plugins: {e}");
                return Ok(ExitCode::from(EXIT_INVALID));
            }
        },
        None => None,
    };
    let runtime = WasmRuntime::new(default_cache_dir()).context("cannot start the WASM runtime")?;
    let rows = match exec::bench::bench(&plan, native.as_ref(), &runtime, repeat) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    if json {
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let secs = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{s:.3}"));
    out!("| stage | docs in | MB in | WASM s | native s | WASM / native | WASM MB/s |");
    out!("|---|---|---|---|---|---|---|");
    let (mut w, mut n) = (0.0, 0.0);
    for r in &rows {
        let ratio = match (r.wasm_s, r.native_s) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        let mbs = r.wasm_s.filter(|s| *s > 0.0).map_or("-".into(), |s| format!("{:.0}", r.bytes_in as f64 / 1e6 / s));
        let differ = if r.outputs_differ { " (outputs differ!)" } else { "" };
        let differ = if r.worker_process && r.wasm_s.is_some() { format!(" [isolation: process]{differ}") } else { differ.to_string() };
        out!(
            "| {}{differ} | {} | {:.1} | {} | {} | {ratio} | {mbs} |",
            r.label,
            r.docs_in,
            r.bytes_in as f64 / 1e6,
            secs(r.wasm_s),
            secs(r.native_s)
        );
        w += r.wasm_s.unwrap_or(0.0);
        n += r.native_s.unwrap_or(0.0);
    }
    let docs = rows.first().map_or(0, |r| r.docs_in) as f64;
    let total_ratio = if n > 0.0 { format!("{:.2}x", w / n) } else { "-".into() };
    out!("| all stages | {docs} | | {w:.3} | {} | {total_ratio} | |", if n > 0.0 { format!("{n:.3}") } else { "-".into() });
    out!();
    out!(
        "{:.0} docs/s through all stages as WASM{}",
        docs / w.max(1e-9),
        if n > 0.0 { format!(", {:.0} as native", docs / n) } else { String::new() }
    );
    Ok(ExitCode::SUCCESS)
}

/// Switches of `run` that are not run options.
struct RunFlags {
    no_cache: bool,
    dry_run: bool,
    restart: bool,
    ignore_memory_plan: bool,
    shard: Option<curator_core::shard::Shard>,
    phase: Option<curator_core::shard::Phase>,
}

fn tune_command(pipeline: &Path, dirs: &PluginDirs, opts: &curator_host::tune::TuneOptions, apply: bool, json: bool) -> Result<ExitCode> {
    use curator_host::tune;
    let inventory = curator_host::gpu::discover();
    let Some(card) = inventory.gpus.first() else {
        let why = inventory.note.unwrap_or_else(|| "no GPU".into());
        out!("no GPU to measure on ({why}): nothing tuned, {} unchanged", pipeline.display());
        return Ok(ExitCode::SUCCESS);
    };
    let plan = match plan::plan_file(pipeline, &scan_for(pipeline, dirs), plan::PlanOptions::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let results = match tune::tune(&plan, opts, card.memory_total_mb << 20) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    if json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        for t in &results {
            out!("{}", tune::report(t, &card.name, card.memory_total_mb));
        }
    }
    if apply {
        let backup = tune::apply(pipeline, &results)?;
        out!("wrote the picks into {} (the old file is {})", pipeline.display(), backup.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn plan_command(pipeline: &Path, dirs: &PluginDirs, memory: Option<&str>, workers: Option<usize>, json: bool) -> Result<ExitCode> {
    let reg = scan_for(pipeline, dirs);
    let memory_bytes = match memory {
        None => None,
        Some(m) => Some(curator_core::partition::parse_size(m).with_context(|| format!("--memory {m:?} is not a size such as 64GB"))?),
    };
    let opts_plan = plan::PlanOptions {
        restart: false,
        check_setup: None,
        memory_bytes,
        ignore_memory_plan: true,
        shard: None,
        phase: None,
        skip_lock: false,
    };
    let plan = match plan::plan_file(pipeline, &reg, opts_plan) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let report = curator_host::dedup::report::report(&plan, &RunOptions { workers, ..Default::default() }, memory_bytes);
    if json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for line in report.lines() {
            out!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run(pipeline: &Path, dirs: &PluginDirs, opts: RunOptions, flags: RunFlags) -> Result<ExitCode> {
    let RunFlags { no_cache, dry_run, restart, ignore_memory_plan, shard, phase } = flags;
    let reg = scan_for(pipeline, dirs);
    let runtime = WasmRuntime::new(if no_cache { None } else { default_cache_dir() }).context("cannot start the WASM runtime")?;
    let opts_plan = plan::PlanOptions {
        restart: restart && !dry_run,
        check_setup: Some(&runtime),
        memory_bytes: None,
        ignore_memory_plan,
        shard,
        phase,
        skip_lock: false,
    };
    let plan = match plan::plan_file(pipeline, &reg, opts_plan) {
        Ok(p) => p,
        Err(e @ PlanError::Spec(_)) | Err(e @ PlanError::Io(_)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    if dry_run {
        let workers = exec::initial_workers(&plan, &opts);
        out!(
            "pipeline {} is valid: {} input file(s) in {} partition(s), {} stage(s), {:.2} core(s) for workers",
            plan.file_label,
            plan.inputs.len(),
            plan.partitions.len(),
            plan.stages.len(),
            exec::capacity(&plan, &opts).cpus,
        );
        for (s, n) in plan.stages.iter().zip(workers) {
            out!(
                "  {:<24} {} [{}, {} MiB reserved per worker] {n} worker(s) to start",
                s.label,
                s.plugin.path.display(),
                fmt_resources(&s.resources),
                s.memory.reserved_mb
            );
        }
        for b in &plan.branches {
            out!("  branch: {:?} of {} -> {}", b.kind, plan.stages[b.stage].label, b.dir.display());
        }
        if let Some(s) = plan.shard {
            out!("shard {} of {} owns:", s.index, s.count);
            for p in &plan.partitions {
                let parts: Vec<String> = p.parts.iter().map(|part| plan.describe_part(part)).collect();
                out!("  partition {}: {} -> {}", p.index, parts.join(", "), p.output_rel);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let summary = match exec::run(&plan, &runtime, &opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    let mut table = plain_table(&["STAGE", "IN", "OUT", "DROPPED", "FAILED", "BUSY s", "IDLE s", "DOCS/s busy", "WORKERS"]);
    for s in &summary.stages {
        table.add_row(vec![
            s.label.clone(),
            s.docs_in.to_string(),
            s.docs_out.to_string(),
            s.dropped.to_string(),
            s.failed.to_string(),
            format!("{:.3}", s.busy_s),
            format!("{:.3}", s.idle_s),
            format!("{:.0}", s.docs_per_s),
            format!("{}/{}", s.workers, s.max_workers),
        ]);
    }
    for k in 1..9 {
        if let Some(c) = table.column_mut(k) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    out!("{}", render(table));
    if let Some(d) = &summary.dedup {
        out!(
            "dedup ({}, {}): {} documents, {} duplicate(s) in {} group(s), largest {}{}; ids in {}",
            d.method,
            d.action,
            d.documents,
            d.duplicates,
            d.groups,
            d.largest_group,
            if d.method == "fuzzy" {
                format!(
                    ", {} candidate pair(s), {} verified, {} pass(es) of {} band(s)",
                    d.candidate_pairs, d.verified_pairs, d.iterations, d.bands_per_iteration
                )
            } else {
                String::new()
            },
            plan.output_dir.join("_duplicates").display()
        );
    }
    out!(
        "read {} documents in {} partition(s) ({} skipped, {} resumed), rejected {} line(s), dead-lettered {}, wrote {} to {} in {:.2}s with {} worker(s), peak RSS {:.0} MiB",
        summary.docs_in,
        summary.partitions,
        summary.skipped_partitions,
        summary.resumed_partitions,
        summary.rejected,
        summary.failed,
        summary.docs_out,
        plan.output_dir.display(),
        summary.elapsed_s,
        summary.workers,
        summary.peak_rss_mb,
    );
    let summary_loc = match plan.shard {
        Some(s) => plan.output_dir.join(&format!("{}/{}.summary.json", curator_host::io::shards::DIR, s.tag())),
        None => plan.output_dir.join("_summary.json"),
    };
    let saved = Spool::create(&summary_loc).and_then(|(spool, mut w)| {
        std::io::Write::write_all(&mut w, &serde_json::to_vec_pretty(&summary).unwrap_or_default()).map_err(|e| spool.werr(e))?;
        spool.commit(w)
    });
    if let Err(e) = saved {
        tracing::warn!("cannot write {}: {e}", summary_loc.display());
    }
    Ok(ExitCode::SUCCESS)
}
