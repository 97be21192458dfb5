//! The GPU back-end: the encoder in fp16 (f32 accumulation, f32 layer norms and softmax, the
//! post-norm layers' residual stream in f32 as PyTorch's autocast keeps it).
//!
//! Everything CUDA is loaded at run time through cudarc (the driver, cuBLAS, NVRTC), so this
//! builds with no CUDA toolkit and [`GpuModel::new`] answers [`EncoderError::NoGpu`] where
//! there is no driver. Matrix products go to cuBLAS (`GemmEx`, fp16 in and out, f32 compute);
//! the rest is seven small kernels compiled by NVRTC for the device's architecture (no
//! headers: fp16 conversions are inline PTX) and cached on disk per (source, NVRTC version,
//! architecture), so a second worker or run loads them instead of compiling.
//!
//! One forward pass runs a batch of `B` sequences padded to the batch's longest `L` (the
//! batcher sorts by length, so padding is small): embeddings + layer norm; per layer one QKV
//! product, attention as two strided-batched products around a masked softmax, the output
//! product + bias + residual + layer norm, the feed-forward pair with the activation fused
//! into the bias add; then pooling on the device. [`GpuModel::pooled_batches`] queues a
//! whole group of passes on the stream (ids uploaded once, activations in a reused
//! workspace, every pass pooling into one output buffer) and copies the vectors back once, so
//! the device never waits for the host between passes.
//!
//! Memory is checked before anything is allocated: weights + the group's workspace and
//! buffers + [`CONTEXT_BYTES`] must fit the stage's budget, else the group is refused as out
//! of memory (the caller halves its passes), so the worker never grows past `gpu_memory_gb`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cudarc::cublas::{Gemm, StridedBatchedConfig};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr};
use cudarc::nvrtc::Ptx;
use curator_gpu::RowMajor;
use half::f16;

use crate::EncoderError;
use crate::config::{Activation, Arch, ModelConfig, Pooling};
use crate::weights::{Elem, Norm, Weights};

pub(crate) mod device;
pub(crate) mod launch;

pub(crate) use device::cuda_missing;
/// The fused attention's layout of relative embeddings, public for the emulated kernels' test
/// (`tests/kernel_emulation.rs` hands it to the kernels as the device gets it).
pub use device::fragment_order;
use device::{GpuDevice, upload_half, upload_layer, upload_norm};

/// What a CUDA context, cuBLAS' workspace and the kernels' modules take on the device besides
/// weights and activations (measured on an H100 with CUDA 13: see the issue note).
pub const CONTEXT_BYTES: u64 = 600 << 20;

/// `Err` (out of memory) when a model's weights (`whose`: "model's", "tower's") and CUDA's
/// context do not fit the stage's GPU memory budget.
pub(crate) fn weights_fit(whose: &str, weight_bytes: u64, budget: Option<u64>) -> Result<(), EncoderError> {
    match budget {
        Some(b) if weight_bytes + CONTEXT_BYTES > b => Err(EncoderError::OutOfMemory(format!(
            "the {whose} weights ({} MiB) and CUDA's context ({} MiB) do not fit the stage's GPU memory budget ({} MiB)",
            weight_bytes >> 20,
            CONTEXT_BYTES >> 20,
            b >> 20
        ))),
        _ => Ok(()),
    }
}

/// cuBLAS' workspace (part of [`CONTEXT_BYTES`]).
pub(crate) const BLAS_WORKSPACE: usize = 32 << 20;

const KERNELS: &str = include_str!("kernels.cu");

pub(crate) struct GLinear {
    pub(crate) w: CudaSlice<f16>,
    pub(crate) b: CudaSlice<f32>,
    pub(crate) out: usize,
    pub(crate) inp: usize,
}

pub(crate) struct GNorm {
    pub(crate) gamma: CudaSlice<f32>,
    pub(crate) beta: CudaSlice<f32>,
}

pub(crate) struct GLayer {
    pub(crate) qkv: GLinear,
    /// DeBERTa: the layer's projected relative embeddings as `[heads, 2 × span, head_dim]`
    /// (content→position keys, position→content queries), when the model has the term.
    pub(crate) pos_key: Option<CudaSlice<f16>>,
    pub(crate) pos_query: Option<CudaSlice<f16>>,
    /// The same in the fused attention's fragment order ([`device::fragment_order`]).
    pub(crate) pos_key_frag: Option<CudaSlice<f16>>,
    pub(crate) pos_query_frag: Option<CudaSlice<f16>>,
    /// DeBERTa: what the query and key biases add to a score's position terms, per head and
    /// table row: `[heads, 2 × span]` ([`device::rel_bias`]; one zero for other models).
    pub(crate) rel_bias: CudaSlice<f32>,
    pub(crate) attn_out: GLinear,
    pub(crate) attn_norm: GNorm,
    pub(crate) up: GLinear,
    pub(crate) down: GLinear,
    pub(crate) out_norm: GNorm,
}

