//! One typed launcher per kernel of `kernels.cu`: its parameters are the kernel's C signature,
//! in order and type, and its one SAFETY note says what matches what and which rows the grid
//! touches.

use std::sync::Arc;

use cudarc::driver::{CudaModule, CudaSlice, CudaStream, CudaView, CudaViewMut, LaunchConfig};
use half::f16;

use super::{Dims, GNorm, GpuModel, driver};
use crate::EncoderError;
use crate::config::Pooling;

curator_gpu::kernels! {
    /// Every kernel of `kernels.cu`, declared with its C signature (`check_signatures` holds
    /// the two together in this module's tests); the launchers below size the grids.
    pub(crate) struct Typed {
        fn embed(ids: *const i32, l: i32, vocab: i32, max_pos: i32, pos_offset: i32, word: *const f16, pos: *const f16, type0: *const f16, gamma: *const f32, beta: *const f32, eps: f32, h: i32, out: *mut f16, res: *mut f32);
        fn add_norm(x: *const f16, bias: *const f32, res: *mut f32, gamma: *const f32, beta: *const f32, eps: f32, h: i32, out: *mut f16);
        fn add_norm_warp(x: *const f16, bias: *const f32, res: *mut f32, gamma: *const f32, beta: *const f32, eps: f32, h: i32, rows: i64, out: *mut f16);
        fn split_qkv(qkv: *const f16, bias: *const f32, l: i32, h: i32, heads: i32, dh: i32, q: *mut f16, k: *mut f16, v: *mut f16);
        fn merge_heads(ctx: *const f16, l: i32, h: i32, heads: i32, dh: i32, out: *mut f16);
        fn softmax_rows(s: *mut f16, rows: i64, l: i32, heads: i32, lens: *const i32);
        fn bias_act(x: *mut f16, bias: *const f32, n: i32, act: i32);
        fn pool(x: *const f32, lens: *const i32, l: i32, h: i32, mode: i32, out: *mut f32);
        /// Fused attention for heads of 32 and 64 dimensions.
        fn attention32(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16);
        fn attention64(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16);
        /// DeBERTa: its position terms added to the scores, and the masked softmax (the split
        /// path); the fused attention with the position terms, in three variants.
        fn disentangled_softmax(s: *mut f16, c2p: *const f16, p2c: *const f16, rel_index: *const i32, rel_bias: *const f32, table_rows: i32, center: i32, lo: i32, w: i32, rows: i64, l: i32, heads: i32, lens: *const i32, use_c2p: i32, use_p2c: i32);
        fn deberta_attention32(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16, pos_key: *const f16, pos_query: *const f16, rel_index: *const i32, rows: i32, center: i32, use_c2p: i32, use_p2c: i32);
        fn deberta_attention64(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16, pos_key: *const f16, pos_query: *const f16, rel_index: *const i32, rows: i32, center: i32, use_c2p: i32, use_p2c: i32);
        fn deberta_attention32_ring(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16, pos_key: *const f16, pos_query: *const f16, rel_index: *const i32, rows: i32, center: i32, use_c2p: i32, use_p2c: i32);
        fn deberta_attention64_ring(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16, pos_key: *const f16, pos_query: *const f16, rel_index: *const i32, rows: i32, center: i32, use_c2p: i32, use_p2c: i32);
        fn deberta_attention32_shared(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16, pos_key: *const f16, pos_query: *const f16, rel_index: *const i32, rows: i32, center: i32, use_c2p: i32, use_p2c: i32);
        fn deberta_attention64_shared(qkv: *const f16, bias: *const f32, lens: *const i32, l: i32, h: i32, heads: i32, scale: f32, out: *mut f16, pos_key: *const f16, pos_query: *const f16, rel_index: *const i32, rows: i32, center: i32, use_c2p: i32, use_p2c: i32);
        /// CLIP's vision tower: embeddings + pre-norm, and the pre-norm layers' residual + norm.
        fn patch_embed(a: *const f16, table: *const f16, period: i32, gamma: *const f32, beta: *const f32, eps: f32, h: i32, x: *mut f16);
        fn residual_norm(a: *const f16, bias: *const f32, add: i32, x: *mut f16, gamma: *const f32, beta: *const f32, eps: f32, h: i32, out: *mut f16);
        fn residual_norm_warp(a: *const f16, bias: *const f32, add: i32, x: *mut f16, gamma: *const f32, beta: *const f32, eps: f32, h: i32, rows: i64, out: *mut f16);
        /// CLIP's preprocessing of decoded images: the horizontal pass, then the vertical pass
        /// into the patch rows.
        fn resize_rows(raw: *const u8, desc: *const i64, coef: *const i32, w: i32, tmp: *mut u8);
        fn resize_patches(tmp: *const u8, desc: *const i64, coef: *const i32, table: *const f32, size: i32, patch: i32, l: i32, tokens: i32, k: i32, patches: *mut f16);
    }
}

