//! Where a plan writes: output names per partition (deterministic), the branch sinks, and
//! the output manifest after a run.

use std::path::Path;

use curator_core::partition::{Extent, Part};
use curator_core::pipeline::WriteMode;
use curator_core::{PipelineSpec, SinkSpec, SpecError};

use super::{BranchKind, PlanError, PlannedBranch, PlannedPartition, checks::holds_outputs};
use crate::io::writer::{OutputManifest, WrittenFile};
use crate::io::{self, InputFile, IoError, Loc};

pub(super) fn describe(inputs: &[InputFile], part: &Part) -> String {
    let f = inputs[part.file].display();
    match part.extent {
        Extent::Whole => f,
        Extent::Bytes { start, end } => format!("{f} bytes {start}..{end}"),
        Extent::Units { start, end } => format!("{f} row groups {start}..{end}"),
    }
}

/// Base name of an input for outputs: compression dropped, and the format's own extension
/// where its outputs are named without it (`a.jsonl.zst` → `a`, `CC-MAIN-1.warc.gz` →
/// `CC-MAIN-1.warc`).
fn base_name(input: &InputFile) -> String {
    let mut name = input.rel.as_str();
    for ext in [".gz", ".zst", ".zstd"] {
        name = name.strip_suffix(ext).unwrap_or(name);
    }
    if input.format.output_names_drop_extension() {
        // Its plain endings (`.jsonl`, not `.jsonl.gz`), matched as discovery matches them.
        let lower = name.to_lowercase();
        let mut plain = input.format.extensions().iter().filter(|e| e.matches('.').count() == 1);
        if let Some(e) = plain.find(|e| lower.ends_with(*e)) {
            return name[..name.len() - e.len()].to_string();
        }
    }
    name.to_string()
}

/// Deterministic output name of a partition, from its source files and index: the input's
/// name for a whole file, `<name>.<piece>` for a piece of a split file, and
/// `part-<index>-<hash of the sources>` for a group of files.
pub fn partition_output_name(inputs: &[InputFile], parts: &[Part], index: usize, ext: &str) -> String {
    match parts {
        [one] if one.piece.1 <= 1 => format!("{}{ext}", base_name(&inputs[one.file])),
        [one] => format!("{}.{:05}{ext}", base_name(&inputs[one.file]), one.piece.0),
        many => {
            let key: Vec<String> = many.iter().map(|p| format!("{}:{:?}", inputs[p.file].rel, p.extent)).collect();
            let hash = xxhash_rust::xxh3::xxh3_64(key.join("\n").as_bytes());
            format!("part-{index:05}-{:08x}{ext}", hash as u32)
        }
    }
}

/// The ending of a sink's output files' names (a sink of no known format is refused by
/// planning's checks: named as JSONL meanwhile).
pub(super) fn sink_ext(sink: &SinkSpec) -> String {
    let format = io::formats::sink(&sink.format).unwrap_or(&io::jsonl::JSONL);
    format.extension(io::formats::sink_compression(sink))
}

/// Output places of the `rejected:` and `tee:` sinks of stages.
#[allow(clippy::too_many_arguments)]
pub(super) fn plan_branches(
    spec: &PipelineSpec,
    label: &str,
    stages: &[super::PlannedStage],
    base: &Path,
    inputs: &[InputFile],
    partitions: &[PlannedPartition],
    resumed: &[Vec<WrittenFile>],
    resuming: bool,
    sharded: bool,
) -> Result<Vec<PlannedBranch>, PlanError> {
    let mut branches = Vec::new();
    for (i, s) in spec.plugin_stages() {
        // The planned stage this pipeline entry became (built-in and dedup stages have no branches).
        let Some(stage) = stages.iter().position(|p| p.index == i && p.builtin.is_none()) else { continue };
        for (kind, field, sink) in [(BranchKind::Rejected, "rejected", &s.rejected), (BranchKind::Tee, "tee", &s.tee)] {
            let Some(sink) = sink else { continue };
            if let Err(message) = io::formats::sink(&sink.format) {
                return Err(SpecError::new(label, format!("stages[{i}].{field}.format"), message).into());
            }
            if matches!(sink.mode, WriteMode::Append | WriteMode::Ignore) {
                return Err(SpecError::new(
                    label,
                    format!("stages[{i}].{field}.mode"),
                    "a branch sink is written with its main sink: use error or overwrite",
                )
                .into());
            }
            let dir = Loc::parse(&sink.path, base)?;
            // Shards share a branch's directory: each checks only its own files (below).
            if sink.mode == WriteMode::Error
                && !resuming
                && !sharded
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
            let mut sink = sink.clone();
            let mut problems = Vec::new();
            super::prepare_sink(&mut sink, label, &format!("stages[{i}].{field}"), base, &mut problems);
            if !problems.is_empty() {
                return Err(PlanError::Spec(problems));
            }
            branches.push(PlannedBranch { stage, kind, sink, prior_manifest: OutputManifest::load(&dir), dir, outputs, resumed });
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
    use std::path::PathBuf;

    fn input(rel: &str) -> InputFile {
        let (format, compressed) = io::sniff_name(rel, None);
        InputFile { loc: Loc::Local(PathBuf::from(rel)), rel: rel.into(), size: 1, format, compressed }
    }

    #[test]
    fn output_names() {
        let inputs =
            vec![input("a.jsonl.zst"), input("sub/b.json.gz"), input("c.txt"), input("d.parquet"), input("e.TSV"), input("f.warc.gz")];
        let whole = |file| Part { file, extent: Extent::Whole, piece: (0, 1) };
        assert_eq!(partition_output_name(&inputs, &[whole(0)], 0, ".jsonl"), "a.jsonl");
        assert_eq!(partition_output_name(&inputs, &[whole(1)], 1, ".jsonl.zst"), "sub/b.jsonl.zst");
        assert_eq!(partition_output_name(&inputs, &[whole(2)], 2, ".jsonl.gz"), "c.txt.jsonl.gz");
        assert_eq!(partition_output_name(&inputs, &[whole(3)], 3, ".parquet"), "d.parquet");
        assert_eq!(partition_output_name(&inputs, &[whole(4)], 3, ".jsonl"), "e.jsonl");
        assert_eq!(partition_output_name(&inputs, &[whole(5)], 3, ".jsonl"), "f.warc.jsonl");
        let piece = Part { file: 0, extent: Extent::Bytes { start: 0, end: 9 }, piece: (3, 16) };
        assert_eq!(partition_output_name(&inputs, &[piece], 7, ".jsonl"), "a.00003.jsonl");
        let group = partition_output_name(&inputs, &[whole(0), whole(2)], 4, ".jsonl");
        assert!(group.starts_with("part-00004-") && group.ends_with(".jsonl"), "{group}");
        assert_eq!(group, partition_output_name(&inputs, &[whole(0), whole(2)], 4, ".jsonl"), "not deterministic");
        assert_ne!(group, partition_output_name(&inputs, &[whole(0), whole(1)], 4, ".jsonl"));
    }
}