/// The device buffers of one forward pass, sized for the largest pass so far and reused:
/// nothing is allocated or zeroed per batch.
pub(crate) struct Workspace {
    pub(crate) tokens: usize,
    pub(crate) scores_len: usize,
    /// The hidden states in fp16 (the products' input) and, in `res`, in f32: the residual
    /// stream of the post-norm layers, which the layer norms read and write.
    pub(crate) x: CudaSlice<f16>,
    pub(crate) res: CudaSlice<f32>,
    pub(crate) qkv: CudaSlice<f16>,
    pub(crate) q: CudaSlice<f16>,
    pub(crate) k: CudaSlice<f16>,
    pub(crate) v: CudaSlice<f16>,
    pub(crate) ctx: CudaSlice<f16>,
    pub(crate) merged: CudaSlice<f16>,
    pub(crate) a: CudaSlice<f16>,
    pub(crate) inter: CudaSlice<f16>,
    pub(crate) scores: CudaSlice<f16>,
    /// DeBERTa: a pass's position-term tables (c2p then p2c, each `[B·heads·L, width]`,
    /// `rel_len` values in all).
    pub(crate) rel_len: usize,
    pub(crate) rel: CudaSlice<f16>,
}

/// Device bytes of a workspace for `tokens` tokens, `scores` attention scores (0: fused
/// attention, without the q, k, v and context buffers) and `rel` position-term values.
pub(crate) fn workspace_bytes(hidden: usize, inter: usize, tokens: usize, scores: usize, rel: usize) -> u64 {
    // In fp16 values: x, qkv (3), merged, a, the f32 residual (2), inter; the split path adds
    // q, k, v and ctx.
    let per_token = if scores > 0 { 12 * hidden + inter } else { 8 * hidden + inter };
    2 * (tokens as u64 * per_token as u64 + scores as u64 + rel as u64)
}

/// DeBERTa's position terms on the device: table rows per token and head (2 × span), how many
/// terms (c2p, p2c), the divisor of every score and each distance's table row.
#[derive(Clone, Copy)]
pub(crate) struct RelDims {
    rows: usize,
    c2p: bool,
    p2c: bool,
    scale: f32,
}

impl RelDims {
    fn of(config: &ModelConfig) -> Option<RelDims> {
        match &config.arch {
            Arch::Bert => None,
            Arch::Deberta(d) => Some(RelDims { rows: 2 * d.span, c2p: d.c2p, p2c: d.p2c, scale: d.scale(config.head_dim()) }),
        }
    }

    fn terms(&self) -> usize {
        usize::from(self.c2p) + usize::from(self.p2c)
    }
}

/// The attention buffers of a pass of `b` sequences of `l` tokens: (scores, position-term
/// values). The fused kernel needs neither (it makes DeBERTa's position terms itself); the
/// split path needs both.
fn attention_buffers(head_dim: usize, heads: usize, rel: Option<RelDims>, b: usize, l: usize) -> (usize, usize) {
    if fused_attention(head_dim, b) {
        return (0, 0);
    }
    (b * heads * l * l, rel.map_or(0, |r| r.terms() * b * heads * l * r.rows))
}

impl Workspace {
    /// Buffers for passes of `tokens` tokens; the split-attention buffers (q, k, v, ctx and
    /// `scores_len` scores) only when the fused kernel does not fit the model (`scores_len` 0).
    pub(crate) fn new(
        stream: &Arc<CudaStream>,
        d: &Dims,
        tokens: usize,
        scores_len: usize,
        rel_len: usize,
    ) -> Result<Workspace, EncoderError> {
        // SAFETY: every buffer is written by a kernel or a product before it is read, within
        // the `tokens` (or `scores_len`) elements a pass uses; nothing reads past them.
        let alloc = |n: usize| unsafe { stream.alloc::<f16>(n.max(1)) }.map_err(driver("allocate activations"));
        let (h, i) = (d.hidden, d.inter);
        Ok(Workspace {
            tokens,
            scores_len,
            rel_len,
            rel: alloc(rel_len)?,
            x: alloc(tokens * h)?,
            // SAFETY: as above; `embed` writes every row a pass reads.
            res: unsafe { stream.alloc::<f32>((tokens * h).max(1)) }.map_err(driver("allocate activations"))?,
            qkv: alloc(tokens * 3 * h)?,
            q: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            k: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            v: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            ctx: alloc(if scores_len > 0 { tokens * h } else { 0 })?,
            merged: alloc(tokens * h)?,
            a: alloc(tokens * h)?,
            inter: alloc(tokens * i)?,
            scores: alloc(scores_len)?,
        })
    }
}