/// The compiled kernels behind launchers that size each one's grid from the shapes it is
/// given (the typed launches are [`Typed`]'s).
pub(crate) struct Kernels {
    typed: Typed,
}

/// Values per image in the preprocessing kernels' descriptors (`PREP_DESC` in kernels.cu).
pub(crate) const PREP_DESC: usize = 11;

/// Blocks per image of the preprocessing kernels (each loops over its image's values).
const PREP_BLOCKS: u32 = 48;

/// A group of images for the preprocessing kernels: [`PREP_DESC`] values per image and the
/// taps they point into (built by `vision::jpeg`).
pub(crate) struct Prep<'a> {
    pub desc: &'a CudaSlice<i64>,
    pub coef: &'a CudaSlice<i32>,
    pub images: usize,
}

/// The device side of DeBERTa's position terms for one pass (see `disentangled_softmax`).
pub(crate) struct RelTerms<'a> {
    /// The tables (views into the workspace; an absent term's is never read).
    pub(super) c2p: CudaView<'a, f16>,
    pub(super) p2c: CudaView<'a, f16>,
    pub(super) use_c2p: bool,
    pub(super) use_p2c: bool,
    pub(super) rel_index: &'a CudaSlice<i32>,
    /// The layer's `rel_bias` (`[heads, rows]`) and its rows per head.
    pub(super) rel_bias: &'a CudaSlice<f32>,
    pub(super) rows: usize,
    /// The window of table rows the pass's distances reach: `[lo, lo + width)`.
    pub(super) lo: usize,
    pub(super) width: usize,
}

/// What the fused attention needs of a layer's DeBERTa position terms: its projected relative
/// embeddings (`[heads, rows, head_dim]`, one per term the model has) and each distance's row.
pub(crate) struct RelEmbeddings<'a> {
    pub(super) pos_key: Option<&'a CudaSlice<f16>>,
    pub(super) pos_query: Option<&'a CudaSlice<f16>>,
    pub(super) rel_index: &'a CudaSlice<i32>,
    pub(super) rows: usize,
}

/// Threads per block of the row kernels.
const THREADS: u32 = 256;

/// Which of DeBERTa's fused attention kernels runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DebertaKernel {
    /// Each step of 16 keys makes both position terms for its 32 distances.
    Default,
    /// `_ring`: the content → position products made once per distance and kept from step to
    /// step (half of them).
    Ring,
    /// `_shared`: that, and the position → content products made once per block for its four
    /// warps (80 distances where the warps made 128).
    Shared,
}

impl DebertaKernel {
    /// `CURATOR_ENCODER_DEBERTA_KERNEL`'s value: unset or empty, `ring`, `shared`.
    pub(crate) fn parse(value: Option<&str>) -> Result<DebertaKernel, String> {
        match value.unwrap_or("") {
            "" | "default" => Ok(DebertaKernel::Default),
            "ring" => Ok(DebertaKernel::Ring),
            "shared" => Ok(DebertaKernel::Shared),
            other => Err(format!("CURATOR_ENCODER_DEBERTA_KERNEL={other}: expected default, ring or shared")),
        }
    }
}

