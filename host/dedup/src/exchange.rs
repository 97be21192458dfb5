//! The phases of a dedup step on machines that share no filesystem: the step's work
//! directory lives under an object-store prefix (`execution.spill_dir: s3://…`, or
//! `OUTPUT/_dedup_work` when the sink is an object store), and each phase works in a scratch
//! copy of its own. Before the phase, [`Exchange::pull`] fetches the files the phase reads
//! ([`reads`]); after it, [`Exchange::push`] uploads the files the phase wrote, each as one
//! whole object, data first and the `.done` markers last, so that a phase that finds a marker
//! finds every file the marker vouches for. The layout of the step, which the first phase
//! fixes, is claimed with a conditional put ([`Exchange::claim`]): concurrent first phases on
//! machines with different memory agree on it.
//!
//! A phase's scratch copy is removed when the phase ends, whatever the outcome (a rerun pulls
//! again); nothing else on the machine depends on it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use curator_core::shard::{Phase, Shard};

use super::DedupError;
use crate::io::Loc;

/// The directory of the files semantic dedup's bucket shards meet through.
const KMEANS: &str = "kmeans/";

/// How many objects move at once (threads of `index::par_map`, each blocking on one transfer).
const PARALLEL: usize = 8;

/// A work directory under an object-store prefix and this phase's scratch copy of it.
pub struct Exchange {
    remote: Loc,
    local: PathBuf,
}

/// What a phase owns, for [`reads`]: its partitions (docs, output) and its docs shard; and
/// whether bucket shards read the documents (fuzzy dedup checking pairs on their text).
pub struct Owned<'a> {
    pub phase: Phase,
    pub shard: Shard,
    pub partitions: &'a HashSet<usize>,
    pub texts: bool,
}

/// Whether the phase `owned` describes reads the work file `rel` (a `/`-separated path
/// below the work directory).
/// - Docs shards: their own partitions and scan (to resume).
/// - Bucket shards: every scan (the signatures, or semantic dedup's embeddings), every
///   document when they check their passes' doubtful pairs on the text, the candidate pairs
///   of their own passes (to resume).
/// - `components`: the scans (exact keys; no fuzzy signatures or band keys, no embeddings),
///   the checked pairs, every document (`_duplicates/` takes the ids); no candidate pairs.
/// - Output shards: their partitions' documents and the scans' indexes.
///
/// The step's small files (fingerprint, layout, markers, groups, statistics) are read by
/// every phase; the files semantic dedup's bucket shards meet through while they run
/// (`kmeans/`, `rendezvous.rs`) by none: they are read where they are.
pub fn reads(owned: &Owned<'_>, rel: &str) -> bool {
    if rel.starts_with(KMEANS) {
        return false;
    }
    if let Some(name) = rel.strip_prefix(super::work::DOCS).and_then(|r| r.strip_prefix('/')) {
        let partition = name.get(..8).and_then(|d| d.parse::<usize>().ok());
        return match owned.phase {
            Phase::Docs | Phase::Output => partition.is_some_and(|p| owned.partitions.contains(&p)),
            Phase::Buckets => owned.texts,
            Phase::Components => true,
        };
    }
    if let Some(rest) = rel.strip_prefix(super::scans::PREFIX) {
        return match owned.phase {
            Phase::Docs => rest.split('/').next() == Some(owned.shard.tag().as_str()),
            Phase::Buckets => true,
            // Exact keys, not fuzzy signatures or band keys (the bucket shards checked the pairs).
            Phase::Components => {
                !rel.ends_with(super::keys::SIGS) && !rel.ends_with(super::keys::BANDS) && !rel.ends_with(super::semantic::EMB)
            }
            Phase::Output => !rel.ends_with(".bin"),
        };
    }
    if rel.starts_with(super::verify::VERIFIED_PREFIX) && !rel.ends_with(".done") {
        return owned.phase == Phase::Components;
    }
    if let Some(rest) = rel.strip_prefix(super::buckets::EDGES_PREFIX) {
        let pass = rest.get(..3).and_then(|p| p.parse::<usize>().ok());
        return owned.phase == Phase::Buckets && pass.is_some_and(|it| curator_core::shard::owns_pass(owned.shard, it));
    }
    true
}

