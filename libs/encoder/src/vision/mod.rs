//! Vision transformers: CLIP's vision tower (ViT-B/32, B/16, L/14 and other widths) from a
//! Hugging Face directory, a full `CLIPModel` checkpoint (`model_type: clip`, the tower's
//! settings under `vision_config`) or a `CLIPVisionModelWithProjection` (`clip_vision_model`).
//!
//! The tower: the image cut into `patch × patch` squares, each flattened and projected (the
//! patch "convolution" as one product), a class token in front, positions added, a layer norm
//! (`pre_layrnorm`), pre-norm transformer layers (`x + attn(ln1(x))`, `x + mlp(ln2(x))`,
//! quick-GELU), the class token's state normalised (`post_layernorm`) and projected
//! (`visual_projection`): transformers' `image_embeds`. The weights reuse the text encoder's
//! [`Layer`] (its `attn_norm` is `layer_norm1`, applied before attention; `out_norm` is
//! `layer_norm2`, before the MLP). The input is the processor's pixel values
//! (`curator_image::clip::Processor`), `[3 × image_size × image_size]` per image.

pub mod cpu;
pub mod gpu;
pub mod jpeg;
mod nvjpeg;
mod nvjpeg_pool;
pub mod stage;

use std::path::Path;

use serde::Deserialize;

use crate::EncoderError;
use crate::config::Activation;
use crate::weights::{Layer, Linear, Norm, Reader};

/// A vision tower's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    pub hidden_size: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub patch_size: usize,
    pub image_size: usize,
    /// The projection's width (`None`: the tower has no projection; the embedding is the
    /// normalised class state).
    pub projection_dim: Option<usize>,
    pub layer_norm_eps: f32,
    pub activation: Activation,
}

/// transformers' `CLIPVisionConfig`, its defaults for what a file leaves out.
#[derive(Deserialize)]
#[serde(default)]
struct RawVision {
    hidden_size: usize,
    intermediate_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    num_channels: usize,
    image_size: usize,
    patch_size: usize,
    projection_dim: usize,
    hidden_act: String,
    layer_norm_eps: f32,
}

impl Default for RawVision {
    fn default() -> RawVision {
        RawVision {
            hidden_size: 768,
            intermediate_size: 3072,
            num_attention_heads: 12,
            num_hidden_layers: 12,
            num_channels: 3,
            image_size: 224,
            patch_size: 32,
            projection_dim: 512,
            hidden_act: "quick_gelu".into(),
            layer_norm_eps: 1e-5,
        }
    }
}

impl VisionConfig {
    /// `dir/config.json`.
    pub fn load(dir: &Path) -> Result<VisionConfig, EncoderError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| EncoderError::io(&path, e))?;
        VisionConfig::from_json(&text).map_err(|reason| EncoderError::Model { path, reason })
    }

    pub fn from_json(text: &str) -> Result<VisionConfig, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let model_type = v.get("model_type").and_then(|t| t.as_str()).unwrap_or("");
        let raw: RawVision = match model_type {
            "clip_vision_model" => serde_json::from_value(v.clone()).map_err(|e| e.to_string())?,
            "clip" => {
                let mut raw: RawVision = serde_json::from_value(v.get("vision_config").cloned().unwrap_or_default())
                    .map_err(|e| format!("vision_config: {e}"))?;
                // A CLIPModel's projection width is the top level's.
                if let Some(p) = v.get("projection_dim").and_then(|p| p.as_u64()) {
                    raw.projection_dim = p as usize;
                }
                raw
            }
            other => return Err(format!("model_type {other:?}: expected a CLIP model (clip or clip_vision_model)")),
        };
        let activation = match raw.hidden_act.as_str() {
            "quick_gelu" => Activation::QuickGelu,
            "gelu" => Activation::Gelu,
            other => return Err(format!("hidden_act {other:?} is not supported (quick_gelu, gelu)")),
        };
        if raw.num_channels != 3 {
            return Err(format!("num_channels {}: only RGB (3) is supported", raw.num_channels));
        }
        if raw.num_attention_heads == 0 || raw.hidden_size == 0 || !raw.hidden_size.is_multiple_of(raw.num_attention_heads) {
            return Err(format!("hidden_size {} is not a multiple of num_attention_heads {}", raw.hidden_size, raw.num_attention_heads));
        }
        if raw.patch_size == 0 || raw.image_size < raw.patch_size || raw.hidden_size > 8192 || raw.intermediate_size == 0 {
            return Err(format!("image_size {} and patch_size {}: the image must hold at least one patch", raw.image_size, raw.patch_size));
        }
        Ok(VisionConfig {
            hidden_size: raw.hidden_size,
            num_heads: raw.num_attention_heads,
            intermediate_size: raw.intermediate_size,
            num_layers: raw.num_hidden_layers,
            patch_size: raw.patch_size,
            image_size: raw.image_size,
            projection_dim: Some(raw.projection_dim).filter(|&p| p > 0),
            layer_norm_eps: raw.layer_norm_eps,
            activation,
        })
    }

    /// Patches per side.
    pub fn grid(&self) -> usize {
        self.image_size / self.patch_size
    }

    /// Tokens per image: the patches and the class token.
    pub fn tokens(&self) -> usize {
        self.grid() * self.grid() + 1
    }

    /// The embedding's width.
    pub fn embed_dim(&self) -> usize {
        self.projection_dim.unwrap_or(self.hidden_size)
    }

    /// Values per image of the input, `3 × image_size²`.
    pub fn pixels(&self) -> usize {
        3 * self.image_size * self.image_size
    }

    /// A short name for logs: `ViT 1024 wide, 24 layers, patch 14 at 224 px`.
    pub fn describe(&self) -> String {
        format!("ViT {} wide, {} layers, patch {} at {} px", self.hidden_size, self.num_layers, self.patch_size, self.image_size)
    }
}