/// The kernel `CURATOR_ENCODER_DEBERTA_KERNEL` picks (read once; a value it does not know is
/// said on stderr once and the default runs). The two variants are checked on CI by
/// `tests/kernel_emulation.rs`; neither is the default until a GPU machine has timed them
/// against it (`gpu-deberta.sh variants`).
fn deberta_kernel() -> DebertaKernel {
    static KERNEL: std::sync::OnceLock<DebertaKernel> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
        let value = std::env::var("CURATOR_ENCODER_DEBERTA_KERNEL").ok();
        DebertaKernel::parse(value.as_deref()).unwrap_or_else(|e| {
            eprintln!("{e}; the default kernel runs");
            DebertaKernel::Default
        })
    })
}

/// One block per row, `floats` floats of shared memory (the row kernels' layout).
fn rows_cfg(rows: usize, floats: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: (floats * 4) as u32 }
}

impl Kernels {
    /// Every kernel of the compiled module.
    pub(crate) fn load(module: &Arc<CudaModule>) -> Result<Kernels, EncoderError> {
        let typed = Typed::load(module).map_err(|(name, e)| driver("kernel")(format!("{name}: {e:?}")))?;
        Ok(Kernels { typed })
    }

    /// `resize_rows(raw, desc, coef, W, tmp)` for a group of images.
    pub(crate) fn resize_rows(
        &self,
        s: &Arc<CudaStream>,
        raw: &CudaSlice<u8>,
        p: &Prep<'_>,
        w: usize,
        tmp: &mut CudaSlice<u8>,
    ) -> Result<(), EncoderError> {
        let (desc, coef, images) = (p.desc, p.coef, p.images);
        debug_assert!(desc.len() >= images * PREP_DESC);
        let w = w as i32;
        let cfg = LaunchConfig { grid_dim: (PREP_BLOCKS, images as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: image y reads its descriptor's rows of
        // raw (offset + (row_lo + rows) × pitch ≤ raw's length, column indices clamped below its
        // width), W + W·k taps at its coef offset, and writes rows × W × 3 bytes at its tmp
        // offset: `vision::jpeg` sizes the buffers from the same descriptors.
        unsafe { self.typed.resize_rows(s, cfg, raw, desc, coef, w, tmp) }.map_err(driver("resize_rows"))
    }

    /// `resize_patches(tmp, desc, coef, table, S, P, L, tokens, K, patches)` for a group of images.
    pub(crate) fn resize_patches(
        &self,
        s: &Arc<CudaStream>,
        tmp: &CudaSlice<u8>,
        p: &Prep<'_>,
        table: &CudaSlice<f32>,
        (size, patch, l, tokens, k): (usize, usize, usize, usize, usize),
        patches: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (desc, coef, images) = (p.desc, p.coef, p.images);
        debug_assert!(desc.len() >= images * PREP_DESC && table.len() == 3 * 256 && tokens <= l);
        let (size, patch, l, tokens, k) = (size as i32, patch as i32, l as i32, tokens as i32, k as i32);
        let cfg = LaunchConfig { grid_dim: (PREP_BLOCKS, images as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: image y reads its rows × S × 3 bytes of tmp (row indices clamped below its
        // rows), S + S·k taps at its coef offset, table's 768 values, and writes the L × K values
        // of its slot, slot < the pass's images ≤ patches' length / (L·K).
        unsafe { self.typed.resize_patches(s, cfg, tmp, desc, coef, table, size, patch, l, tokens, k, patches) }
            .map_err(driver("resize_patches"))
    }

    /// `patch_embed(a, table, period, gamma, beta, eps, H, x)` over `t` rows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch_embed(
        &self,
        s: &Arc<CudaStream>,
        a: &CudaSlice<f16>,
        table: &CudaSlice<f16>,
        period: usize,
        norm: &GNorm,
        t: usize,
        d: &Dims,
        x: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (p, h) = (period as i32, d.hidden as i32);
        debug_assert!(a.len() >= t * d.hidden && x.len() >= t * d.hidden && table.len() >= period * d.hidden && period > 0);
        // SAFETY: block r < t reads row r of a, row r % period of table (period × H values) and
        // writes row r of x, all inside their buffers.
        unsafe { self.typed.patch_embed(s, rows_cfg(t, d.hidden), a, table, p, &norm.gamma, &norm.beta, d.eps, h, x) }
            .map_err(driver("patch_embed"))
    }

    /// `residual_norm(a, bias, add, x, gamma, beta, eps, H, out)` over `t` rows: with `add`,
    /// `x += a + bias`; then `out = LayerNorm(x)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn residual_norm(
        &self,
        s: &Arc<CudaStream>,
        a: &CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        add: bool,
        x: &mut CudaSlice<f16>,
        norm: &GNorm,
        t: usize,
        d: &Dims,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (add, h) = (i32::from(add), d.hidden as i32);
        debug_assert!(a.len() >= t * d.hidden && x.len() >= t * d.hidden && out.len() >= t * d.hidden && bias.len() == d.hidden);
        if d.hidden <= 1024 && d.hidden.is_multiple_of(2) {
            let rows = t as i64;
            let cfg = LaunchConfig { grid_dim: (t.div_ceil(8) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: warp r < rows reads row r of a and x (H ≤
            // 1024 even values, 32-bit aligned), writes row r of x and of out.
            return unsafe { self.typed.residual_norm_warp(s, cfg, a, bias, add, x, &norm.gamma, &norm.beta, d.eps, h, rows, out) }
                .map_err(driver("residual_norm"));
        }
        // SAFETY: block r < t reads row r of a and x, writes row r of x and of
        // out (distinct buffers: Rust's borrows), H values each, inside the t × H buffers.
        unsafe { self.typed.residual_norm(s, rows_cfg(t, d.hidden), a, bias, add, x, &norm.gamma, &norm.beta, d.eps, h, out) }
            .map_err(driver("residual_norm"))
    }

    /// `attention32` / `attention64(qkv, bias, lens, L, H, heads, scale, out)`, and with
    /// DeBERTa's position terms (`rel`) `deberta_attention32` / `deberta_attention64(…, pos_key,
    /// pos_query, rel_index, rows, center, use_c2p, use_p2c)`: a block of four warps per 64
    /// queries of one (sequence, head).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attention(
        &self,
        s: &Arc<CudaStream>,
        qkv: &CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        d: &Dims,
        rel: Option<&RelEmbeddings>,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (l_i, h_i, heads_i) = (l as i32, d.hidden as i32, d.heads as i32);
        let scale = 1.0 / d.rel.map_or((d.head_dim as f32).sqrt(), |r| r.scale);
        debug_assert!(qkv.len() >= b * l * 3 * d.hidden && out.len() >= b * l * d.hidden && bias.len() == 3 * d.hidden);
        debug_assert!(lens.len() == b && l.is_multiple_of(8) && d.hidden.is_multiple_of(2) && b <= 65_535);
        let cfg = LaunchConfig { grid_dim: (l.div_ceil(64) as u32, d.heads as u32, b as u32), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
        let k = &self.typed;
        let Some(r) = rel else {
            // SAFETY: the C parameters of the variant matching the head size and `rel`, in order
            // and type (unsigned short* qkv, float* bias, int* lens, int L, int H, int heads, float
            // scale, unsigned short* out; then for DeBERTa unsigned short* pos_key, pos_query, int*
            // rel_index, int rows, int center, int use_c2p, int use_p2c); block (x, head, seq) reads
            // rows of sequence `seq` only (b × L rows of 3H) and only below L, and writes its
            // queries' rows (below L) of `out` (b × L × H); lens holds b lengths ≤ L. Every 32-bit
            // access is at an even element offset (H, L and the head size are even). DeBERTa: each
            // distance is clamped to ±(L - 1) before it indexes rel_index (2 · center + 1 entries,
            // center ≥ L - 1), whose rows are below `rows`; pos_key and pos_query hold heads × rows
            // × head_dim values (an absent one is never read).
            let launched = match d.head_dim {
                // SAFETY: as said above.
                32 => unsafe { k.attention32(s, cfg, qkv, bias, lens, l_i, h_i, heads_i, scale, out) },
                // SAFETY: as said above.
                64 => unsafe { k.attention64(s, cfg, qkv, bias, lens, l_i, h_i, heads_i, scale, out) },
                other => return Err(EncoderError::Gpu(format!("no fused attention for heads of {other}"))),
            };
            return launched.map_err(driver("attention"));
        };
        let center = (r.rel_index.len() / 2) as i32;
        let rows_i = r.rows as i32;
        let (use_c2p, use_p2c) = (i32::from(r.pos_key.is_some()), i32::from(r.pos_query.is_some()));
        debug_assert!(l <= center as usize + 1);
        let some = r.pos_key.or(r.pos_query).ok_or_else(|| EncoderError::Gpu("DeBERTa attention without position terms".into()))?;
        debug_assert!([r.pos_key, r.pos_query].iter().flatten().all(|p| p.len() == d.heads * r.rows * d.head_dim));
        // An absent term's pointer is never read (its flag is 0): the other one stands in.
        let (pos_key, pos_query) = (r.pos_key.unwrap_or(some), r.pos_query.unwrap_or(some));
        macro_rules! deberta {
            ($kernel:ident) => {
                // SAFETY: as said above, for the DeBERTa variants.
                unsafe {
                    k.$kernel(
                        s,
                        cfg,
                        qkv,
                        bias,
                        lens,
                        l_i,
                        h_i,
                        heads_i,
                        scale,
                        out,
                        pos_key,
                        pos_query,
                        r.rel_index,
                        rows_i,
                        center,
                        use_c2p,
                        use_p2c,
                    )
                }
            };
        }
        let launched = match (d.head_dim, deberta_kernel()) {
            (32, DebertaKernel::Default) => deberta!(deberta_attention32),
            (64, DebertaKernel::Default) => deberta!(deberta_attention64),
            (32, DebertaKernel::Ring) => deberta!(deberta_attention32_ring),
            (64, DebertaKernel::Ring) => deberta!(deberta_attention64_ring),
            (32, DebertaKernel::Shared) => deberta!(deberta_attention32_shared),
            (64, DebertaKernel::Shared) => deberta!(deberta_attention64_shared),
            (other, _) => return Err(EncoderError::Gpu(format!("no fused attention for heads of {other}"))),
        };
        launched.map_err(driver("attention"))
    }

    /// `embed(ids, L, vocab, max_pos, pos_offset, word, pos, type0, gamma, beta, eps, H, out, res)`:
    /// one block per token of the pass (`ids.len()` of them).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn embed(
        &self,
        s: &Arc<CudaStream>,
        ids: &CudaView<i32>,
        l: usize,
        d: &Dims,
        m: &GpuModel,
        out: &mut CudaSlice<f16>,
        res: &mut CudaSlice<f32>,
    ) -> Result<(), EncoderError> {
        let (l, vocab, max_pos, off, h) = (l as i32, d.vocab as i32, d.max_pos as i32, d.pos_offset as i32, d.hidden as i32);
        debug_assert!(out.len() >= ids.len() * d.hidden && res.len() >= ids.len() * d.hidden);
        let (norm, cfg) = (&m.embed_norm, rows_cfg(ids.len(), d.hidden));
        // SAFETY: the kernel clamps
        // ids to the vocabulary and positions to the table, and writes ids.len() rows of H into
        // `out` and `res`.
        unsafe {
            self.typed.embed(
                s,
                cfg,
                ids,
                l,
                vocab,
                max_pos,
                off,
                &m.word,
                &m.position,
                &m.token_type,
                &norm.gamma,
                &norm.beta,
                d.eps,
                h,
                out,
                res,
            )
        }
        .map_err(driver("embed"))
    }

    /// `add_norm(x, bias, res, gamma, beta, eps, H, out)` over `t` rows: `res` (the f32
    /// residual stream) becomes LayerNorm(x + bias + res), and `out` the same in fp16.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_norm(
        &self,
        s: &Arc<CudaStream>,
        x: &CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        res: &mut CudaSlice<f32>,
        norm: &GNorm,
        t: usize,
        d: &Dims,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let h = d.hidden as i32;
        debug_assert!(x.len() >= t * d.hidden && res.len() >= t * d.hidden && out.len() >= t * d.hidden && bias.len() == d.hidden);
        if d.hidden <= 1024 && d.hidden.is_multiple_of(2) {
            let rows = t as i64;
            let cfg = LaunchConfig { grid_dim: (t.div_ceil(8) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: warp r < rows reads row r of x and res (H ≤ 1024 even
            // values, 32- and 64-bit aligned) into registers before writing row r of res and out.
            return unsafe { self.typed.add_norm_warp(s, cfg, x, bias, res, &norm.gamma, &norm.beta, d.eps, h, rows, out) }
                .map_err(driver("add_norm"));
        }
        // SAFETY: t blocks each read one row of H into shared memory, then write it to res and out,
        // inside the t × H buffers.
        unsafe { self.typed.add_norm(s, rows_cfg(t, d.hidden), x, bias, res, &norm.gamma, &norm.beta, d.eps, h, out) }
            .map_err(driver("add_norm"))
    }

    /// `split_qkv(qkv, bias, L, H, heads, dh, q, k, v)`: one block per token of `t`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn split_qkv(
        &self,
        s: &Arc<CudaStream>,
        qkv: &CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        t: usize,
        l: usize,
        d: &Dims,
        q: &mut CudaSlice<f16>,
        k: &mut CudaSlice<f16>,
        v: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (l, h, heads, dh) = (l as i32, d.hidden as i32, d.heads as i32, d.head_dim as i32);
        debug_assert!(qkv.len() >= t * 3 * d.hidden && q.len() >= t * d.hidden && k.len() >= t * d.hidden && v.len() >= t * d.hidden);
        // SAFETY: block r reads row r
        // of the t × 3H product and writes its 3H values inside the three t × H buffers.
        unsafe { self.typed.split_qkv(s, rows_cfg(t, 0), qkv, bias, l, h, heads, dh, q, k, v) }.map_err(driver("split_qkv"))
    }

    /// `merge_heads(ctx, L, H, heads, dh, out)`: one block per token of `t`.
    pub(super) fn merge_heads(
        &self,
        s: &Arc<CudaStream>,
        ctx: &CudaSlice<f16>,
        t: usize,
        l: usize,
        d: &Dims,
        out: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        let (l, h, heads, dh) = (l as i32, d.hidden as i32, d.heads as i32, d.head_dim as i32);
        debug_assert!(ctx.len() >= t * d.hidden && out.len() >= t * d.hidden);
        // SAFETY: block r writes row r of `out` from
        // the same token's values in ctx, both t × H.
        unsafe { self.typed.merge_heads(s, rows_cfg(t, 0), ctx, l, h, heads, dh, out) }.map_err(driver("merge_heads"))
    }

    /// `softmax_rows(s, rows, L, heads, lens)`: one warp per row of `L` scores.
    /// `disentangled_softmax(s, c2p, p2c, rel_index, center, lo, W, rows, L, heads, lens,
    /// use_c2p, use_p2c)`: one warp per row of scores.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn disentangled_softmax(
        &self,
        s: &Arc<CudaStream>,
        scores: &mut CudaSlice<f16>,
        rel: &RelTerms,
        rows: usize,
        l: usize,
        heads: usize,
        lens: &CudaView<i32>,
    ) -> Result<(), EncoderError> {
        let center = (rel.rel_index.len() / 2) as i32;
        let (lo_i, w_i, rows_i, l_i, heads_i) = (rel.lo as i32, rel.width as i32, rows as i64, l as i32, heads as i32);
        let (use_c2p, use_p2c) = (i32::from(rel.use_c2p), i32::from(rel.use_p2c));
        debug_assert!(scores.len() >= rows * l && lens.len() * heads * l == rows && l <= center as usize + 1);
        debug_assert!((!rel.use_c2p || rel.c2p.len() >= rows * rel.width) && (!rel.use_p2c || rel.p2c.len() >= rows * rel.width));
        let table_rows = rel.rows as i32;
        let warps = 8u32;
        let cfg = LaunchConfig {
            grid_dim: ((rows as u64).div_ceil(warps as u64) as u32, 1, 1),
            block_dim: (warps * 32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: warps past `rows` return; each row is L scores inside the buffer; a present table holds rows × W
        // values, read at columns rel_index[i - j + center] - lo for i, j < L, which lie in
        // [0, W) (the host's window); rel_bias holds heads × table_rows values, read at
        // rel_index[…] < table_rows; rel_index holds 2 × center + 1 entries and i - j + center
        // lies in it (L ≤ center + 1); an absent table is never read.
        unsafe {
            self.typed.disentangled_softmax(
                s,
                cfg,
                scores,
                &rel.c2p,
                &rel.p2c,
                rel.rel_index,
                rel.rel_bias,
                table_rows,
                center,
                lo_i,
                w_i,
                rows_i,
                l_i,
                heads_i,
                lens,
                use_c2p,
                use_p2c,
            )
        }
        .map_err(driver("disentangled softmax"))
    }

    pub(super) fn softmax_rows(
        &self,
        s: &Arc<CudaStream>,
        scores: &mut CudaSlice<f16>,
        rows: usize,
        l: usize,
        heads: usize,
        lens: &CudaView<i32>,
    ) -> Result<(), EncoderError> {
        let (rows_i, l_i, heads_i) = (rows as i64, l as i32, heads as i32);
        debug_assert!(scores.len() >= rows * l && lens.len() * heads * l == rows);
        let warps = 8u32;
        let cfg = LaunchConfig {
            grid_dim: ((rows as u64).div_ceil(warps as u64) as u32, 1, 1),
            block_dim: (warps * 32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: warps past `rows` return, each row is L
        // values inside the scores buffer, and lens holds one length per sequence (rows /
        // (heads × L) of them).
        unsafe { self.typed.softmax_rows(s, cfg, scores, rows_i, l_i, heads_i, lens) }.map_err(driver("softmax"))
    }

    /// `bias_act(x, bias, N, act)` over `rows` rows of `n` values.
    pub(crate) fn bias_act(
        &self,
        s: &Arc<CudaStream>,
        x: &mut CudaSlice<f16>,
        bias: &CudaSlice<f32>,
        rows: usize,
        n: usize,
        act: i32,
    ) -> Result<(), EncoderError> {
        let n_i = n as i32;
        debug_assert!(x.len() >= rows * n && bias.len() == n);
        // SAFETY: block r updates row r of x (N values) in place, inside rows × N.
        unsafe { self.typed.bias_act(s, rows_cfg(rows, 0), x, bias, n_i, act) }.map_err(driver("bias_act"))
    }

    /// `pool(x, lens, L, H, mode, out)` over the f32 residual stream: one block per sequence.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pool(
        &self,
        s: &Arc<CudaStream>,
        x: &CudaSlice<f32>,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        h: usize,
        pooling: Pooling,
        out: &mut CudaViewMut<f32>,
    ) -> Result<(), EncoderError> {
        let (l_i, h_i, mode) = (l as i32, h as i32, i32::from(pooling == Pooling::Cls));
        debug_assert!(x.len() >= b * l * h && lens.len() == b && out.len() == b * h);
        let cfg = LaunchConfig { grid_dim: (b as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: block i reads sequence i's first lens[i] ≤ L rows
        // of H and writes row i of `out` (b × H).
        unsafe { self.typed.pool(s, cfg, x, lens, l_i, h_i, mode, out) }.map_err(driver("pool"))
    }
}

#[cfg(test)]
mod tests {
    use super::{DebertaKernel, Typed};

    #[test]
    fn the_declared_kernels_match_kernels_cu() {
        curator_gpu::check_signatures(include_str!("kernels.cu"), Typed::SIGNATURES).unwrap();
    }

    #[test]
    fn the_deberta_kernel_is_named_by_its_variable() {
        assert_eq!(DebertaKernel::parse(None), Ok(DebertaKernel::Default));
        assert_eq!(DebertaKernel::parse(Some("")), Ok(DebertaKernel::Default));
        assert_eq!(DebertaKernel::parse(Some("ring")), Ok(DebertaKernel::Ring));
        assert_eq!(DebertaKernel::parse(Some("shared")), Ok(DebertaKernel::Shared));
        assert!(DebertaKernel::parse(Some("Ring")).unwrap_err().contains("expected default, ring or shared"));
    }
}
