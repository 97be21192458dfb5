//! Shards of one run sharing an output directory (`run --shard I/N`): each writes a record
//! of what it finished, `<output>/_shards/shard-I-of-N.json`; `merge` checks that every
//! shard of the same plan finished and writes the run's `_manifest.json` and `_summary.json`.

use curator_core::shard::Shard;

use super::journal::Journal;
use super::writer::{OutputManifest, WrittenFile, write_small};
use super::{IoError, Loc};

/// What one shard finished.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShardRecord {
    pub shard: Shard,
    /// The plan's fingerprint (pipeline and input listing): shards of different plans are
    /// never merged.
    pub fingerprint: String,
    /// Every output file the shard owns (resumed ones included).
    pub files: Vec<WrittenFile>,
    /// Every branch sink's files (`rejected:`, `tee:`), in the pipeline's branch order.
    #[serde(default)]
    pub branches: Vec<BranchRecord>,
    pub documents_in: u64,
    pub documents_out: u64,
    pub rejected: u64,
    pub failed: u64,
    /// The run's dedup step's statistics, as an output shard of a phased step has them (the
    /// same in every output shard: the components phase's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<serde_json::Value>,
}

/// One branch sink's files of a shard: its directory (a path or object-store URL) and files.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BranchRecord {
    pub dir: String,
    pub files: Vec<WrittenFile>,
}

impl BranchRecord {
    /// A local directory is recorded absolute, so `merge` finds it from any directory.
    pub fn new(dir: &Loc, files: Vec<WrittenFile>) -> BranchRecord {
        let dir = match dir {
            Loc::Local(p) => std::path::absolute(p).unwrap_or_else(|_| p.clone()).display().to_string(),
            remote => remote.display(),
        };
        BranchRecord { dir, files }
    }
}

/// Directory of the shard records in an output directory.
pub const DIR: &str = "_shards";

impl ShardRecord {
    pub fn save(&self, out: &Loc) -> Result<(), IoError> {
        let loc = out.join(&format!("{DIR}/{}.json", self.shard.tag()));
        let text = serde_json::to_vec_pretty(self).map_err(|e| IoError::Write { path: loc.display(), source: e.into() })?;
        write_small(&loc, &text)
    }
}

/// Why shards cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{0}: no shard records (run the shards with --shard I/N first)")]
    NoShards(String),
    #[error("{dir}: {message}")]
    Inconsistent { dir: String, message: String },
    #[error("{dir}: shard(s) {missing} of {count} have not finished (no {DIR}/shard-…-of-{count:04}.json)")]
    Missing { dir: String, missing: String, count: usize },
}

/// What `merge` wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Merged {
    pub shards: usize,
    pub files: usize,
    pub documents_in: u64,
    pub documents_out: u64,
    pub rejected: u64,
    pub failed: u64,
    /// A phased dedup step's statistics (from the output shards' records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dedup: Option<serde_json::Value>,
}

/// Check that every shard of one plan finished in `out`, then write `_manifest.json` (every
/// file, by path) and `_summary.json`, and remove the shards' journals.
pub fn merge(out: &Loc) -> Result<Merged, MergeError> {
    let dir = out.join(DIR);
    let shown = out.display();
    let listed = if dir.exists() || dir.is_remote() { dir.list_files().unwrap_or_default() } else { Vec::new() };
    let mut records: Vec<ShardRecord> = Vec::new();
    for (name, loc, _) in listed {
        if !name.ends_with(".json") || name.ends_with(".summary.json") {
            continue;
        }
        let bytes = loc.read_all()?;
        let r: ShardRecord = serde_json::from_slice(&bytes)
            .map_err(|e| MergeError::Inconsistent { dir: shown.clone(), message: format!("{}: not a shard record: {e}", loc.display()) })?;
        records.push(r);
    }
    let Some(first) = records.first().cloned() else { return Err(MergeError::NoShards(shown)) };
    let count = first.shard.count;
    if let Some(r) = records.iter().find(|r| r.shard.count != count || r.fingerprint != first.fingerprint) {
        return Err(MergeError::Inconsistent {
            dir: shown,
            message: format!(
                "{} and {} are shards of different runs (another shard count, pipeline or input); remove the stale one",
                first.shard.tag(),
                r.shard.tag()
            ),
        });
    }
    let missing: Vec<String> = (0..count).filter(|i| !records.iter().any(|r| r.shard.index == *i)).map(|i| i.to_string()).collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { dir: shown, missing: missing.join(", "), count });
    }
    records.sort_by_key(|r| r.shard.index);
    let mut files: Vec<WrittenFile> = records.iter().flat_map(|r| r.files.iter().cloned()).collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let merged = Merged {
        shards: count,
        files: files.len(),
        documents_in: records.iter().map(|r| r.documents_in).sum(),
        documents_out: records.iter().map(|r| r.documents_out).sum(),
        rejected: records.iter().map(|r| r.rejected).sum(),
        failed: records.iter().map(|r| r.failed).sum(),
        dedup: records.iter().find_map(|r| r.dedup.clone()),
    };
    OutputManifest { files }.save(out)?;
    // Each branch sink's manifest: every shard's files of that branch.
    let branches = records.iter().map(|r| r.branches.len()).max().unwrap_or(0);
    for b in 0..branches {
        let Some(dir) = records.iter().find_map(|r| r.branches.get(b)).map(|br| br.dir.clone()) else { continue };
        let mut files: Vec<WrittenFile> =
            records.iter().filter_map(|r| r.branches.get(b)).flat_map(|br| br.files.iter().cloned()).collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let loc = Loc::parse(&dir, std::path::Path::new("/"))
            .map_err(|e| MergeError::Inconsistent { dir: shown.clone(), message: format!("branch sink {dir}: {e}") })?;
        OutputManifest { files }.save(&loc)?;
    }
    let summary = serde_json::to_vec_pretty(&merged).map_err(|e| IoError::Write { path: shown.clone(), source: e.into() })?;
    write_small(&out.join("_summary.json"), &summary)?;
    for r in &records {
        Journal::remove(out, &Journal::name(Some(r.shard)));
    }
    Ok(merged)
}
