//! `curator-host plan`: what a pipeline will need, without running it.

use curator_core::dedup::{Corpus, DedupPlan, plan_dedup};

use super::Plan;
use super::capacity::{capacity, initial_workers};
use crate::dedup::human;

#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub pipeline: String,
    /// The sink's directory or URL (relative paths resolved against the pipeline file).
    pub output: String,
    pub input_files: usize,
    pub input_bytes: u64,
    pub partitions: usize,
    /// Documents and decoded bytes, estimated from file sizes and a sample.
    pub corpus: CorpusReport,
    pub memory_bytes: u64,
    pub cores_for_workers: f64,
    pub stages: Vec<StageReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dedup: Option<DedupReport>,
    /// What the sink will write, where its format estimates it (tokenized formats).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_estimate: Option<OutputReport>,
    pub warnings: Vec<String>,
}

/// The sink's output estimated from the start of the input, as if every document were kept.
#[derive(Debug, serde::Serialize)]
pub struct OutputReport {
    pub sample_documents: usize,
    #[serde(flatten)]
    pub estimate: crate::io::format::OutputEstimate,
}

/// Documents `plan`'s output estimate tokenizes.
const ESTIMATE_SAMPLE_DOCS: usize = 2_000;

/// The sink format's estimate of its output for `docs` documents like a sample of the input's.
fn output_estimate(plan: &Plan, docs: u64) -> Option<OutputReport> {
    let format = crate::io::formats::sink(&plan.spec.sink.format).ok()?;
    let sampled = std::cell::Cell::new(0);
    let sample = || {
        let batches = plan.read_spread_sample(ESTIMATE_SAMPLE_DOCS, 16).unwrap_or_default();
        let texts: Vec<String> = batches
            .iter()
            .filter_map(|b| crate::io::records::string_column(b, crate::io::TEXT))
            .flat_map(|a| a.iter().map(|t| t.unwrap_or_default().to_string()))
            .collect();
        sampled.set(texts.len());
        texts
    };
    let estimate = format.estimate(&plan.spec.sink, &sample, docs)?;
    Some(OutputReport { sample_documents: sampled.get(), estimate })
}

#[derive(Debug, serde::Serialize)]
pub struct CorpusReport {
    pub documents: u64,
    pub bytes: u64,
}

#[derive(Debug, serde::Serialize)]
pub struct StageReport {
    pub label: String,
    pub plugin: String,
    pub workers: usize,
    pub reserved_mb_per_worker: u64,
    /// GPU devices of each worker (empty for CPU stages).
    pub gpus: Vec<Vec<u32>>,
    /// What each worker asks for (manifest and pipeline merged): what a cluster scheduler
    /// such as `curator-ray` reserves.
    pub resources: curator_core::Resources,
}

/// One service: what starts, how many, where (or the endpoint).
#[derive(Debug, serde::Serialize)]
pub struct ServiceReport {
    pub name: String,
    /// The command (with `{port}`) or the endpoint's URL.
    pub runs: String,
    pub replicas: usize,
    /// GPU devices of each replica (empty for a CPU server or an endpoint).
    pub gpus: Vec<Vec<u32>>,
}

#[derive(Debug, serde::Serialize)]
pub struct DedupReport {
    pub label: String,
    pub method: String,
    /// What the step will run with (its own settings, or the planner's where unset).
    pub plan: DedupPlan,
    /// What the planner recommends for this machine when nothing is set.
    pub recommended_bands_per_iteration: usize,
    pub recommended_partitions: usize,
    /// The similarity where a pair is caught with probability ½: (1/b)^(1/r).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lsh_threshold: Option<f64>,
    pub work_dir: String,
}

