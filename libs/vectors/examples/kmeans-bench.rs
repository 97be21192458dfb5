//! k-means and the SemDeDup pass on random-but-clustered unit vectors, timed; the vectors are
//! written for `scripts/semdedup/bench.py` (faiss, scikit-learn on the same data).
//!
//!     kmeans-bench N D K ITERS [OUT.f32|-] [cpu|gpu|both] [REMOVED.txt|-] [CENTRES NOISE]
//!
//! The data: CENTRES × K centres uniform in [−1, 1]^D (default 2 per cluster), each row one of
//! them plus uniform noise of width NOISE (default 0.8; 3.0 makes the clusters overlap, as real
//! embeddings do, and Lloyd take many iterations to settle), 2 % near-copies of earlier rows,
//! all normalised.
//!
//! Prints one JSON line: k-means seconds (exactly ITERS Lloyd iterations: tol < 0), of them
//! the seeding (`init_s`) and each iteration's `[seconds, share of the n × k distances
//! computed]` (`steps`: the bounds' work); the assignment alone, best of 3, and its rate
//! (`assign_gflops`, 2·n·k·d flops); the SemDeDup pass over every cluster; the duplicates at
//! eps 0.01; and with `both` how far the CPU's and the GPU's removed sets agree (Jaccard).

use std::time::Instant;

use std::collections::{BTreeMap, BTreeSet};

use curator_vectors::{KMeansParams, Rng, assign, kmeans, semdedup};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let (n, d, k, iters) = (arg(1, 100_000), arg(2, 384), arg(3, 100), arg(4, 10));
    let per: usize = args.get(8).and_then(|s| s.parse().ok()).unwrap_or(2);
    let noise: f64 = args.get(9).and_then(|s| s.parse().ok()).unwrap_or(0.8);
    // Clustered: per × k centres, points near them, 2 % near-copies of other points.
    let mut rng = Rng::new(1);
    let centres: Vec<f32> = (0..per * k * d).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
    let mut data = vec![0f32; n * d];
    for i in 0..n {
        let copy = i > 0 && rng.next_f64() < 0.02;
        let src = if copy { Some(rng.below(i)) } else { None };
        let c = rng.below(per * k);
        for j in 0..d {
            data[i * d + j] = match src {
                Some(s) => data[s * d + j] + ((rng.next_f64() - 0.5) * 0.002) as f32,
                None => centres[c * d + j] + ((rng.next_f64() - 0.5) * noise) as f32,
            };
        }
        let row = &mut data[i * d..(i + 1) * d];
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
    if let Some(out) = args.get(5).filter(|o| o.as_str() != "-") {
        let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(out, bytes).expect("write vectors");
    }
    let mode = args.get(6).map(String::as_str).unwrap_or("cpu");
    let p = KMeansParams { k, max_iter: iters, tol: -1.0, seed: 42, init_sample: (8 * k).min(n) };
    let mut report = vec![format!("\"n\": {n}, \"d\": {d}, \"k\": {k}")];
    let mut removed: Vec<(String, BTreeSet<usize>)> = Vec::new();
    if mode == "cpu" || mode == "both" {
        let t = Instant::now();
        let m = kmeans(&data, d, &p);
        let fit_s = t.elapsed().as_secs_f64();
        // The assignment alone (every row against every centroid), best of 3: the kernel's rate.
        let mut assign_s = f64::INFINITY;
        let (mut labels, mut dists) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let t = Instant::now();
            (labels, dists) = assign(&data, d, &m.centroids, k);
            assign_s = assign_s.min(t.elapsed().as_secs_f64());
        }
        let gflops = 2.0 * (n * k * d) as f64 / assign_s / 1e9;
        let t = Instant::now();
        let dups = pass(&labels, &dists, k, |ids| {
            let vecs: Vec<f32> = ids.iter().flat_map(|&i| data[i * d..(i + 1) * d].iter().copied()).collect();
            semdedup(&vecs, d, 1024)
        });
        let pair_s = t.elapsed().as_secs_f64();
        report.push(format!(
            "\"cpu\": {{\"iterations\": {}, \"kmeans_s\": {fit_s:.3}, \"init_s\": {:.3}, \"steps\": [{}], \"assign_s\": {assign_s:.3}, \"assign_gflops\": {gflops:.1}, \"semdedup_s\": {pair_s:.3}, \"inertia\": {:.3}, \"duplicates_eps_0.01\": {}, \"threads\": {}}}",
            m.iterations,
            m.init_seconds,
            m.steps.iter().map(|s| format!("[{:.3}, {:.3}]", s.seconds, s.distances as f64 / (n * k) as f64)).collect::<Vec<_>>().join(", "),
            m.inertia,
            dups.len(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ));
        if let Some(path) = args.get(7).filter(|p| p.as_str() != "-") {
            let text: String = dups.iter().map(|(r, p)| format!("{r} {p}\n")).collect();
            std::fs::write(path, text).expect("write removed rows");
        }
        removed.push(("cpu".into(), dups.into_keys().collect()));
    }
    if mode == "gpu" || mode == "both" {
        let t = Instant::now();
        let gpu = match curator_vectors::gpu::Gpu::open() {
            Ok(g) => g,
            Err(e) => {
                eprintln!("no GPU: {e}");
                std::process::exit(1);
            }
        };
        let open_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (m, labels, dists) = gpu.kmeans(&data, d, &p).expect("GPU k-means");
        let fit_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let on_device = gpu.upload(&data).expect("upload");
        let dups = pass(&labels, &dists, k, |ids| {
            let rows: Vec<u32> = ids.iter().map(|&i| i as u32).collect();
            gpu.semdedup(&on_device, d, &rows, 4096).expect("GPU semdedup")
        });
        let pair_s = t.elapsed().as_secs_f64();
        report.push(format!(
            "\"gpu\": {{\"iterations\": {}, \"open_s\": {open_s:.3}, \"kmeans_s\": {fit_s:.3}, \"semdedup_s\": {pair_s:.3}, \"inertia\": {:.3}, \"duplicates_eps_0.01\": {}}}",
            m.iterations,
            m.inertia,
            dups.len()
        ));
        removed.push(("gpu".into(), dups.into_keys().collect()));
    }
    if let [(_, a), (_, b)] = removed.as_slice() {
        let inter = a.intersection(b).count();
        let union = a.union(b).count();
        report.push(format!("\"removed_set_jaccard_cpu_gpu\": {:.4}", inter as f64 / union.max(1) as f64));
    }
    println!("{{{}}}", report.join(", "));
}

/// The SemDeDup pass over every cluster ("hard": farthest from the centroid kept first);
/// the rows removed at eps 0.01, each with the earlier row it is nearest to.
fn pass(labels: &[u32], dists: &[f32], k: usize, mut within: impl FnMut(&[usize]) -> Vec<(f32, Option<u32>)>) -> BTreeMap<usize, usize> {
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (i, &l) in labels.iter().enumerate() {
        members[l as usize].push(i);
    }
    let mut out = BTreeMap::new();
    for mut ids in members {
        if ids.len() < 2 {
            continue;
        }
        ids.sort_by(|&a, &b| dists[b].total_cmp(&dists[a]).then(a.cmp(&b)));
        for (j, (s, i)) in within(&ids).into_iter().enumerate() {
            if let Some(i) = i.filter(|_| s >= 0.99) {
                out.insert(ids[j], ids[i as usize]);
            }
        }
    }
    out
}
