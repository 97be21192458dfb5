//! Fuzzy dedup: MinHash signatures (from the `minhash` stage), scanned into each document's
//! record for the LSH passes (`buckets.rs`): the signature, or only its band keys when the
//! pairs are not checked; then the candidate pairs those passes found, checked against their
//! true Jaccard similarity (`verify.rs`) and joined into connected components.
//!
//! A band's key is xxh3-64 of its values, seeded with the band's number.

use std::sync::atomic::Ordering;

use curator_core::dedup::FuzzyParams;

use super::DedupError;
use super::components::Components;
use super::index::Index;
use super::keys::{Records, SIGNATURE, band_keys, signatures};
use super::scans::Sigs;
use super::work::{RecordFile, Work, load_pairs, read_all, save_pairs, write_atomic};

use crate::metrics::RunMetrics;
use crate::task::SpillDir;

/// Candidate and verified pair counts of the components phase.
const PAIRS: &str = "pairs.json";

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

/// What the components phase found.
pub struct Found {
    /// `(position, survivor)` for every document in a group of two or more.
    pub groups: Vec<(u32, u32)>,
    /// Distinct candidate pairs from the buckets, those that passed, and those compared on text.
    pub candidates: u64,
    pub verified: u64,
    pub text_checks: u64,
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
    super::buckets::passes_done(work, iterations, "buckets-", "have not finished")?;
    let (kept, candidates, checked) = match pairs {
        Pairs::Checked => super::verify::join_verified(work, iterations)?,
        Pairs::Check { docs, sigs, p, chunk_docs } => {
            let edges = super::buckets::read_edges(work, |it| it < iterations)?;
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
