//! Semantic dedup (NeMo Curator's SemDeDup), on the CPU: each document's embedding (the
//! `embedding_field` column, e.g. from the `embedder` stage) is read from the documents
//! spill, normalised and written to `emb.bin` (position order); k-means is fitted on them
//! (`fit_fraction` of them, a seeded sample) and every document assigned (`clusters.bin`:
//! label and squared distance to its centroid); then each cluster on its own, a few at a
//! time (one per core): its members in keep order (`core::dedup::keep_order`), each one's
//! largest cosine similarity to an earlier member, in tiles (`curator_vectors::semdedup`).
//! A member at ≥ 1 − eps of an earlier one is a duplicate; its group's survivor is the
//! first member of the chain it points along (the one kept). Per-cluster statistics for every
//! eps go to `semantic.json`.
//!
//! Memory: the fit sample and centroids during k-means; during the pairwise phase a label
//! and distance per document plus the clusters in flight. `emb.bin` is read by `pread`.

use std::os::unix::fs::FileExt;

use arrow_array::{Array, FixedSizeListArray, Float32Array, StringArray};
use curator_core::dedup::{SemanticParams, keep_order};
use curator_vectors::{KMeansParams, assign, kmeans, semdedup};

use super::DedupError;
use super::index::{Index, par_map};
use super::work::save_pairs;
use super::work::{RecordFile, Work, write_atomic};
use crate::metrics::RunMetrics;
use crate::task::SpillDir;

/// Every document's unit embedding, in position order (`d` float32s each).
pub const EMB: &str = "emb.bin";
/// `{"dim": d}` beside [`EMB`].
pub const META: &str = "emb.json";
const CLUSTERS: &str = "clusters.bin";
/// Per-cluster statistics (cluster, size, duplicates at each eps), for `_summary.json`.
pub const STATS: &str = "semantic.json";

fn io(path: &std::path::Path, e: std::io::Error) -> DedupError {
    DedupError::Io { path: path.display().to_string(), source: e }
}

/// The embedding width a scan recorded in `work` (0: it saw no document).
pub fn dim(work: &Work) -> Result<usize, DedupError> {
    let meta = super::work::read_all(&work.path(META))?;
    Ok(serde_json::from_slice::<serde_json::Value>(&meta).ok().and_then(|v| v["dim"].as_u64()).unwrap_or(0) as usize)
}

/// Read the embedding of every document of the partitions `owned` picks into `emb.bin`
/// (unit length); the index and the dimension.
pub fn scan(
    work: &Work,
    docs: &SpillDir,
    owned: impl Fn(usize) -> bool,
    p: &SemanticParams,
    metrics: &RunMetrics,
) -> Result<(Index, usize), DedupError> {
    if work.done("scan") {
        return Ok((Index::load(work)?, dim(work)?));
    }
    let field = p.embedding_field.as_str();
    let mut out = RecordFile::create(work.path(EMB))?;
    let mut dim: Option<usize> = None;
    let index = Index::build(
        docs,
        owned,
        &[field, crate::io::ID],
        |task, name| {
            let source = &task.meta.source;
            let missing = || DedupError::Data {
                path: name.to_string(),
                message: format!(
                    "no float32-vector column {field:?} in the batch read from {source} (put an `embedder` stage before the \
                     dedup step, store the vectors in the input as arrays of numbers, or set embedding_field)"
                ),
            };
            // A batch every row of which a stage dropped carries no vectors, and may not
            // carry the column either (a stage that never saw a row did not add it).
            if task.batch.num_rows() == 0 {
                return Ok((0, Vec::new(), format!("{name} (read from {source})")));
            }
            let col = task.batch.column_by_name(field).ok_or_else(missing)?;
            let list = col.as_any().downcast_ref::<FixedSizeListArray>().ok_or_else(missing)?;
            let d = list.value_length() as usize;
            if d == 0 {
                return Err(DedupError::Data { path: name.to_string(), message: format!("{field:?} has 0 dimensions") });
            }
            let values = list.values().as_any().downcast_ref::<Float32Array>().ok_or_else(missing)?;
            let start = list.value_offset_at(0);
            let mut v = values.values().get(start..start + list.len() * d).ok_or_else(missing)?.to_vec();
            for (r, row) in v.chunks_exact_mut(d.max(1)).enumerate() {
                if list.is_null(r) {
                    let id = task
                        .batch
                        .column_by_name(crate::io::ID)
                        .and_then(|c| c.as_any().downcast_ref::<StringArray>().map(|s| s.value(r).to_string()));
                    return Err(DedupError::Data {
                        path: name.to_string(),
                        message: format!(
                            "document {} (read from {source}) has no {field:?}: every document needs a vector",
                            id.unwrap_or_default()
                        ),
                    });
                }
                let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    row.iter_mut().for_each(|x| *x /= norm);
                }
            }
            Ok((d, v, format!("{name} (read from {source})")))
        },
        |_, (d, v, name)| {
            match dim {
                _ if d == 0 => {}
                None => dim = Some(d),
                Some(x) if x != d => {
                    return Err(DedupError::Data {
                        path: name,
                        message: format!("{field:?} has {d} dimensions where earlier batches had {x}"),
                    });
                }
                _ => {}
            }
            metrics.dedup.docs_hashed.fetch_add((v.len() / d.max(1)) as u64, std::sync::atomic::Ordering::Relaxed);
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            out.write(&bytes)
        },
    )?;
    out.commit()?;
    let dim = dim.unwrap_or(0);
    write_atomic(&work.path(META), serde_json::json!({ "dim": dim }).to_string().as_bytes())?;
    index.save(work)?;
    work.mark("scan")?;
    Ok((index, dim))
}

