//! The GPU path of semantic dedup: k-means and the within-cluster pass with cuBLAS (f32
//! GEMMs) and two NVRTC kernels, loaded at run time through cudarc (nothing to build with).
//! The `cuda` feature (default); `gpu_absent.rs` stands in without it.
//!
//! k-means keeps the data on the device and, per iteration and chunk of rows: `X·Cᵀ` (GEMM),
//! the nearest centroid of each row (kernel), then the clusters' sums as a second GEMM,
//! `onehot(labels)ᵀ·X`, so sums are deterministic (no atomics). Seeding is the CPU path's
//! ([`crate::seed_plus_plus`]), so both start from the same centroids; they then differ only
//! by float summation order (the CPU keeps exact fixed-point sums).
//!
//! The within-cluster pass gathers a cluster's rows in keep order on the device, and for
//! each tile pair computes the similarities (GEMM) and folds them into each row's running
//! maximum over earlier rows (kernel, rows in order, so ties go to the earlier row as on
//! the CPU).

use std::sync::Arc;

use cudarc::cublas::{CudaBlas, Gemm};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};
use curator_gpu::RowMajor;

use crate::{KMeans, KMeansParams, Rng};

const KERNELS: &str = r#"
// Nearest centroid per row: scores [m × k] = X·Cᵀ; dist = |c|² − 2 x·c + |x|². One warp per
// row (coalesced reads of the row); ties go to the smaller centroid index, as on the CPU.
extern "C" __global__ void nearest(const float* scores, const float* c_norm, const float* x_norm, int m, int k,
                                   unsigned int* labels, float* dists, float* onehot) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int r = (int)(t / 32), lane = (int)(t % 32);
    if (r >= m) return;
    const float* row = scores + (long long)r * k;
    float best = 3.4e38f; int arg = 0x7fffffff;
    for (int j = lane; j < k; j += 32) {
        float d = c_norm[j] - 2.0f * row[j];
        if (d < best) { best = d; arg = j; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffff, best, o);
        int oa = __shfl_xor_sync(0xffffffff, arg, o);
        if (ob < best || (ob == best && oa < arg)) { best = ob; arg = oa; }
    }
    if (lane == 0) {
        labels[r] = arg;
        float v = best + x_norm[r];
        dists[r] = v > 0.0f ? v : 0.0f;
        onehot[(long long)r * k + arg] = 1.0f;
    }
}

// Fold a tile of similarities sims [jn × in] (rows j0.., columns i0..) into each row's
// largest similarity to an earlier row.
extern "C" __global__ void fold_max(const float* sims, int jn, int in, int j0, int i0, float* best, int* arg) {
    int jj = blockIdx.x * blockDim.x + threadIdx.x;
    if (jj >= jn) return;
    int j = j0 + jj;
    float b = best[j]; int a = arg[j];
    const float* row = sims + (long long)jj * in;
    for (int ii = 0; ii < in; ii++) {
        int i = i0 + ii;
        if (i >= j) break;
        if (a < 0 || row[ii] > b) { b = row[ii]; a = i; }
    }
    best[j] = b; arg[j] = a;
}

// Gather rows idx[0..m) of data [n × d] into out [m × d].
extern "C" __global__ void gather(const float* data, const unsigned int* idx, int m, int d, float* out) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)m * d) return;
    long long r = t / d; int c = (int)(t % d);
    out[t] = data[(long long)idx[r] * d + c];
}
"#;

curator_gpu::kernels! {
    /// The kernels of [`KERNELS`], with their C signatures.
    pub struct Kernels {
        fn nearest(scores: *const f32, c_norm: *const f32, x_norm: *const f32, m: i32, k: i32, labels: *mut u32, dists: *mut f32, onehot: *mut f32);
        fn fold_max(sims: *const f32, jn: i32, i_n: i32, j0: i32, i0: i32, best: *mut f32, arg: *mut i32);
        fn gather(data: *const f32, idx: *const u32, m: i32, d: i32, out: *mut f32);
    }
}

/// Vectors on the device ([`Gpu::upload`]).
pub struct OnDevice(CudaSlice<f32>);

/// The device, its cuBLAS handle and the kernels.
pub struct Gpu {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    kernels: Kernels,
}

fn e<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> String {
    move |err| format!("{what}: {err:?}")
}

