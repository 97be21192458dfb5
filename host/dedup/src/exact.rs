//! Exact dedup: a 128-bit hash of each text (xxh3-128, or MD5 as NeMo Curator), written with
//! the document's position to hash-partitioned key files; each partition is then sorted on
//! its own, so memory is one partition's records whatever the corpus size.

use std::sync::atomic::Ordering;

use arrow_array::Array;

use curator_core::dedup::ExactHash;

use super::DedupError;
use super::index::{Index, utf8};
use super::keys::key;
use super::scans::Scanned;
use super::work::{RecordFile, Work, load_pairs, save_pairs};
use crate::metrics::RunMetrics;
use crate::task::SpillDir;

const RECORD: usize = 20;

fn key_file(p: usize) -> String {
    format!("keys-{p:04}.bin")
}

/// Hash every document of the partitions `owned` picks into `partitions` key files in
/// `work` (one docs shard's scan directory), with shard-local positions; their index.
pub fn scan(
    work: &Work,
    docs: &SpillDir,
    owned: impl Fn(usize) -> bool,
    h: ExactHash,
    partitions: usize,
    metrics: &RunMetrics,
) -> Result<Index, DedupError> {
    if work.done("scan") {
        return Index::load(work);
    }
    let mut files = (0..partitions).map(|p| RecordFile::create(work.path(&key_file(p)))).collect::<Result<Vec<_>, _>>()?;
    let index = Index::build(
        docs,
        owned,
        &[crate::io::TEXT],
        |task, name| {
            // A lean batch's keys were computed when it was spilled (`lean.rs`).
            if let Some(keys) = super::lean::keys(&task.batch) {
                return Ok(keys.collect::<Vec<_>>());
            }
            let text = utf8(task, crate::io::TEXT, name)?;
            Ok((0..text.len()).map(|r| key(text.value(r), h)).collect::<Vec<_>>())
        },
        |base, hashes| {
            for (r, k) in hashes.iter().enumerate() {
                let hi = u64::from_le_bytes([k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7]]);
                let p = ((hi as u128 * partitions as u128) >> 64) as usize;
                let mut rec = [0u8; RECORD];
                rec[..16].copy_from_slice(k);
                rec[16..].copy_from_slice(&(base + r as u32).to_le_bytes());
                files[p].write(&rec)?;
            }
            metrics.dedup.docs_hashed.fetch_add(hashes.len() as u64, Ordering::Relaxed);
            Ok(())
        },
    )?;
    for f in files {
        f.commit()?;
    }
    index.save(work)?;
    work.mark("scan")?;
    Ok(index)
}

/// Group each key partition (its file in every docs shard's scan, positions made run-wide):
/// `(position, survivor)` for every document in a group of two or more, by position.
pub fn group(work: &Work, scanned: &Scanned, partitions: usize) -> Result<Vec<(u32, u32)>, DedupError> {
    if work.done("groups") {
        return load_pairs(work, "groups.bin");
    }
    let mut out = Vec::new();
    for p in 0..partitions {
        let mut recs: Vec<(u64, u64, u32)> = Vec::new();
        for part in &scanned.parts {
            let path = part.work.path(&key_file(p));
            let ioerr = |e| DedupError::Io { path: path.display().to_string(), source: e };
            let len = std::fs::metadata(&path).map_err(ioerr)?.len() as usize;
            let mut reader = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(&path).map_err(ioerr)?);
            recs.reserve(len / RECORD);
            let mut c = [0u8; RECORD];
            for _ in 0..len / RECORD {
                std::io::Read::read_exact(&mut reader, &mut c).map_err(ioerr)?;
                let w = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap_or_default());
                let local = u32::from_le_bytes(c[16..20].try_into().unwrap_or_default());
                recs.push((w(0), w(8), (part.base + local as u64) as u32));
            }
        }
        recs.sort_unstable();
        let mut i = 0;
        while i < recs.len() {
            let mut j = i + 1;
            while j < recs.len() && recs[j].0 == recs[i].0 && recs[j].1 == recs[i].1 {
                j += 1;
            }
            if j - i > 1 {
                let root = recs[i].2;
                out.extend(recs[i..j].iter().map(|r| (r.2, root)));
            }
            i = j;
        }
    }
    out.sort_unstable();
    save_pairs(work, "groups.bin", &out)?;
    work.mark("groups")?;
    Ok(out)
}
