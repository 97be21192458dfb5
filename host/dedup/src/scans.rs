//! A step's documents scanned one docs shard at a time: each shard (`run --phase docs
//! --shard I/N`, or the whole corpus as shard 0 of 1 on one machine) writes its exact keys or
//! MinHash signatures, with an index of its own, into `scan-shard-I-of-N/`. The later phases
//! see the shards as one corpus: `gather` puts their indexes end to end (shards own
//! contiguous runs of partitions, so that is source order) and `Sigs` reads signatures by
//! run-wide position across the shards' files.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use curator_core::shard::Shard;

use super::DedupError;
use super::index::Index;
use super::work::Work;

/// The scan directories' names (`scan-shard-I-of-N`).
pub const PREFIX: &str = "scan-";

/// The scan directory of docs shard `shard`.
pub fn part(work: &Work, shard: Shard) -> Result<Work, DedupError> {
    work.sub(&format!("{PREFIX}{}", shard.tag()))
}

/// One docs shard's scan: its directory, the run-wide position of its first document, and
/// its documents.
pub struct Part {
    pub work: Work,
    pub base: u64,
    pub docs: u64,
}

/// Every docs shard's scan, and their documents as one index.
pub struct Scanned {
    pub parts: Vec<Part>,
    pub index: Index,
}

/// The shards whose files in `work` are named `PREFIX` + the shard's tag + `suffix`.
pub fn shards_in(work: &Work, prefix: &str, suffix: &str) -> Result<Vec<Shard>, DedupError> {
    let entries = std::fs::read_dir(&work.dir).map_err(|e| DedupError::Io { path: work.dir.display().to_string(), source: e })?;
    Ok(entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            Shard::from_tag(name.strip_prefix(prefix)?.strip_suffix(suffix)?)
        })
        .collect())
}

/// The scans of all docs shards in `work`: of `count` shards when given, else of the one
/// shard count found. Missing or unfinished shards, or scans of two different counts, are
/// errors that say which.
pub fn gather(work: &Work, count: Option<usize>) -> Result<Scanned, DedupError> {
    let data = |message: String| DedupError::Data { path: work.dir.display().to_string(), message };
    let mut found = shards_in(work, PREFIX, "")?;
    if let Some(n) = count {
        found.retain(|s| s.count == n);
    }
    let mut counts: Vec<usize> = found.iter().map(|s| s.count).collect();
    counts.sort_unstable();
    counts.dedup();
    let count = match (count, counts.as_slice()) {
        (Some(n), _) => n,
        (None, [n]) => *n,
        (None, []) => return Err(data("no docs shard has been scanned (run --phase docs first)".into())),
        (None, many) => {
            return Err(data(format!(
                "holds docs shards of {} different counts ({}); remove the scan-shard-… directories of the stale one",
                many.len(),
                many.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" and ")
            )));
        }
    };
    let mut parts = Vec::with_capacity(count);
    let mut indexes = Vec::with_capacity(count);
    let mut missing = Vec::new();
    let mut base = 0u64;
    for index in 0..count {
        let dir = work.dir.join(format!("{PREFIX}{}", Shard { index, count }.tag()));
        let w = Work { dir };
        if !w.done("scan") {
            missing.push(index.to_string());
            continue;
        }
        let idx = Index::load(&w)?;
        let docs = idx.documents();
        parts.push(Part { work: w, base, docs });
        base += docs;
        indexes.push(idx);
    }
    if !missing.is_empty() {
        return Err(data(format!(
            "docs shard(s) {} of {count} have not finished (run --phase docs --shard I/{count} for each)",
            missing.join(", ")
        )));
    }
    Ok(Scanned { parts, index: Index::concat(&indexes)? })
}

/// Fixed-size records (signatures) of every document, read by run-wide position from the
/// docs shards' files.
pub struct Sigs {
    files: Vec<(std::fs::File, PathBuf, u64, u64)>,
    record: usize,
}

