//! `curator-host run | plan | bench | tune`: the subcommands that take a pipeline file. The
//! work is in the library (`plan`, `exec`, `tune`); this file plans, starts and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use curator_host::exec::{self, RunOptions};
use curator_host::io::writer::Spool;
use curator_host::os::default_cache_dir;
use curator_host::plan::{self, PlanError};
use curator_host::wasm::WasmRuntime;

use super::{EXIT_FAILED, EXIT_INVALID, PluginDirs, fmt_resources, plain_table, render, scan_for};

pub(crate) fn bench(pipeline: &Path, dirs: &PluginDirs, native_dir: Option<PathBuf>, repeat: usize, json: bool) -> Result<ExitCode> {
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
pub(crate) struct RunFlags {
    pub(crate) no_cache: bool,
    pub(crate) dry_run: bool,
    pub(crate) restart: bool,
    pub(crate) ignore_memory_plan: bool,
    pub(crate) shard: Option<curator_core::shard::Shard>,
    pub(crate) phase: Option<curator_core::shard::Phase>,
}

pub(crate) fn tune_command(
    pipeline: &Path,
    dirs: &PluginDirs,
    opts: &curator_host::tune::TuneOptions,
    apply: bool,
    json: bool,
) -> Result<ExitCode> {
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

pub(crate) fn plan_command(
    pipeline: &Path,
    dirs: &PluginDirs,
    memory: Option<&str>,
    workers: Option<usize>,
    json: bool,
) -> Result<ExitCode> {
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
        hold_output: false,
    };
    let plan = match plan::plan_file(pipeline, &reg, opts_plan) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let report = curator_host::plan::report::report(&plan, workers, memory_bytes);
    if json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for line in report.lines() {
            out!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `run`; its exit code. A serving host (`warm`) lends its WASM runtime, the setup checks
/// its earlier runs passed and its pool of kept stage instances (not with `--no-cache`).
pub(crate) fn run(
    pipeline: &Path,
    dirs: &PluginDirs,
    opts: RunOptions,
    flags: RunFlags,
    warm: Option<&super::serve_cli::Warm>,
) -> Result<u8> {
    let RunFlags { no_cache, dry_run, restart, ignore_memory_plan, shard, phase } = flags;
    let reg = scan_for(pipeline, dirs);
    let warm = warm.filter(|_| !no_cache);
    let own;
    let runtime = match warm {
        Some(w) => &w.runtime,
        None => {
            own = WasmRuntime::new(if no_cache { None } else { default_cache_dir() }).context("cannot start the WASM runtime")?;
            &own
        }
    };
    let check_setup = |s: &plan::PlannedStage| {
        let Some(pool) = warm.map(|w| &w.pool) else { return exec::check_setup(s, runtime) };
        let key = exec::warm::stage_key(s);
        if !pool.setup_checked(&key) {
            exec::check_setup(s, runtime)?;
            pool.record_setup_check(key);
        }
        Ok(())
    };
    let opts = RunOptions { warm: warm.map(|w| w.pool.clone()), ..opts };
    let opts_plan = plan::PlanOptions {
        restart: restart && !dry_run,
        check_setup: Some(&check_setup),
        memory_bytes: None,
        ignore_memory_plan,
        shard,
        phase,
        skip_lock: false,
        hold_output: !dry_run,
    };
    let plan = match plan::plan_file(pipeline, &reg, opts_plan) {
        Ok(p) => p,
        Err(e @ PlanError::Spec(_)) | Err(e @ PlanError::Io(_)) => {
            eprintln!("error: {e}");
            return Ok(EXIT_INVALID);
        }
    };
    if dry_run {
        print_dry_run(&plan, opts.workers);
        return Ok(0);
    }
    let summary = match exec::run(&plan, runtime, &opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_FAILED);
        }
    };
    print_summary(&plan, &summary);
    let summary_loc = match plan.shard {
        Some(s) => plan.output_dir.join(&format!("{}/{}.summary.json", curator_host::io::shards::DIR, s.tag())),
        None => plan.output_dir.join("_summary.json"),
    };
    let saved = Spool::create(&summary_loc, Default::default()).and_then(|(spool, mut w)| {
        std::io::Write::write_all(&mut w, &serde_json::to_vec_pretty(&summary).unwrap_or_default()).map_err(|e| spool.werr(e))?;
        spool.commit(w)
    });
    if let Err(e) = saved {
        tracing::warn!("cannot write {}: {e}", summary_loc.display());
    }
    Ok(0)
}

/// `run --dry-run`: what the plan would start, and (a shard) the partitions it owns.
fn print_dry_run(plan: &plan::Plan, cores: Option<usize>) {
    let workers = curator_host::plan::capacity::initial_workers(plan, cores);
    out!(
        "pipeline {} is valid: {} input file(s) in {} partition(s), {} stage(s), {:.2} core(s) for workers",
        plan.file_label,
        plan.inputs.len(),
        plan.partitions.len(),
        plan.stages.len(),
        curator_host::plan::capacity::capacity(plan, cores).cpus,
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
}

/// The run's table (per stage), its dedup step and its totals.
fn print_summary(plan: &plan::Plan, summary: &exec::RunSummary) {
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
    for s in summary.stages.iter().filter(|s| !s.sums.is_empty()) {
        let totals: Vec<String> = s.sums.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out!("{}: {}", s.label, totals.join(", "));
    }
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
    if let Some(tokens) = summary.tokens() {
        out!(
            "tokens: {tokens} in {} file(s), {:.0} tokens/s",
            summary.outputs.iter().filter(|f| f.tokens.is_some()).count(),
            tokens as f64 / summary.elapsed_s.max(1e-9)
        );
    }
}

/// `lock PIPELINE`: pin every plugin the pipeline uses (name, version, ABI, sha256) in
/// `PIPELINE.lock`, which later runs check before any stage starts.
pub(crate) fn lock_command(pipeline: &Path, dirs: &PluginDirs) -> Result<ExitCode> {
    let opts = plan::PlanOptions { skip_lock: true, ..Default::default() };
    let plan = match plan::plan_file(pipeline, &scan_for(pipeline, dirs), opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };
    let lock = plan::lock::build(&plan.stages)?;
    let path = plan::lock::lock_path(pipeline);
    std::fs::write(&path, serde_json::to_vec_pretty(&lock)?).with_context(|| format!("cannot write {}", path.display()))?;
    for p in &lock.plugins {
        out!("{} {} (ABI {}, {}) sha256 {}", p.name, p.version, p.abi, p.kind, p.sha256);
    }
    out!("wrote {} ({} plugin(s))", path.display(), lock.plugins.len());
    Ok(ExitCode::SUCCESS)
}