/// A model's weights on the GPU and what runs them.
pub struct GpuModel {
    dev: GpuDevice,
    word: CudaSlice<f16>,
    position: CudaSlice<f16>,
    token_type: CudaSlice<f16>,
    embed_norm: GNorm,
    /// DeBERTa: each relative distance's table row, `rel_index[i - j + center]`, on the
    /// device and here (a pass's window of rows is read from it).
    rel_index: CudaSlice<i32>,
    rel_index_host: Vec<i32>,
    layers: Vec<GLayer>,
    dims: Dims,
    weight_bytes: u64,
    budget: Option<u64>,
    workspace: Mutex<Option<Workspace>>,
}

use device::Marks;

#[derive(Clone, Copy)]
pub(crate) struct Dims {
    pub(crate) hidden: usize,
    pub(crate) inter: usize,
    pub(crate) heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) vocab: usize,
    pub(crate) max_pos: usize,
    pub(crate) pos_offset: usize,
    pub(crate) eps: f32,
    pub(crate) act: i32,
    pub(crate) rel: Option<RelDims>,
}

/// The `act` code of the `bias_act` kernel for an activation.
pub(crate) fn activation_code(a: Activation) -> i32 {
    match a {
        Activation::Gelu => 0,
        Activation::GeluTanh => 1,
        Activation::Relu => 2,
        Activation::QuickGelu => 3,
    }
}

pub(crate) fn driver<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> EncoderError {
    move |err| {
        let text = format!("{err:?}");
        if text.contains("OUT_OF_MEMORY") || text.contains("ALLOC_FAILED") {
            EncoderError::OutOfMemory(format!("{what}: {text}"))
        } else {
            EncoderError::Gpu(format!("{what}: {text}"))
        }
    }
}

/// Device bytes one forward pass of `batch` sequences padded to `len` tokens needs
/// (activations, scores, its ids, lengths and pooled vectors).
pub fn activation_bytes(config: &ModelConfig, batch: usize, len: usize) -> u64 {
    let (hidden, heads) = (config.hidden_size, config.num_heads);
    let (scores, rel) = attention_buffers(config.head_dim(), heads, RelDims::of(config), batch, len);
    workspace_bytes(hidden, config.intermediate_size, batch * len, scores, rel) + io_bytes(hidden, batch, batch * len)
}

/// Whether a pass of `batch` sequences with heads of `head_dim` runs the fused attention
/// kernel (heads of 32 or 64; at most 65,535 sequences, the grid's z limit).
fn fused_attention(head_dim: usize, batch: usize) -> bool {
    // `CURATOR_ENCODER_SPLIT_ATTENTION` forces the split path (to compare the two); read once.
    static SPLIT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    matches!(head_dim, 32 | 64) && batch <= 65_535 && !*SPLIT.get_or_init(|| std::env::var_os("CURATOR_ENCODER_SPLIT_ATTENTION").is_some())
}

/// Device bytes of a group's ids, lengths and pooled vectors.
fn io_bytes(hidden: usize, seqs: usize, tokens: usize) -> u64 {
    4 * tokens as u64 + seqs as u64 * (4 + 4 * hidden as u64)
}

/// The kernels' PTX for this device: from `cache` when an earlier process compiled it for
/// the same source, NVRTC and architecture, else compiled by NVRTC (and written there).
pub(crate) fn kernels_ptx(cache: Option<&Path>, arch: (i32, i32)) -> Result<(Ptx, &'static str), EncoderError> {
    let (ptx, from) = curator_gpu::ptx("encoder", KERNELS, "embed", Some(arch), cache).map_err(EncoderError::Gpu)?;
    Ok((ptx, from.as_str()))
}

/// Open GPU 0 and load the kernels ([`GpuDevice::open`]); a panic in a CUDA library is
/// [`EncoderError::NoGpu`].
pub(crate) fn open_device(kernel_cache: Option<&Path>) -> Result<GpuDevice, EncoderError> {
    match std::panic::catch_unwind(|| GpuDevice::open(kernel_cache)) {
        Ok(r) => r,
        Err(_) => Err(EncoderError::NoGpu("CUDA set-up panicked (a CUDA library is missing)".into())),
    }
}