impl Sigs {
    /// The file `name` of every part, `record` bytes per document.
    pub fn open(scanned: &Scanned, name: &str, record: usize) -> Result<Sigs, DedupError> {
        let mut files = Vec::with_capacity(scanned.parts.len());
        for p in &scanned.parts {
            let path = p.work.path(name);
            let f = std::fs::File::open(&path).map_err(|e| DedupError::Io { path: path.display().to_string(), source: e })?;
            files.push((f, path, p.base, p.docs));
        }
        Ok(Sigs { files, record })
    }

    /// Fill `buf` (a whole number of records) with the records from position `first` on.
    pub fn read(&self, first: u64, buf: &mut [u8]) -> Result<(), DedupError> {
        let mut doc = first;
        let mut at = 0;
        while at < buf.len() {
            let k = self.files.partition_point(|f| f.2 + f.3 <= doc);
            let Some((file, path, base, docs)) = self.files.get(k) else {
                return Err(DedupError::Data { path: String::new(), message: format!("document {doc} is past the last docs shard") });
            };
            let take = (((base + docs - doc) as usize) * self.record).min(buf.len() - at);
            file.read_exact_at(&mut buf[at..at + take], (doc - base) * self.record as u64)
                .map_err(|e| DedupError::Io { path: path.display().to_string(), source: e })?;
            at += take;
            doc += (take / self.record.max(1)) as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexedFile;

    fn scan(work: &Work, shard: Shard, docs: &[u32]) {
        let w = part(work, shard).unwrap();
        let mut bytes = Vec::new();
        let mut files = Vec::new();
        let mut base = 0;
        for (k, &n) in docs.iter().enumerate() {
            for d in 0..n {
                bytes.extend_from_slice(&(shard.index as u32 * 1000 + base + d).to_le_bytes());
            }
            files.push(IndexedFile {
                name: format!("{:08}-0000000000.arrow", shard.index * 10 + k),
                partition: shard.index * 10 + k,
                base,
                rows: n,
                lean: false,
            });
            base += n;
        }
        std::fs::write(w.path("sigs.bin"), bytes).unwrap();
        Index { files }.save(&w).unwrap();
        w.mark("scan").unwrap();
    }

    #[test]
    fn shards_read_as_one_corpus_in_shard_order() {
        let dir = tempfile::tempdir().unwrap();
        let work = Work::open(dir.path(), "fp", true).unwrap();
        scan(&work, Shard { index: 1, count: 3 }, &[2, 1]);
        let err = gather(&work, None).err().unwrap().to_string();
        assert!(err.contains("docs shard(s) 0, 2 of 3 have not finished"), "{err}");
        scan(&work, Shard { index: 0, count: 3 }, &[4]);
        scan(&work, Shard { index: 2, count: 3 }, &[0, 5]);
        let s = gather(&work, None).unwrap();
        assert_eq!(s.index.documents(), 12);
        let bases: Vec<u32> = s.index.files.iter().map(|f| f.base).collect();
        assert_eq!(bases, [0, 4, 6, 7, 7]);
        let sigs = Sigs::open(&s, "sigs.bin", 4).unwrap();
        let mut buf = vec![0u8; 4 * 12];
        sigs.read(0, &mut buf).unwrap();
        let v: Vec<u32> = buf.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(v, [0, 1, 2, 3, 1000, 1001, 1002, 2000, 2001, 2002, 2003, 2004]);
        let mut one = [0u8; 8];
        sigs.read(5, &mut one).unwrap();
        assert_eq!(one, [233, 3, 0, 0, 234, 3, 0, 0]);
        assert!(sigs.read(11, &mut one).is_err());
        // A stale scan of another shard count is named.
        scan(&work, Shard { index: 0, count: 2 }, &[1]);
        assert!(gather(&work, None).err().unwrap().to_string().contains("2 and 3"));
        assert_eq!(gather(&work, Some(3)).unwrap().index.documents(), 12);
    }
}