fn read_rows(file: &std::fs::File, path: &std::path::Path, d: usize, rows: &[u32]) -> Result<Vec<f32>, DedupError> {
    let mut out = Vec::with_capacity(rows.len() * d);
    let mut buf = vec![0u8; d * 4];
    for &r in rows {
        file.read_exact_at(&mut buf, r as u64 * (d * 4) as u64).map_err(|e| io(path, e))?;
        out.extend(buf.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
    }
    Ok(out)
}

/// Fits k-means on rows (`n × d`) and returns the centroids: the CPU's or the GPU's.
type Fit<'a> = &'a dyn Fn(&[f32], &KMeansParams) -> Result<Vec<f32>, DedupError>;

/// A cluster's rows (positions, in keep order) to each one's largest similarity to an
/// earlier row and that row.
type Within<'a> = &'a (dyn Fn(&[u32]) -> Result<Vec<(f32, Option<u32>)>, DedupError> + Sync);

/// The positions k-means is fitted on, ascending: every document, or a seeded sample of
/// `fit_fraction` of them (at least `k`).
pub fn fit_rows(n: u64, k: usize, p: &SemanticParams) -> Vec<u32> {
    if p.fit_fraction >= 1.0 {
        return (0..n as u32).collect();
    }
    let want = ((n as f64 * p.fit_fraction).ceil() as usize).clamp(k.min(n as usize), n as usize);
    let mut rng = curator_vectors::Rng::new(p.seed ^ 0x5eed);
    curator_vectors::sample(n as usize, want, &mut rng).into_iter().map(|i| i as u32).collect()
}

/// How k-means runs for `k` clusters fitted on `fitted` documents.
pub fn kmeans_params(k: usize, p: &SemanticParams, fitted: usize) -> KMeansParams {
    KMeansParams { k, max_iter: p.max_iter, tol: p.tol, seed: p.seed, init_sample: (8 * k).min(fitted) }
}

/// Fit k-means and assign every document: `(label, squared distance)` per position.
pub fn cluster(work: &Work, n: u64, d: usize, p: &SemanticParams) -> Result<Vec<(u32, f32)>, DedupError> {
    cluster_with(work, n, d, p, &|rows, kp| Ok(kmeans(rows, d, kp).centroids))
}

fn cluster_with(work: &Work, n: u64, d: usize, p: &SemanticParams, fit_model: Fit<'_>) -> Result<Vec<(u32, f32)>, DedupError> {
    let path = work.path(CLUSTERS);
    if work.done("kmeans") {
        return Ok(assigned_from(&super::work::read_all(&path)?));
    }
    let emb_path = work.path(EMB);
    let file = std::fs::File::open(&emb_path).map_err(|e| io(&emb_path, e))?;
    let k = p.clusters(n);
    let fit_rows = fit_rows(n, k, p);
    let fit = read_rows(&file, &emb_path, d, &fit_rows)?;
    let centroids = fit_model(&fit, &kmeans_params(k, p, fit_rows.len()))?;
    drop(fit);
    tracing::info!(clusters = k, "dedup: k-means fitted on {} of {n} documents", fit_rows.len());
    let out = assign_range(0..n, d, &centroids, |rows| read_rows(&file, &emb_path, d, rows))?;
    write_atomic(&path, &assigned_bytes(&out))?;
    work.mark("kmeans")?;
    Ok(out)
}

/// The documents at positions `range`, each assigned to its nearest of `centroids` (`(label,
/// squared distance)`), read by `read` a chunk at a time.
pub fn assign_range(
    range: std::ops::Range<u64>,
    d: usize,
    centroids: &[f32],
    read: impl Fn(&[u32]) -> Result<Vec<f32>, DedupError>,
) -> Result<Vec<(u32, f32)>, DedupError> {
    const CHUNK: u64 = 65_536;
    let k = centroids.len() / d.max(1);
    let mut out = Vec::with_capacity((range.end - range.start) as usize);
    for start in range.clone().step_by(CHUNK as usize) {
        let rows: Vec<u32> = (start as u32..start.saturating_add(CHUNK).min(range.end) as u32).collect();
        let (labels, dists) = assign(&read(&rows)?, d, centroids, k);
        out.extend(labels.into_iter().zip(dists));
    }
    Ok(out)
}

/// `(label, squared distance)` per document as little-endian bytes (`clusters.bin`, a bucket
/// shard's assignments).
pub fn assigned_bytes(assigned: &[(u32, f32)]) -> Vec<u8> {
    assigned.iter().flat_map(|(l, s)| l.to_le_bytes().into_iter().chain(s.to_le_bytes())).collect()
}

/// [`assigned_bytes`] read back.
pub fn assigned_from(bytes: &[u8]) -> Vec<(u32, f32)> {
    bytes.chunks_exact(8).map(|c| (u32::from_le_bytes([c[0], c[1], c[2], c[3]]), f32::from_le_bytes([c[4], c[5], c[6], c[7]]))).collect()
}

/// One cluster's result: `(position, survivor)` for its duplicates and their survivors, and
/// its duplicates at each eps.
struct ClusterResult {
    pairs: Vec<(u32, u32)>,
    per_eps: Vec<u64>,
}

fn one_cluster(members: &[u32], dist: &[f32], p: &SemanticParams, within: Within<'_>) -> Result<ClusterResult, DedupError> {
    let order = keep_order(dist, members, p.keep, p.seed);
    let rows: Vec<u32> = order.iter().map(|&i| members[i]).collect();
    let best = within(&rows)?;
    let per_eps: Vec<u64> =
        p.eps.iter().map(|e| best.iter().filter(|(s, i)| i.is_some() && f64::from(*s) >= 1.0 - e).count() as u64).collect();
    let threshold = 1.0 - p.eps[0];
    let dup = |j: usize| best[j].1.is_some() && f64::from(best[j].0) >= threshold;
    // Follow each duplicate to the kept member its chain starts from.
    let mut root: Vec<usize> = (0..rows.len()).collect();
    for j in 0..rows.len() {
        if dup(j)
            && let Some(i) = best[j].1
        {
            root[j] = root[i as usize];
        }
    }
    let mut pairs = Vec::new();
    let mut survivors = std::collections::BTreeSet::new();
    for j in 0..rows.len() {
        if dup(j) {
            pairs.push((rows[j], rows[root[j]]));
            survivors.insert(root[j]);
        }
    }
    pairs.extend(survivors.into_iter().map(|r| (rows[r], rows[r])));
    Ok(ClusterResult { pairs, per_eps })
}

/// The pairwise phase over every cluster: `(position, survivor)` pairs as the other methods
/// give them; writes `semantic.json`.
pub fn pairwise(work: &Work, d: usize, assigned: &[(u32, f32)], p: &SemanticParams) -> Result<Vec<(u32, u32)>, DedupError> {
    if work.done("groups") {
        return super::work::load_pairs(work, "groups.bin");
    }
    let emb_path = work.path(EMB);
    let file = std::fs::File::open(&emb_path).map_err(|e| io(&emb_path, e))?;
    let within = |rows: &[u32]| Ok(semdedup(&read_rows(&file, &emb_path, d, rows)?, d, curator_core::dedup::PAIR_TILE as usize));
    let threads = crate::os::available_cores().clamp(1, curator_core::dedup::CLUSTERS_IN_FLIGHT as usize);
    pairwise_with(work, assigned, p, threads, &within)
}

fn pairwise_with(
    work: &Work,
    assigned: &[(u32, f32)],
    p: &SemanticParams,
    threads: usize,
    within: Within<'_>,
) -> Result<Vec<(u32, u32)>, DedupError> {
    if work.done("groups") {
        return super::work::load_pairs(work, "groups.bin");
    }
    let found = clusters_pass(assigned, p, threads, within, |_| true)?;
    let k = assigned.iter().map(|(l, _)| *l as usize + 1).max().unwrap_or(0);
    save_groups(work, k, p, found)
}

/// What the pairwise pass found in some of the clusters: `(position, survivor)` pairs, each
/// cluster's statistics (`cluster`, `size`, `duplicates` at each eps) in cluster order, and
/// the largest cluster's size (over every cluster).
pub struct Found {
    pub pairs: Vec<(u32, u32)>,
    pub per_cluster: Vec<serde_json::Value>,
    pub largest: usize,
}

/// The pairwise pass over the clusters `owns` picks (of the labels in `assigned`, one per
/// position), `threads` clusters at a time.
pub fn clusters_pass(
    assigned: &[(u32, f32)],
    p: &SemanticParams,
    threads: usize,
    within: Within<'_>,
    owns: impl Fn(usize) -> bool,
) -> Result<Found, DedupError> {
    let k = assigned.iter().map(|(l, _)| *l as usize + 1).max().unwrap_or(0);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); k];
    for (pos, (l, _)) in assigned.iter().enumerate() {
        members[*l as usize].push(pos as u32);
    }
    let clusters: Vec<usize> = (0..k).filter(|&c| members[c].len() > 1 && owns(c)).collect();
    let results = par_map(&clusters, threads, |&c| {
        let dist: Vec<f32> = members[c].iter().map(|&m| assigned[m as usize].1).collect();
        one_cluster(&members[c], &dist, p, within)
    })?;
    let mut pairs = Vec::new();
    let mut per_cluster = Vec::new();
    for (&c, r) in clusters.iter().zip(results) {
        pairs.extend(r.pairs);
        per_cluster.push(serde_json::json!({ "cluster": c, "size": members[c].len(), "duplicates": r.per_eps }));
    }
    Ok(Found { pairs, per_cluster, largest: members.iter().map(Vec::len).max().unwrap_or(0) })
}