/// A vision tower's weights (f32 on the host).
#[derive(Debug, Clone)]
pub struct VisionWeights {
    /// The patch embedding as a product: `[hidden, 3 · patch²]`, no bias (zeros).
    pub patch: Linear,
    pub class: Vec<f32>,
    /// `[tokens × hidden]`.
    pub position: Vec<f32>,
    pub pre_norm: Norm,
    pub layers: Vec<Layer>,
    pub post_norm: Norm,
    /// `[embed_dim, hidden]`, no bias; `None` without a projection.
    pub projection: Option<Linear>,
}

impl VisionWeights {
    /// `path` (a `.safetensors` file: a whole CLIP checkpoint or the vision tower alone),
    /// each tensor from its place in the file (a whole CLIP file's text tower is never read).
    pub fn load(path: &Path, config: &VisionConfig) -> Result<VisionWeights, EncoderError> {
        VisionWeights::read(Reader::open(path, "vision_model.")?, config)
    }

    pub fn from_bytes(bytes: &[u8], path: &Path, config: &VisionConfig) -> Result<VisionWeights, EncoderError> {
        VisionWeights::read(Reader::new(bytes, path, "vision_model.")?, config)
    }

    /// The checks of [`VisionWeights::load`] on `path`'s header alone; the weights it gives
    /// are hollow (shapes kept, values empty), for planning's set-up check.
    pub fn check(path: &Path, config: &VisionConfig) -> Result<VisionWeights, EncoderError> {
        VisionWeights::read(Reader::header_only(path, "vision_model.")?, config)
    }

    fn read(r: Reader<'_>, config: &VisionConfig) -> Result<VisionWeights, EncoderError> {
        let (h, i, p) = (config.hidden_size, config.intermediate_size, config.patch_size);
        if !r.has("vision_model.embeddings.patch_embedding.weight") {
            return Err(r.err("no vision_model.embeddings.patch_embedding.weight tensor: not a CLIP checkpoint".into()));
        }
        let no_bias = |w: Vec<f32>, out: usize, inp: usize| Linear { w, b: vec![0.0; out], out, inp };
        let patch = no_bias(r.get("embeddings.patch_embedding.weight", &[h, 3, p, p], false)?, h, 3 * p * p);
        let mut layers = Vec::with_capacity(config.num_layers);
        for l in 0..config.num_layers {
            let q = format!("encoder.layers.{l}");
            layers.push(Layer {
                query: r.linear(&format!("{q}.self_attn.q_proj"), h, h, false)?,
                key: r.linear(&format!("{q}.self_attn.k_proj"), h, h, false)?,
                value: r.linear(&format!("{q}.self_attn.v_proj"), h, h, false)?,
                attn_out: r.linear(&format!("{q}.self_attn.out_proj"), h, h, false)?,
                attn_norm: r.norm(&format!("{q}.layer_norm1"), h)?,
                up: r.linear(&format!("{q}.mlp.fc1"), i, h, false)?,
                down: r.linear(&format!("{q}.mlp.fc2"), h, i, false)?,
                out_norm: r.norm(&format!("{q}.layer_norm2"), h)?,
                pos_key: Vec::new(),
                pos_query: Vec::new(),
            });
        }
        let projection = match config.projection_dim {
            Some(d) => Some(no_bias(r.get("visual_projection.weight", &[d, h], true)?, d, h)),
            None => None,
        };
        Ok(VisionWeights {
            patch,
            class: r.get("embeddings.class_embedding", &[h], false)?,
            position: r.get("embeddings.position_embedding.weight", &[config.tokens(), h], false)?,
            // transformers' spelling.
            pre_norm: r.norm("pre_layrnorm", h)?,
            layers,
            post_norm: r.norm("post_layernorm", h)?,
            projection,
        })
    }
}

