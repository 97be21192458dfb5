//! The GPU path of semantic dedup against the CPU path, on the card: k-means finds the same
//! clusters (well-separated ones, so both must), and the within-cluster pass gives each row
//! the same nearest earlier row with the same similarity (to float rounding). Without a GPU
//! the test says it skipped (`curator_gpu::testing::gpu_or_skip`); `scripts/gpu-checks.sh`
//! runs it on the GPU machine with `CURATOR_REQUIRE_GPU=1`.

use std::collections::BTreeMap;

use curator_gpu::CudaLib;
use curator_vectors::{KMeansParams, Rng, gpu::Gpu, kmeans, semdedup};

/// `per` unit vectors of dimension `d` around each of `k` random centres, every 10th row a
/// near copy of the row before it.
fn clustered(k: usize, per: usize, d: usize) -> Vec<f32> {
    let mut rng = Rng::new(7);
    let unit = |v: &mut Vec<f32>| {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
    };
    let centres: Vec<Vec<f32>> = (0..k)
        .map(|_| {
            let mut c: Vec<f32> = (0..d).map(|_| rng.next_f64() as f32 - 0.5).collect();
            unit(&mut c);
            c
        })
        .collect();
    let mut out = Vec::new();
    for i in 0..k * per {
        let noise = if i % 10 == 9 { 1e-4 } else { 0.05 };
        let base: Vec<f32> = if i % 10 == 9 { out[out.len() - d..].to_vec() } else { centres[i % k].clone() };
        let mut v: Vec<f32> = base.iter().map(|x| x + noise * (rng.next_f64() as f32 - 0.5)).collect();
        unit(&mut v);
        out.extend(v);
    }
    out
}

#[test]
fn gpu_kmeans_and_the_within_cluster_pass_agree_with_the_cpu() {
    if curator_gpu::testing::gpu_or_skip("semantic dedup's GPU path", &[CudaLib::Nvrtc, CudaLib::Cublas]).is_none() {
        return;
    }
    let gpu = Gpu::open().expect("the GPU path starts");
    let (k, d) = (8, 32);
    let data = clustered(k, 250, d);
    let p = KMeansParams { k, max_iter: 30, tol: 1e-6, seed: 42, init_sample: 8 * k };
    let cpu = kmeans(&data, d, &p);
    let (_, gpu_labels, _) = gpu.kmeans(&data, d, &p).expect("GPU k-means");
    let (cpu_labels, _) = curator_vectors::assign(&data, d, &cpu.centroids, cpu.k);
    // The same partition, whatever each side numbers its clusters.
    let mut map = BTreeMap::new();
    for (c, g) in cpu_labels.iter().zip(&gpu_labels) {
        assert_eq!(*map.entry(*c).or_insert(*g), *g, "a CPU cluster is split on the GPU");
    }
    assert_eq!(map.len(), k);

    let rows: Vec<u32> = (0..(data.len() / d) as u32).collect();
    let on_card = gpu.upload(&data).expect("upload");
    let want = semdedup(&data, d, 128);
    let got = gpu.semdedup(&on_card, d, &rows, 128).expect("GPU semdedup");
    assert_eq!(want.len(), got.len());
    for (r, ((ws, wa), (gs, ga))) in want.iter().zip(&got).enumerate() {
        assert!((ws - gs).abs() < 1e-4, "row {r}: similarity {ws} on the CPU, {gs} on the GPU");
        // A near tie may go either way in float; a clear nearest row must be the same.
        if wa != ga {
            assert!((ws - gs).abs() < 1e-4 && ws < &0.999, "row {r}: nearest {wa:?} on the CPU, {ga:?} on the GPU");
        }
    }
    let dups = want.iter().filter(|(s, _)| *s > 0.999).count();
    assert!(dups >= 190, "the planted near copies are found ({dups})");
}