/// Row-major `c[m × n] = a[m × k] · b[n × k]ᵀ` (rows against rows).
fn rows_dot(
    blas: &CudaBlas,
    a: &impl DevicePtr<f32>,
    m: usize,
    b: &impl DevicePtr<f32>,
    n: usize,
    k: usize,
    c: &mut impl DevicePtrMut<f32>,
) -> Result<(), String> {
    let cfg = RowMajor::rows_dot(m, n, k).config(1.0f32, 0.0);
    // SAFETY: a is m × k, b is n × k and c is m × n, row-major, as the caller allocated.
    unsafe { blas.gemm(cfg, b, a, c) }.map_err(e("cuBLAS"))
}

impl Gpu {
    /// GPU 0 (`CUDA_VISIBLE_DEVICES` picks the card); `Err` says why there is none.
    pub fn open() -> Result<Gpu, String> {
        std::panic::catch_unwind(Gpu::open_inner).unwrap_or_else(|_| Err("CUDA set-up panicked (a CUDA library is missing)".into()))
    }

    fn open_inner() -> Result<Gpu, String> {
        use curator_gpu::CudaLib;
        curator_gpu::require(&[CudaLib::Driver, CudaLib::Nvrtc, CudaLib::Cublas])?;
        let ctx = CudaContext::new(0).map_err(e("cannot open GPU 0"))?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(e("cuBLAS"))?;
        let (ptx, _) = curator_gpu::ptx("vectors", KERNELS, "", None, None)?;
        let module = ctx.load_module(ptx).map_err(e("load kernels"))?;
        let kernels = Kernels::load(&module).map_err(|(name, err)| format!("kernel {name}: {err:?}"))?;
        Ok(Gpu { kernels, _ctx: ctx, stream, blas })
    }