/// The report for a checked plan. `memory`: what the plan was made for (default: available).
pub fn report(plan: &Plan, workers: Option<usize>, memory: Option<u64>) -> Report {
    let memory = memory.unwrap_or_else(crate::os::available_memory_bytes);
    let corpus: Corpus = match &plan.dedup {
        Some(d) => d.corpus,
        None => crate::dedup::estimate::corpus(&plan.inputs, plan.spec.source.limit),
    };
    let cores = capacity(plan, workers).cpus;
    let workers = initial_workers(plan, workers);
    let stages = plan
        .stages
        .iter()
        .zip(workers)
        .map(|(s, n)| StageReport {
            label: s.label.clone(),
            plugin: s.plugin.path.display().to_string(),
            workers: n,
            reserved_mb_per_worker: s.memory.reserved_mb,
            gpus: s.gpu.iter().map(|a| a.devices.clone()).collect(),
            resources: s.resources.clone(),
        })
        .collect();
    let mut warnings = Vec::new();
    let dedup = plan.dedup.as_ref().map(|d| {
        let mut free = d.spec.clone();
        free.bands_per_iteration = None;
        free.partitions = None;
        let rec = plan_dedup(&free, corpus, memory);
        if !d.capacity.fits {
            warnings.push(format!(
                "dedup {:?} will not fit: its peak phase needs about {} but a dedup phase may use {} ({} given); set bands_per_iteration: {} and partitions: {} (or leave them unset)",
                d.label,
                human(d.capacity.peak_bytes),
                human(d.capacity.budget_bytes),
                human(memory),
                rec.bands_per_iteration,
                rec.partitions,
            ));
        }
        warnings.extend(d.capacity.warnings.iter().map(|w| format!("dedup {:?}: {w}", d.label)));
        if d.spec.bands_per_iteration.is_some_and(|b| b > rec.bands_per_iteration) && d.capacity.fits {
            warnings.push(format!(
                "dedup {:?}: bands_per_iteration {} fits, with little room; {} is what this machine's memory suggests",
                d.label,
                d.spec.bands_per_iteration.unwrap_or(0),
                rec.bands_per_iteration
            ));
        }
        let lsh = (d.spec.method == curator_core::DedupMethod::Fuzzy).then(|| d.spec.fuzzy().lsh_threshold());
        DedupReport {
            label: d.label.clone(),
            method: format!("{:?}", d.spec.method).to_lowercase(),
            plan: plan_dedup(&d.spec, corpus, memory),
            recommended_bands_per_iteration: rec.bands_per_iteration,
            recommended_partitions: rec.partitions,
            lsh_threshold: lsh,
            work_dir: d.exchange.as_ref().map(|r| r.display()).unwrap_or_else(|| d.work_dir.display().to_string()),
        }
    });
    let services = plan
        .services
        .iter()
        .map(|s| ServiceReport {
            name: s.name.clone(),
            runs: match (&s.spec.command, &s.endpoint) {
                (Some(c), _) => c.display(),
                (None, Some(u)) => format!("endpoint {u}"),
                (None, None) => String::new(),
            },
            replicas: s.replicas.len(),
            gpus: s.replicas.iter().flatten().map(|a| a.devices.clone()).collect(),
        })
        .collect();
    Report {
        output: plan.output_dir.display(),
        pipeline: plan.file_label.clone(),
        input_files: plan.inputs.len(),
        input_bytes: plan.inputs.iter().map(|f| f.size).sum(),
        partitions: plan.dedup.as_ref().map(|d| d.all_partitions.len()).unwrap_or(plan.partitions.len()),
        corpus: CorpusReport { documents: corpus.docs, bytes: corpus.bytes },
        memory_bytes: memory,
        cores_for_workers: cores,
        stages,
        services,
        dedup,
        output_estimate: output_estimate(plan, corpus.docs),
        warnings,
    }
}

impl Report {
    /// The report as text, one line per item.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![
            format!(
                "pipeline {}: {} input file(s), {} in {} partition(s)",
                self.pipeline,
                self.input_files,
                human(self.input_bytes),
                self.partitions
            ),
            format!(
                "corpus (estimated from file sizes and a sample): ~{} documents, ~{} of text",
                self.corpus.documents,
                human(self.corpus.bytes)
            ),
            format!("machine: {:.2} core(s) for workers, {} of memory planned for", self.cores_for_workers, human(self.memory_bytes)),
            "stages:".to_string(),
        ];
        for s in &self.stages {
            let gpus = if s.gpus.is_empty() { String::new() } else { format!(", GPUs {:?}", s.gpus) };
            out.push(format!("  {:<28} {} worker(s), {} MiB reserved each{gpus}", s.label, s.workers, s.reserved_mb_per_worker));
        }
        if !self.services.is_empty() {
            out.push("services:".to_string());
            for s in &self.services {
                let gpus = if s.gpus.is_empty() { String::new() } else { format!(", GPUs {:?}", s.gpus) };
                let what = if s.runs.starts_with("endpoint ") {
                    s.runs.clone()
                } else {
                    format!("{} replica(s) of `{}`{gpus}", s.replicas, s.runs)
                };
                out.push(format!("  {:<28} {what}", s.name));
            }
        }
        if let Some(d) = &self.dedup {
            let p = &d.plan;
            out.push(format!("dedup {:?} ({}), work directory {}:", d.label, d.method, d.work_dir));
            if d.method == "fuzzy" {
                out.push(format!(
                    "  bands per iteration {} ({} pass(es)), partitions {}; recommended here: {} and {}{}",
                    p.bands_per_iteration,
                    p.iterations,
                    p.partitions,
                    d.recommended_bands_per_iteration,
                    d.recommended_partitions,
                    d.lsh_threshold.map(|t| format!("; LSH threshold (1/b)^(1/r) = {t:.3}")).unwrap_or_default()
                ));
            } else {
                out.push(format!("  partitions {} (recommended here: {})", p.partitions, d.recommended_partitions));
            }
            for ph in &p.phases {
                out.push(format!("  phase {:<11} ~{:>10}   = {}", ph.phase, human(ph.bytes), ph.formula));
            }
            out.push(format!(
                "  peak ~{} of the {} a dedup phase may use ({:.0} % of memory): {}",
                human(p.peak_bytes),
                human(p.budget_bytes),
                curator_core::dedup::DEDUP_MEMORY_SHARE * 100.0,
                if p.fits { "fits" } else { "DOES NOT FIT" }
            ));
            out.push(format!("  spill disk at the peak: ~{}", human(p.spill_bytes)));
            out.push(format!(
                "  documents kept in memory for the output: up to ~{} (the rest is read again; not in --phase runs)",
                human(p.resident_bytes())
            ));
        }
        if let Some(o) = &self.output_estimate {
            out.push(format!(
                "output (estimated from {} document(s) at the starts of up to 16 partitions, as if every document is kept): ~{} tokens, ~{}",
                o.sample_documents,
                o.estimate.tokens,
                human(o.estimate.bytes)
            ));
        }
        for w in &self.warnings {
            out.push(format!("warning: {w}"));
        }
        out
    }
}
