//! Row-major matrix products on cuBLAS, written once. Every buffer in curator's GPU crates is
//! row-major; cuBLAS is column-major, where a row-major `C = op(A) · op(B)` is the product
//! `Cᵀ = op(B)ᵀ · op(A)ᵀ`: the operands swap places and each stored matrix is read as its
//! transpose. [`RowMajor`] describes a product as the code reads it and makes cuBLAS' config
//! from it, so no call site maps dimensions, transposes and leading dimensions by hand.
//!
//! The config it makes is for cuBLAS' operands **B first, then A**: `blas.gemm(cfg, b, a, c)`
//! (`gemm_strided_batched` likewise).

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
use cudarc::cublas::{GemmConfig, StridedBatchedConfig};

/// How an operand is stored (row-major, `ld` values from one row to the next).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored {
    /// The operand itself.
    AsIs { ld: usize },
    /// Its transpose.
    Transposed { ld: usize },
}

/// The row-major product `C[m × n] = A[m × k] · B[k × n]`, each operand stored as it is or as
/// its transpose, rows of each matrix `ld` values apart (packed unless set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowMajor {
    m: usize,
    n: usize,
    k: usize,
    a: Stored,
    b: Stored,
    ldc: usize,
}

impl RowMajor {
    /// `C[m × n] = A[m × k] · B[k × n]`, all three packed.
    pub fn new(m: usize, n: usize, k: usize) -> RowMajor {
        RowMajor { m, n, k, a: Stored::AsIs { ld: k }, b: Stored::AsIs { ld: n }, ldc: n }
    }

    /// `C[m × n] = A[m × k] · Bᵀ` with `B` stored `[n × k]`: rows of A against rows of B (a
    /// linear layer `x Wᵀ`, a table of dot products), all packed.
    pub fn rows_dot(m: usize, n: usize, k: usize) -> RowMajor {
        RowMajor::new(m, n, k).b_transposed()
    }

    /// A is given as its transpose, stored `[k × m]` (packed: rows `m` apart).
    pub fn a_transposed(self) -> RowMajor {
        RowMajor { a: Stored::Transposed { ld: self.m }, ..self }
    }

    /// B is given as its transpose, stored `[n × k]` (packed: rows `k` apart).
    pub fn b_transposed(self) -> RowMajor {
        RowMajor { b: Stored::Transposed { ld: self.k }, ..self }
    }

    /// A's stored rows are `ld` values apart (after [`RowMajor::a_transposed`], if any).
    pub fn lda(self, ld: usize) -> RowMajor {
        let a = match self.a {
            Stored::AsIs { .. } => Stored::AsIs { ld },
            Stored::Transposed { .. } => Stored::Transposed { ld },
        };
        RowMajor { a, ..self }
    }

    /// B's stored rows are `ld` values apart (after [`RowMajor::b_transposed`], if any).
    pub fn ldb(self, ld: usize) -> RowMajor {
        let b = match self.b {
            Stored::AsIs { .. } => Stored::AsIs { ld },
            Stored::Transposed { .. } => Stored::Transposed { ld },
        };
        RowMajor { b, ..self }
    }

    /// C's rows are `ld` values apart.
    pub fn ldc(self, ld: usize) -> RowMajor {
        RowMajor { ldc: ld, ..self }
    }

    /// cuBLAS' config for `C = alpha · A · B + beta · C`; call cuBLAS with **B, then A**.
    pub fn config<T>(&self, alpha: T, beta: T) -> GemmConfig<T> {
        // cuBLAS computes Cᵀ [n × m] = op(B)ᵀ [n × k] · op(A)ᵀ [k × m]. A row-major matrix
        // stored with rows `ld` apart is, to cuBLAS, its transpose with leading dimension `ld`:
        // an operand stored as it is needs no transpose there, one stored transposed needs one.
        let (transa, lda) = op(self.b);
        let (transb, ldb) = op(self.a);
        GemmConfig { transa, transb, m: self.n as i32, n: self.m as i32, k: self.k as i32, alpha, lda, ldb, beta, ldc: self.ldc as i32 }
    }

    /// The same over `batch` products, the i-th's A, B and C starting `strides` (A, B, C)
    /// values after the (i-1)-th's; call cuBLAS with **B, then A**.
    pub fn strided<T>(&self, alpha: T, beta: T, batch: usize, strides: [usize; 3]) -> StridedBatchedConfig<T> {
        let [a, b, c] = strides;
        StridedBatchedConfig {
            gemm: self.config(alpha, beta),
            batch_size: batch as i32,
            stride_a: b as i64,
            stride_b: a as i64,
            stride_c: c as i64,
        }
    }
}

