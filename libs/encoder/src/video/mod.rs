//! Video towers: one embedding per clip from a few of its frames. InternVideo2's stage-2
//! vision tower (`PretrainInternVideo2` + `vision_proj`, what NeMo Curator's
//! `InternVideo2EmbeddingStage` runs): frames cut into 14 × 14 patches (a tubelet of one frame),
//! a class token and one learned position per patch and frame, pre-norm blocks with RMS norms,
//! RMS-normed queries and keys and layer scale, an attention-pooling block (the tokens' mean
//! asks every token) to the CLIP width, then the projection to the shared video-text space and
//! unit length.
//!
//! A model directory holds `config.json` ([`VideoConfig`]) and `model.safetensors` under the
//! checkpoint's own names (`vision_encoder.…`, `vision_proj.…`);
//! `scripts/models/internvideo2_weights.py` makes one from the published checkpoint. The tower
//! runs in f32 on the CPU ([`cpu`]); frames are made into its input as NeMo makes them
//! ([`frames`]).

pub mod cpu;
pub mod frames;
pub mod gpu;

use std::path::Path;

use rayon::prelude::*;
use serde::Deserialize;

use crate::EncoderError;
use crate::tensors::{Linear, Norm};
use crate::weights::Reader;

/// A video tower's shape, from the model directory's `config.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VideoConfig {
    /// `internvideo2` (the one family read so far).
    pub model_type: String,
    /// The tower's width (1408 for the 1B model).
    pub embed_dim: usize,
    /// Blocks (40 for the 1B model).
    pub depth: usize,
    pub num_heads: usize,
    /// The MLP's hidden width (6144: 1408 · 48/11).
    pub mlp_hidden: usize,
    pub patch_size: usize,
    /// Frames are resized to this square.
    pub img_size: usize,
    /// Frames per clip (the position table's length: NeMo's InternVideo2 takes 8).
    pub num_frames: usize,
    /// The attention pool's output width (768).
    pub clip_embed_dim: usize,
    pub attn_pool_num_heads: usize,
    /// The embedding's width after `vision_proj` (512).
    pub proj_dim: usize,
}

impl VideoConfig {
    pub fn load(dir: &Path) -> Result<VideoConfig, EncoderError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| EncoderError::io(&path, e))?;
        let config: VideoConfig =
            serde_json::from_str(&text).map_err(|e| EncoderError::Model { path: path.clone(), reason: e.to_string() })?;
        config.validate().map_err(|reason| EncoderError::Model { path, reason })?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        if self.model_type != "internvideo2" {
            return Err(format!("model_type {:?}: only \"internvideo2\" is read", self.model_type));
        }
        let zero = [self.embed_dim, self.num_heads, self.mlp_hidden, self.patch_size, self.img_size, self.num_frames];
        if zero.contains(&0) || self.clip_embed_dim == 0 || self.attn_pool_num_heads == 0 || self.proj_dim == 0 {
            return Err("every size must be positive".into());
        }
        if !self.embed_dim.is_multiple_of(self.num_heads) || !self.embed_dim.is_multiple_of(self.attn_pool_num_heads) {
            return Err(format!("embed_dim {} is not a multiple of the heads", self.embed_dim));
        }
        if !self.img_size.is_multiple_of(self.patch_size) {
            return Err(format!("img_size {} is not a multiple of patch_size {}", self.img_size, self.patch_size));
        }
        Ok(())
    }

    /// Patches per side of a frame.
    pub fn grid(&self) -> usize {
        self.img_size / self.patch_size
    }

    /// Tokens of a clip: the class token and a patch per frame.
    pub fn tokens(&self) -> usize {
        1 + self.num_frames * self.grid() * self.grid()
    }

    /// Pixel values of one clip: `[frames × 3 × size × size]`.
    pub fn pixels(&self) -> usize {
        self.num_frames * 3 * self.img_size * self.img_size
    }

    pub fn describe(&self) -> String {
        format!(
            "InternVideo2 {} wide, {} blocks, {} frames of {} px, embeddings of {}",
            self.embed_dim, self.depth, self.num_frames, self.img_size, self.proj_dim
        )
    }
}

