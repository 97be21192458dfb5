//! Fuzzy dedup: MinHash signatures (from the `minhash` stage) → LSH buckets, a few bands per
//! pass → candidate pairs → their true Jaccard similarity → connected components.
//!
//! A band's key is xxh3-64 of its values, seeded with the band's number. One pass takes
//! `bands_per_iteration` bands of every document: a (key, position) record per document and
//! band, 16 bytes packed in a u128, cut into hash partitions and sorted in place. Documents
//! sharing a key are candidates: each is paired with the bucket's first member and with the
//! one before it (a star keeps a bucket of k documents at 2k pairs, the chain keeps a pair
//! that fails the check against the first member a second chance).

use std::sync::atomic::Ordering;

use arrow_array::Array;

use curator_core::dedup::{FuzzyParams, Shingle};
use curator_sdk::shingle::Shingles;

use super::DedupError;
use super::components::Components;
use super::index::{Index, load_pairs, save_pairs, utf8};
use super::scans::Sigs;
use super::work::{RecordFile, Work, read_all, write_atomic};

use crate::metrics::RunMetrics;
use crate::task::SpillDir;

/// The column the `minhash` stage writes.
pub const SIGNATURE: &str = "minhash_signature";
/// Each docs shard's signatures, in position order (`scans.rs`).
pub const SIGS: &str = "sigs.bin";
/// Candidate and verified pair counts of the components phase.
const PAIRS: &str = "pairs.json";

/// Value of each hex digit, 0xff for anything else.
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Decode one hex signature (8 digits per value) into little-endian u32 bytes.
fn decode(hex: &str, hashes: usize, out: &mut Vec<u8>) -> Option<()> {
    let b = hex.as_bytes();
    if b.len() != hashes * 8 {
        return None;
    }
    let mut bad = 0u8;
    for word in b.chunks_exact(8) {
        let mut v = 0u32;
        for &d in word {
            let x = HEX[d as usize];
            bad |= x;
            v = (v << 4) | (x & 0xf) as u32;
        }
        out.extend_from_slice(&v.to_le_bytes());
    }
    // Every valid digit is < 16; 0xff marks an invalid one.
    (bad & 0xf0 == 0).then_some(())
}

/// Write the signature of every document of the partitions `owned` picks to `sigs.bin` in
/// `work` (one docs shard's scan directory), in position order.
pub fn scan(
    work: &Work,
    docs: &SpillDir,
    owned: impl Fn(usize) -> bool,
    p: &FuzzyParams,
    metrics: &RunMetrics,
) -> Result<Index, DedupError> {
    if work.done("scan") {
        return Index::load(work);
    }
    let hashes = p.num_hashes();
    let mut sigs = RecordFile::create(work.path(SIGS))?;
    let index = Index::build(
        docs,
        owned,
        &[SIGNATURE],
        |task, name| {
            let mut buf = Vec::new();
            if task.batch.num_rows() == 0 {
                return Ok(buf);
            }
            let bad = |r: usize| DedupError::Data {
                path: format!("{name} ({})", task.meta),
                message: format!("row {r}: {SIGNATURE} is not {hashes} u32 values (binary, or hex text)"),
            };
            // Binary (the `minhash` plugin: little-endian u32), or hex text (8 digits a value).
            if let Some(col) = task.batch.column_by_name(SIGNATURE).and_then(|c| c.as_any().downcast_ref::<arrow_array::BinaryArray>()) {
                let (offsets, values) = (col.value_offsets(), col.value_data());
                let (first, last) = (offsets[0] as usize, offsets[col.len()] as usize);
                if col.null_count() > 0 || last - first != col.len() * hashes * 4 {
                    return Err(bad((0..col.len()).find(|&r| col.is_null(r) || col.value(r).len() != hashes * 4).unwrap_or(0)));
                }
                // Every row has exactly `hashes * 4` bytes, so the rows lie back to back.
                return Ok(values[first..last].to_vec());
            }
            let col = utf8(task, SIGNATURE, name)?;
            buf.reserve(col.len() * hashes * 4);
            for r in 0..col.len() {
                decode(col.value(r), hashes, &mut buf).ok_or_else(|| bad(r))?;
            }
            Ok(buf)
        },
        |_, buf| {
            sigs.write(&buf)?;
            metrics.dedup.docs_hashed.fetch_add((buf.len() / (hashes * 4).max(1)) as u64, Ordering::Relaxed);
            Ok(())
        },
    )?;
    sigs.commit()?;
    index.save(work)?;
    work.mark("scan")?;
    Ok(index)
}

