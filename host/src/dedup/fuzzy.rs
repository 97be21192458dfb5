//! Fuzzy dedup: MinHash signatures (from the `minhash` stage), scanned into each document's
//! record for the LSH passes (`buckets.rs`): the signature, or only its band keys when the
//! pairs are not checked; then the candidate pairs those passes found, checked against their
//! true Jaccard similarity (`verify.rs`) and joined into connected components.
//!
//! A band's key is xxh3-64 of its values, seeded with the band's number.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use arrow_array::Array;

use curator_core::dedup::{FuzzyParams, Shingle};
use curator_sdk::shingle::Shingles;

use super::DedupError;
use super::components::Components;
use super::index::{Index, load_pairs, save_pairs};
use super::scans::Sigs;
use super::work::{RecordFile, Work, read_all, write_atomic};

use crate::metrics::RunMetrics;
use crate::task::SpillDir;

/// The column the `minhash` stage writes.
pub const SIGNATURE: &str = "minhash_signature";
/// Each docs shard's signatures, in position order (`scans.rs`).
pub const SIGS: &str = "sigs.bin";
/// Each docs shard's band keys, in position order, when the pairs are not checked.
pub const BANDS: &str = "bands.bin";
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

/// The signatures of `batch`'s documents, back to back (`hashes` little-endian u32 each):
/// the `minhash` plugin's binary column as it is, or hex text (8 digits a value) decoded.
/// `name` says where the batch came from, for the error.
pub(crate) fn signatures<'b>(batch: &'b arrow_array::RecordBatch, hashes: usize, name: &str) -> Result<Cow<'b, [u8]>, DedupError> {
    let bad = |r: usize| DedupError::Data {
        path: name.to_string(),
        message: format!("row {r}: {SIGNATURE} is not {hashes} u32 values (binary, or hex text)"),
    };
    let col = batch.column_by_name(SIGNATURE);
    if let Some(col) = col.and_then(|c| c.as_any().downcast_ref::<arrow_array::BinaryArray>()) {
        let (offsets, values) = (col.value_offsets(), col.value_data());
        let (first, last) = (offsets[0] as usize, offsets[col.len()] as usize);
        if col.null_count() > 0 || last - first != col.len() * hashes * 4 {
            return Err(bad((0..col.len()).find(|&r| col.is_null(r) || col.value(r).len() != hashes * 4).unwrap_or(0)));
        }
        // Every row has exactly `hashes * 4` bytes, so the rows lie back to back.
        return Ok(Cow::Borrowed(&values[first..last]));
    }
    let Some(col) = col.and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>()) else {
        return Err(DedupError::Data { path: name.to_string(), message: format!("no {SIGNATURE} column (binary, or hex text)") });
    };
    let mut buf = Vec::with_capacity(col.len() * hashes * 4);
    for r in 0..col.len() {
        decode(col.value(r), hashes, &mut buf).ok_or_else(|| bad(r))?;
    }
    Ok(Cow::Owned(buf))
}

/// Band `b`'s key of one signature: xxh3-64 of the band's values, seeded with `b`.
fn band_key(sig: &[u8], rows: usize, b: usize) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(&sig[b * rows * 4..(b + 1) * rows * 4], b as u64)
}

/// Every band's key of each signature in `sigs` (back to back), appended to `out`: 8 bytes
/// (little-endian) a band, `num_bands` a document.
pub(crate) fn band_keys(sigs: &[u8], p: &FuzzyParams, out: &mut Vec<u8>) {
    out.reserve(sigs.len() / (p.num_hashes() * 4).max(1) * p.num_bands * 8);
    for sig in sigs.chunks_exact(p.num_hashes() * 4) {
        for b in 0..p.num_bands {
            out.extend_from_slice(&band_key(sig, p.rows, b).to_le_bytes());
        }
    }
}

/// What the scan keeps of each document for the bucket passes: its signature when the pairs
/// are checked (the check reads it), else only its band keys (8 bytes a band, not 4 a hash).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Records {
    Signatures,
    BandKeys,
}

impl Records {
    pub(crate) fn of(p: &FuzzyParams) -> Records {
        if p.checks_pairs() { Records::Signatures } else { Records::BandKeys }
    }
    /// The scan's file of them, in position order.
    pub(crate) fn file(self) -> &'static str {
        match self {
            Records::Signatures => SIGS,
            Records::BandKeys => BANDS,
        }
    }
    /// Bytes per document.
    pub(crate) fn width(self, p: &FuzzyParams) -> usize {
        match self {
            Records::Signatures => p.num_hashes() * 4,
            Records::BandKeys => p.num_bands * 8,
        }
    }
    /// Band `b`'s key of one document's record.
    pub(crate) fn band_key(self, record: &[u8], p: &FuzzyParams, b: usize) -> u64 {
        match self {
            Records::Signatures => band_key(record, p.rows, b),
            Records::BandKeys => u64::from_le_bytes(record[b * 8..b * 8 + 8].try_into().unwrap_or_default()),
        }
    }
}