/// One block's parameters.
#[derive(Debug, Clone)]
pub struct Block {
    pub norm1: Vec<f32>,
    /// Queries, keys and values side by side (`[3 · dim, dim]`, no bias).
    pub qkv: Linear,
    pub q_norm: Vec<f32>,
    pub k_norm: Vec<f32>,
    pub proj: Linear,
    pub ls1: Vec<f32>,
    pub norm2: Vec<f32>,
    pub fc1: Linear,
    pub fc2: Linear,
    pub ls2: Vec<f32>,
}

/// The attention-pooling block (`clip_projector`).
#[derive(Debug, Clone)]
pub struct Pool {
    pub norm_q: Norm,
    pub norm_k: Norm,
    pub norm_v: Norm,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub proj: Linear,
}

/// A video tower's weights (f32 on the host).
#[derive(Debug, Clone)]
pub struct VideoWeights {
    /// The patch embedding as a product: `[dim, 3 · patch²]`.
    pub patch: Linear,
    pub class: Vec<f32>,
    /// `[tokens × dim]`.
    pub position: Vec<f32>,
    pub blocks: Vec<Block>,
    pub pool: Pool,
    pub projection: Linear,
}

impl VideoWeights {
    fn read(r: &Reader<'_>, c: &VideoConfig) -> Result<VideoWeights, EncoderError> {
        let (d, p, m) = (c.embed_dim, c.patch_size, c.mlp_hidden);
        if !r.has("vision_encoder.patch_embed.proj.weight") {
            return Err(r.err("no vision_encoder.patch_embed.proj.weight tensor: not an InternVideo2 checkpoint".into()));
        }
        let vec = |name: &str, n: usize| r.get::<f32>(name, &[n], false);
        let linear = |name: &str, out: usize, inp: usize| r.linear::<f32>(name, out, inp, false);
        let patch = Linear {
            w: r.get("patch_embed.proj.weight", &[d, 3, 1, p, p], false)?,
            b: vec("patch_embed.proj.bias", d)?,
            out: d,
            inp: 3 * p * p,
        };
        let mut blocks = Vec::with_capacity(c.depth);
        for i in 0..c.depth {
            let b = format!("blocks.{i}");
            blocks.push(Block {
                norm1: vec(&format!("{b}.norm1.weight"), d)?,
                qkv: Linear { w: r.get(&format!("{b}.attn.qkv.weight"), &[3 * d, d], false)?, b: vec![0.0; 3 * d], out: 3 * d, inp: d },
                q_norm: vec(&format!("{b}.attn.q_norm.weight"), d)?,
                k_norm: vec(&format!("{b}.attn.k_norm.weight"), d)?,
                proj: linear(&format!("{b}.attn.proj"), d, d)?,
                ls1: vec(&format!("{b}.ls1.gamma"), d)?,
                norm2: vec(&format!("{b}.norm2.weight"), d)?,
                fc1: linear(&format!("{b}.mlp.fc1"), m, d)?,
                fc2: linear(&format!("{b}.mlp.fc2"), d, m)?,
                ls2: vec(&format!("{b}.ls2.gamma"), d)?,
            });
        }
        let cross = |x: &str| -> Result<Linear, EncoderError> {
            Ok(Linear {
                w: r.get(&format!("clip_projector.cross_attn.{x}.weight"), &[d, d], false)?,
                b: vec(&format!("clip_projector.cross_attn.{x}_bias"), d)?,
                out: d,
                inp: d,
            })
        };
        let pool = Pool {
            norm_q: r.norm("clip_projector.norm1_q", d)?,
            norm_k: r.norm("clip_projector.norm1_k", d)?,
            norm_v: r.norm("clip_projector.norm1_v", d)?,
            q: cross("q")?,
            k: cross("k")?,
            v: cross("v")?,
            proj: linear("clip_projector.cross_attn.proj", c.clip_embed_dim, d)?,
        };
        Ok(VideoWeights {
            patch,
            class: r.get("cls_token", &[1, 1, d], false)?,
            position: r.get("pos_embed", &[1, c.tokens(), d], false)?,
            blocks,
            pool,
            projection: r.linear("vision_proj", c.proj_dim, c.clip_embed_dim, true)?,
        })
    }
}

