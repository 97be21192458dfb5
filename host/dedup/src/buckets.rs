//! The LSH passes of fuzzy dedup: each pass takes `bands_per_iteration` bands of every
//! document as (key, position) records, 16 bytes packed in a u128, cut by key into shards (in
//! memory, one per core) or hash partitions (through files, one at a time), sorted; documents
//! sharing a key are candidate pairs, written to the pass's edges files. A band's key is the
//! scan's (`fuzzy::Records`): read from the band keys, or hashed from the signature.
//!
//! Each member of a bucket is paired with the bucket's first member and with the one before
//! it (a star keeps a bucket of k documents at 2k pairs, the chain keeps a pair that fails
//! the check against the first member a second chance).

use std::ops::Range;

use curator_core::dedup::FuzzyParams;

use super::DedupError;
use super::index::par_map;
use super::keys::Records;
use super::scans::Sigs;
use super::work::{RecordFile, Work, read_all};

/// The names of the candidate-pair files the bucket passes write (`edges-PASS-…bin`).
pub const EDGES_PREFIX: &str = "edges-";

pub fn edges_prefix(it: usize) -> String {
    format!("{EDGES_PREFIX}{it:03}-")
}

/// Candidate pairs of one bucket partition's records (sorted here), packed `a << 32 | b`, a < b.
fn bucket_pairs(recs: &mut [u128], edges: &mut Vec<u64>) {
    recs.sort_unstable();
    let mut i = 0;
    while i < recs.len() {
        let key = recs[i] >> 32;
        let mut j = i + 1;
        while j < recs.len() && recs[j] >> 32 == key {
            j += 1;
        }
        if j - i > 1 {
            let first = recs[i] as u32 as u64;
            for k in i + 1..j {
                let d = recs[k] as u32 as u64;
                let prev = recs[k - 1] as u32 as u64;
                if d != first {
                    edges.push(first << 32 | d);
                }
                if k > i + 1 && prev != d {
                    edges.push(prev << 32 | d);
                }
            }
        }
        i = j;
    }
}

/// Sort `recs` in `shards` pieces (split by key) on every core; each piece's candidate pairs
/// go to its own edges file of pass `it`, partition `q`. Pairs are not held in memory.
fn pairs_to_files(work: &Work, recs: Vec<u128>, it: usize, q: usize) -> Result<(), DedupError> {
    shards_to_files(work, split_by_key(recs, crate::os::available_cores().max(1)), it, q)
}

/// Each of `shards` (records cut by key: a bucket never spans two) sorted on its own core;
/// its candidate pairs go to its own edges file of pass `it`, partition `q`.
fn shards_to_files(work: &Work, shards: Vec<Vec<u128>>, it: usize, q: usize) -> Result<(), DedupError> {
    let ids: Vec<usize> = (0..shards.len()).collect();
    let shards: Vec<std::sync::Mutex<Vec<u128>>> = shards.into_iter().map(std::sync::Mutex::new).collect();
    par_map(&ids, crate::os::available_cores().max(1), |&s| {
        let mut recs =
            std::mem::take(&mut *shards[s].lock().map_err(|_| DedupError::Data { path: String::new(), message: "poisoned".into() })?);
        let mut edges = Vec::new();
        bucket_pairs(&mut recs, &mut edges);
        drop(recs);
        edges.sort_unstable();
        edges.dedup();
        let mut f = RecordFile::create(work.path(&format!("{}{q:04}-{s:03}.bin", edges_prefix(it))))?;
        for e in &edges {
            f.write(&e.to_le_bytes())?;
        }
        f.commit()
    })?;
    Ok(())
}

/// The shard of `shards` a band key's records go to: by its top bits.
fn shard_of(key: u64, shards: usize) -> usize {
    ((key as u128 * shards as u128) >> 64) as usize
}

/// `docs` cut into at most `pieces` ranges of about equal size, in order.
fn split_range(docs: Range<u32>, pieces: usize) -> Vec<Range<u32>> {
    let (start, len) = (docs.start as u64, (docs.end - docs.start) as u64);
    let pieces = (pieces as u64).clamp(1, len.max(1));
    (0..pieces).map(|i| (start + len * i / pieces) as u32..(start + len * (i + 1) / pieces) as u32).collect()
}