/// What a bucket shard's pairwise pass `found` (of `clusters` in all), for `components`:
/// its pairs in `pairs`, its statistics in `stats` (JSON).
pub fn save_found(work: &Work, pairs: &str, stats: &str, clusters: usize, found: Found) -> Result<(), DedupError> {
    save_pairs(work, pairs, &found.pairs)?;
    let v = serde_json::json!({ "clusters": clusters, "largest_cluster": found.largest, "per_cluster": found.per_cluster });
    write_atomic(&work.path(stats), v.to_string().as_bytes())
}

/// The step's groups from what the pairwise pass found in every cluster (of `k`):
/// `groups.bin` and `semantic.json` written, the phase marked; the pairs, sorted.
pub fn save_groups(work: &Work, k: usize, p: &SemanticParams, mut found: Found) -> Result<Vec<(u32, u32)>, DedupError> {
    found.pairs.sort_unstable();
    found.per_cluster.sort_by_key(|s| s["cluster"].as_u64());
    let stats = &found.per_cluster;
    let summary = serde_json::json!({
        "clusters": k,
        "eps": p.eps,
        "duplicates": p.eps.iter().enumerate().map(|(i, _)| stats.iter().map(|s| s["duplicates"][i].as_u64().unwrap_or(0)).sum::<u64>()).collect::<Vec<_>>(),
        "largest_cluster": found.largest,
        "per_cluster": stats,
    });
    write_atomic(&work.path(STATS), summary.to_string().as_bytes())?;
    save_pairs(work, "groups.bin", &found.pairs)?;
    work.mark("groups")?;
    Ok(found.pairs)
}