/// Where a loaded tower runs.
enum Backend {
    Cpu,
    Gpu(Box<gpu::GpuVideo>),
}

/// A video tower loaded from a model directory, on the CPU or the GPU.
pub struct VideoModel {
    pub config: VideoConfig,
    pub weights: VideoWeights,
    backend: Backend,
    check_only: bool,
}

const PREFIX: &str = "vision_encoder.";

impl VideoModel {
    /// `dir/config.json` and `dir/model.safetensors`, every tensor's name and shape checked;
    /// on the CPU.
    pub fn load(dir: &Path) -> Result<VideoModel, EncoderError> {
        VideoModel::load_on(dir, crate::Device::Cpu, None)
    }

    /// [`VideoModel::load`] on `device` (`Auto`: the GPU when one is usable, else the CPU);
    /// the GPU's compiled kernels cached in `kernel_cache`.
    pub fn load_on(dir: &Path, device: crate::Device, kernel_cache: Option<&Path>) -> Result<VideoModel, EncoderError> {
        let config = VideoConfig::load(dir)?;
        let path = dir.join("model.safetensors");
        let weights = VideoWeights::read(&Reader::open(&path, PREFIX)?, &config)?;
        let gpu = || gpu::GpuVideo::open(&config, &weights, kernel_cache).map(Box::new);
        let backend = match device {
            crate::Device::Cpu => Backend::Cpu,
            crate::Device::Gpu => Backend::Gpu(gpu()?),
            crate::Device::Auto => gpu().map(Backend::Gpu).unwrap_or(Backend::Cpu),
        };
        Ok(VideoModel { config, weights, backend, check_only: false })
    }

    /// The checks of [`VideoModel::load`] on the weights' header alone (planning's set-up
    /// check); the model cannot run.
    pub fn check(dir: &Path) -> Result<VideoModel, EncoderError> {
        let config = VideoConfig::load(dir)?;
        let path = dir.join("model.safetensors");
        let weights = VideoWeights::read(&Reader::header_only(&path, PREFIX)?, &config)?;
        Ok(VideoModel { config, weights, backend: Backend::Cpu, check_only: true })
    }

    /// "cpu" or "gpu".
    pub fn device(&self) -> &'static str {
        match self.backend {
            Backend::Cpu => "cpu",
            Backend::Gpu(_) => "gpu",
        }
    }

    /// One unit-length embedding per clip (`pixels`: `[n × frames × 3 × size × size]`, as
    /// [`frames::pixels`] makes them), `[n × proj_dim]`: on the CPU the clips in parallel, on
    /// the GPU `per_pass` clips at a time.
    pub fn embed(&self, pixels: &[f32], per_pass: usize) -> Result<Vec<f32>, EncoderError> {
        if self.check_only {
            return Err(EncoderError::CheckOnly);
        }
        let per = self.config.pixels();
        if !pixels.len().is_multiple_of(per) {
            return Err(EncoderError::Image(format!("{} pixel values are not whole clips of {per}", pixels.len())));
        }
        match &self.backend {
            Backend::Cpu => Ok(self.embed_cpu(pixels)),
            Backend::Gpu(g) => {
                let mut out = Vec::with_capacity(pixels.len() / per * self.config.proj_dim);
                for pass in pixels.chunks(per * per_pass.max(1)) {
                    let clips = pass.len() / per;
                    let patches: Vec<f32> =
                        pass.par_chunks_exact(per).flat_map_iter(|clip| cpu::token_patches(&self.config, clip, true)).collect();
                    out.extend(g.embed(&patches, clips)?);
                }
                Ok(out)
            }
        }
    }

    /// [`VideoModel::embed`] on the CPU whatever the backend (the GPU path's reference).
    pub fn embed_cpu(&self, pixels: &[f32]) -> Vec<f32> {
        pixels.par_chunks_exact(self.config.pixels()).flat_map_iter(|clip| cpu::embed(&self.config, &self.weights, clip)).collect()
    }
}
