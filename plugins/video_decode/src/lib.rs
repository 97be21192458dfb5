//! `video_decode`: each video document (its `text` is the file's path, as the `video` source
//! writes it) decoded into small frames at a target rate, as the frame columns of
//! [`curator_video::frames`]: what scene detection, motion scores and frame embeddings read.
//!
//! On the GPU it decodes with NVDEC (`nvdec.rs`: the driver's `libnvcuvid`, loaded at run time,
//! fed by our own demuxer) and scales on the device, so only the small frames cross to the host;
//! on the CPU with FFmpeg's libavcodec and libswscale (`cpu.rs`, frame-threaded). Both are fed
//! the same packets by [`curator_video::Demuxer`].
//!
//! A video that fails to decode fails its batch (one video per batch by default): the host
//! retries it (`execution.num_run_attempts`), then stops the run naming the file, or, with
//! `execution.ignore_failures`, dead-letters it with the reason and goes on.

#[cfg(feature = "cpu")]
mod cpu;
mod nvdec;

use std::path::Path;

use curator_sdk::prelude::*;
use curator_video::frames::{self, Frames, Target};
use curator_video::{Demuxer, VideoError};

/// Videos into frames at a target rate and size (NVDEC on the GPU, FFmpeg on the CPU).
#[stage(
    name = "video_decode",
    native,
    cpus = 4.0,
    gpu_memory_gb = 1.0,
    memory_mb = 4096,
    inputs = ["text"],
    outputs = ["frames", "frame_times", "frame_width", "frame_height", "frame_channels"],
    batch_size = 1
)]
pub struct VideoDecode {
    /// auto (NVDEC if the driver has it, else the CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
    /// Frames per second to keep (0: every frame; scene cuts need every frame).
    #[param(default = 0.0, min = 0.0)]
    pub fps: f64,
    /// Width of the frames written, in pixels.
    #[param(default = 48, min = 1, max = 4096)]
    pub width: usize,
    /// Height of the frames written, in pixels.
    #[param(default = 27, min = 1, max = 4096)]
    pub height: usize,
    /// rgb (3 bytes a pixel) | gray (luma, 1 byte)
    #[param(default = "rgb", one_of = ["rgb", "gray"])]
    pub color: String,
    /// Most frames kept per video (0: no limit); a video with more fails, naming the limit.
    #[param(default = 0, min = 0)]
    pub max_frames: usize,
    /// Decoder threads on the CPU (0: one per core).
    #[param(default = 4, min = 0, max = 256)]
    pub threads: usize,
    #[state]
    gpu: Option<nvdec::Nvdec>,
}

/// Frames above this many bytes per video would not fit a batch column (u32 offsets).
const MAX_FRAME_BYTES: usize = 1 << 31;

impl VideoDecode {
    fn target(&self) -> Target {
        let channels = if self.color == "gray" { 1 } else { 3 };
        let by_size = MAX_FRAME_BYTES / (self.width * self.height * channels).max(1);
        let max_frames = if self.max_frames == 0 { by_size } else { self.max_frames.min(by_size) };
        Target { fps: self.fps, width: self.width, height: self.height, channels, max_frames }
    }

    fn decode(&mut self, path: &str) -> Result<Frames, StageError> {
        let failed = |e: VideoError| StageError::Failed(e.to_string());
        let demuxer = Demuxer::open(Path::new(path)).map_err(failed)?;
        let target = self.target();
        if let Some(gpu) = self.gpu.as_mut() {
            return gpu.decode(demuxer, &target).map_err(|e| StageError::Failed(format!("{path}: NVDEC: {e}")));
        }
        cpu_decode(demuxer, &target, self.threads).map_err(|e| StageError::Failed(format!("{path}: {e}")))
    }
}

#[cfg(feature = "cpu")]
fn cpu_decode(demuxer: Demuxer, target: &Target, threads: usize) -> Result<Frames, String> {
    cpu::decode(demuxer, target, threads)
}

#[cfg(not(feature = "cpu"))]
fn cpu_decode(_: Demuxer, _: &Target, _: usize) -> Result<Frames, String> {
    Err("this build of video_decode has no CPU decoder (built without the `cpu` feature); use device: gpu".into())
}

impl Stage for VideoDecode {
    fn init(&mut self) -> Result<(), StageError> {
        let want_gpu = match self.device.as_str() {
            "gpu" => true,
            "cpu" => false,
            _ => nvdec::Nvdec::available(),
        };
        if want_gpu {
            self.gpu = Some(nvdec::Nvdec::new().map_err(|e| StageError::Failed(format!("video_decode: device gpu: {e}")))?);
        } else if !cfg!(feature = "cpu") {
            return Err(StageError::InvalidParams("device cpu: this build has no CPU decoder".into()));
        }
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let paths = batch.column("text")?.strings()?;
        let mut rows = Vec::with_capacity(paths.len());
        for r in 0..paths.len() {
            let path = paths.get(r).unwrap_or_default();
            rows.push(self.decode(path)?);
        }
        Ok(Output::Columns(frames::to_columns(&rows)))
    }
}

/// Check that a decoder's output fits the target's frame limit.
pub(crate) fn check_limit(frames: &Frames, target: &Target) -> Result<(), String> {
    if frames.len() >= target.max_frames {
        return Err(format!(
            "more than {} frames of {}x{}x{} (raise max_frames, or lower fps or the frame size)",
            target.max_frames, target.width, target.height, target.channels
        ));
    }
    Ok(())
}
