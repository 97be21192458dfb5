//! Candidate pairs checked against the Jaccard threshold: triaged on their MinHash signatures,
//! and only the doubtful ones compared on the text of the two documents. On one machine the
//! components phase checks every pass's pairs at once ([`verify`]); in a phased step each
//! bucket shard checks the pairs of its own passes ([`verify_pass`]), so that the
//! `components` job only joins what they kept ([`join_verified`]).

use curator_core::dedup::FuzzyParams;
use curator_sdk::shingle::{Scratch, jaccard, shingle_set};

use super::DedupError;
use super::index::{Index, IndexedFile, utf8};
use super::scans::Sigs;
use super::work::{RecordFile, Work, read_all, write_atomic};
use crate::task::SpillDir;

/// A bucket shard's checked pairs of pass `PASS`: `verified-PASS.bin` (the pairs kept, 8
/// bytes each) and `verified-PASS.json` (distinct candidates, kept, checked on text).
pub const VERIFIED_PREFIX: &str = "verified-";

fn name(it: usize, ext: &str) -> String {
    format!("{VERIFIED_PREFIX}{it:03}.{ext}")
}

fn pairs(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
}

/// Pass `it`'s candidate pairs (its edges files) checked by the bucket shard that found them;
/// marked `verified-PASS` when written.
pub fn verify_pass(
    work: &Work,
    sigs: &Sigs,
    docs: &SpillDir,
    index: &Index,
    p: &FuzzyParams,
    it: usize,
    chunk_docs: u64,
) -> Result<(), DedupError> {
    let marker = format!("{VERIFIED_PREFIX}{it:03}");
    if work.done(&marker) {
        return Ok(());
    }
    let edges = super::buckets::read_edges(work, |pass| pass == it)?;
    let candidates = edges.len() as u64;
    let (kept, checked) =
        if p.checks_pairs() && !edges.is_empty() { verify(sigs, &edges, docs, index, p, chunk_docs)? } else { (edges, 0) };
    let mut f = RecordFile::create(work.path(&name(it, "bin")))?;
    for e in &kept {
        f.write(&e.to_le_bytes())?;
    }
    f.commit()?;
    write_atomic(&work.path(&name(it, "json")), serde_json::json!([candidates, kept.len(), checked]).to_string().as_bytes())?;
    tracing::info!("dedup: pass {it}: {candidates} candidate pair(s) checked here, {} kept ({checked} compared on text)", kept.len());
    work.mark(&marker)
}

/// Every pass's pairs as the bucket shards checked them, distinct, with (candidates, checked
/// on text) summed over the passes (a pair two passes found counts in each); an error names
/// the passes no bucket shard has checked.
pub fn join_verified(work: &Work, iterations: usize) -> Result<(Vec<u64>, u64, u64), DedupError> {
    super::buckets::passes_done(work, iterations, VERIFIED_PREFIX, "have not had their pairs checked")?;
    let (mut kept, mut candidates, mut checked) = (Vec::new(), 0, 0);
    for it in 0..iterations {
        kept.extend(pairs(&read_all(&work.path(&name(it, "bin")))?));
        let counts = read_all(&work.path(&name(it, "json")))?;
        let (c, _, x): (u64, u64, u64) = serde_json::from_slice(&counts).unwrap_or((0, 0, 0));
        candidates += c;
        checked += x;
    }
    kept.sort_unstable();
    kept.dedup();
    Ok((kept, candidates, checked))
}

/// How a candidate pair is decided from its signatures alone, when they leave no doubt: with
/// `k` hashes the share of equal values estimates the Jaccard similarity with standard
/// deviation √(t(1−t)/k) near the threshold t; a pair more than 6 deviations above it is
/// accepted, more than 6 below rejected (a wrong call has odds below 10⁻⁹), and identical
/// signatures are accepted when t^k < 10⁻⁹. Only the pairs in between are checked on text.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Triage {
    Accept,
    Reject,
    Check,
}

fn triage(sa: &[u8], sb: &[u8], t: f64, k: usize) -> Triage {
    let equal = sa.chunks_exact(4).zip(sb.chunks_exact(4)).filter(|(x, y)| x == y).count();
    let margin = 6.0 * (t * (1.0 - t) / k as f64).sqrt();
    let est = equal as f64 / k as f64;
    if (equal == k && t.powi(k as i32) < 1e-9) || est >= t + margin {
        Triage::Accept
    } else if est < t - margin {
        Triage::Reject
    } else {
        Triage::Check
    }
}

