//! The vision tower in fp16 on the GPU, on the text encoder's device, products and kernels
//! (`crate::gpu`): the images' patches are cut on the host (a reshuffle) and uploaded as one
//! `[B·L, 3·patch²]` fp16 matrix whose class and padding rows are zero; then one product for
//! the patch embedding, `patch_embed` (positions + class, `pre_layrnorm`), and per layer the
//! QKV product, the fused attention kernel (every image has the same `tokens`, padded to a
//! multiple of 8 and masked), the output product, `residual_norm` (residual add in fp16, then
//! `layer_norm2`), the MLP pair with quick-GELU fused into the bias add, and `residual_norm`
//! again (then the next layer's `layer_norm1`, or `post_layernorm` after the last). The class
//! rows are projected by one product reading them in place (a row stride of `L·H`), and the
//! embeddings come back in fp16, one copy per call.
//!
//! The patches of a pass are cut on all cores into one of [`STAGING`] pinned host buffers
//! taken in turn, so the upload is asynchronous and the host cuts the next pass while the
//! device runs this one (a pageable copy would wait for the stream each time); JPEGs are
//! decoded and preprocessed on the device instead (`super::jpeg`). Either way a pass's patches
//! are made on a second stream into one of two device buffers, so that the next pass's upload
//! or decode runs while the forward pass of this one does (events order the two streams: the
//! forward waits for its patches, the patches of pass i + 2 wait for the forward of pass i).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::cublas::Gemm;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice};
use curator_gpu::RowMajor;
use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use super::jpeg::{DeviceJpeg, JPEG_BYTES, Job};
use super::{VisionConfig, VisionWeights};
use crate::EncoderError;
use crate::batching::padded_len;
use crate::gpu::device::{GpuDevice, Marks, upload_half, upload_layer, upload_linear, upload_norm};
use crate::gpu::{CONTEXT_BYTES, Dims, GLayer, GLinear, GNorm, Workspace, driver, weights_fit, workspace_bytes};

/// Pinned host buffers a call's passes go through in turn.
const STAGING: usize = 3;

/// Pinned host buffers for the passes' patches (each `per_pass × L × K`), taken in turn, and
/// the two device buffers passes make their patches in, in turn.
type Staging = (Vec<PinnedHostSlice<f16>>, [Option<CudaSlice<f16>>; 2]);

/// A vision tower on the GPU.
pub struct GpuVision {
    dev: GpuDevice,
    patch: GLinear,
    /// `[L, H]`: positions, the class embedding added to row 0, zero rows past the tokens.
    table: CudaSlice<f16>,
    pre_norm: GNorm,
    layers: Vec<GLayer>,
    post_norm: GNorm,
    /// `[embed_dim, H]`, or `None` (the class state is the embedding).
    projection: Option<CudaSlice<f16>>,
    /// Zeros, the bias of the steps that have none.
    zeros: CudaSlice<f32>,
    dims: Dims,
    tokens: usize,
    /// Tokens per image padded to a multiple of 8 (the fused attention's rows).
    l: usize,
    patch_size: usize,
    image_size: usize,
    embed_dim: usize,
    weight_bytes: u64,
    budget: Option<u64>,
    workspace: Mutex<Option<Workspace>>,
    staging: Mutex<Staging>,
    /// The stream patches are made on (uploads, decodes, the preprocessing kernels).
    prep: Arc<CudaStream>,
    /// nvJPEG and its buffers, or why there is none.
    jpeg: Mutex<Result<DeviceJpeg, String>>,
    /// NVML and the card's UUID as it names it: whether other processes use the card.
    card: Option<(nvml_wrapper::Nvml, String)>,
}

