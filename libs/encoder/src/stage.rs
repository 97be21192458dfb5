//! What the embedder and classifier stages share: their encoder set-up from params, the
//! model's directory from the grant, and errors as the host should treat them.

use curator_sdk::prelude::*;

use crate::{Device, Encoder, EncoderError, Options};

/// Options for the encoder from a stage's params (shared by the embedder and classifier).
pub fn encoder_options(device: &str, max_tokens: usize, max_batch_tokens: usize, max_docs: usize) -> Result<Options, StageError> {
    options_in(&curator_sdk::native::context(), device, max_tokens, max_batch_tokens, max_docs)
}

/// [`encoder_options`] for a worker whose context is `context`.
fn options_in(
    context: &curator_sdk::native::WorkerContext,
    device: &str,
    max_tokens: usize,
    max_batch_tokens: usize,
    max_docs: usize,
) -> Result<Options, StageError> {
    let device = device.parse::<Device>().map_err(StageError::InvalidParams)?;
    Ok(Options {
        // Planning's set-up check reads the model's config and tokenizer and checks its
        // weights file's header, but reads no weight and leaves the GPU alone: the worker
        // that runs loads the model, once.
        device: if context.check_only { Device::Cpu } else { device },
        check_only: context.check_only,
        max_tokens: (max_tokens > 0).then_some(max_tokens),
        token_budget: max_batch_tokens,
        max_docs,
        gpu_memory_bytes: context.gpu_memory_budget_bytes,
        kernel_cache: context.cache_dir.as_ref().map(|d| std::path::PathBuf::from(d).join("kernels")),
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
    let check = if curator_sdk::native::context().check_only { " (set-up check: the worker that runs puts it on the GPU)" } else { "" };
    let t = encoder.setup_times();
    let gpu_part = match encoder.kernels_from() {
        Some(_) => format!(", CUDA context {:.2} s alongside, then cuBLAS + kernels + weights {:.2} s", t.context_s, t.backend_s),
        None => String::new(),
    };
    log(
        Level::Info,
        &format!(
            "{stage}: {} ({}; {} layers, {} wide) on the {}{check}, up to {} tokens, {} padded tokens per pass, tokenizer: {}; \
             set up in {:.2} s (model files {:.2} s{gpu_part})",
            model,
            encoder.config.layout,
            encoder.config.num_layers,
            encoder.config.hidden_size,
            encoder.device(),
            encoder.max_tokens(),
            encoder.token_budget(),
            encoder.tokenizer(),
            t.total_s(),
            t.files_s,
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

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::native::WorkerContext;

    #[test]
    fn the_set_up_check_leaves_the_gpu_alone_and_workers_cache_kernels() {
        let ctx = WorkerContext { check_only: true, ..Default::default() };
        assert_eq!(options_in(&ctx, "gpu", 0, 16384, 1024).unwrap().device, Device::Cpu);
        let ctx = WorkerContext { cache_dir: Some("/c".into()), gpu_memory_budget_bytes: Some(1 << 30), ..Default::default() };
        let opts = options_in(&ctx, "gpu", 256, 16384, 1024).unwrap();
        assert_eq!((opts.device, opts.max_tokens, opts.gpu_memory_bytes), (Device::Gpu, Some(256), Some(1 << 30)));
        assert_eq!(opts.kernel_cache, Some(std::path::PathBuf::from("/c/kernels")));
        assert!(options_in(&ctx, "tpu", 0, 1, 1).is_err());
    }
}
