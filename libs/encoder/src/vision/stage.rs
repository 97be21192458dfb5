//! What the stages over CLIP's vision tower share (`image_embedder`, `clip_aesthetic_filter`):
//! the model and its preprocessing from the granted directory, on the device the params and
//! the worker's context say, with the images per pass halved until a pass fits the stage's
//! `gpu_memory_gb`.

use curator_image::clip::Processor;
use curator_sdk::prelude::*;

use super::{VisionModel, VisionOptions};
use crate::{Device, EncoderError};

/// The tower at `model` (inside the granted `models` directory) and its processor, on
/// `device` (`auto`, `gpu`, `cpu`); `per_pass` is lowered until a pass fits. Planning's
/// set-up check reads the model's config and its weights file's header, no weight, and
/// leaves the GPU to the worker that runs.
pub fn load_tower(stage: &str, model: &str, device: &str, per_pass: &mut usize) -> Result<(VisionModel, Processor), StageError> {
    let context = curator_sdk::native::context();
    let device = device.parse::<Device>().map_err(StageError::InvalidParams)?;
    let opts = VisionOptions {
        device: if context.check_only { Device::Cpu } else { device },
        gpu_memory_bytes: context.gpu_memory_budget_bytes,
        kernel_cache: context.cache_dir.as_ref().map(|d| std::path::PathBuf::from(d).join("kernels")),
        check_only: context.check_only,
    };
    let dir = curator_sdk::granted_path(model);
    let tower = VisionModel::load_with(&dir, &opts).map_err(|e| match e {
        EncoderError::Io { .. } | EncoderError::Model { .. } => {
            StageError::InvalidParams(format!("model {model}: {e} (grant its directory as `models`)"))
        }
        other => StageError::Failed(format!("model {model}: {other}")),
    })?;
    let processor = Processor::from_dir(&dir, tower.config.image_size).map_err(|e| StageError::InvalidParams(e.to_string()))?;
    let input = processor.output_size(tower.config.image_size, tower.config.image_size);
    if input != (tower.config.image_size, tower.config.image_size) {
        return Err(StageError::InvalidParams(format!(
            "model {model}: the processor makes {}×{} images, the tower takes {} px",
            input.0, input.1, tower.config.image_size
        )));
    }
    while *per_pass > 1 && !tower.fits(*per_pass) {
        *per_pass /= 2;
    }
    log(
        Level::Info,
        &format!(
            "{stage}: {model} ({}, {} wide embeddings) on the {}, {} images per pass, JPEGs decoded by {}",
            tower.config.describe(),
            tower.config.embed_dim(),
            tower.device(),
            per_pass,
            tower.jpeg_decoding()
        ),
    );
    Ok((tower, processor))
}

/// A failure of the tower during a batch, as the host should treat it.
pub fn batch_error(e: EncoderError) -> StageError {
    match e {
        EncoderError::OutOfMemory(m) => StageError::OutOfMemory(m),
        other => StageError::Failed(other.to_string()),
    }
}