/// The files below `dir` (`/`-separated relative paths) with their size and modification
/// time; temporary files (a leading `.`, a `.tmp` extension) left out.
pub type Snapshot = HashMap<String, (u64, SystemTime)>;

fn io(path: &Path, e: std::io::Error) -> DedupError {
    DedupError::Io { path: path.display().to_string(), source: e }
}

fn walk(root: &Path, dir: &Path, out: &mut Snapshot) -> Result<(), DedupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.ends_with(".tmp") {
            continue;
        }
        let meta = entry.metadata().map_err(|e| io(&path, e))?;
        if meta.is_dir() {
            walk(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            let rel = rel.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/");
            out.insert(rel, (meta.len(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
        }
    }
    Ok(())
}

impl Exchange {
    /// The work directory at `remote`, copied for one phase into the scratch directory
    /// `local` (emptied first).
    pub fn open(remote: Loc, local: &Path) -> Result<Exchange, DedupError> {
        let _ = std::fs::remove_dir_all(local);
        std::fs::create_dir_all(local).map_err(|e| io(local, e))?;
        Ok(Exchange { remote, local: local.to_path_buf() })
    }

    pub fn remote(&self) -> &Loc {
        &self.remote
    }

    /// Fetch the files `wanted` picks into the scratch copy; how many.
    pub fn pull(&self, wanted: impl Fn(&str) -> bool) -> Result<usize, DedupError> {
        let listed = match self.remote.list_files() {
            Ok(l) => l,
            // A prefix with no object yet (the first phase) is an empty directory.
            Err(_) if !self.remote.exists() => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut todo = Vec::new();
        for (rel, loc, _) in listed {
            if wanted(&rel) {
                let to = self.local.join(&rel);
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
                }
                todo.push((loc, to));
            }
        }
        let n = todo.len();
        super::index::par_map(&todo, PARALLEL, |(loc, to)| loc.download(to).map_err(DedupError::from))?;
        Ok(n)
    }

    /// The scratch copy as it is now (before the phase runs, for [`Exchange::push`]).
    pub fn snapshot(&self) -> Result<Snapshot, DedupError> {
        let mut out = Snapshot::new();
        walk(&self.local, &self.local, &mut out)?;
        Ok(out)
    }

    /// Upload the files that are new or changed since `before`: data first, then the
    /// `.done` markers; how many.
    pub fn push(&self, before: &Snapshot) -> Result<usize, DedupError> {
        let now = self.snapshot()?;
        let (markers, data): (Vec<String>, Vec<String>) = now
            .into_iter()
            .filter(|(rel, stamp)| before.get(rel) != Some(stamp))
            .map(|(rel, _)| rel)
            .partition(|rel| rel.ends_with(".done"));
        let n = markers.len() + data.len();
        for batch in [data, markers] {
            let jobs: Vec<(Loc, PathBuf)> = batch.iter().map(|rel| (self.remote.join(rel), self.local.join(rel))).collect();
            super::index::par_map(&jobs, PARALLEL, |(loc, from)| loc.upload(from).map_err(DedupError::from))?;
        }
        Ok(n)
    }

    /// The file `rel` as the first phase to claim it wrote it: `bytes` when this call is
    /// first, else the stored object (downloaded into the scratch copy either way).
    pub fn claim(&self, rel: &str, bytes: &[u8]) -> Result<(), DedupError> {
        let loc = self.remote.join(rel);
        let to = self.local.join(rel);
        if loc.create_new(bytes)? { super::work::write_atomic(&to, bytes) } else { loc.download(&to).map_err(DedupError::from) }
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.local);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_reads_only_what_it_needs() {
        let partitions: HashSet<usize> = [3, 4].into();
        // Docs shard, bucket shard, output shard 1 of 2 (bucket shard 1 owns pass 1: passes are
        // dealt round-robin); which of D(ocs), B(uckets), C(omponents), O(utput) read each file.
        let shard = Shard { index: 1, count: 2 };
        let table = [
            ("fingerprint", "DBCO"),
            ("layout.json", "DBCO"),
            ("groups.bin", "DBCO"),
            ("buckets-000.done", "DBCO"),
            ("verified-001.done", "DBCO"),
            ("docs/00000003-0000000000.arrow", "DBCO"),
            ("docs/00000003.done", "DBCO"),
            ("docs/00000007-0000000001.arrow", "BC"),
            ("scan-shard-0000-of-0002/emb.bin", "B"),
            ("kmeans/round-0000.bin", ""),
            ("semantic-pairs-shard-0000-of-0002.bin", "DBCO"),
            ("scan-shard-0001-of-0002/sigs.bin", "DB"),
            ("scan-shard-0001-of-0002/bands.bin", "DB"),
            ("scan-shard-0001-of-0002/index.json", "DBCO"),
            ("scan-shard-0000-of-0002/keys-0000.bin", "BC"),
            ("scan-shard-0000-of-0002/read.json", "BCO"),
            ("edges-000-0000-001.bin", ""),
            ("edges-001-0000-001.bin", "B"),
            ("verified-001.bin", "C"),
        ];
        for (file, readers) in table {
            for (letter, phase) in [('D', Phase::Docs), ('B', Phase::Buckets), ('C', Phase::Components), ('O', Phase::Output)] {
                let owned = Owned { phase, shard, partitions: &partitions, texts: true };
                assert_eq!(reads(&owned, file), readers.contains(letter), "{file} read by {phase:?}?");
                // Bucket shards that check no text read no documents.
                let no_texts = Owned { texts: false, ..owned };
                let docs = file.starts_with("docs/");
                assert_eq!(reads(&no_texts, file), readers.contains(letter) && !(phase == Phase::Buckets && docs), "{file}");
            }
        }
    }

    #[test]
    fn push_uploads_what_changed_and_claim_lets_the_first_writer_win() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Loc::Local(dir.path().join("remote"));
        std::fs::create_dir_all(dir.path().join("remote/docs")).unwrap();
        std::fs::write(dir.path().join("remote/fingerprint"), "f").unwrap();
        std::fs::write(dir.path().join("remote/docs/00000001.done"), "").unwrap();
        let x = Exchange::open(remote.clone(), &dir.path().join("a")).unwrap();
        assert_eq!(x.pull(|rel| rel != "docs/00000001.done").unwrap(), 1);
        let before = x.snapshot().unwrap();
        std::fs::create_dir_all(dir.path().join("a/scan-shard-0000-of-0001")).unwrap();
        std::fs::write(dir.path().join("a/scan-shard-0000-of-0001/sigs.bin"), "s").unwrap();
        std::fs::write(dir.path().join("a/scan-shard-0000-of-0001/scan.done"), "").unwrap();
        std::fs::write(dir.path().join("a/.x.tmp"), "").unwrap();
        assert_eq!(x.push(&before).unwrap(), 2);
        assert_eq!(std::fs::read(dir.path().join("remote/scan-shard-0000-of-0001/sigs.bin")).unwrap(), b"s");
        x.claim("layout.json", b"first").unwrap();
        let y = Exchange::open(remote, &dir.path().join("b")).unwrap();
        y.claim("layout.json", b"second").unwrap();
        assert_eq!(std::fs::read(dir.path().join("b/layout.json")).unwrap(), b"first");
        drop(x);
        assert!(!dir.path().join("a").exists());
    }
}
