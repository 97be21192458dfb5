//! The GPU path, with cudarc: the CUDA driver and NVRTC are loaded at run time, so this
//! builds with no CUDA toolkit and no GPU, and runs wherever a driver is present. The kernels
//! perform exactly the integer operations of [`crate::cpu`], so signatures are identical.
//!
//! Two kernels, one block per document: `shingles` gives every byte position the base hash
//! of the n-gram starting there (0 where no n-gram starts: not a character start, or too
//! close to the end), then `signatures` has thread i fold hash function i over them.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaStream, LaunchConfig};

const KERNELS: &str = r#"
__device__ unsigned long long mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

extern "C" __global__ void shingles(const unsigned char* text, const unsigned long long* offsets, int rows, int n,
                                    unsigned long long* hashes) {
    int r = blockIdx.x;
    if (r >= rows) return;
    unsigned long long start = offsets[r], end = offsets[r + 1];
    for (unsigned long long p = start + threadIdx.x; p < end; p += blockDim.x) {
        unsigned long long h = 0;
        if ((text[p] & 0xC0) != 0x80) {
            unsigned long long e = p;
            int chars = 0;
            while (e < end && chars < n) {
                e++;
                while (e < end && (text[e] & 0xC0) == 0x80) e++;
                chars++;
            }
            // A whole n-gram, or the whole text when it is shorter than n characters.
            if (chars == n || p == start) {
                unsigned long long f = 0xcbf29ce484222325ULL;
                for (unsigned long long q = p; q < e; q++) {
                    f ^= (unsigned long long)text[q];
                    f *= 0x100000001b3ULL;
                }
                h = mix64(f) | 1ULL;
            }
        }
        hashes[p] = h;
    }
}

extern "C" __global__ void signatures(const unsigned long long* offsets, int rows, const unsigned long long* hashes,
                                      const unsigned long long* a, const unsigned long long* b, int k, unsigned int* out) {
    int r = blockIdx.x;
    if (r >= rows) return;
    unsigned long long start = offsets[r], end = offsets[r + 1];
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        unsigned long long ai = a[i], bi = b[i];
        unsigned int m = 0xFFFFFFFFu;
        for (unsigned long long p = start; p < end; p++) {
            unsigned long long h = hashes[p];
            if (h != 0) {
                unsigned int v = (unsigned int)((ai * h + bi) >> 32);
                m = v < m ? v : m;
            }
        }
        out[(unsigned long long)r * k + i] = m;
    }
}
"#;

curator_gpu::kernels! {
    /// The kernels of [`KERNELS`], with their C signatures.
    pub struct Kernels {
        fn shingles(text: *const u8, offsets: *const u64, rows: i32, n: i32, hashes: *mut u64);
        fn signatures(offsets: *const u64, rows: i32, hashes: *const u64, a: *const u64, b: *const u64, k: i32, out: *mut u32);
    }
}

/// A CUDA context on device 0 (the worker's `CUDA_VISIBLE_DEVICES` decides which card that
/// is) with the kernels compiled by NVRTC.
pub struct Gpu {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Kernels,
}

static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();

fn e<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> String {
    move |err| format!("{what}: {err:?}")
}

impl Gpu {
    /// The process's GPU, set up on first use; `Err` says why there is none.
    pub fn shared() -> Result<&'static Gpu, String> {
        GPU.get_or_init(|| catch_unwind(AssertUnwindSafe(Gpu::new)).unwrap_or_else(|_| Err("CUDA set-up panicked".into())))
            .as_ref()
            .map_err(|e| e.clone())
    }

    fn new() -> Result<Gpu, String> {
        // cudarc panics on first use when a library is missing: look first.
        curator_gpu::require(&[curator_gpu::CudaLib::Driver, curator_gpu::CudaLib::Nvrtc])?;
        let ctx = CudaContext::new(0).map_err(e("cannot open GPU 0"))?;
        let stream = ctx.default_stream();
        let (ptx, _) = curator_gpu::ptx("minhash", KERNELS, "signatures", None, None)?;
        let module = ctx.load_module(ptx).map_err(e("cannot load kernels"))?;
        let kernels = Kernels::load(&module).map_err(|(name, err)| format!("kernel {name}: {err:?}"))?;
        Ok(Gpu { _ctx: ctx, stream, kernels })
    }

    /// Signatures of a UTF-8 column, as [`crate::cpu::signatures`].
    pub fn signatures(&self, data: &[u8], offsets: &[u32], n: usize, a: &[u64], b: &[u64]) -> Result<Vec<u32>, String> {
        let rows = offsets.len().saturating_sub(1);
        let k = a.len();
        if rows == 0 || k == 0 {
            return Ok(Vec::new());
        }
        let base = offsets[0] as usize;
        let text = &data[base..offsets[rows] as usize];
        let offs: Vec<u64> = offsets.iter().map(|o| (*o as usize - base) as u64).collect();
        let padded: &[u8] = if text.is_empty() { &[0u8] } else { text };
        let s = &self.stream;
        let d_text = s.clone_htod(padded).map_err(e("copy text"))?;
        let d_offs = s.clone_htod(&offs).map_err(e("copy offsets"))?;
        let mut d_hashes = s.alloc_zeros::<u64>(padded.len()).map_err(e("allocate shingle hashes"))?;
        let d_a = s.clone_htod(a).map_err(e("copy coefficients"))?;
        let d_b = s.clone_htod(b).map_err(e("copy coefficients"))?;
        let mut d_out = s.alloc_zeros::<u32>(rows * k).map_err(e("allocate signatures"))?;
        let (rows_i, n_i, k_i) = (rows as i32, n as i32, k as i32);
        let grid = (rows as u32, 1, 1);
        let kernels = &self.kernels;
        let cfg = LaunchConfig { grid_dim: grid, block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: block r < rows reads text[offsets[r]..offsets[r + 1]] (offsets are rows + 1
        // ascending positions within the padded text) and writes hashes at the same positions
        // (hashes holds one per text byte).
        unsafe { kernels.shingles(s, cfg, &d_text, &d_offs, rows_i, n_i, &mut d_hashes) }.map_err(e("launch shingles"))?;
        let threads = a.len().div_ceil(32).clamp(1, 32) as u32 * 32;
        let cfg = LaunchConfig { grid_dim: grid, block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: block r < rows reads its rows' hashes as above and a[i], b[i] for i < k (both
        // hold k), and writes out[r × k + i], inside rows × k.
        unsafe { kernels.signatures(s, cfg, &d_offs, rows_i, &d_hashes, &d_a, &d_b, k_i, &mut d_out) }.map_err(e("launch signatures"))?;
        s.clone_dtoh(&d_out).map_err(e("copy signatures back"))
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