fn op(stored: Stored) -> (cublasOperation_t, i32) {
    match stored {
        Stored::AsIs { ld } => (CUBLAS_OP_N, ld as i32),
        Stored::Transposed { ld } => (CUBLAS_OP_T, ld as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cuBLAS' column-major `C = alpha · op(A) · op(B) + beta · C`, as its manual defines it,
    /// over flat buffers: the reference the configs are checked against (no GPU needed).
    fn cublas_gemm(cfg: &GemmConfig<f64>, a: &[f64], b: &[f64], c: &mut [f64]) {
        let (m, n, k) = (cfg.m as usize, cfg.n as usize, cfg.k as usize);
        let (lda, ldb, ldc) = (cfg.lda as usize, cfg.ldb as usize, cfg.ldc as usize);
        let at = |i: usize, p: usize| if cfg.transa == CUBLAS_OP_N { a[i + p * lda] } else { a[p + i * lda] };
        let bt = |p: usize, j: usize| if cfg.transb == CUBLAS_OP_N { b[p + j * ldb] } else { b[j + p * ldb] };
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
                c[i + j * ldc] = cfg.alpha * dot + cfg.beta * c[i + j * ldc];
            }
        }
    }

    /// Values that tell positions apart.
    fn filled(len: usize, seed: usize) -> Vec<f64> {
        (0..len).map(|i| ((i * 7 + seed * 13) % 23) as f64 - 11.0).collect()
    }

    /// Every layout (as is or transposed, packed or with wider rows) gives the row-major
    /// product computed by hand, through cuBLAS' column-major definition, with alpha and beta.
    #[test]
    fn every_layout_computes_the_row_major_product() {
        let (m, n, k) = (3, 5, 4);
        for (a_t, b_t, pad) in [(false, false, 0), (false, true, 0), (true, false, 0), (true, true, 0), (false, true, 3), (true, false, 2)]
        {
            // Logical A[m × k] and B[k × n].
            let (la, lb) = (filled(m * k, 1), filled(k * n, 2));
            let get_a = |i: usize, p: usize| la[i * k + p];
            let get_b = |p: usize, j: usize| lb[p * n + j];
            let mut g = RowMajor::new(m, n, k);
            // Store each as the layout says, with `pad` extra values per row.
            let (a_rows, a_cols) = if a_t { (k, m) } else { (m, k) };
            let (b_rows, b_cols) = if b_t { (n, k) } else { (k, n) };
            let (lda, ldb, ldc) = (a_cols + pad, b_cols + pad, n + pad);
            let mut sa = vec![f64::NAN; a_rows * lda];
            for r in 0..a_rows {
                for c in 0..a_cols {
                    sa[r * lda + c] = if a_t { get_a(c, r) } else { get_a(r, c) };
                }
            }
            let mut sb = vec![f64::NAN; b_rows * ldb];
            for r in 0..b_rows {
                for c in 0..b_cols {
                    sb[r * ldb + c] = if b_t { get_b(c, r) } else { get_b(r, c) };
                }
            }
            if a_t {
                g = g.a_transposed();
            }
            if b_t {
                g = g.b_transposed();
            }
            g = g.lda(lda).ldb(ldb).ldc(ldc);
            let mut c = filled(m * ldc, 3);
            let before = c.clone();
            cublas_gemm(&g.config(2.0, 0.5), &sb, &sa, &mut c);
            for i in 0..m {
                for j in 0..n {
                    let want = 2.0 * (0..k).map(|p| get_a(i, p) * get_b(p, j)).sum::<f64>() + 0.5 * before[i * ldc + j];
                    assert_eq!(c[i * ldc + j], want, "A transposed {a_t}, B transposed {b_t}, pad {pad}: C[{i}][{j}]");
                }
                // The padding of C's rows is left alone.
                assert_eq!(c[i * ldc + n..(i + 1) * ldc], before[i * ldc + n..(i + 1) * ldc]);
            }
        }
    }

    #[test]
    fn packed_layouts_and_strides_reach_cublas_swapped() {
        let g = RowMajor::rows_dot(2, 3, 4);
        let cfg = g.config(1.0f32, 0.0);
        assert_eq!((cfg.transa, cfg.transb), (CUBLAS_OP_T, CUBLAS_OP_N));
        assert_eq!((cfg.m, cfg.n, cfg.k, cfg.lda, cfg.ldb, cfg.ldc), (3, 2, 4, 4, 4, 3));
        let s = g.strided(1.0f32, 0.0, 6, [8, 12, 6]);
        assert_eq!((s.batch_size, s.stride_a, s.stride_b, s.stride_c), (6, 12, 8, 6), "cuBLAS' A is our B");
    }
}