/// Write the signatures (or band keys, `Records::of`) of every document of the partitions
/// `owned` picks to `sigs.bin` (or `bands.bin`) in `work` (one docs shard's scan
/// directory), in position order. A lean batch brings its band keys; one spilled whole, its
/// signatures.
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
    let records = Records::of(p);
    let width = records.width(p);
    let mut out = RecordFile::create(work.path(records.file()))?;
    let index = Index::build(
        docs,
        owned,
        &[SIGNATURE],
        |task, name| {
            if task.batch.num_rows() == 0 {
                return Ok(Vec::new());
            }
            let at = format!("{name} ({})", task.meta);
            if let Some(keys) = super::lean::key_bytes(&task.batch) {
                if records != Records::BandKeys || keys.len() != task.batch.num_rows() * width {
                    return Err(DedupError::Data {
                        path: at,
                        message: format!("{} does not hold this step's band keys", super::lean::KEY),
                    });
                }
                return Ok(keys.to_vec());
            }
            let sigs = signatures(&task.batch, p.num_hashes(), &at)?;
            Ok(match records {
                Records::Signatures => sigs.into_owned(),
                Records::BandKeys => {
                    let mut keys = Vec::new();
                    band_keys(&sigs, p, &mut keys);
                    keys
                }
            })
        },
        |_, buf| {
            out.write(&buf)?;
            metrics.dedup.docs_hashed.fetch_add((buf.len() / width.max(1)) as u64, Ordering::Relaxed);
            Ok(())
        },
    )?;
    out.commit()?;
    index.save(work)?;
    work.mark("scan")?;
    Ok(index)
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
        .filter(|n| n.strip_prefix(super::buckets::EDGES_PREFIX).and_then(|r| r.get(..3)).and_then(|p| p.parse().ok()).is_some_and(&wanted))
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
    /// Every pass's candidate pairs, checked here against the Jaccard threshold on their
    /// signatures (`sigs`; none when the threshold is 0 and every pair is kept), and on the
    /// text in `docs` where those leave doubt.
    Check { docs: &'a SpillDir, sigs: Option<&'a Sigs>, p: &'a FuzzyParams, chunk_docs: u64 },
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
            let (kept, checked) = match sigs {
                Some(sigs) if p.checks_pairs() && !edges.is_empty() => super::verify::verify(sigs, &edges, docs, index, p, chunk_docs)?,
                _ => (edges, 0),
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

    /// A lean batch's band keys bucket a document as its signature does, and the signature
    /// column (binary or hex) is refused with its row when a value is short.
    #[test]
    fn band_keys_of_a_lean_batch_bucket_as_the_signature_does() {
        use arrow_array::{ArrayRef, BinaryArray, RecordBatch, StringArray};
        use std::sync::Arc;
        let p = FuzzyParams { shingle: Shingle::Chars(5), num_bands: 3, rows: 2, seed: 1, jaccard_threshold: 0.0 };
        let sigs: Vec<Vec<u8>> = (0..4u32).map(|d| (0..6u32).flat_map(|h| (d * 7 + h % 3).to_le_bytes()).collect()).collect();
        let batch = |sig: ArrayRef| {
            let text: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "d"]));
            RecordBatch::try_from_iter([(crate::io::TEXT, text), (SIGNATURE, sig)]).unwrap()
        };
        let binary = batch(Arc::new(BinaryArray::from_iter_values(sigs.iter())));
        let lean = super::super::lean::lean_batch(&binary, &super::super::lean::DocKey::Bands(p)).unwrap();
        let names: Vec<String> = lean.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, [super::super::lean::KEY], "the text and the signatures are left out");
        let keys = super::super::lean::key_bytes(&lean).unwrap();
        assert_eq!(keys.len(), 4 * 3 * 8);
        for (d, sig) in sigs.iter().enumerate() {
            let record = &keys[d * 24..(d + 1) * 24];
            for b in 0..3 {
                assert_eq!(Records::BandKeys.band_key(record, &p, b), Records::Signatures.band_key(sig, &p, b), "doc {d} band {b}");
            }
        }
        // Documents with other values get other keys.
        assert_ne!(keys[..8], keys[24..32]);
        let hex = batch(Arc::new(StringArray::from_iter_values(
            sigs.iter().map(|s| s.chunks(4).map(|v| format!("{:08x}", u32::from_le_bytes(v.try_into().unwrap()))).collect::<String>()),
        )));
        assert_eq!(signatures(&hex, 6, "x").unwrap(), signatures(&binary, 6, "x").unwrap());
        let short = batch(Arc::new(BinaryArray::from_iter_values([&sigs[0][..], &sigs[1][..4], &sigs[2][..], &sigs[3][..]])));
        let e = signatures(&short, 6, "docs/f.arrow").unwrap_err().to_string();
        assert!(e.contains("docs/f.arrow") && e.contains("row 1"), "{e}");
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