/// One image of a call: pixel values made on the host, or JPEG bytes and their plan, decoded
/// and preprocessed on the device.
pub(crate) enum Slot<'a> {
    Host(Cow<'a, [f32]>),
    /// The bytes, their plan, and the image's index in the call (for the CPU path, should
    /// the decoder refuse it).
    Device(&'a [u8], Arc<curator_image::plan::Plan>, usize),
}

impl GpuVision {
    /// The tower on GPU 0, its weights in fp16; `budget`: the bytes it may use in all.
    pub fn new(
        config: &VisionConfig,
        w: &VisionWeights,
        budget: Option<u64>,
        kernel_cache: Option<&std::path::Path>,
    ) -> Result<GpuVision, EncoderError> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| GpuVision::open(config, w, budget, kernel_cache))) {
            Ok(r) => r,
            Err(_) => Err(EncoderError::NoGpu("CUDA set-up panicked (a CUDA library is missing)".into())),
        }
    }

    fn open(
        config: &VisionConfig,
        w: &VisionWeights,
        budget: Option<u64>,
        kernel_cache: Option<&std::path::Path>,
    ) -> Result<GpuVision, EncoderError> {
        let h = config.hidden_size;
        let head_dim = h / config.num_heads;
        if !matches!(head_dim, 32 | 64) {
            return Err(EncoderError::Gpu(format!("heads of {head_dim} dimensions: the GPU path takes 32 or 64 (use the CPU)")));
        }
        let weight_bytes = vision_weight_bytes(w);
        weights_fit("tower's", weight_bytes, budget)?;
        let dev = GpuDevice::open(kernel_cache)?;
        let s = dev.stream.clone();
        let tokens = config.tokens();
        let l = padded_len(tokens);
        let mut table = vec![0f32; l * h];
        table[..tokens * h].copy_from_slice(&w.position);
        table[..h].iter_mut().zip(&w.class).for_each(|(t, c)| *t += c);
        let layers = w.layers.iter().map(|layer| upload_layer(&s, layer, config.num_heads, 1.0)).collect::<Result<Vec<_>, _>>()?;
        // The patch product's inner dimension (3·patch², 588 for L/14) padded with zero columns
        // to a multiple of 8, the tensor cores' granule (cuBLAS is ~5× slower off it).
        let (k, k_pad) = (w.patch.inp, w.patch.inp.next_multiple_of(8));
        let mut padded = vec![0f32; h * k_pad];
        for (dst, src) in padded.chunks_exact_mut(k_pad).zip(w.patch.w.chunks_exact(k)) {
            dst[..k].copy_from_slice(src);
        }
        let patch = crate::weights::Linear { w: padded, b: w.patch.b.clone(), out: h, inp: k_pad };
        Ok(GpuVision {
            patch: upload_linear(&s, &patch)?,
            table: upload_half(&s, &table)?,
            pre_norm: upload_norm(&s, &w.pre_norm)?,
            layers,
            post_norm: upload_norm(&s, &w.post_norm)?,
            projection: w.projection.as_ref().map(|p| upload_half(&s, &p.w)).transpose()?,
            zeros: s.alloc_zeros::<f32>(h).map_err(driver("allocate"))?,
            dims: Dims {
                hidden: h,
                inter: config.intermediate_size,
                heads: config.num_heads,
                head_dim,
                vocab: 0,
                max_pos: 0,
                pos_offset: 0,
                eps: config.layer_norm_eps,
                act: crate::gpu::activation_code(config.activation),
                rel: None,
            },
            tokens,
            l,
            patch_size: config.patch_size,
            image_size: config.image_size,
            embed_dim: config.embed_dim(),
            weight_bytes,
            budget,
            workspace: Mutex::new(None),
            staging: Mutex::new((Vec::new(), [None, None])),
            prep: dev.ctx().new_stream().map_err(driver("create a stream"))?,
            jpeg: Mutex::new(DeviceJpeg::open()),
            card: nvml_wrapper::Nvml::init().ok().zip(nvml_uuid(&dev)),
            dev,
        })
    }

    /// How the kernels were obtained ("compiled", "cached").
    pub fn kernels_from(&self) -> &'static str {
        self.dev.kernels_from
    }

    /// Device milliseconds per step so far (empty unless `CURATOR_ENCODER_PROFILE` is set).
    pub fn profile(&self) -> Vec<(String, f64)> {
        let mut p = self.dev.profile();
        if !p.is_empty() && self.decoder_state().is_ok_and(|(_, pooled)| pooled) {
            let (device, pinned, reused, fresh) = super::nvjpeg_pool::stats();
            p.push(("nvJPEG pool: device MiB held".into(), (device >> 20) as f64));
            p.push(("nvJPEG pool: pinned MiB held".into(), (pinned >> 20) as f64));
            p.push(("nvJPEG pool: allocations reused".into(), reused as f64));
            p.push(("nvJPEG pool: allocations from the driver".into(), fresh as f64));
        }
        p
    }

    /// Device bytes a pass of `b` images needs besides the weights.
    pub fn pass_bytes(&self, b: usize) -> u64 {
        let t = (b * self.l) as u64;
        let k = self.patch.inp;
        // Two patch buffers (one being made while the other is read).
        workspace_bytes(self.dims.hidden, self.dims.inter, b * self.l, 0, 0)
            + 2 * t * 2 * k as u64
            + b as u64 * (4 + 2 * self.embed_dim as u64)
    }

    /// Whether passes of `b` images fit the budget.
    pub fn fits(&self, b: usize) -> bool {
        self.budget.is_none_or(|budget| self.weight_bytes + CONTEXT_BYTES + self.jpeg_bytes() + self.pass_bytes(b) <= budget)
    }

    /// Device bytes JPEG decoding may hold (none without nvJPEG).
    fn jpeg_bytes(&self) -> u64 {
        if self.jpeg_decoder().is_ok() { JPEG_BYTES } else { 0 }
    }

    /// Whether this process may decode JPEGs on the card now. With nvJPEG's memory from our
    /// pools (`CURATOR_NVJPEG_POOL=1`, `nvjpeg_pool`), always. With nvJPEG's own allocators
    /// (the default), or when `CURATOR_NVJPEG_SHARED=0` asks for it, only while NVML lists this process as
    /// the card's only compute process (true where NVML cannot say): on an H200 (driver 580),
    /// a process on the card that ended while this one was in `nvjpegDecodeBatched` left the
    /// decode waiting in the driver's `cuMemFree` (nvJPEG's default allocator freeing a buffer
    /// it grew) for good, and the card's next decode with it. While another is there, the
    /// batch's JPEGs decode on the CPU.
    fn may_decode(&self, pooled: bool) -> bool {
        // `CURATOR_NVJPEG_SHARED`: 1 decodes on a shared card whatever the allocator (to
        // reproduce the hang), 0 never does.
        let shared = match std::env::var("CURATOR_NVJPEG_SHARED").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => pooled,
        };
        if shared {
            return true;
        }
        let Some((nvml, uuid)) = &self.card else { return true };
        nvml.device_by_uuid(uuid.as_str()).and_then(|d| d.running_compute_processes()).map_or(true, |p| p.len() <= 1)
    }

    /// How JPEGs are decoded on this device ("hardware" engines or "GPU" cores), or why they
    /// are not (no nvJPEG library, say).
    pub fn jpeg_decoder(&self) -> Result<&'static str, String> {
        self.decoder_state().map(|(backend, _)| backend)
    }

    /// Whether nvJPEG's memory comes from our pools.
    pub fn jpeg_pooled(&self) -> bool {
        self.decoder_state().is_ok_and(|(_, pooled)| pooled)
    }

    /// The decoder's back-end and whether its memory is pooled, or why there is no decoder.
    fn decoder_state(&self) -> Result<(&'static str, bool), String> {
        match self.jpeg.lock().as_deref() {
            Ok(Ok(d)) => Ok((d.backend(), d.pooled())),
            Ok(Err(e)) => Err(e.clone()),
            Err(_) => Err("the decoder's lock is poisoned".into()),
        }
    }

    /// Where each image goes: JPEGs the decoder takes (their header read here, on all cores)
    /// whose crop needs no padding to the device, their plans shared by size; the rest through
    /// `cpu(i)`, on all cores.
    pub(crate) fn route<'a>(
        &self,
        images: &[&'a [u8]],
        processor: &curator_image::clip::Processor,
        cpu: &(dyn Fn(usize) -> Result<Vec<f32>, String> + Sync),
    ) -> Result<Vec<Slot<'a>>, EncoderError> {
        let decoder = self.decoder_state().is_ok_and(|(_, pooled)| self.may_decode(pooled));
        let sizes: Vec<Option<(usize, usize)>> = images
            .par_iter()
            .map(|b| {
                let h = curator_image::jpeg::header(b).filter(|h| decoder && DeviceJpeg::takes(h))?;
                Some((h.width, h.height))
            })
            .collect();
        let mut plans: HashMap<(usize, usize), Option<Arc<curator_image::plan::Plan>>> = HashMap::new();
        for &(w, h) in sizes.iter().flatten() {
            plans.entry((w, h)).or_insert_with(|| {
                processor.plan(w, h).filter(|p| p.out_width == self.image_size && p.out_height == self.image_size).map(Arc::new)
            });
        }
        images
            .par_iter()
            .zip(sizes)
            .enumerate()
            .map(|(i, (bytes, size))| match size.and_then(|s| plans.get(&s).cloned().flatten()) {
                Some(plan) => Ok(Slot::Device(bytes, plan, i)),
                None => cpu(i).map(|px| Slot::Host(Cow::Owned(px))).map_err(EncoderError::Image),
            })
            .collect()
    }

    /// One embedding per image (`pixels`: `[n × 3 × S × S]` f32), `[n × embed_dim]`, not
    /// normalised; in passes of `per_pass` images, one copy back at the end.
    pub fn embed(&self, pixels: &[f32], per_pass: usize) -> Result<Vec<f32>, EncoderError> {
        let per = 3 * self.image_size * self.image_size;
        let slots: Vec<Slot<'_>> = pixels.chunks_exact(per).map(|c| Slot::Host(Cow::Borrowed(c))).collect();
        self.embed_slots(&slots, None, None, per_pass, true)
    }

    /// One embedding per slot (see [`GpuVision::route`]; `table`: the processor's byte →
    /// value table, needed when a slot is on the device; `cpu`: the CPU path for a device slot's
    /// image, taken for a whole pass when nvJPEG refuses one of its images),
    /// `[n × embed_dim]`, not normalised. Without `forward` only the patches are made (timing
    /// the preprocessing), and nothing comes back.
    pub(crate) fn embed_slots(
        &self,
        slots: &[Slot<'_>],
        table: Option<&[f32]>,
        cpu: Option<&(dyn Fn(usize) -> Result<Vec<f32>, String> + Sync)>,
        per_pass: usize,
        forward: bool,
    ) -> Result<Vec<f32>, EncoderError> {
        let n = slots.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let b_max = per_pass.clamp(1, n);
        if !self.fits(per_pass.max(b_max)) {
            return Err(EncoderError::OutOfMemory(format!(
                "passes of {b_max} images need {} MiB with the weights, over the budget of {} MiB",
                (self.weight_bytes + CONTEXT_BYTES + self.jpeg_bytes() + self.pass_bytes(b_max)) >> 20,
                self.budget.unwrap_or(0) >> 20
            )));
        }
        let s = &self.dev.stream;
        let mut guard = self.workspace.lock().map_err(|_| EncoderError::Gpu("the workspace lock is poisoned".into()))?;
        let tokens = b_max * self.l;
        if guard.as_ref().is_none_or(|w| w.tokens < tokens) {
            *guard = None;
            *guard = Some(Workspace::new(s, &self.dims, tokens, 0, 0)?);
        }
        let Some(ws) = guard.as_mut() else { return Err(EncoderError::Gpu("no workspace".into())) };
        let mut out = s.alloc_zeros::<f16>(n * self.embed_dim).map_err(driver("allocate output"))?;
        let lens = s.clone_htod(&vec![self.tokens as i32; b_max]).map_err(driver("copy lengths"))?;
        let on_device = slots.iter().any(|x| matches!(x, Slot::Device(..)));
        let table = match (on_device, table) {
            (false, _) => None,
            (true, Some(t)) => Some(s.clone_htod(t).map_err(driver("copy the pixel table"))?),
            (true, None) => return Err(EncoderError::Gpu("images to preprocess on the device but no pixel table".into())),
        };
        let mut jpeg = self.jpeg.lock().map_err(|_| EncoderError::Gpu("the decoder's lock is poisoned".into()))?;
        // Staging buffers hold `per_pass` images whatever this call's size, so that calls of
        // different sizes reuse them (a pass copies them whole).
        let pass_len = per_pass.max(1) * self.l * self.patch.inp;
        let mut staging = self.staging.lock().map_err(|_| EncoderError::Gpu("the staging lock is poisoned".into()))?;
        let (pinned, buffers) = &mut *staging;
        if pinned.first().is_some_and(|p| p.len() != pass_len) {
            pinned.clear();
        }
        for buf in buffers.iter_mut() {
            if buf.as_ref().is_none_or(|p| p.len() != pass_len) {
                *buf = None;
                // SAFETY: every pass's patches are copied in (or written on the device) before a
                // product reads them.
                *buf = Some(unsafe { s.alloc::<f16>(pass_len) }.map_err(driver("allocate patches"))?);
            }
        }
        let prep = &self.prep;
        // Everything queued on the main stream so far (the buffers, the table, an earlier call)
        // comes before the patches.
        prep.join(s).map_err(driver("order the streams"))?;
        let mut read: [Option<CudaEvent>; 2] = [None, None];
        let mut marks = self.dev.marks();
        let geometry = (self.image_size, self.patch_size, self.l, self.tokens, self.patch.inp);
        let mut host_passes = 0;
        for (pass, chunk) in slots.chunks(b_max).enumerate() {
            let b = chunk.len();
            let Some(patches) = buffers[pass % 2].as_mut() else { return Err(EncoderError::Gpu("no patch buffer".into())) };
            if let Some(done) = &read[pass % 2] {
                // The forward pass that read this buffer two passes ago is done.
                prep.wait(done).map_err(driver("order the streams"))?;
            }
            let host: Vec<Option<&[f32]>> = chunk.iter().map(|x| if let Slot::Host(px) = x { Some(&**px) } else { None }).collect();
            if host.iter().any(Option::is_some) {
                self.upload(&host, pinned, &mut host_passes, pass_len, patches)?;
            }
            let jobs: Vec<Job<'_>> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, x)| if let Slot::Device(bytes, plan, _) = x { Some((i, *bytes, plan.clone())) } else { None })
                .collect();
            if let (false, Some(table)) = (jobs.is_empty(), &table) {
                let Ok(dec) = jpeg.as_mut() else { return Err(EncoderError::Gpu("images routed to a decoder that is not there".into())) };
                let t = std::time::Instant::now();
                let done = dec.preprocess(&self.dev, prep, &jobs, table, geometry, patches);
                self.dev.add_host_time("host: decode calls", t);
                match (done, cpu) {
                    (Ok(()), _) => {}
                    // nvJPEG refused an image its header promised it would take: the whole
                    // pass is made again on the host, its JPEGs through the CPU path.
                    (Err(EncoderError::Gpu(e)), Some(cpu)) if e.starts_with("nvJPEG decode") => {
                        let again: Vec<Option<Vec<f32>>> = chunk
                            .par_iter()
                            .map(|x| if let Slot::Device(.., i) = x { cpu(*i).map(Some).map_err(EncoderError::Image) } else { Ok(None) })
                            .collect::<Result<_, _>>()?;
                        let all: Vec<Option<&[f32]>> = host.iter().zip(&again).map(|(h, a)| h.or(a.as_deref())).collect();
                        self.upload(&all, pinned, &mut host_passes, pass_len, patches)?;
                    }
                    (Err(e), _) => return Err(e),
                }
            }
            // The forward pass waits for its patches.
            s.join(prep).map_err(driver("order the streams"))?;
            if forward {
                let t = std::time::Instant::now();
                self.forward(ws, patches, &lens, b, &mut marks)?;
                self.dev.mark(&mut marks, "projection")?;
                self.project(ws, b, &mut out, pass * b_max)?;
                self.dev.add_host_time("host: forward calls", t);
            }
            read[pass % 2] = Some(s.record_event(None).map_err(driver("record an event"))?);
        }
        self.dev.mark(&mut marks, "end")?;
        if !forward {
            s.synchronize().map_err(driver("synchronize"))?;
            super::nvjpeg_pool::settle();
            return Ok(Vec::new());
        }
        let host = s.clone_dtoh(&out).map_err(driver("copy embeddings back"))?;
        // The stream has run: every decode of this call, which it waited for, is done, so the
        // blocks nvJPEG gave back may be handed out again.
        super::nvjpeg_pool::settle();
        self.dev.add_profile(marks);
        Ok(host.into_iter().map(f16::to_f32).collect())
    }

    /// Cut the host slots' patches into the next pinned staging buffer (allocated up to
    /// [`STAGING`] of them) and copy it into `patches` on the preprocessing stream.
    fn upload(
        &self,
        slots: &[Option<&[f32]>],
        pinned: &mut Vec<PinnedHostSlice<f16>>,
        host_passes: &mut usize,
        pass_len: usize,
        patches: &mut CudaSlice<f16>,
    ) -> Result<(), EncoderError> {
        if pinned.len() < STAGING.min(*host_passes + 1) {
            // SAFETY: written in full (zeros where no patch goes) before it is copied.
            pinned.push(unsafe { self.dev.ctx().alloc_pinned::<f16>(pass_len) }.map_err(driver("allocate pinned memory"))?);
        }
        let host_buf = &mut pinned[*host_passes % STAGING];
        *host_passes += 1;
        // Waits for this buffer's previous copy, STAGING passes ago.
        self.patches_into(slots, host_buf.as_mut_slice().map_err(driver("pinned memory"))?);
        self.prep.memcpy_htod(host_buf, patches).map_err(driver("copy patches"))
    }

    /// The host slots' patches as rows of `[slots·L, 3·patch²]` fp16 in `out` (the rest zero:
    /// row 0 of each image, the class token, its padding rows, and the device slots, which
    /// the device writes after the copy), cut on all cores.
    fn patches_into(&self, slots: &[Option<&[f32]>], out: &mut [f16]) {
        let (p, s) = (self.patch_size, self.image_size);
        let (g, k) = (s / p, self.patch.inp);
        let per_image = self.l * k;
        out[slots.len() * per_image..].par_chunks_mut(1 << 20).for_each(|c| c.fill(f16::ZERO));
        out[..slots.len() * per_image].par_chunks_mut(per_image).zip(slots.par_iter()).for_each(|(dst, px)| {
            let Some(px) = px else {
                dst.fill(f16::ZERO);
                return;
            };
            dst[..k].fill(f16::ZERO);
            dst[(1 + g * g) * k..].fill(f16::ZERO);
            let mut row = vec![0f32; k]; // the tail past 3·patch² stays zero
            for gy in 0..g {
                for gx in 0..g {
                    super::patch_into(px, s, p, gy, gx, &mut row);
                    dst[(1 + gy * g + gx) * k..][..k].convert_from_f32_slice(&row);
                }
            }
        });
    }

    /// One pass of `b` images: the states after `post_layernorm` in `ws.merged`.
    fn forward(
        &self,
        ws: &mut Workspace,
        patches: &CudaSlice<f16>,
        lens: &CudaSlice<i32>,
        b: usize,
        marks: &mut Marks,
    ) -> Result<(), EncoderError> {
        let (d, t, s, k) = (self.dims, b * self.l, &self.dev.stream, &self.dev.k);
        let lens = lens.slice(..b);
        let mut mark = |name| self.dev.mark(marks, name);
        mark("gemm patches")?;
        self.dev.matmul(&self.patch, patches, t, &mut ws.a)?;
        mark("norms")?;
        k.patch_embed(s, &ws.a, &self.table, self.l, &self.pre_norm, t, &d, &mut ws.x)?;
        // The first layer's layer_norm1 (each layer's input is in `merged`).
        let first = self.layers.first().map_or(&self.post_norm, |l| &l.attn_norm);
        k.residual_norm(s, &ws.a, &self.zeros, false, &mut ws.x, first, t, &d, &mut ws.merged)?;
        for (i, layer) in self.layers.iter().enumerate() {
            mark("gemm qkv")?;
            self.dev.matmul(&layer.qkv, &ws.merged, t, &mut ws.qkv)?;
            mark("attention")?;
            k.attention(s, &ws.qkv, &layer.qkv.b, &lens, b, self.l, &d, None, &mut ws.a)?;
            mark("gemm attn_out")?;
            self.dev.matmul(&layer.attn_out, &ws.a, t, &mut ws.merged)?;
            mark("norms")?;
            k.residual_norm(s, &ws.merged, &layer.attn_out.b, true, &mut ws.x, &layer.out_norm, t, &d, &mut ws.a)?;
            mark("gemm up")?;
            self.dev.matmul(&layer.up, &ws.a, t, &mut ws.inter)?;
            mark("bias_act")?;
            k.bias_act(s, &mut ws.inter, &layer.up.b, t, d.inter, d.act)?;
            mark("gemm down")?;
            self.dev.matmul(&layer.down, &ws.inter, t, &mut ws.merged)?;
            let next = self.layers.get(i + 1).map_or(&self.post_norm, |l| &l.attn_norm);
            mark("norms")?;
            k.residual_norm(s, &ws.merged, &layer.down.b, true, &mut ws.x, next, t, &d, &mut ws.a)?;
            std::mem::swap(&mut ws.a, &mut ws.merged);
        }
        Ok(())
    }

    /// The class rows of `ws.merged` (one every `L·H` values) projected into `out` from row
    /// `first`: `out[b × embed_dim] = cls[b × H] Wᵀ` (or copied, without a projection).
    fn project(&self, ws: &Workspace, b: usize, out: &mut CudaSlice<f16>, first: usize) -> Result<(), EncoderError> {
        let (h, e, s) = (self.dims.hidden, self.embed_dim, &self.dev.stream);
        let mut dst = out.slice_mut(first * e..(first + b) * e);
        match &self.projection {
            Some(w) => {
                let cfg = RowMajor::rows_dot(b, e, h).lda(self.l * h).config(f16::ONE, f16::ZERO);
                // SAFETY: W is e × h row-major; the b class rows are the first h values of each
                // image's L × h block of `merged` (b·L·h values, the pass's tokens); dst holds
                // b × e values.
                unsafe { self.dev.blas.gemm(cfg, w, &ws.merged, &mut dst) }.map_err(driver("cuBLAS gemm"))
            }
            None => {
                for i in 0..b {
                    let src = ws.merged.slice(i * self.l * h..i * self.l * h + h);
                    let mut row = dst.slice_mut(i * e..(i + 1) * e);
                    s.memcpy_dtod(&src, &mut row).map_err(driver("copy class rows"))?;
                }
                Ok(())
            }
        }
    }
}

/// Device bytes of a tower's weights (matrices in fp16, vectors in f32).
fn vision_weight_bytes(w: &VisionWeights) -> u64 {
    let mat: usize = w.layers.iter().map(|l| l.query.w.len() * 4 + l.up.w.len() + l.down.w.len()).sum::<usize>()
        + w.patch.w.len()
        + w.position.len()
        + w.projection.as_ref().map_or(0, |p| p.w.len());
    let vec: usize =
        w.layers.iter().map(|l| 3 * l.query.b.len() + l.attn_out.b.len() + l.up.b.len() + l.down.b.len() + 4 * l.query.out).sum();
    (2 * mat + 4 * vec) as u64
}

/// The card's UUID as NVML names it (`GPU-8-4-4-4-12` hex digits).
fn nvml_uuid(dev: &GpuDevice) -> Option<String> {
    let b: Vec<u8> = dev.ctx().uuid().ok()?.bytes.iter().map(|b| *b as u8).collect();
    let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    Some(format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16)))
}
