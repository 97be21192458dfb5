//! k-means and the SemDeDup pass on random-but-clustered unit vectors, timed; the vectors are
//! written for `scripts/semdedup/bench.py` (faiss, scikit-learn on the same data).
//!
//!     kmeans-bench N D K ITERS [OUT.f32]
//!
//! Prints one JSON line: k-means seconds (fixed ITERS iterations, tol 0), the assignment,
//! the SemDeDup pass over every cluster, and the duplicates at eps 0.01.

use std::time::Instant;

use curator_vectors::{KMeansParams, Rng, assign, kmeans, semdedup};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let (n, d, k, iters) = (arg(1, 100_000), arg(2, 384), arg(3, 100), arg(4, 10));
    // Clustered: 2k centres, points near them, 2 % near-copies of other points.
    let mut rng = Rng::new(1);
    let centres: Vec<f32> = (0..2 * k * d).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
    let mut data = vec![0f32; n * d];
    for i in 0..n {
        let copy = i > 0 && rng.next_f64() < 0.02;
        let src = if copy { Some(rng.below(i)) } else { None };
        let c = rng.below(2 * k);
        for j in 0..d {
            data[i * d + j] = match src {
                Some(s) => data[s * d + j] + ((rng.next_f64() - 0.5) * 0.002) as f32,
                None => centres[c * d + j] + ((rng.next_f64() - 0.5) * 0.8) as f32,
            };
        }
        let row = &mut data[i * d..(i + 1) * d];
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
    if let Some(out) = args.get(5) {
        let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(out, bytes).expect("write vectors");
    }
    let t = Instant::now();
    let m = kmeans(&data, d, &KMeansParams { k, max_iter: iters, tol: 0.0, seed: 42, init_sample: (20 * k).min(n) });
    let fit_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (labels, dists) = assign(&data, d, &m.centroids, k);
    let assign_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (i, &l) in labels.iter().enumerate() {
        members[l as usize].push(i);
    }
    let mut dups = 0usize;
    let mut largest = 0;
    for mut ids in members {
        largest = largest.max(ids.len());
        // "hard": farthest from the centroid first (kept).
        ids.sort_by(|&a, &b| dists[b].total_cmp(&dists[a]).then(a.cmp(&b)));
        let vecs: Vec<f32> = ids.iter().flat_map(|&i| data[i * d..(i + 1) * d].iter().copied()).collect();
        dups += semdedup(&vecs, d, 1024).iter().filter(|(s, i)| i.is_some() && *s >= 0.99).count();
    }
    let pair_s = t.elapsed().as_secs_f64();
    println!(
        "{{\"n\": {n}, \"d\": {d}, \"k\": {k}, \"iterations\": {}, \"kmeans_s\": {fit_s:.3}, \"assign_s\": {assign_s:.3}, \"semdedup_s\": {pair_s:.3}, \"inertia\": {:.3}, \"duplicates_eps_0.01\": {dups}, \"largest_cluster\": {largest}, \"threads\": {}}}",
        m.iterations,
        m.inertia,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}