impl GpuModel {
    /// Open GPU 0 (the worker's `CUDA_VISIBLE_DEVICES` picks the card), load the kernels
    /// (from `kernel_cache` when present) and upload the weights in fp16. `budget`: the bytes
    /// this model may use in all.
    pub fn new<M: Elem>(
        config: &ModelConfig,
        w: &Weights<M>,
        budget: Option<u64>,
        kernel_cache: Option<&Path>,
    ) -> Result<GpuModel, EncoderError> {
        GpuModel::on_device(open_device(kernel_cache), config, w, budget)
    }

    /// The model's weights uploaded to `dev` (from [`open_device`], which may run on another
    /// thread while the model's files are read).
    pub(crate) fn on_device<M: Elem>(
        dev: Result<GpuDevice, EncoderError>,
        config: &ModelConfig,
        w: &Weights<M>,
        budget: Option<u64>,
    ) -> Result<GpuModel, EncoderError> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| GpuModel::upload(dev?, config, w, budget))) {
            Ok(r) => r,
            Err(_) => Err(EncoderError::NoGpu("CUDA set-up panicked (a CUDA library is missing)".into())),
        }
    }

    fn upload<M: Elem>(dev: GpuDevice, config: &ModelConfig, w: &Weights<M>, budget: Option<u64>) -> Result<GpuModel, EncoderError> {
        let stream = dev.stream.clone();
        let weight_bytes = w.gpu_bytes() as u64;
        weights_fit("model's", weight_bytes, budget)?;
        let norm = |n: &Norm| upload_norm(&stream, n);
        let rel_scale = RelDims::of(config).map_or(1.0, |r| r.scale);
        let layers = w.layers.iter().map(|l| upload_layer(&stream, l, config.num_heads, rel_scale)).collect::<Result<Vec<_>, _>>()?;
        let h = config.hidden_size;
        let dims = Dims {
            hidden: h,
            inter: config.intermediate_size,
            heads: config.num_heads,
            head_dim: config.head_dim(),
            vocab: config.vocab_size,
            max_pos: if w.position.is_empty() { 1 } else { config.max_positions },
            pos_offset: config.position_offset(),
            eps: config.layer_norm_eps,
            act: activation_code(config.activation),
            rel: RelDims::of(config),
        };
        // Each relative distance i - j (|i - j| < the longest sequence) to its table row.
        let rel_index: Vec<i32> = match &config.arch {
            Arch::Deberta(dis) => {
                // Past the longest sequence with room to spare (batches pad to a multiple of 8).
                dis.rows_by_distance(config.max_tokens() + 63).into_iter().map(|r| r as i32).collect()
            }
            Arch::Bert => vec![0],
        };
        // A model without absolute positions or token types adds a row of zeros (max_pos 1).
        let zeros = vec![f16::ZERO; h];
        let table = |t: &[M]| if t.is_empty() { upload_half(&stream, &zeros) } else { upload_half(&stream, t) };
        Ok(GpuModel {
            word: upload_half(&stream, &w.word)?,
            position: table(&w.position)?,
            token_type: table(w.token_type.get(..h).unwrap_or(&[]))?,
            embed_norm: norm(&w.embed_norm)?,
            rel_index: stream.clone_htod(&rel_index).map_err(driver("upload relative positions"))?,
            rel_index_host: rel_index,
            layers,
            dev,
            dims,
            weight_bytes,
            budget,
            workspace: Mutex::new(None),
        })
    }

    /// How the kernels were obtained ("compiled", "cached").
    pub fn kernels_from(&self) -> &'static str {
        self.dev.kernels_from
    }

    /// Seconds the driver took to create this model's context.
    pub fn context_s(&self) -> f64 {
        self.dev.context_s
    }

    /// `y[t × out] = x[t × inp] Wᵀ` (no bias: the next kernel adds it).
    fn matmul(&self, l: &GLinear, x: &CudaSlice<f16>, t: usize, y: &mut CudaSlice<f16>) -> Result<(), EncoderError> {
        self.dev.matmul(l, x, t, y)
    }

    /// Pooled vectors of `batches` (each a list of indices into `seqs`, padded to its own
    /// longest): `[Σ batch sizes × hidden]` f32, in batch order. Every pass of the group is
    /// queued on the stream and the vectors come back in one copy: the host waits once.
    pub fn pooled_batches(&self, seqs: &[Vec<u32>], batches: &[Vec<usize>], pooling: Pooling) -> Result<Vec<f32>, EncoderError> {
        let d = self.dims;
        let h = d.hidden;
        let shapes: Vec<(usize, usize)> = batches
            .iter()
            .map(|b| (b.len(), crate::batching::padded_len(b.iter().map(|&i| seqs[i].len()).max().unwrap_or(1).max(1))))
            .collect();
        let n: usize = shapes.iter().map(|s| s.0).sum();
        let total: usize = shapes.iter().map(|(b, l)| b * l).sum();
        if n == 0 {
            return Ok(Vec::new());
        }
        let tokens = shapes.iter().map(|(b, l)| b * l).max().unwrap_or(0);
        let buffers: Vec<(usize, usize)> = shapes.iter().map(|&(b, l)| attention_buffers(d.head_dim, d.heads, d.rel, b, l)).collect();
        let scores = buffers.iter().map(|x| x.0).max().unwrap_or(0);
        let rel = buffers.iter().map(|x| x.1).max().unwrap_or(0);
        if let Some(budget) = self.budget {
            let need = self.weight_bytes + CONTEXT_BYTES + workspace_bytes(h, d.inter, tokens, scores, rel) + io_bytes(h, n, total);
            if need > budget {
                return Err(EncoderError::OutOfMemory(format!(
                    "{n} sequences in passes of up to {tokens} padded tokens need {} MiB, over the budget of {} MiB",
                    need >> 20,
                    budget >> 20
                )));
            }
        }
        let mut ids = vec![0i32; total];
        let mut lens = Vec::with_capacity(n);
        let mut at = 0;
        for (batch, &(b, l)) in batches.iter().zip(&shapes) {
            for (r, &i) in batch.iter().enumerate() {
                for (j, &id) in seqs[i].iter().enumerate() {
                    ids[at + r * l + j] = id as i32;
                }
                lens.push(seqs[i].len() as i32);
            }
            at += b * l;
        }
        let s = &self.dev.stream;
        let mut guard = self.workspace.lock().map_err(|_| EncoderError::Gpu("the workspace lock is poisoned".into()))?;
        if guard.as_ref().is_none_or(|w| w.tokens < tokens || w.scores_len < scores || w.rel_len < rel) {
            let (t0, s0, r0) = guard.as_ref().map_or((0, 0, 0), |w| (w.tokens, w.scores_len, w.rel_len));
            *guard = None; // free the old one first
            *guard = Some(Workspace::new(s, &d, tokens.max(t0), scores.max(s0), rel.max(r0))?);
        }
        let Some(ws) = guard.as_mut() else { return Err(EncoderError::Gpu("no workspace".into())) };
        let d_ids = s.clone_htod(&ids).map_err(driver("copy ids"))?;
        let d_lens = s.clone_htod(&lens).map_err(driver("copy lengths"))?;
        let mut pooled = s.alloc_zeros::<f32>(n * h).map_err(driver("allocate output"))?;
        let (mut t_at, mut s_at) = (0, 0);
        let mut marks = self.dev.marks();
        for &(b, l) in &shapes {
            let pass_ids = d_ids.slice(t_at..t_at + b * l);
            let pass_lens = d_lens.slice(s_at..s_at + b);
            let mut out = pooled.slice_mut(s_at * h..(s_at + b) * h);
            self.forward(ws, &pass_ids, &pass_lens, b, l, pooling, &mut out, &mut marks)?;
            t_at += b * l;
            s_at += b;
        }
        self.mark(&mut marks, "end")?;
        let vectors = s.clone_dtoh(&pooled).map_err(driver("copy results back"))?;
        self.dev.add_profile(marks);
        Ok(vectors)
    }

    fn mark(&self, marks: &mut Marks, name: &'static str) -> Result<(), EncoderError> {
        self.dev.mark(marks, name)
    }

    /// Device milliseconds per step so far (empty unless `CURATOR_ENCODER_PROFILE` is set).
    pub fn profile(&self) -> Vec<(String, f64)> {
        self.dev.profile()
    }

    /// One pass: `b` sequences padded to `l` tokens, pooled into `out` (`b × hidden`).
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &self,
        ws: &mut Workspace,
        ids: &CudaView<i32>,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        pooling: Pooling,
        out: &mut CudaViewMut<f32>,
        marks: &mut Marks,
    ) -> Result<(), EncoderError> {
        let d = self.dims;
        let (t, h) = (b * l, d.hidden);
        let k = &self.dev.k;
        self.mark(marks, "embed")?;
        k.embed(&self.dev.stream, ids, l, &d, self, &mut ws.x, &mut ws.res)?;
        let fused = fused_attention(d.head_dim, b);
        for layer in &self.layers {
            self.mark(marks, "gemm qkv")?;
            self.matmul(&layer.qkv, &ws.x, t, &mut ws.qkv)?;
            if fused {
                // DeBERTa: the kernel makes its position terms itself, from the layer's
                // projected relative embeddings.
                let rel = d.rel.map(|r| launch::RelEmbeddings {
                    pos_key: layer.pos_key_frag.as_ref().filter(|_| r.c2p),
                    pos_query: layer.pos_query_frag.as_ref().filter(|_| r.p2c),
                    rel_index: &self.rel_index,
                    rows: r.rows,
                });
                self.mark(marks, "attention")?;
                k.attention(&self.dev.stream, &ws.qkv, &layer.qkv.b, lens, b, l, &d, rel.as_ref(), &mut ws.merged)?;
            } else {
                self.split_attention(ws, layer, lens, b, l, marks)?;
            }
            self.mark(marks, "gemm attn_out")?;
            self.matmul(&layer.attn_out, &ws.merged, t, &mut ws.a)?;
            self.mark(marks, "add_norm")?;
            // res = LN(a + bias + res), merged its fp16 copy; then that is the layer's
            // attention output.
            k.add_norm(&self.dev.stream, &ws.a, &layer.attn_out.b, &mut ws.res, &layer.attn_norm, t, &d, &mut ws.merged)?;
            std::mem::swap(&mut ws.a, &mut ws.merged);
            self.mark(marks, "gemm up")?;
            self.matmul(&layer.up, &ws.a, t, &mut ws.inter)?;
            self.mark(marks, "bias_act")?;
            k.bias_act(&self.dev.stream, &mut ws.inter, &layer.up.b, t, d.inter, d.act)?;
            self.mark(marks, "gemm down")?;
            self.matmul(&layer.down, &ws.inter, t, &mut ws.merged)?;
            // res = LN(down + bias + res), x its fp16 copy.
            self.mark(marks, "add_norm")?;
            k.add_norm(&self.dev.stream, &ws.merged, &layer.down.b, &mut ws.res, &layer.out_norm, t, &d, &mut ws.x)?;
        }
        self.mark(marks, "pool")?;
        k.pool(&self.dev.stream, &ws.res, lens, b, l, h, pooling, out)
    }

    /// Attention as separate steps (heads the fused kernel does not cover): split into
    /// per-head Q, K, V, scores by cuBLAS, softmax, context by cuBLAS, heads merged into
    /// `ws.merged`.
    fn split_attention(
        &self,
        ws: &mut Workspace,
        layer: &GLayer,
        lens: &CudaView<i32>,
        b: usize,
        l: usize,
        marks: &mut Marks,
    ) -> Result<(), EncoderError> {
        let d = self.dims;
        let t = b * l;
        let k = &self.dev.k;
        let scale = f16::from_f32(1.0 / d.rel.map_or((d.head_dim as f32).sqrt(), |r| r.scale));
        self.mark(marks, "split_qkv")?;
        k.split_qkv(&self.dev.stream, &ws.qkv, &layer.qkv.b, t, l, &d, &mut ws.q, &mut ws.k, &mut ws.v)?;
        // scores[bh] = Q Kᵀ / √dh, row-major L × L.
        let (heads, dh) = (b * d.heads, d.head_dim);
        let cfg = RowMajor::rows_dot(l, l, dh).strided(scale, f16::ZERO, heads, [l * dh, l * dh, l * l]);
        // SAFETY: b × heads matrices of L × dh (K, Q) and L × L (scores), within the
        // workspace's sizes for this pass.
        self.mark(marks, "gemm scores")?;
        match d.rel {
            // The scale in f32 (1/√(3·64) in fp16 is off by 3e-4).
            Some(r) => self.gemm_ex(cfg, 1.0 / r.scale, &ws.k, &ws.q, &mut ws.scores)?,
            // SAFETY: b × heads matrices of L × dh (K, Q) and L × L (scores), as `cfg` strides
            // them, within the workspace's buffers sized for this pass.
            None => unsafe { self.dev.blas.gemm_strided_batched(cfg, &ws.k, &ws.q, &mut ws.scores) }.map_err(driver("cuBLAS scores"))?,
        }
        if let Some(r) = d.rel {
            self.mark(marks, "gemm positions")?;
            let window = self.position_terms(ws, layer, r, b, l)?;
            self.mark(marks, "softmax")?;
            let terms = self.rel_terms(&ws.rel, layer, r, window);
            k.disentangled_softmax(&self.dev.stream, &mut ws.scores, &terms, b * d.heads * l, l, d.heads, lens)?;
        } else {
            self.mark(marks, "softmax")?;
            k.softmax_rows(&self.dev.stream, &mut ws.scores, b * d.heads * l, l, d.heads, lens)?;
        }
        // ctx[bh] = P V, row-major L × dh.
        let cfg = RowMajor::new(l, dh, l).strided(f16::ONE, f16::ZERO, heads, [l * l, l * dh, l * dh]);
        self.mark(marks, "gemm context")?;
        // SAFETY: V (L × dh), P (L × L), ctx (L × dh) per head, as `cfg` strides them, within
        // the workspace's buffers sized for this pass.
        unsafe { self.dev.blas.gemm_strided_batched(cfg, &ws.v, &ws.scores, &mut ws.ctx) }.map_err(driver("cuBLAS context"))?;
        self.mark(marks, "merge_heads")?;
        k.merge_heads(&self.dev.stream, &ws.ctx, t, l, &d, &mut ws.merged)?;
        Ok(())
    }
}