    fn flat(n: usize) -> LaunchConfig {
        LaunchConfig { grid_dim: (n.div_ceil(256).max(1) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
    }

    /// k-means as [`crate::kmeans`], on the device. Also returns every row's label and squared
    /// distance at the last assignment.
    pub fn kmeans(&self, data: &[f32], d: usize, p: &KMeansParams) -> Result<(KMeans, Vec<u32>, Vec<f32>), String> {
        let n = data.len() / d.max(1);
        let k = p.k.clamp(1, n.max(1));
        let mut rng = Rng::new(p.seed);
        let idx = crate::sample(n, p.init_sample.max(k).min(n), &mut rng);
        let mut centroids = crate::seed_plus_plus(data, d, &idx, k, &mut rng);
        let tol = p.tol * crate::variance(data, d, &idx);
        let s = &self.stream;
        let x = s.clone_htod(data).map_err(e("upload vectors"))?;
        let x_norm: Vec<f32> = data.chunks_exact(d).map(|r| r.iter().map(|v| v * v).sum()).collect();
        let x_norm = s.clone_htod(&x_norm).map_err(e("upload norms"))?;
        let chunk = (256 << 20) / (4 * k.max(d)).max(1);
        let chunk = chunk.clamp(1024, n.max(1024));
        let mut scores = s.alloc_zeros::<f32>(chunk * k).map_err(e("allocate scores"))?;
        let mut onehot = s.alloc_zeros::<f32>(chunk * k).map_err(e("allocate one-hot"))?;
        let mut d_labels = s.alloc_zeros::<u32>(n).map_err(e("allocate labels"))?;
        let mut d_dists = s.alloc_zeros::<f32>(n).map_err(e("allocate distances"))?;
        let mut sums = s.alloc_zeros::<f32>(k * d).map_err(e("allocate sums"))?;
        let (mut labels, mut dists) = (vec![0u32; n], vec![0f32; n]);
        let mut iterations = 0;
        let mut inertia = 0.0;
        for _ in 0..p.max_iter.max(1) {
            iterations += 1;
            let c = s.clone_htod(&centroids).map_err(e("upload centroids"))?;
            let c_norm: Vec<f32> = centroids.chunks_exact(d).map(|r| r.iter().map(|v| v * v).sum()).collect();
            let c_norm = s.clone_htod(&c_norm).map_err(e("upload centroid norms"))?;
            for start in (0..n).step_by(chunk) {
                let m = chunk.min(n - start);
                let xs = x.slice(start * d..(start + m) * d);
                rows_dot(&self.blas, &xs, m, &c, k, d, &mut scores)?;
                s.memset_zeros(&mut onehot).map_err(e("clear one-hot"))?;
                let (m_i, k_i) = (m as i32, k as i32);
                let xn = x_norm.slice(start..start + m);
                let mut lab = d_labels.slice_mut(start..start + m);
                let mut dis = d_dists.slice_mut(start..start + m);
                // SAFETY: warp r < m reads row r of scores (m × k, the chunk's), c_norm (k),
                // x_norm[r] (the chunk's m), and writes labels[r], dists[r] (the chunk's m) and
                // one value of onehot's row r (m × k); warps past m return.
                unsafe { self.kernels.nearest(s, Gpu::flat(m * 32), &scores, &c_norm, &xn, m_i, k_i, &mut lab, &mut dis, &mut onehot) }
                    .map_err(e("nearest"))?;
                // sums[k × d] += onehotᵀ[k × m] · X[m × d]
                let beta = if start == 0 { 0.0 } else { 1.0 };
                let cfg = RowMajor::new(k, d, m).a_transposed().config(1.0f32, beta);
                // SAFETY: X rows (m × d), one-hot (m × k), sums (k × d), row-major.
                unsafe { self.blas.gemm(cfg, &xs, &onehot, &mut sums) }.map_err(e("cuBLAS sums"))?;
            }
            s.memcpy_dtoh(&d_labels, &mut labels).map_err(e("copy labels"))?;
            s.memcpy_dtoh(&d_dists, &mut dists).map_err(e("copy distances"))?;
            let host_sums = s.clone_dtoh(&sums).map_err(e("copy sums"))?;
            inertia = dists.iter().map(|&v| f64::from(v)).sum();
            let mut counts = vec![0u64; k];
            labels.iter().for_each(|&l| counts[l as usize] += 1);
            let shift = crate::update(
                &mut centroids,
                &host_sums.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
                &counts,
                data,
                || dists.clone(),
                d,
            );
            if shift <= tol {
                break;
            }
        }
        Ok((KMeans { centroids, k, d, iterations, inertia, init_seconds: 0.0, steps: Vec::new() }, labels, dists))
    }

    /// [`crate::semdedup`] for a cluster whose rows (positions into `data`, already on the
    /// device with [`Gpu::upload`]) are `rows`, in keep order.
    pub fn semdedup(&self, data: &OnDevice, d: usize, rows: &[u32], tile: usize) -> Result<Vec<(f32, Option<u32>)>, String> {
        let m = rows.len();
        if m == 0 {
            return Ok(Vec::new());
        }
        let s = &self.stream;
        let idx = s.clone_htod(rows).map_err(e("upload rows"))?;
        let mut v = s.alloc_zeros::<f32>(m * d).map_err(e("allocate cluster"))?;
        let (m_i, d_i) = (m as i32, d as i32);
        // SAFETY: thread t < m × d writes v[t] (m × d) from data row idx[t / d] (every row
        // index the caller gives is a row of data, n × d); threads past m × d return.
        unsafe { self.kernels.gather(s, Gpu::flat(m * d), &data.0, &idx, m_i, d_i, &mut v) }.map_err(e("gather"))?;
        let tile = tile.max(1).min(m);
        let mut sims = s.alloc_zeros::<f32>(tile * tile).map_err(e("allocate tile"))?;
        let mut best = s.clone_htod(&vec![0f32; m]).map_err(e("allocate best"))?;
        let mut arg = s.clone_htod(&vec![-1i32; m]).map_err(e("allocate arg"))?;
        for j0 in (0..m).step_by(tile) {
            let jn = tile.min(m - j0);
            for i0 in (0..=j0).step_by(tile) {
                let i_n = tile.min(m - i0);
                let vj = v.slice(j0 * d..(j0 + jn) * d);
                let vi = v.slice(i0 * d..(i0 + i_n) * d);
                rows_dot(&self.blas, &vj, jn, &vi, i_n, d, &mut sims)?;
                let (jn_i, in_i, j0_i, i0_i) = (jn as i32, i_n as i32, j0 as i32, i0 as i32);
                // SAFETY: thread jj < jn reads row jj of sims (jn × i_n ≤ the tile) and updates
                // best[j0 + jj] and arg[j0 + jj] (both hold m ≥ j0 + jn); threads past jn return.
                unsafe { self.kernels.fold_max(s, Gpu::flat(jn), &sims, jn_i, in_i, j0_i, i0_i, &mut best, &mut arg) }
                    .map_err(e("fold_max"))?;
            }
        }
        let best = s.clone_dtoh(&best).map_err(e("copy best"))?;
        let arg = s.clone_dtoh(&arg).map_err(e("copy arg"))?;
        Ok(best.into_iter().zip(arg).map(|(b, a)| if a < 0 { (0.0, None) } else { (b, Some(a as u32)) }).collect())
    }

    /// Put `data` on the device (for [`Gpu::semdedup`]).
    pub fn upload(&self, data: &[f32]) -> Result<OnDevice, String> {
        self.stream.clone_htod(data).map(OnDevice).map_err(e("upload vectors"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_kernels_match_the_cuda_source() {
        curator_gpu::check_signatures(KERNELS, Kernels::SIGNATURES).unwrap();
    }
}