/// `f(key, position)` for band `bands` of every document in `docs`, read from `sigs` a
/// block at a time.
fn for_each_band_key(
    sigs: &Sigs,
    docs: Range<u32>,
    p: &FuzzyParams,
    bands: Range<usize>,
    mut f: impl FnMut(u64, u32),
) -> Result<(), DedupError> {
    let records = Records::of(p);
    let width = records.width(p);
    let block = ((1 << 20) / width.max(1)).clamp(1, (docs.end - docs.start).max(1) as usize);
    let mut buf = vec![0u8; block * width];
    let mut doc = docs.start;
    while doc < docs.end {
        let take = block.min((docs.end - doc) as usize);
        let buf = &mut buf[..take * width];
        sigs.read(doc as u64, buf)?;
        for (k, rec) in buf.chunks_exact(width).enumerate() {
            for b in bands.clone() {
                f(records.band_key(rec, p, b), doc + k as u32);
            }
        }
        doc += take as u32;
    }
    Ok(())
}

/// One pass's (key, position) records of `bands` for all `n` documents, in `shards` vectors
/// cut by key, built on every core with no step on one: each range of documents counts its
/// records per shard, the shards are allocated at their exact sizes, then each range writes
/// its records into its own place of every shard (reading its keys twice costs less than
/// moving the records once more).
fn records_by_shard(sigs: &Sigs, n: u32, p: &FuzzyParams, bands: Range<usize>, shards: usize) -> Result<Vec<Vec<u128>>, DedupError> {
    let threads = crate::os::available_cores().max(1);
    let ranges = split_range(0..n, threads * 4);
    let counts = par_map(&ranges, threads, |docs| {
        let mut c = vec![0usize; shards];
        for_each_band_key(sigs, docs.clone(), p, bands.clone(), |key, _| c[shard_of(key, shards)] += 1)?;
        Ok(c)
    })?;
    // Zeroed allocations: their pages are touched first by the threads that fill them.
    let mut out: Vec<Vec<u128>> = (0..shards).map(|s| vec![0u128; counts.iter().map(|c| c[s]).sum()]).collect();
    {
        let mut places: Vec<Vec<&mut [u128]>> = ranges.iter().map(|_| Vec::with_capacity(shards)).collect();
        for (s, shard) in out.iter_mut().enumerate() {
            let mut rest: &mut [u128] = shard;
            for (r, c) in counts.iter().enumerate() {
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(c[s]);
                places[r].push(mine);
                rest = tail;
            }
        }
        // Each range of documents with its place in every shard.
        type Job<'a> = (Range<u32>, std::sync::Mutex<Vec<&'a mut [u128]>>);
        let jobs: Vec<Job<'_>> = ranges.into_iter().zip(places).map(|(r, p)| (r, std::sync::Mutex::new(p))).collect();
        par_map(&jobs, threads, |(docs, place)| {
            let mut place = place.lock().map_err(|_| DedupError::Data { path: String::new(), message: "poisoned".into() })?;
            let mut at = vec![0usize; shards];
            for_each_band_key(sigs, docs.clone(), p, bands.clone(), |key, doc| {
                let s = shard_of(key, shards);
                place[s][at[s]] = (key as u128) << 32 | doc as u128;
                at[s] += 1;
            })
        })?;
    }
    Ok(out)
}

/// `recs` cut into `n` vectors by the top bits of their key (a bucket never spans two), each
/// reserved for its expected size plus slack so that no vector doubles.
fn split_by_key(recs: Vec<u128>, n: usize) -> Vec<Vec<u128>> {
    let n = n.max(1);
    if n == 1 {
        return vec![recs];
    }
    let expected = recs.len() / n;
    let slack = 8 * ((expected as f64).sqrt() as usize) + 1024;
    let mut out: Vec<Vec<u128>> = (0..n).map(|_| Vec::with_capacity(expected + slack)).collect();
    // Move in blocks, shrinking the source as it is consumed so memory does not double.
    let mut recs = recs;
    let block = (recs.len() / 8).max(1 << 20);
    while !recs.is_empty() {
        let start = recs.len().saturating_sub(block);
        for r in recs.drain(start..) {
            let key = (r >> 32) as u64;
            out[shard_of(key, n)].push(r);
        }
        recs.shrink_to_fit();
    }
    out
}

