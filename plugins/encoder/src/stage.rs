//! What the embedder and classifier stages share: their encoder set-up from params, the
//! model's directory from the grant, and errors as the host should treat them.

use curator_sdk::prelude::*;

use crate::{Device, Encoder, EncoderError, Options};

/// Options for the encoder from a stage's params (shared by the embedder and classifier).
pub fn encoder_options(device: &str, max_tokens: usize, max_batch_tokens: usize, max_docs: usize) -> Result<Options, StageError> {
    Ok(Options {
        device: device.parse::<Device>().map_err(StageError::InvalidParams)?,
        max_tokens: (max_tokens > 0).then_some(max_tokens),
        token_budget: max_batch_tokens,
        max_docs,
        gpu_memory_bytes: curator_sdk::native::context().gpu_memory_budget_bytes,
        kernel_cache: curator_sdk::native::context().cache_dir.map(|d| std::path::PathBuf::from(d).join("kernels")),
        ..Options::default()
    })
}

/// Load the model a stage's `model` param names (a path in a granted directory).
pub fn load_encoder(stage: &str, model: &str, opts: &Options) -> Result<Encoder, StageError> {
    let dir = curator_sdk::granted_path(model);
    let encoder = Encoder::load(&dir, opts).map_err(|e| match e {
        EncoderError::Io { .. } | EncoderError::Model { .. } => {
            StageError::InvalidParams(format!("model {model}: {e} (grant its directory as `models`)"))
        }
        other => StageError::Failed(other.to_string()),
    })?;
    log(
        Level::Info,
        &format!(
            "{stage}: {} ({} layers, {} wide) on the {}, up to {} tokens, {} padded tokens per pass, tokenizer: {}",
            model,
            encoder.config.num_layers,
            encoder.config.hidden_size,
            encoder.device(),
            encoder.max_tokens(),
            encoder.token_budget(),
            encoder.tokenizer()
        ),
    );
    Ok(encoder)
}

/// An encoder error during a batch, as the host should treat it.
pub fn batch_error(e: EncoderError) -> StageError {
    match e {
        EncoderError::OutOfMemory(m) => StageError::OutOfMemory(m),
        other => StageError::Failed(other.to_string()),
    }
}

/// The texts of column `field` (null rows as empty texts).
pub fn texts<'a>(batch: &'a Batch, field: &str) -> Result<Vec<&'a str>, StageError> {
    let col = batch.column(field)?;
    let s = col.strings()?;
    (0..s.len())
        .map(|i| {
            if col.is_valid(i) {
                s.get(i).ok_or_else(|| StageError::Failed(format!("column {field:?}: row {i} is malformed")))
            } else {
                Ok("")
            }
        })
        .collect()
}