impl GpuModel {
    /// What the kernels need of a pass's position terms, the tables in `rel` as
    /// [`GpuModel::position_terms`] wrote them (`(lo, width, split)` is what it returned).
    fn rel_terms<'a>(
        &'a self,
        rel: &'a CudaSlice<f16>,
        layer: &'a GLayer,
        r: RelDims,
        (lo, width, split): (usize, usize, usize),
    ) -> launch::RelTerms<'a> {
        // An absent term's view is never read (the workspace holds at least one value).
        launch::RelTerms {
            c2p: rel.slice(0..split.max(1)),
            p2c: rel.slice(split.min(rel.len() - 1)..),
            use_c2p: r.c2p,
            use_p2c: r.p2c,
            rel_index: &self.rel_index,
            rel_bias: &layer.rel_bias,
            rows: r.rows,
            lo,
            width,
        }
    }

    /// DeBERTa's position-term tables of a pass into `ws.rel` (c2p, then p2c, each `[heads,
    /// B·L, width]`), over only the table rows that distances under `l` reach: `(lo, width,
    /// where p2c starts)`.
    fn position_terms(
        &self,
        ws: &mut Workspace,
        layer: &GLayer,
        r: RelDims,
        b: usize,
        l: usize,
    ) -> Result<(usize, usize, usize), EncoderError> {
        let center = self.rel_index_host.len() / 2;
        // Rounded out to multiples of 8 (cuBLAS' fast kernels want aligned leading
        // dimensions), within the table's rows.
        let lo = (self.rel_index_host[center + 1 - l] as usize) / 8 * 8;
        let width = (self.rel_index_host[center + l - 1] as usize + 1 - lo).next_multiple_of(8).min(r.rows - lo);
        let table = b * self.dims.heads * l * width;
        let split = if r.c2p { table } else { 0 };
        let (mut c2p, mut p2c) = ws.rel.split_at_mut(split);
        let h = self.dims.hidden;
        if let Some(pos) = layer.pos_key.as_ref().filter(|_| r.c2p) {
            self.position_term(&ws.qkv.slice(0..), pos, b * l, r.rows, lo, width, &mut c2p)?;
        }
        if let Some(pos) = layer.pos_query.as_ref().filter(|_| r.p2c) {
            self.position_term(&ws.qkv.slice(h..), pos, b * l, r.rows, lo, width, &mut p2c)?;
        }
        Ok((lo, width, split))
    }

    /// One DeBERTa position term for every token and head, without the bias of Q or K (the
    /// kernels add `rel_bias`): `out[head] = X[head] pos[head][lo..lo + width]ᵀ / scale`,
    /// `[T × width]` per head, X being the QKV product's Q (c2p) or K (p2c) columns (`x`
    /// starts at them; rows of 3H) and pos `[heads, rows = 2·span, dh]`. One strided batched
    /// product over the heads.
    #[allow(clippy::too_many_arguments)]
    fn position_term(
        &self,
        x: &CudaView<f16>,
        pos: &CudaSlice<f16>,
        t: usize,
        rows: usize,
        lo: usize,
        width: usize,
        out: &mut CudaViewMut<f16>,
    ) -> Result<(), EncoderError> {
        let d = self.dims;
        let (dh, heads) = (d.head_dim, d.heads);
        let scale = d.rel.map_or(1.0, |r| r.scale);
        // gemm_ex takes the scale in f32.
        let cfg = RowMajor::rows_dot(t, width, dh).lda(3 * d.hidden).strided(f16::ONE, f16::ZERO, heads, [dh, rows * dh, t * width]);
        // Head h: pos[h]'s rows lo..lo + width (width × dh, rows · dh apart per head); X's T
        // rows of dh at column h·dh of the [T, 3H] product (row stride 3H); out's T × width at
        // h·T·width, inside the table of heads·T·width values.
        let a = pos.slice(lo * dh..);
        self.gemm_ex(cfg, 1.0 / scale, &a, x, out)
    }

    /// cuBLAS' strided batched product in fp16 with f32 accumulation, `alpha` given in f32
    /// (the config's fp16 one is ignored: 1/√(3·64) rounded to fp16 is off by 3e-4).
    fn gemm_ex<A: DevicePtr<f16>, B: DevicePtr<f16>, C: cudarc::driver::DevicePtrMut<f16>>(
        &self,
        cfg: StridedBatchedConfig<f16>,
        alpha: f32,
        a: &A,
        b: &B,
        c: &mut C,
    ) -> Result<(), EncoderError> {
        use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cudaDataType_t};
        let beta = cfg.gemm.beta.to_f32();
        let s = &self.dev.stream;
        let (a, _ra) = a.device_ptr(s);
        let (b, _rb) = b.device_ptr(s);
        let (c, _rc) = c.device_ptr_mut(s);
        // SAFETY: the caller's config describes A, B and C inside their buffers (as for
        // `gemm_strided_batched`); alpha and beta are f32, as CUBLAS_COMPUTE_32F takes them.
        unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                *self.dev.blas.handle(),
                cfg.gemm.transa,
                cfg.gemm.transb,
                cfg.gemm.m,
                cfg.gemm.n,
                cfg.gemm.k,
                (&alpha) as *const f32 as *const _,
                a as *const _,
                cudaDataType_t::CUDA_R_16F,
                cfg.gemm.lda,
                cfg.stride_a,
                b as *const _,
                cudaDataType_t::CUDA_R_16F,
                cfg.gemm.ldb,
                cfg.stride_b,
                (&beta) as *const f32 as *const _,
                c as *mut _,
                cudaDataType_t::CUDA_R_16F,
                cfg.gemm.ldc,
                cfg.stride_c,
                cfg.batch_size,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(driver("cuBLAS product"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels compile (NVRTC needs no GPU). Skipped, with the reason printed, where no
    /// NVRTC library is found; scripts/models/gpu-models.sh runs them on a GPU.
    #[test]
    fn kernels_compile_with_nvrtc() {
        if let Err(missing) = curator_gpu::require(&[curator_gpu::CudaLib::Nvrtc]) {
            eprintln!("skipped: {missing}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("curator-kernels-{}", std::process::id()));
        let (ptx, from) = kernels_ptx(Some(&dir), (9, 0)).unwrap();
        assert_eq!(from, "compiled");
        for entry in [
            "embed",
            "add_norm",
            "split_qkv",
            "merge_heads",
            "softmax_rows",
            "bias_act",
            "pool",
            "attention32",
            "attention64",
            "add_norm_warp",
            "disentangled_softmax",
            "deberta_attention32",
            "deberta_attention64",
            "deberta_attention32_ring",
            "deberta_attention64_ring",
            "deberta_attention32_shared",
            "deberta_attention64_shared",
            "patch_embed",
            "residual_norm",
            "residual_norm_warp",
        ] {
            assert!(ptx.to_src().contains(&format!(".entry {entry}")), "{entry} missing");
        }
        // The second time it comes from the cache.
        assert_eq!(kernels_ptx(Some(&dir), (9, 0)).unwrap().1, "cached");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn activation_memory_is_the_workspace_and_the_io_of_a_pass() {
        let minilm = ModelConfig::parse(
            r#"{"hidden_size":384,"intermediate_size":1536,"num_attention_heads":12,"num_hidden_layers":6,"vocab_size":30522}"#,
        )
        .unwrap();
        // Heads of 32: fused attention, no q/k/v/context buffers and no scores. 64 × 128 tokens:
        // 2 B × T × (6 H + I) of fp16 activations, 4 B × T × H of the f32 residual stream, 4 B
        // per id, and per sequence its length and its pooled vector.
        let t: u64 = 64 * 128;
        assert_eq!(activation_bytes(&minilm, 64, 128), 2 * t * (6 * 384 + 1536) + 4 * t * 384 + 4 * t + 64 * (4 + 4 * 384));
        // At equal tokens, the fused path's memory does not grow with the sequence length.
        assert!(activation_bytes(&minilm, 32, 256) <= activation_bytes(&minilm, 64, 128));
        // Heads of 48 take the split path: four more buffers of T × H and the L² scores.
        let odd = ModelConfig::parse(
            r#"{"hidden_size":384,"intermediate_size":1536,"num_attention_heads":8,"num_hidden_layers":6,"vocab_size":30522}"#,
        )
        .unwrap();
        let scores: u64 = 2 * 64 * 8 * 128 * 128;
        assert_eq!(activation_bytes(&odd, 64, 128), 2 * t * (10 * 384 + 1536) + 4 * t * 384 + scores + 4 * t + 64 * (4 + 4 * 384));
        assert!(activation_bytes(&odd, 32, 256) > activation_bytes(&odd, 64, 128), "L² scores");
    }
}