fn gpu_error(e: String) -> DedupError {
    DedupError::Data { path: "GPU".into(), message: e }
}

/// The k-means and pairwise phases on the GPU, in this process: what `curator-host
/// dedup-gpu` (started by [`run_on_gpu`]) does, so a CUDA fault costs that process, not the
/// run. Writes the same files as the CPU path.
pub fn gpu_phases(work_dir: &std::path::Path, n: u64, d: usize, p: &SemanticParams) -> Result<(), DedupError> {
    let work = Work { dir: work_dir.to_path_buf() };
    let gpu = curator_vectors::gpu::Gpu::open().map_err(gpu_error)?;
    let assigned = cluster_with(&work, n, d, p, &|rows, kp| gpu.kmeans(rows, d, kp).map(|(m, _, _)| m.centroids).map_err(gpu_error))?;
    if !work.done("groups") {
        let emb = super::work::read_all(&work.path(EMB))?;
        let values: Vec<f32> = emb.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        drop(emb);
        let on_device = gpu.upload(&values).map_err(gpu_error)?;
        drop(values);
        let tile = 4096;
        pairwise_with(&work, &assigned, p, 1, &|rows| gpu.semdedup(&on_device, d, rows, tile).map_err(gpu_error))?;
    }
    Ok(())
}

/// Run [`gpu_phases`] in a child `curator-host dedup-gpu` process; `Err` when it could not
/// finish (the caller falls back to the CPU under `device: auto`).
pub fn run_on_gpu(work: &Work, n: u64, d: usize, spec: &curator_core::DedupSpec) -> Result<(), DedupError> {
    let out = crate::os::worker_command()
        .arg("dedup-gpu")
        .arg(&work.dir)
        .args(["--docs", &n.to_string(), "--dim", &d.to_string(), "--spec"])
        .arg(serde_json::to_string(spec).unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| DedupError::Io { path: "curator-host dedup-gpu".into(), source: e })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Err(DedupError::Data {
        path: "GPU".into(),
        message: format!("the GPU phases failed ({}): {}", out.status, tail.into_iter().rev().collect::<Vec<_>>().join(" | ")),
    })
}
