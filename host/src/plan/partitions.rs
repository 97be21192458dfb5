//! The input cut into partitions, each with its output name: what an interrupted earlier run
//! already finished (its journal) is left out, and the sink's write mode decides what happens
//! to an output that exists.

use std::collections::HashSet;

use curator_core::PipelineSpec;
use curator_core::partition::{Extent, FileInfo, Part, PartitionBy, Splittable, partition};
use curator_core::pipeline::WriteMode;
use curator_core::shard::Shard;

use super::outputs::{describe, partition_output_name, sink_ext};
use super::{PlanError, PlannedPartition};
use crate::io::journal::Journal;
use crate::io::writer::{OutputManifest, WrittenFile};
use crate::io::{self, InputFile, IoError, Loc};

/// The partitions of a run.
pub(super) struct Partitioning {
    /// The partitions this run processes.
    pub planned: Vec<PlannedPartition>,
    /// Every partition this shard owns, finished or not (a dedup step needs them all).
    pub all: Vec<PlannedPartition>,
    /// Outputs an interrupted earlier run finished, and the branch files of each.
    pub resumed: Vec<WrittenFile>,
    pub resumed_branches: Vec<Vec<WrittenFile>>,
    /// Whether a journal of an earlier run was found (and is being resumed).
    pub resuming: bool,
    /// Partitions left out because their output exists (`mode: ignore`).
    pub skipped: usize,
    /// The output manifest found before the run.
    pub prior_manifest: OutputManifest,
}

/// How the source is cut: `blocksize` wins over `files_per_partition`; by default, as many
/// files each as the source's format reads at once (one; a folder's images: 1024).
fn partition_by(spec: &PipelineSpec) -> PartitionBy {
    match (spec.source.files_per_partition, spec.source.blocksize.as_ref().and_then(|b| b.bytes())) {
        (_, Some(bytes)) => PartitionBy::Bytes(bytes),
        (Some(n), None) => PartitionBy::Files(n),
        (None, None) => {
            let format = spec.source.format.as_ref().and_then(|f| io::formats::source(f).ok());
            PartitionBy::Files(format.map_or(1, |f| f.files_per_partition()))
        }
    }
}

/// What can be cut inside each file.
fn file_infos(inputs: &[InputFile], by: PartitionBy) -> Result<Vec<FileInfo>, IoError> {
    let mut infos = Vec::with_capacity(inputs.len());
    for f in inputs {
        let split = match by {
            PartitionBy::Files(_) => Splittable::No,
            _ => f.format.splittable(f)?,
        };
        infos.push(FileInfo { size: f.size, split });
    }
    Ok(infos)
}

/// Cut the inputs, keep the partitions `shard` owns, and name each one's output.
/// `restart`: forget (and delete) the journal of an earlier run. `keep_all`: also list every
/// owned partition, finished or not (`Partitioning::all`, for a dedup step).
pub(super) fn plan_partitions(
    spec: &PipelineSpec,
    inputs: &[InputFile],
    output_dir: &Loc,
    journal_name: &str,
    restart: bool,
    shard: Option<Shard>,
    keep_all: bool,
) -> Result<Partitioning, PlanError> {
    let by = partition_by(spec);
    let infos = file_infos(inputs, by)?;
    let ext = sink_ext(&spec.sink);
    let prior_manifest = OutputManifest::load(output_dir);
    let journal = if restart {
        Journal::remove(output_dir, journal_name);
        None
    } else {
        Journal::load(output_dir, journal_name)
    };
    let resuming = journal.is_some();
    let journal = journal.unwrap_or_default();
    let mut out = Partitioning {
        planned: Vec::new(),
        all: Vec::new(),
        resumed: Vec::new(),
        resumed_branches: Vec::new(),
        resuming,
        skipped: 0,
        prior_manifest,
    };
    let mut taken: HashSet<String> = HashSet::new();
    let every = partition(&infos, by);
    let owners = shard.map(|s| {
        let size = |part: &Part| match part.extent {
            Extent::Bytes { start, end } => end.saturating_sub(start),
            _ => inputs[part.file].size,
        };
        curator_core::shard::owners(&every.iter().map(|p| p.parts.iter().map(size).sum()).collect::<Vec<u64>>(), s.count)
    });
    for (k, p) in every.into_iter().enumerate() {
        if let (Some(s), Some(o)) = (shard, &owners)
            && o[k] != s.index
        {
            continue;
        }
        let mut output_rel = partition_output_name(inputs, &p.parts, p.index, &ext);
        if keep_all {
            out.all.push(PlannedPartition {
                index: p.index,
                output: output_dir.join(&output_rel),
                parts: p.parts.clone(),
                output_rel: output_rel.clone(),
            });
        }
        if let Some(other) = out.planned.iter().find(|q| q.output_rel == output_rel) {
            return Err(IoError::Collision {
                a: inputs[other.parts[0].file].display(),
                b: inputs[p.parts[0].file].display(),
                out: output_dir.join(&output_rel).display(),
            }
            .into());
        }
        let mut output = output_dir.join(&output_rel);
        let sources: Vec<String> = p.parts.iter().map(|part| describe(inputs, part)).collect();
        if let Some(done) =
            journal.iter().find(|j| j.file.sources == sources && (j.file.is_empty() || output_dir.join(&j.file.path).exists()))
        {
            out.resumed.push(done.file.clone());
            out.resumed_branches.push(done.branches.clone());
            taken.insert(done.file.path.clone());
            continue;
        }
        // Resuming: an output not in the journal is from the interrupted run; redo it.
        if output.exists() && !resuming {
            match spec.sink.mode {
                WriteMode::Error => return Err(IoError::Exists { path: output.display() }.into()),
                WriteMode::Ignore => {
                    out.skipped += 1;
                    continue;
                }
                WriteMode::Append => {
                    (output_rel, output) = free_name(output_dir, &output_rel, &ext, &taken);
                }
                WriteMode::Overwrite => {}
            }
        }
        taken.insert(output_rel.clone());
        out.planned.push(PlannedPartition { index: p.index, parts: p.parts, output_rel, output });
    }
    Ok(out)
}

/// `mode: append`: the first `stem.K.ext` that neither exists nor is taken by this run.
fn free_name(output_dir: &Loc, output_rel: &str, ext: &str, taken: &HashSet<String>) -> (String, Loc) {
    let stem = output_rel.strip_suffix(ext).unwrap_or(output_rel);
    let mut k = 1;
    loop {
        let candidate = format!("{stem}.{k}{ext}");
        let loc = output_dir.join(&candidate);
        if !taken.contains(&candidate) && !loc.exists() {
            return (candidate, loc);
        }
        k += 1;
    }
}