/// Where a loaded tower runs.
enum Backend {
    Cpu,
    Gpu(Box<gpu::GpuVision>),
}

/// A vision tower loaded from a model directory, on the CPU or the GPU.
pub struct VisionModel {
    pub config: VisionConfig,
    pub weights: VisionWeights,
    backend: Backend,
    /// Loaded by [`VisionOptions::check_only`]: hollow weights, never run.
    check_only: bool,
}

/// How a [`VisionModel`] is set up (the text encoder's [`crate::Options`] fields that apply).
#[derive(Debug, Clone)]
pub struct VisionOptions {
    pub device: crate::Device,
    /// GPU memory the tower may use (weights, activations, workspace), bytes.
    pub gpu_memory_bytes: Option<u64>,
    /// Where compiled GPU kernels are cached.
    pub kernel_cache: Option<std::path::PathBuf>,
    /// Planning's set-up check (as [`crate::Options::check_only`]): the weights file's header
    /// checked, no weight read, on the CPU; the tower refuses to run.
    pub check_only: bool,
}

impl VisionModel {
    /// `dir/config.json` and `dir/model.safetensors`, on the CPU.
    pub fn load(dir: &Path) -> Result<VisionModel, EncoderError> {
        VisionModel::load_with(
            dir,
            &VisionOptions { device: crate::Device::Cpu, gpu_memory_bytes: None, kernel_cache: None, check_only: false },
        )
    }

    /// [`VisionModel::load`] on the device `opts` asks for (`Auto`: the GPU when one is
    /// usable, else the CPU).
    pub fn load_with(dir: &Path, opts: &VisionOptions) -> Result<VisionModel, EncoderError> {
        let config = VisionConfig::load(dir)?;
        let path = dir.join("model.safetensors");
        let weights = if opts.check_only { VisionWeights::check(&path, &config)? } else { VisionWeights::load(&path, &config)? };
        let gpu = || gpu::GpuVision::new(&config, &weights, opts.gpu_memory_bytes, opts.kernel_cache.as_deref()).map(Box::new);
        let backend = match opts.device {
            _ if opts.check_only => Backend::Cpu,
            crate::Device::Cpu => Backend::Cpu,
            crate::Device::Gpu => Backend::Gpu(gpu()?),
            crate::Device::Auto => gpu().map(Backend::Gpu).unwrap_or(Backend::Cpu),
        };
        Ok(VisionModel { config, weights, backend, check_only: opts.check_only })
    }