/// The names of the candidate-pair files the bucket passes write (`edges-PASS-…bin`).
pub(crate) const EDGES_PREFIX: &str = "edges-";

pub(crate) fn edges_prefix(it: usize) -> String {
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
    let threads = crate::os::available_cores().max(1);
    let shards = split_by_key(recs, threads);
    let ids: Vec<usize> = (0..shards.len()).collect();
    let shards: Vec<std::sync::Mutex<Vec<u128>>> = shards.into_iter().map(std::sync::Mutex::new).collect();
    super::index::par_map(&ids, threads, |&s| {
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
            out[((key as u128 * n as u128) >> 64) as usize].push(r);
        }
        recs.shrink_to_fit();
    }
    out
}

/// Pass `it`: bucket its bands of every document and write the candidate pairs it finds.
/// The bands' keys are hashed on every core; with one partition the records stay in memory,
/// with more they go through one spill file per partition, processed one at a time.
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
    let hashes = p.num_hashes();
    let bands = it * bpi..((it + 1) * bpi).min(p.num_bands);
    let row_bytes = p.rows * 4;
    let sig_bytes = hashes * 4;
    let per_part = n as usize * bands.len() / partitions + 1;
    let mut in_memory: Vec<u128> = if partitions == 1 { Vec::with_capacity(per_part) } else { Vec::new() };
    let mut files = if partitions == 1 {
        Vec::new()
    } else {
        (0..partitions).map(|q| RecordFile::create(work.path(&format!("bucket-{it:03}-{q:04}.bin")))).collect::<Result<Vec<_>, _>>()?
    };
    let threads = crate::os::available_cores().max(1);
    let chunk_docs = ((8 << 20) / sig_bytes.max(1)).max(threads);
    let mut chunk = vec![0u8; chunk_docs * sig_bytes];
    let mut doc: u32 = 0;
    while doc < n {
        let take = (chunk_docs as u32).min(n - doc) as usize;
        let buf = &mut chunk[..take * sig_bytes];
        sigs.read(doc as u64, buf)?;
        let pieces: Vec<(u32, &[u8])> = buf
            .chunks(take.div_ceil(threads) * sig_bytes)
            .enumerate()
            .map(|(i, c)| (doc + (i * take.div_ceil(threads)) as u32, c))
            .collect();
        let recs = super::index::par_map(&pieces, threads, |&(first, piece)| {
            let mut out = Vec::with_capacity(piece.len() / sig_bytes * bands.len());
            for (k, sig) in piece.chunks_exact(sig_bytes).enumerate() {
                for b in bands.clone() {
                    let key = xxhash_rust::xxh3::xxh3_64_with_seed(&sig[b * row_bytes..(b + 1) * row_bytes], b as u64);
                    out.push((key as u128) << 32 | (first + k as u32) as u128);
                }
            }
            Ok(out)
        })?;
        for r in recs.into_iter().flatten() {
            if partitions == 1 {
                in_memory.push(r);
            } else {
                let q = (((r >> 32) as u64 as u128 * partitions as u128) >> 64) as usize;
                files[q].write(&r.to_le_bytes())?;
            }
        }
        doc += take as u32;
    }
    drop(chunk);
    if partitions == 1 {
        pairs_to_files(work, in_memory, it, 0)?;
    } else {
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
    }
    work.mark(&marker)
}