/// Pass `it`: bucket its bands of every document and write the candidate pairs it finds.
/// The bands' keys are hashed (or read, `Records::BandKeys`) on every core; with one
/// partition the records stay in memory, with more they go through one spill file per
/// partition, processed one at a time.
pub fn buckets(work: &Work, sigs: &Sigs, n: u32, p: &FuzzyParams, bpi: usize, partitions: usize, it: usize) -> Result<(), DedupError> {
    let marker = format!("buckets-{it:03}");
    if work.done(&marker) {
        return Ok(());
    }
    // Pairs a killed earlier attempt at this pass left.
    let prefix = edges_prefix(it);
    if let Ok(entries) = std::fs::read_dir(&work.dir) {
        for e in entries.flatten() {
            if e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let bands = it * bpi..((it + 1) * bpi).min(p.num_bands);
    let threads = crate::os::available_cores().max(1);
    if partitions == 1 {
        shards_to_files(work, records_by_shard(sigs, n, p, bands, threads)?, it, 0)?;
        return work.mark(&marker);
    }
    let mut files =
        (0..partitions).map(|q| RecordFile::create(work.path(&format!("bucket-{it:03}-{q:04}.bin")))).collect::<Result<Vec<_>, _>>()?;
    // A window of documents at a time (its records, 16 B a band, stay near 16 MiB: the plan's
    // overhead for the phase), its records made on every core, then sent to their
    // partitions' files in order.
    let window = ((1 << 20) / bands.len().max(1)).max(threads) as u32;
    let mut doc: u32 = 0;
    while doc < n {
        let end = doc.saturating_add(window).min(n);
        let pieces = split_range(doc..end, threads);
        let recs = par_map(&pieces, threads, |docs| {
            let mut out = Vec::with_capacity((docs.end - docs.start) as usize * bands.len());
            for_each_band_key(sigs, docs.clone(), p, bands.clone(), |key, d| out.push((key as u128) << 32 | d as u128))?;
            Ok(out)
        })?;
        for r in recs.into_iter().flatten() {
            files[shard_of((r >> 32) as u64, partitions)].write(&r.to_le_bytes())?;
        }
        doc = end;
    }
    for f in files {
        f.commit()?;
    }
    for q in 0..partitions {
        let part = work.path(&format!("bucket-{it:03}-{q:04}.bin"));
        let bytes = read_all(&part)?;
        let recs: Vec<u128> = bytes.chunks_exact(16).map(|c| u128::from_le_bytes(c.try_into().unwrap_or_default())).collect();
        drop(bytes);
        pairs_to_files(work, recs, it, q)?;
        let _ = std::fs::remove_file(&part);
    }
    work.mark(&marker)
}

/// An error naming the passes of `iterations` without a `MARKERPASS` marker, which `what`
/// (`have not finished`) describes.
pub fn passes_done(work: &Work, iterations: usize, marker: &str, what: &str) -> Result<(), DedupError> {
    let missing: Vec<String> = (0..iterations).filter(|it| !work.done(&format!("{marker}{it:03}"))).map(|it| it.to_string()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(DedupError::Data {
        path: work.dir.display().to_string(),
        message: format!("LSH pass(es) {} of {iterations} {what} (run --phase buckets for every bucket shard first)", missing.join(", ")),
    })
}

/// The candidate pairs the passes `wanted` picks wrote (their edges files), distinct and sorted.
pub fn read_edges(work: &Work, wanted: impl Fn(usize) -> bool) -> Result<Vec<u64>, DedupError> {
    let mut names: Vec<String> = std::fs::read_dir(&work.dir)
        .map_err(|e| DedupError::Io { path: work.dir.display().to_string(), source: e })?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| n.ends_with(".bin"))
        .filter(|n| n.strip_prefix(EDGES_PREFIX).and_then(|r| r.get(..3)).and_then(|p| p.parse().ok()).is_some_and(&wanted))
        .collect();
    names.sort();
    let mut edges: Vec<u64> = Vec::new();
    for name in names {
        let bytes = read_all(&work.path(&name))?;
        edges.extend(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())));
    }
    edges.sort_unstable();
    edges.dedup();
    Ok(edges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_pair_each_member_with_the_first_and_the_previous() {
        let rec = |key: u64, d: u32| (key as u128) << 32 | d as u128;
        let mut recs = vec![rec(7, 9), rec(7, 3), rec(1, 4), rec(7, 5), rec(2, 8), rec(2, 8)];
        let mut edges = Vec::new();
        bucket_pairs(&mut recs, &mut edges);
        edges.sort_unstable();
        let pairs: Vec<(u64, u64)> = edges.iter().map(|e| (e >> 32, e & 0xffff_ffff)).collect();
        assert_eq!(pairs, [(3, 5), (3, 9), (5, 9)]);
    }

    #[test]
    fn ranges_cover_the_documents_in_order() {
        assert_eq!(split_range(10..20, 3), [10..13, 13..16, 16..20]);
        assert_eq!(split_range(0..2, 8), [0..1, 1..2]);
        assert_eq!(split_range(5..5, 4), vec![5..5; 1]);
    }
}
