//! Semantic dedup across machines: the bucket shards of a phased step (`run --phase buckets
//! --shard J/M`, all M at the same time) fit k-means together, then each runs the pairwise
//! pass over its own clusters; `components` joins what they found. The result is one
//! machine's, pair for pair (`curator_vectors::fit` says why the centroids are the same).
//!
//! ```text
//! docs shards: scan-shard-I-of-N/emb.bin (each its partitions' unit embeddings)
//! bucket shard J of M, rows [J·n/M, (J+1)·n/M) by run-wide position:
//!   its seeding rows             ─▶ kmeans/init-J.bin ─┐ shard 0 seeds ─▶ kmeans/round-0000.bin
//!   round t: its fit rows' sums  ─▶ kmeans/partial-t-J.bin ─┐ shard 0 reduces ─▶ round-(t+1)
//!   …until a round is the last (converged, or max_iter)
//!   every row of its range assigned ─▶ kmeans/assigned-J.bin (label, distance)
//!   the clusters c with c mod M = J, from every shard's assignments ─▶ semantic-pairs-J.bin
//! components: every shard's pairs ─▶ groups.bin, semantic.json
//! ```
//!
//! The `kmeans/` files are written once each (the first writer wins) through the
//! [`Rendezvous`], in the work directory or its object-store prefix, while the shards run.
//! Every partial is a function of its round's centroids and the shard's rows alone, so a
//! shard that dies and is started again joins at the last round written, with fresh bounds.

use curator_core::dedup::{DedupPhase, SemanticParams};
use curator_core::shard::Shard;
use curator_vectors::fit::{self, FitShard, Partial};

use super::rendezvous::{PATIENCE, Rendezvous};
use super::scans::{self, Sigs};
use super::semantic::{self, Found};
use super::work::Work;
use super::{DedupError, DedupStats, PhaseClock, StepPlan};

/// Rows read from the embeddings at a time.
const READ_ROWS: usize = 16_384;

fn round_name(t: usize) -> String {
    format!("kmeans/round-{t:04}.bin")
}
fn partial_name(t: usize, shard: Shard) -> String {
    format!("kmeans/partial-{t:04}-{}.bin", shard.tag())
}
fn init_name(shard: Shard) -> String {
    format!("kmeans/init-{}.bin", shard.tag())
}
fn assigned_name(shard: Shard) -> String {
    format!("kmeans/assigned-{}.bin", shard.tag())
}
/// A bucket shard's marker, pairs and statistics in the work directory.
const DONE_PREFIX: &str = "semantic-";
fn pairs_name(shard: Shard) -> String {
    format!("semantic-pairs-{}.bin", shard.tag())
}
fn found_name(shard: Shard) -> String {
    format!("semantic-found-{}.json", shard.tag())
}

fn data(path: &str, message: String) -> DedupError {
    DedupError::Data { path: path.to_string(), message }
}

/// Every shard of `shard`'s count.
fn all(shard: Shard) -> impl Iterator<Item = Shard> {
    (0..shard.count).map(move |index| Shard { index, count: shard.count })
}

/// The shards of `count` that `missing` (places in shard order) names, for messages.
fn shards_named(missing: &[usize], count: usize) -> String {
    format!("bucket shard(s) {} of {count}", missing.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", "))
}

/// A round's centroids, as shard 0 writes them: whether they are the fit's last, the
/// absolute tolerance, the fixed-point scale, then `k × d` float32s.
struct Round {
    last: bool,
    tol: f64,
    scale: f64,
    centroids: Vec<f32>,
}

impl Round {
    fn to_bytes(&self, d: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(40 + self.centroids.len() * 4);
        out.extend_from_slice(&u64::from(self.last).to_le_bytes());
        out.extend_from_slice(&self.tol.to_le_bytes());
        out.extend_from_slice(&self.scale.to_le_bytes());
        out.extend_from_slice(&((self.centroids.len() / d.max(1)) as u64).to_le_bytes());
        out.extend_from_slice(&(d as u64).to_le_bytes());
        self.centroids.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
        out
    }