    /// "GPU" or "CPU".
    pub fn device(&self) -> &'static str {
        match self.backend {
            Backend::Cpu => "CPU",
            Backend::Gpu(_) => "GPU",
        }
    }

    /// One embedding per image (`pixels`: images back to back, [`VisionConfig::pixels`]
    /// values each), `[n × embed_dim]`, scaled to unit length when `normalize`; on the GPU in
    /// passes of `per_pass` images.
    pub fn embed(&self, pixels: &[f32], normalize: bool, per_pass: usize) -> Result<Vec<f32>, EncoderError> {
        if self.check_only {
            return Err(EncoderError::CheckOnly);
        }
        let Backend::Gpu(g) = &self.backend else { return Ok(self.embed_cpu(pixels, normalize)) };
        let mut out = g.embed(pixels, per_pass)?;
        if normalize {
            normalize_rows(&mut out, self.config.embed_dim());
        }
        Ok(out)
    }

    /// One embedding per encoded image, as [`VisionModel::embed`]: on the GPU, JPEGs that
    /// nvJPEG decodes are decoded and preprocessed there (`processor`'s plan for their size);
    /// every other image (and every image on the CPU) is made into pixel values by `cpu(i)`,
    /// on all cores.
    pub fn embed_encoded(
        &self,
        images: &[&[u8]],
        processor: &curator_image::clip::Processor,
        cpu: &(dyn Fn(usize) -> Result<Vec<f32>, String> + Sync),
        normalize: bool,
        per_pass: usize,
    ) -> Result<Vec<f32>, EncoderError> {
        let mut out = self.encoded(images, processor, cpu, per_pass, true)?;
        if normalize {
            normalize_rows(&mut out, self.config.embed_dim());
        }
        Ok(out)
    }

    /// The preprocessing of [`VisionModel::embed_encoded`] alone (decode, resize, crop,
    /// normalise, cut into patches; on the GPU the patches stay there): for benchmarks.
    pub fn prepare_encoded(
        &self,
        images: &[&[u8]],
        processor: &curator_image::clip::Processor,
        cpu: &(dyn Fn(usize) -> Result<Vec<f32>, String> + Sync),
        per_pass: usize,
    ) -> Result<(), EncoderError> {
        self.encoded(images, processor, cpu, per_pass, false).map(drop)
    }

    /// [`VisionModel::embed_encoded`], not normalised; without `forward` the preprocessing
    /// alone, returning nothing.
    fn encoded(
        &self,
        images: &[&[u8]],
        processor: &curator_image::clip::Processor,
        cpu: &(dyn Fn(usize) -> Result<Vec<f32>, String> + Sync),
        per_pass: usize,
        forward: bool,
    ) -> Result<Vec<f32>, EncoderError> {
        use rayon::prelude::*;
        if self.check_only {
            return Err(EncoderError::CheckOnly);
        }
        match &self.backend {
            Backend::Gpu(g) => {
                let slots = g.route(images, processor, cpu)?;
                g.embed_slots(&slots, Some(&processor.table()), Some(cpu), per_pass, forward)
            }
            Backend::Cpu => {
                let pixels = (0..images.len()).into_par_iter().map(cpu).collect::<Result<Vec<_>, _>>().map_err(EncoderError::Image)?;
                Ok(if forward { cpu::embed(&self.config, &self.weights, &pixels.concat()) } else { Vec::new() })
            }
        }
    }

    /// How JPEGs are decoded: on the GPU ("nvJPEG, hardware" or "nvJPEG, GPU"), or on the CPU
    /// and why.
    pub fn jpeg_decoding(&self) -> String {
        match &self.backend {
            Backend::Cpu => "CPU".into(),
            Backend::Gpu(g) => match g.jpeg_decoder() {
                Ok(b) => format!("nvJPEG ({b}{})", if g.jpeg_pooled() { ", pooled memory" } else { "" }),
                Err(e) => format!("CPU ({e})"),
            },
        }
    }

    /// [`VisionModel::embed`] on the CPU, whatever the backend (the reference).
    pub fn embed_cpu(&self, pixels: &[f32], normalize: bool) -> Vec<f32> {
        let mut out = cpu::embed(&self.config, &self.weights, pixels);
        if normalize {
            normalize_rows(&mut out, self.config.embed_dim());
        }
        out
    }

    /// Device milliseconds per step of the GPU passes so far (empty on the CPU, or unless
    /// `CURATOR_ENCODER_PROFILE` is set).
    pub fn profile(&self) -> Vec<(String, f64)> {
        match &self.backend {
            Backend::Cpu => Vec::new(),
            Backend::Gpu(g) => g.profile(),
        }
    }

    /// Whether passes of `images` fit the GPU budget (always on the CPU).
    pub fn fits(&self, images: usize) -> bool {
        match &self.backend {
            Backend::Cpu => true,
            Backend::Gpu(g) => g.fits(images),
        }
    }
}

/// Patch `(gy, gx)` of an image's pixel values (`[3 × size × size]`) flattened into `row` as the
/// patch convolution's weight is (channel, row, column): `3 · patch²` values. The one
/// definition of the cut, for both back-ends.
pub(crate) fn patch_into(px: &[f32], size: usize, patch: usize, gy: usize, gx: usize, row: &mut [f32]) {
    let mut at = 0;
    for c in 0..3 {
        for ky in 0..patch {
            let src = c * size * size + (gy * patch + ky) * size + gx * patch;
            row[at..at + patch].copy_from_slice(&px[src..src + patch]);
            at += patch;
        }
    }
}

/// Each `dim`-wide row scaled to unit length (NeMo's `embed / ‖embed‖`; a zero row stays zero).
pub fn normalize_rows(v: &mut [f32], dim: usize) {
    for row in v.chunks_exact_mut(dim) {
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            row.iter_mut().for_each(|x| *x /= n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_of_both_layouts_and_transformers_defaults() {
        let full = r#"{"model_type": "clip", "projection_dim": 768,
            "vision_config": {"hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16,
                              "num_hidden_layers": 24, "patch_size": 14}}"#;
        let c = VisionConfig::from_json(full).unwrap();
        assert_eq!((c.hidden_size, c.num_layers, c.patch_size, c.image_size, c.embed_dim()), (1024, 24, 14, 224, 768));
        assert_eq!(c.tokens(), 257);
        assert_eq!(c.activation, Activation::QuickGelu);
        let b32 = VisionConfig::from_json(r#"{"model_type": "clip_vision_model"}"#).unwrap();
        assert_eq!((b32.hidden_size, b32.tokens(), b32.embed_dim()), (768, 50, 512));
        assert!(VisionConfig::from_json(r#"{"model_type": "bert"}"#).unwrap_err().contains("CLIP"));
        assert!(VisionConfig::from_json(r#"{"model_type": "clip_vision_model", "hidden_size": 100}"#).is_err());
    }
}