/// The pairs whose shingle sets have Jaccard ≥ the threshold, and how many were checked on
/// text. Pairs are triaged on their signatures (`triage`, every core); the shingle sets of
/// just the documents in an undecided pair are built from the spill (every core), and those
/// pairs checked exactly (every core).
pub fn verify(
    sigs: &Sigs,
    edges: &[u64],
    docs: &SpillDir,
    index: &Index,
    p: &FuzzyParams,
    chunk_docs: u64,
) -> Result<(Vec<u64>, u64), DedupError> {
    let k = p.num_hashes();
    let t = p.jaccard_threshold;
    let threads = crate::os::available_cores().max(1);
    let chunks: Vec<&[u64]> = edges.chunks(edges.len().div_ceil(threads * 4).max(1)).collect();
    let triaged = super::index::par_map(&chunks, threads, |part| {
        let (mut sa, mut sb) = (vec![0u8; k * 4], vec![0u8; k * 4]);
        let (mut accepted, mut check) = (Vec::new(), Vec::new());
        // Pairs are sorted by their first document, which a bucket's star repeats: it is
        // read once per run of pairs.
        let mut first: Option<u32> = None;
        for &e in part.iter() {
            let read = |doc: u32, buf: &mut Vec<u8>| sigs.read(doc as u64, buf);
            if first != Some((e >> 32) as u32) {
                read((e >> 32) as u32, &mut sa)?;
                first = Some((e >> 32) as u32);
            }
            read(e as u32, &mut sb)?;
            match triage(&sa, &sb, t, k) {
                Triage::Accept => accepted.push(e),
                Triage::Check => check.push(e),
                Triage::Reject => {}
            }
        }
        Ok((accepted, check))
    })?;
    let mut kept = Vec::new();
    let mut check = Vec::new();
    for (a, c) in triaged {
        kept.extend(a);
        check.extend(c);
    }
    // Undecided pairs, a chunk of at most `chunk_docs` documents' sets at a time.
    let mut start = 0;
    while start < check.len() {
        let mut docs_in: std::collections::HashSet<u32> = std::collections::HashSet::new();
        let mut end = start;
        while end < check.len() {
            let e = check[end];
            let new = [(e >> 32) as u32, e as u32].iter().filter(|d| !docs_in.contains(d)).count();
            if docs_in.len() + new > chunk_docs.max(2) as usize && end > start {
                break;
            }
            docs_in.insert((e >> 32) as u32);
            docs_in.insert(e as u32);
            end += 1;
        }
        let mut involved: Vec<u32> = docs_in.into_iter().collect();
        involved.sort_unstable();
        kept.extend(check_on_text(&check[start..end], &involved, docs, index, p, threads)?);
        start = end;
    }
    Ok((kept, check.len() as u64))
}

/// The pairs of `pairs` whose shingle sets have Jaccard ≥ the threshold; `involved`: their
/// documents, sorted. Sets are built from the spill and pairs checked on every core.
fn check_on_text(
    pairs: &[u64],
    involved: &[u32],
    docs: &SpillDir,
    index: &Index,
    p: &FuzzyParams,
    threads: usize,
) -> Result<Vec<u64>, DedupError> {
    let kind = super::keys::shingles(p);
    let t = p.jaccard_threshold;
    let in_file = |f: &IndexedFile| {
        let i = involved.partition_point(|&d| d < f.base);
        (i, involved[i..].partition_point(|&d| (d as u64) < f.base as u64 + f.rows as u64))
    };
    let per_file = index.par_each(
        docs,
        |f| in_file(f).1 > 0,
        &[crate::io::TEXT],
        |f, task| {
            let text = utf8(task, crate::io::TEXT, &f.name)?;
            let (start, n) = in_file(f);
            let mut scratch = Scratch::default();
            Ok(involved[start..start + n]
                .iter()
                .map(|&d| shingle_set(text.value((d - f.base) as usize), kind, &mut scratch))
                .collect::<Vec<_>>())
        },
    )?;
    let sets: Vec<Vec<u64>> = per_file.into_iter().flatten().collect();
    if sets.len() != involved.len() {
        return Err(DedupError::Data {
            path: "index.json".into(),
            message: "a candidate pair names a document that is not in the spill".into(),
        });
    }
    let at = |d: u32| involved.binary_search(&d).unwrap_or(0);
    let chunks: Vec<&[u64]> = pairs.chunks(pairs.len().div_ceil(threads * 4).max(1)).collect();
    let passed = super::index::par_map(&chunks, threads, |part| {
        Ok(part.iter().copied().filter(|e| jaccard(&sets[at((e >> 32) as u32)], &sets[at(*e as u32)]) >= t).collect::<Vec<u64>>())
    })?;
    Ok(passed.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_decide_only_the_clear_pairs() {
        let sig = |equal: usize, k: usize| -> (Vec<u8>, Vec<u8>) {
            let a: Vec<u8> = (0..k as u32).flat_map(|v| v.to_le_bytes()).collect();
            let b: Vec<u8> = (0..k as u32).flat_map(|v| if (v as usize) < equal { v } else { v + 1_000_000 }.to_le_bytes()).collect();
            (a, b)
        };
        // 112 hashes: identical signatures are safe (0.8^112 < 1e-9), 100 of 112 are not.
        let cases = [
            (260, 260, Triage::Accept),
            (250, 260, Triage::Accept),
            (208, 260, Triage::Check),
            (150, 260, Triage::Reject),
            (112, 112, Triage::Accept),
            (100, 112, Triage::Check),
        ];
        for (equal, k, want) in cases {
            let (a, b) = sig(equal, k);
            assert_eq!(triage(&a, &b, 0.8, k), want, "{equal} of {k} equal");
        }
    }
}