    fn from_bytes(bytes: &[u8], d: usize, name: &str) -> Result<Round, DedupError> {
        let word = |i: usize| bytes.get(i * 8..i * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
        let bad = || data(name, "a k-means round's centroids, cut short or of another width".into());
        let (last, tol, scale, k, width) = (word(0), word(1), word(2), word(3), word(4));
        let (Some(last), Some(tol), Some(scale), Some(k), Some(width)) = (last, tol, scale, k, width) else { return Err(bad()) };
        if width != d as u64 || bytes.len() as u64 != 40 + k * width * 4 {
            return Err(bad());
        }
        let centroids = bytes[40..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok(Round { last: last != 0, tol: f64::from_bits(tol), scale: f64::from_bits(scale), centroids })
    }
}

/// Run-wide positions `[lo, hi)` bucket shard `shard` holds of `n` documents.
fn range(n: u64, shard: Shard) -> (u64, u64) {
    let c = shard.count.max(1) as u128;
    ((n as u128 * shard.index as u128 / c) as u64, (n as u128 * (shard.index as u128 + 1) / c) as u64)
}

/// The unit embeddings of `positions`, in that order (runs of consecutive positions read at once).
fn vectors(emb: &Sigs, d: usize, positions: &[u32]) -> Result<Vec<f32>, DedupError> {
    let mut out = Vec::with_capacity(positions.len() * d);
    let mut buf = Vec::new();
    let mut i = 0;
    while i < positions.len() {
        let mut j = i + 1;
        while j < positions.len() && positions[j] == positions[j - 1].wrapping_add(1) && j - i < READ_ROWS {
            j += 1;
        }
        buf.resize((j - i) * d * 4, 0);
        emb.read(u64::from(positions[i]), &mut buf)?;
        out.extend(buf.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
        i = j;
    }
    Ok(out)
}

/// The embedding width every docs shard recorded (shards without documents record 0).
fn width(scanned: &scans::Scanned) -> Result<usize, DedupError> {
    let mut found = 0;
    for part in &scanned.parts {
        let d = semantic::dim(&part.work)?;
        if d != 0 && found != 0 && d != found {
            return Err(data(
                &part.work.dir.display().to_string(),
                format!("embeddings of {d} dimensions where another docs shard's have {found}"),
            ));
        }
        found = found.max(d);
    }
    Ok(found)
}

/// Bucket shard `shard` of a semantic step: k-means with the other shards, then the
/// pairwise pass over its clusters; its pairs and statistics go into the work directory.
pub fn bucket_shard(
    dedup: StepPlan<'_>,
    work: &Work,
    meet: &Rendezvous,
    shard: Shard,
    mut stats: DedupStats,
) -> Result<DedupStats, DedupError> {
    let p = dedup.spec.semantic();
    let scanned = scans::gather(work, None)?;
    let n = scanned.index.documents();
    stats.documents = n;
    let marker = format!("{DONE_PREFIX}{}", shard.tag());
    if work.done(&marker) {
        tracing::info!("dedup: bucket shard {} of {} finished in an earlier run", shard.index, shard.count);
        return Ok(stats);
    }
    let d = width(&scanned)?;
    if n == 0 || d == 0 {
        semantic::save_found(
            work,
            &pairs_name(shard),
            &found_name(shard),
            0,
            Found { pairs: Vec::new(), per_cluster: Vec::new(), largest: 0 },
        )?;
        work.mark(&marker)?;
        return Ok(stats);
    }
    let emb = Sigs::open(&scanned, semantic::EMB, d * 4)?;
    let k = p.clusters(n);
    let fit_rows = semantic::fit_rows(n, k, &p);
    let kp = semantic::kmeans_params(k, &p, fit_rows.len());
    let (lo, hi) = range(n, shard);
    let (fa, fb) = (fit_rows.partition_point(|&r| u64::from(r) < lo), fit_rows.partition_point(|&r| u64::from(r) < hi));

    let clock = PhaseClock::start(DedupPhase::Kmeans, None);
    let mine = vectors(&emb, d, &fit_rows[fa..fb])?;
    let centroids = fit_together(meet, shard, (&mine, fa), fit_rows.len(), d, &kp)?;
    drop(mine);
    // Every row of the range, assigned to the fitted centroids.
    let mine = semantic::assign_range(lo..hi, d, &centroids, |rows| vectors(&emb, d, rows))?;
    meet.put(&assigned_name(shard), &semantic::assigned_bytes(&mine))?;
    drop(mine);
    let names: Vec<String> = all(shard).map(assigned_name).collect();
    let parts = meet.wait(&names, PATIENCE, |m| format!("the clusters of {}", shards_named(m, shard.count)))?;
    let every: Vec<(u32, f32)> = parts.iter().flat_map(|b| semantic::assigned_from(b)).collect();
    if every.len() as u64 != n {
        return Err(data(&meet.display(), format!("the shards' clusters cover {} documents of {n}", every.len())));
    }
    clock.finish(&mut stats, false);

    let clock = PhaseClock::start(DedupPhase::Pairwise, None);
    let within = |rows: &[u32]| Ok(curator_vectors::semdedup(&vectors(&emb, d, rows)?, d, curator_core::dedup::PAIR_TILE as usize));
    let threads = crate::os::available_cores().clamp(1, curator_core::dedup::CLUSTERS_IN_FLIGHT as usize);
    let found = semantic::clusters_pass(&every, &p, threads, &within, |c| c % shard.count == shard.index)?;
    let clusters = every.iter().map(|(l, _)| *l as usize + 1).max().unwrap_or(0);
    tracing::info!(
        "dedup: bucket shard {} of {}: {} of {clusters} cluster(s) checked here, {} duplicate pair(s)",
        shard.index,
        shard.count,
        found.per_cluster.len(),
        found.pairs.iter().filter(|(a, b)| a != b).count()
    );
    semantic::save_found(work, &pairs_name(shard), &found_name(shard), clusters, found)?;
    work.mark(&marker)?;
    clock.finish(&mut stats, false);
    Ok(stats)
}

/// k-means over every shard's fit rows (`rows`: this shard's, the first at fit index
/// `first`; `total` in all), meeting the others at each round: the fitted centroids.
fn fit_together(
    meet: &Rendezvous,
    shard: Shard,
    (rows, first): (&[f32], usize),
    total: usize,
    d: usize,
    kp: &curator_vectors::KMeansParams,
) -> Result<Vec<f32>, DedupError> {
    let k = kp.k.clamp(1, total.max(1));
    let m = rows.len() / d;
    let (idx, mut rng) = fit::init_sample(total, kp);
    // This shard's seeding rows and its largest magnitude.
    if !meet.exists(&round_name(0)) {
        let mut bytes = fit::max_abs(rows).to_le_bytes().to_vec();
        let lo = idx.partition_point(|&i| i < first);
        let hi = idx.partition_point(|&i| i < first + m);
        bytes.extend_from_slice(&((hi - lo) as u64).to_le_bytes());
        for &i in &idx[lo..hi] {
            bytes.extend_from_slice(&(i as u64).to_le_bytes());
            rows[(i - first) * d..(i - first + 1) * d].iter().for_each(|x| bytes.extend_from_slice(&x.to_le_bytes()));
        }
        meet.put(&init_name(shard), &bytes)?;
    }
    if shard.index == 0 && !meet.exists(&round_name(0)) {
        let names: Vec<String> = all(shard).map(init_name).collect();
        let inits = meet.wait(&names, PATIENCE, |m| format!("the seeding rows of {}", shards_named(m, shard.count)))?;
        let mut max = 0f32;
        let mut seed_rows: Vec<(u64, &[u8])> = Vec::with_capacity(idx.len());
        for (bytes, name) in inits.iter().zip(&names) {
            let bad = || data(name, "seeding rows cut short".into());
            let head = bytes.get(..12).ok_or_else(bad)?;
            max = max.max(f32::from_le_bytes([head[0], head[1], head[2], head[3]]));
            let count = u64::from_le_bytes(head[4..12].try_into().unwrap_or([0; 8])) as usize;
            let body = &bytes[12..];
            if body.len() != count * (8 + d * 4) {
                return Err(bad());
            }
            for rec in body.chunks_exact(8 + d * 4) {
                seed_rows.push((u64::from_le_bytes(rec[..8].try_into().unwrap_or([0; 8])), &rec[8..]));
            }
        }
        seed_rows.sort_unstable_by_key(|(i, _)| *i);
        if seed_rows.len() != idx.len() {
            return Err(data("kmeans/", format!("{} seeding rows from the shards where the fit samples {}", seed_rows.len(), idx.len())));
        }
        let seed: Vec<f32> =
            seed_rows.iter().flat_map(|(_, v)| v.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect();
        let (centroids, tol) = fit::start(&seed, d, k, kp.tol, &mut rng);
        let scale = fit::fixed_scale(total, max);
        meet.put(&round_name(0), &Round { last: false, tol, scale, centroids }.to_bytes(d))?;
    }
    // A shard started again joins at the last round written.
    let mut t = 0;
    while meet.exists(&round_name(t + 1)) {
        t += 1;
    }
    let wait_round = |t: usize| -> Result<Round, DedupError> {
        let name = round_name(t);
        let got =
            meet.wait(std::slice::from_ref(&name), PATIENCE, |_| format!("k-means round {t} from bucket shard 0 of {}", shard.count))?;
        Round::from_bytes(&got[0], d, &name)
    };
    let mut round = wait_round(t)?;
    let mut fitter = FitShard::new(rows, d, first as u64, &round.centroids, total, round.scale, kp.seed);
    while !round.last {
        let partial = fitter.round(&round.centroids);
        meet.put(&partial_name(t, shard), &partial.to_bytes(d))?;
        crate::os::crash_point(&partial_name(t, shard));
        if shard.index == 0 && !meet.exists(&round_name(t + 1)) {
            let names: Vec<String> = all(shard).map(|s| partial_name(t, s)).collect();
            let got = meet.wait(&names, PATIENCE, |m| format!("k-means round {t} of {}", shards_named(m, shard.count)))?;
            let partials = got
                .iter()
                .zip(&names)
                .map(|(b, name)| Partial::from_bytes(b, k, d).map_err(|e| data(name, e.to_string())))
                .collect::<Result<Vec<_>, _>>()?;
            let mut next = round.centroids.clone();
            let shift = fit::reduce(&mut next, &partials, round.scale, d);
            let last = shift <= round.tol || t + 1 >= kp.max_iter.max(1);
            meet.put(&round_name(t + 1), &Round { last, tol: round.tol, scale: round.scale, centroids: next }.to_bytes(d))?;
        }
        let next = wait_round(t + 1)?;
        fitter.follow(&round.centroids, &next.centroids);
        round = next;
        t += 1;
    }
    tracing::info!("dedup: k-means fitted on {total} documents by {} shard(s) in {t} round(s)", shard.count);
    Ok(round.centroids)
}

/// Components phase of a phased semantic step: every bucket shard's pairs and statistics
/// joined into the step's groups (`groups.bin`, `semantic.json`).
pub fn join(work: &Work, p: &SemanticParams) -> Result<Vec<(u32, u32)>, DedupError> {
    if work.done("groups") {
        return super::work::load_pairs(work, "groups.bin");
    }
    let here = work.dir.display().to_string();
    let mut found = scans::shards_in(work, DONE_PREFIX, ".done")?;
    found.sort_unstable_by_key(|s| (s.count, s.index));
    let Some(count) = found.last().map(|s| s.count) else {
        return Err(data(
            &here,
            "no bucket shard of the semantic step has finished (run --phase buckets --shard J/M, all M at once)".into(),
        ));
    };
    if found.iter().any(|s| s.count != count) {
        return Err(data(&here, "holds bucket shards of two different counts; remove the semantic-shard-… files of the stale one".into()));
    }
    let missing: Vec<usize> = (0..count).filter(|i| !found.iter().any(|s| s.index == *i)).collect();
    if !missing.is_empty() {
        return Err(data(
            &here,
            format!("{} have not finished (run --phase buckets --shard J/{count}, all at once)", shards_named(&missing, count)),
        ));
    }
    let mut all_found = Found { pairs: Vec::new(), per_cluster: Vec::new(), largest: 0 };
    let mut clusters = 0;
    for s in (0..count).map(|index| Shard { index, count }) {
        all_found.pairs.extend(super::work::load_pairs(work, &pairs_name(s))?);
        let path = work.path(&found_name(s));
        let v: serde_json::Value =
            serde_json::from_slice(&super::work::read_all(&path)?).map_err(|e| data(&path.display().to_string(), e.to_string()))?;
        clusters = clusters.max(v["clusters"].as_u64().unwrap_or(0) as usize);
        all_found.largest = all_found.largest.max(v["largest_cluster"].as_u64().unwrap_or(0) as usize);
        all_found.per_cluster.extend(v["per_cluster"].as_array().cloned().unwrap_or_default());
    }
    semantic::save_groups(work, clusters, p, all_found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_position_once_and_rounds_read_back() {
        for n in [0u64, 1, 7, 1000] {
            for count in 1..6 {
                let ranges: Vec<(u64, u64)> = (0..count).map(|index| range(n, Shard { index, count })).collect();
                assert_eq!(ranges[0].0, 0);
                assert_eq!(ranges[count - 1].1, n);
                assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0));
            }
        }
        let r = Round { last: true, tol: 1e-4, scale: 1024.0, centroids: vec![0.5, -0.25, 1.0, 2.0] };
        let back = Round::from_bytes(&r.to_bytes(2), 2, "r").unwrap();
        assert!(back.last && back.tol == r.tol && back.scale == r.scale && back.centroids == r.centroids);
        assert!(Round::from_bytes(&r.to_bytes(2), 4, "r").is_err());
        assert!(Round::from_bytes(&r.to_bytes(2)[..41], 2, "r").is_err());
    }
}
