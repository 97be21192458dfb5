//! The documents in front of a dedup barrier, in source order: each spilled batch file with
//! its partition, the position of its first document and its row count. A document's
//! position (u32) is its place in that order; it is what every later phase stores.

use std::path::PathBuf;

use arrow_array::StringArray;

use super::DedupError;
use super::work::{Work, write_atomic};
use crate::task::{SpillDir, Task};

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IndexedFile {
    /// File name in the documents spill.
    pub name: String,
    /// The partition's run-wide index.
    pub partition: usize,
    /// Position of the file's first document.
    pub base: u32,
    pub rows: u32,
    /// Whether the file is lean: its text is read from the source again (`lean.rs`).
    #[serde(default)]
    pub lean: bool,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Index {
    pub files: Vec<IndexedFile>,
}

const NAME: &str = "index.json";

fn partition_of(name: &str) -> usize {
    name.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0)
}

impl Index {
    pub fn documents(&self) -> u64 {
        self.files.iter().map(|f| f.rows as u64).sum()
    }

    /// Whether any spilled file is lean, so the output reads the source again.
    pub fn any_lean(&self) -> bool {
        self.files.iter().any(|f| f.lean)
    }

    /// The file of `name` (files are in name order: partition, then sequence).
    pub fn file(&self, name: &str) -> Option<&IndexedFile> {
        self.files.binary_search_by(|f| f.name.as_str().cmp(name)).ok().map(|i| &self.files[i])
    }

    /// The files of the partition with run-wide index `partition`, in sequence order.
    pub fn partition_files(&self, partition: usize) -> &[IndexedFile] {
        let start = self.files.partition_point(|f| f.partition < partition);
        let end = start + self.files[start..].partition_point(|f| f.partition == partition);
        &self.files[start..end]
    }

    /// The index of several docs shards' documents, in shard order (shards own contiguous
    /// runs of partitions, so this is source order): each shard's positions move up by the
    /// documents of the shards before it.
    pub fn concat(parts: &[Index]) -> Result<Index, DedupError> {
        let mut files = Vec::new();
        let mut base: u64 = 0;
        for part in parts {
            for f in &part.files {
                files.push(IndexedFile { base: (base + f.base as u64) as u32, ..f.clone() });
            }
            base += part.documents();
            if base > curator_core::dedup::MAX_DOCS {
                return Err(DedupError::TooManyDocs(base));
            }
        }
        Ok(Index { files })
    }

    /// Read the spilled batches of the partitions `owned` picks in source order, numbering
    /// documents; returns the index. `map` runs on every core (a window of files at a
    /// time), `fold` in order on this thread with each file's first position: memory holds
    /// one window's results.
    pub fn build<R: Send>(
        docs: &SpillDir,
        owned: impl Fn(usize) -> bool,
        columns: &[&str],
        map: impl Fn(&Task, &str) -> Result<R, DedupError> + Sync,
        mut fold: impl FnMut(u32, R) -> Result<(), DedupError>,
    ) -> Result<Index, DedupError> {
        let mut paths = docs.list()?;
        paths.retain(|p| owned(partition_of(p.file_name().and_then(|n| n.to_str()).unwrap_or_default())));
        let threads = crate::os::available_cores().max(1);
        let mut files = Vec::with_capacity(paths.len());
        let mut base: u64 = 0;
        // The lean key always: it tells a lean file from a whole one.
        let columns: Vec<&str> = columns.iter().copied().chain([super::lean::KEY]).collect();
        for window in paths.chunks(threads * 2) {
            let results = par_map(window, threads, |path| {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
                let task = docs.read_columns(path, &columns)?;
                let rows = task.batch.num_rows() as u64;
                let r = map(&task, &name)?;
                Ok((name, rows, r, super::lean::is_lean(&task.batch)))
            })?;
            for (name, rows, r, lean) in results {
                if base + rows > curator_core::dedup::MAX_DOCS {
                    return Err(DedupError::TooManyDocs(base + rows));
                }
                fold(base as u32, r)?;
                files.push(IndexedFile { partition: partition_of(&name), name, base: base as u32, rows: rows as u32, lean });
                base += rows;
            }
        }
        Ok(Index { files })
    }

    /// `map` over the `columns` of the files `want` picks, on every core; results in file order.
    pub fn par_each<R: Send>(
        &self,
        docs: &SpillDir,
        want: impl Fn(&IndexedFile) -> bool,
        columns: &[&str],
        map: impl Fn(&IndexedFile, &Task) -> Result<R, DedupError> + Sync,
    ) -> Result<Vec<R>, DedupError> {
        let picked: Vec<&IndexedFile> = self.files.iter().filter(|f| want(f)).collect();
        par_map(&picked, crate::os::available_cores().max(1), |f| {
            let task = docs.read_columns(&self.path(docs, f), columns)?;
            if task.batch.num_rows() as u32 != f.rows {
                return Err(DedupError::Data { path: f.name.clone(), message: "the spilled batch changed since it was indexed".into() });
            }
            map(f, &task)
        })
    }

    pub fn path(&self, docs: &SpillDir, f: &IndexedFile) -> PathBuf {
        docs.path().join(&f.name)
    }

    pub fn save(&self, work: &Work) -> Result<(), DedupError> {
        let json = serde_json::to_vec(self).map_err(|e| DedupError::Data { path: NAME.into(), message: e.to_string() })?;
        write_atomic(&work.path(NAME), &json)
    }

    pub fn load(work: &Work) -> Result<Index, DedupError> {
        let path = work.path(NAME);
        let bytes = super::work::read_all(&path)?;
        serde_json::from_slice(&bytes).map_err(|e| DedupError::Data { path: path.display().to_string(), message: e.to_string() })
    }
}

/// A batch's utf8 column by name.
pub fn utf8<'a>(task: &'a Task, column: &str, file: &str) -> Result<&'a StringArray, DedupError> {
    task.batch
        .column_by_name(column)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| DedupError::Data { path: file.to_string(), message: format!("no utf8 column {column:?}") })
}

/// `f` over `items` on up to `threads` threads; results in item order, the first error wins.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> Result<R, DedupError> + Sync,
) -> Result<Vec<R>, DedupError> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = threads.clamp(1, items.len().max(1));
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (next, f) = (&next, &f);
                s.spawn(move || -> Result<Vec<(usize, R)>, DedupError> {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(item)?));
                    }
                    Ok(mine)
                })
            })
            .collect();
        let mut all = Vec::with_capacity(items.len());
        for h in handles {
            match h.join() {
                Ok(r) => all.extend(r?),
                Err(_) => return Err(DedupError::Data { path: String::new(), message: "a dedup thread panicked".into() }),
            }
        }
        Ok(all)
    })?;
    out.sort_unstable_by_key(|(i, _)| *i);
    Ok(out.into_iter().map(|(_, r)| r).collect())
}
