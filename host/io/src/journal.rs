//! The journal of a run: one line per committed partition, so that a killed run resumes
//! without loss or duplication; and the removal of temp files that killed runs left.

use std::path::{Path, PathBuf};

use super::writer::WrittenFile;
use super::{IoError, Loc};

/// One line of the journal: a partition's committed main output and its branch outputs
/// (in the order of `Plan::branches`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct JournalEntry {
    #[serde(flatten)]
    pub file: WrittenFile,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<WrittenFile>,
}

/// The journal of finished partitions, so that a killed run resumes from it; a run that
/// finishes replaces it with the output manifest.
///
/// In a local output directory it is `_journal.jsonl`: one line per committed output file,
/// synced to disk before the next partition is reported done. An object store cannot append,
/// so there each entry is its own small object under `_journal/` (named by the entry's
/// output path), uploaded whole (an object is never seen half-written) before the partition
/// is reported done.
pub struct Journal {
    /// Opened (and created) when the run opens its first output file ([`Journal::begin`]):
    /// a run that writes nothing leaves none, and a run killed after committing a file but
    /// before its journal line leaves one (empty), so that the next run resumes rather than
    /// refusing the directory.
    file: Option<std::fs::File>,
    begun: bool,
    path: PathBuf,
    /// The object-store prefix entries go under (remote output directories).
    remote: Option<Loc>,
}

impl Journal {
    pub const NAME: &'static str = "_journal.jsonl";

    /// The journal's file name: `_journal.jsonl`, or one per shard (`_journal.shard-0003-of-0008.jsonl`),
    /// so that shards sharing an output directory never append to the same file.
    pub fn name(shard: Option<curator_core::shard::Shard>) -> String {
        match shard {
            None => Self::NAME.to_string(),
            Some(s) => format!("_journal.{}.jsonl", s.tag()),
        }
    }

    /// Where the entries of journal `name` live in a remote directory: `_journal/`,
    /// `_journal.shard-0003-of-0008/`.
    fn remote_prefix(dir: &Loc, name: &str) -> Loc {
        dir.join(name.strip_suffix(".jsonl").unwrap_or(name))
    }

    /// Entries of the journal `name` in `dir`; `None` when there is none (no run was
    /// interrupted there after committing a partition). A torn last line (a kill mid-write)
    /// is ignored.
    pub fn load(dir: &Loc, name: &str) -> Option<Vec<JournalEntry>> {
        match dir {
            Loc::Local(d) => {
                let text = std::fs::read_to_string(d.join(name)).ok()?;
                Some(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
            }
            Loc::Remote(_) => {
                let objects = Self::remote_prefix(dir, name).list_files().ok()?;
                let entries: Vec<JournalEntry> = objects
                    .iter()
                    .filter(|(rel, _, _)| rel.ends_with(".json"))
                    .filter_map(|(_, loc, _)| serde_json::from_slice(&loc.read_all().ok()?).ok())
                    .collect();
                (!objects.is_empty()).then_some(entries)
            }
        }
    }

    /// The journal of an output directory. Nothing is created until [`Journal::begin`] or the
    /// first entry.
    pub fn open_for_append(dir: &Loc, name: &str) -> Result<Option<Journal>, IoError> {
        Ok(Some(match dir {
            Loc::Local(d) => Journal { file: None, begun: false, path: d.join(name), remote: None },
            Loc::Remote(_) => {
                let prefix = Self::remote_prefix(dir, name);
                Journal { file: None, begun: false, path: PathBuf::from(prefix.display()), remote: Some(prefix) }
            }
        }))
    }

    /// Mark the directory as holding a run's outputs before the first of them is committed
    /// (an empty journal; a `begun` object in an object store): once a file may be in place,
    /// a killed run is resumed, never taken for a directory of someone else's files.
    pub fn begin(&mut self) -> Result<(), IoError> {
        if self.begun {
            return Ok(());
        }
        self.begun = true;
        if let Some(prefix) = &self.remote {
            return super::writer::write_small(&prefix.join("begun"), b"");
        }
        self.open_file()
    }

    fn open_file(&mut self) -> Result<(), IoError> {
        if self.file.is_some() {
            return Ok(());
        }
        let err = |source: std::io::Error| IoError::write(self.path.display().to_string(), source);
        if let Some(d) = self.path.parent() {
            std::fs::create_dir_all(d).map_err(err)?;
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path).map_err(err)?;
        // The journal's name in its directory is durable before any output it vouches for.
        file.sync_all().map_err(err)?;
        if let Some(d) = self.path.parent()
            && let Ok(dir) = std::fs::File::open(d)
        {
            let _ = dir.sync_all();
        }
        self.file = Some(file);
        Ok(())
    }

    /// Record a committed output file durably.
    pub fn record(&mut self, f: &JournalEntry) -> Result<(), IoError> {
        use std::io::Write;
        let path = self.path.display().to_string();
        let mut line = serde_json::to_vec(f).map_err(|e| IoError::write(path, e.into()))?;
        if let Some(prefix) = &self.remote {
            let key = format!("{:016x}.json", xxhash_rust::xxh3::xxh3_64(f.file.sources.join("\n").as_bytes()));
            return super::writer::write_small(&prefix.join(&key), &line);
        }
        line.push(b'\n');
        self.open_file()?;
        let err = |source: std::io::Error| IoError::write(self.path.display().to_string(), source);
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        file.write_all(&line).and_then(|_| file.sync_data()).map_err(err)
    }

    pub fn remove(dir: &Loc, name: &str) {
        match dir {
            Loc::Local(d) => {
                let _ = std::fs::remove_file(d.join(name));
            }
            Loc::Remote(_) => {
                for (_, loc, _) in Self::remote_prefix(dir, name).list_files().unwrap_or_default() {
                    let _ = loc.delete();
                }
            }
        }
    }
}

/// Remove temp files that killed runs left in a local output directory (`.<name>.tmp-<pid>-…`
/// of processes other than this one). With `owned` (a shard: the names of its partitions'
/// outputs), only the temp files of those outputs: other shards writing into the same
/// directory at the same time keep theirs.
pub fn remove_stale_spools(dir: &Loc, owned: Option<&[String]>) {
    fn walk(d: &Path, ours: &str, owned: Option<&[String]>) {
        let Ok(entries) = std::fs::read_dir(d) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                walk(&p, ours, owned);
            } else if let Some(at) = name.find(".tmp-")
                && name.starts_with('.')
                && !name.contains(ours)
                && owned.is_none_or(|o| o.iter().any(|n| name[1..at].starts_with(n.as_str())))
            {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    if let Loc::Local(d) = dir {
        walk(d, &format!(".tmp-{}-", std::process::id()), owned);
    }
}
