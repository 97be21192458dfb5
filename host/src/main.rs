//! `curator-host`: run curation pipelines made of sandboxed WASM stages.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};

use curator_host::exec::RunOptions;
use curator_host::registry::{self, Registry};

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
    /// A stage of its own: in Rust, a crate outside this workspace built the way curator's
    /// own plugins are; in Python (`--lang python`), a module for `curator-sdk build`. With a
    /// unit test, a README with the commands to build and try it, and a sample pipeline.
    Stage {
        /// The stage's name (lowercase, digits, `_` or `-`): the crate and the plugin.
        name: String,
        /// A native (C ABI) library instead of a WASM component (for GPU stages and
        /// anything that needs the machine).
        #[arg(long, conflicts_with = "lang")]
        native: bool,
        /// The language: rust, or python (a sandboxed WASM component with CPython inside,
        /// built by the Python SDK's `curator-sdk build`).
        #[arg(long, default_value = "rust", value_parser = ["rust", "python"])]
        lang: String,
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
    /// Join Megatron datasets (`.bin`/`.idx` pairs) into one, as Megatron-LM's
    /// `tools/merge_datasets.py` does: every pair in --input in name order (a `megatron`
    /// sink's output directory: its other files are left alone), or the prefixes given.
    #[cfg(feature = "tokens")]
    MegatronMerge {
        /// A directory of `.bin`/`.idx` pairs.
        #[arg(long, required_unless_present = "prefix")]
        input: Option<PathBuf>,
        /// A dataset prefix (PATH for PATH.bin and PATH.idx), in the order given; repeatable.
        #[arg(long, conflicts_with = "input")]
        prefix: Vec<PathBuf>,
        /// The merged dataset's prefix: OUTPUT_PREFIX.bin and OUTPUT_PREFIX.idx.
        #[arg(long)]
        output_prefix: PathBuf,
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
    /// Serve `run` requests on a Unix socket, keeping plugins, stage instances and models
    /// between runs (curator-ray's warm workers).
    ///
    /// One request at a time; the compiled plugins, the stage instances (worker processes
    /// with their models loaded) and the setup checks are kept for the next run of the same
    /// stages. Each request is a line of JSON, {"argv": ["run", ...], "cwd": "..."},
    /// answered with one line: {"code", "stdout", "stderr", "elapsed_s", "kept"}.
    Serve {
        /// The socket to listen on (created; a stale one is replaced).
        #[arg(long)]
        socket: PathBuf,
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
#[path = "cli/pipeline.rs"]
mod pipeline_cli;
use pipeline_cli::{RunFlags, bench, lock_command, plan_command, run, tune_command};
#[path = "cli/host.rs"]
mod host_cli;
#[path = "cli/serve.rs"]
mod serve_cli;

/// The log filter without `CURATOR_LOG`: warnings from everything, progress from the host's
/// own crates (the library and the crates under it).
const DEFAULT_LOG: &str = "warn,curator_host=info,curator_sandbox=info,curator_io=info,curator_run=info,curator_dedup=info";

/// `CURATOR_LOG` (`level` and `target=level` directives, comma-separated), else [`DEFAULT_LOG`].
/// A per-target filter (`Targets`) rather than `EnvFilter`: the same directives, without span and
/// field filters, without the regex engine that `EnvFilter` compiles in.
fn log_filter() -> tracing_subscriber::filter::Targets {
    let parse = |s: &str| s.parse::<tracing_subscriber::filter::Targets>().ok();
    std::env::var("CURATOR_LOG")
        .ok()
        .and_then(|s| parse(&s))
        .or_else(|| parse(DEFAULT_LOG))
        .unwrap_or_else(|| tracing_subscriber::filter::Targets::new().with_default(tracing::Level::WARN))
}

fn main() -> ExitCode {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    let output = tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(std::io::stderr).with_target(false);
    tracing_subscriber::registry().with(output).with(log_filter()).init();
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
        Command::Run { .. } => dispatch_run(cli, None).map(ExitCode::from),
        Command::Plan { pipeline, plugins, memory, workers, json } => plan_command(&pipeline, &plugins, memory.as_deref(), workers, json),
        Command::DedupGpu { work, docs, dim, spec } => host_cli::dedup_gpu(&work, docs, dim, &spec),
        Command::Tune { pipeline, plugins, stage, gpu_memory, margin, sample, start, apply, json } => {
            let opts = curator_host::tune::TuneOptions { stage, gpu_memory_gb: gpu_memory, margin, sample_docs: sample, start };
            tune_command(&pipeline, &plugins, &opts, apply, json)
        }
        Command::Lock { pipeline, plugins } => lock_command(&pipeline, &plugins),
        Command::New { what: NewCommand::Stage { name, native, lang, kind, dir, sdk, sdk_git } } => {
            host_cli::new_stage(&name, native, &lang, &kind, &dir, sdk, sdk_git)
        }
        Command::Merge { output } => host_cli::merge(&output),
        #[cfg(feature = "tokens")]
        Command::MegatronMerge { input, prefix, output_prefix } => host_cli::megatron_merge(input.as_deref(), &prefix, &output_prefix),
        Command::Bench { pipeline, plugins, native_plugins, repeat, json } => bench(&pipeline, &plugins, native_plugins, repeat, json),
        Command::Plugin { command } => plugin_cli::run(command),
        Command::Worker { plugin, manifest: true, .. } => {
            Ok(ExitCode::from(curator_host::worker::serve::serve_manifest(&plugin).clamp(0, 255) as u8))
        }
        Command::Worker { plugin, params, context, cpus, wasm, shm, .. } => host_cli::worker(&plugin, &params, &context, &cpus, wasm, &shm),
        Command::Gpus { json } => host_cli::gpus(json),
        Command::Serve { socket } => serve_cli::serve(&socket),
        Command::Schema { what } => host_cli::schema(what),
    }
}

/// `run`, in this process or as a request to a serving host (`warm`); its exit code.
fn dispatch_run(cli: Cli, warm: Option<&serve_cli::Warm>) -> Result<u8> {
    // Readers and writers in this process allocate each batch's buffers afresh: reuse freed
    // ones instead of faulting in new pages every batch, as worker processes do.
    curator_host::os::keep_large_allocations();
    let Command::Run {
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
    } = cli.command
    else {
        anyhow::bail!("not a run");
    };
    let (shard, phase) = match parse_shard_and_phase(shard, shard_from_env, phase) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_INVALID);
        }
    };
    let flags = RunFlags { no_cache, dry_run, restart, ignore_memory_plan, shard, phase };
    run(&pipeline, &plugins, RunOptions { workers, strict, metrics_addr: metrics, warm: None }, flags, warm)
}

/// `--shard I/N` (or `--shard-from-env`) and `--phase P`, parsed.
type ShardAndPhase = (Option<curator_core::shard::Shard>, Option<curator_core::shard::Phase>);

fn parse_shard_and_phase(shard: Option<String>, from_env: bool, phase: Option<String>) -> Result<ShardAndPhase, String> {
    let shard = match (shard, from_env) {
        (Some(s), _) => Some(curator_core::shard::Shard::parse(&s)),
        (None, true) => Some(curator_core::shard::Shard::from_env(|k| std::env::var(k).ok())),
        (None, false) => None,
    };
    let shard = shard.transpose().map_err(|e| e.to_string())?;
    let phase = phase.as_deref().map(curator_core::shard::Phase::parse).transpose().map_err(|e| e.to_string())?;
    Ok((shard, phase))
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