pub(crate) fn shingles(p: &FuzzyParams) -> Shingles {
    match p.shingle {
        Shingle::Chars(n) => Shingles::Chars(n),
        Shingle::Words(n) => Shingles::Words(n),
    }
}

/// What the components phase found.
pub struct Found {
    /// `(position, survivor)` for every document in a group of two or more.
    pub groups: Vec<(u32, u32)>,
    /// Distinct candidate pairs from the buckets, those that passed, and those compared on text.
    pub candidates: u64,
    pub verified: u64,
    pub text_checks: u64,
}

/// An error naming the passes of `iterations` without a `MARKERPASS` marker, which `what`
/// (`have not finished`) describes.
pub(crate) fn passes_done(work: &Work, iterations: usize, marker: &str, what: &str) -> Result<(), DedupError> {
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
pub(crate) fn read_edges(work: &Work, wanted: impl Fn(usize) -> bool) -> Result<Vec<u64>, DedupError> {
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

/// Where the components phase gets its checked pairs.
pub enum Pairs<'a> {
    /// Every pass's candidate pairs, checked here against the Jaccard threshold (unless it is
    /// 0) on their signatures, and on the text in `docs` where those leave doubt.
    Check { docs: &'a SpillDir, sigs: &'a Sigs, p: &'a FuzzyParams, chunk_docs: u64 },
    /// The bucket shards of a phased step checked their own passes' pairs
    /// (`verify::verify_pass`): only joined here.
    Checked,
}

/// Every pass's checked pairs joined into components: `(position, survivor)` pairs,
/// candidates, verified. Every pass must have finished (a sharded step's bucket shards may
/// not all have run).
pub fn components(work: &Work, index: &Index, iterations: usize, pairs: Pairs<'_>, metrics: &RunMetrics) -> Result<Found, DedupError> {
    let n = index.documents() as u32;
    if work.done("groups") {
        let bytes = read_all(&work.path(PAIRS))?;
        let (c, v, x): (u64, u64, u64) = serde_json::from_slice(&bytes).unwrap_or((0, 0, 0));
        return Ok(Found { groups: load_pairs(work, "groups.bin")?, candidates: c, verified: v, text_checks: x });
    }
    passes_done(work, iterations, "buckets-", "have not finished")?;
    let (kept, candidates, checked) = match pairs {
        Pairs::Checked => super::verify::join_verified(work, iterations)?,
        Pairs::Check { docs, sigs, p, chunk_docs } => {
            let edges = read_edges(work, |it| it < iterations)?;
            let candidates = edges.len() as u64;
            metrics.dedup.candidate_pairs.store(candidates, Ordering::Relaxed);
            let (kept, checked) = if p.jaccard_threshold > 0.0 && !edges.is_empty() {
                super::verify::verify(sigs, &edges, docs, index, p, chunk_docs)?
            } else {
                (edges, 0)
            };
            (kept, candidates, checked)
        }
    };
    metrics.dedup.candidate_pairs.store(candidates, Ordering::Relaxed);
    metrics.dedup.text_checks.store(checked, Ordering::Relaxed);
    let verified = kept.len() as u64;
    metrics.dedup.verified_pairs.store(verified, Ordering::Relaxed);
    let mut c = Components::new(n);
    for e in &kept {
        c.union((e >> 32) as u32, *e as u32);
    }
    drop(kept);
    let groups = c.groups();
    write_atomic(&work.path(PAIRS), serde_json::json!([candidates, verified, checked]).to_string().as_bytes())?;
    save_pairs(work, "groups.bin", &groups)?;
    work.mark("groups")?;
    Ok(Found { groups, candidates, verified, text_checks: checked })
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
    fn hex_signatures_decode_or_refuse() {
        let mut out = Vec::new();
        assert!(decode("0000000aFFFFFFFF", 2, &mut out).is_some());
        assert_eq!(out, [10, 0, 0, 0, 255, 255, 255, 255]);
        assert!(decode("0000000a", 2, &mut out).is_none());
        assert!(decode("0000000g", 1, &mut out).is_none());
    }
}
