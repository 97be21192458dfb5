//! A transformer encoder runtime for native GPU stages.
//!
//! [`Encoder::load`] reads a Hugging Face model directory (`config.json`,
//! `model.safetensors`, `tokenizer.json`, and sentence-transformers' pooling files when
//! present) and runs BERT-family encoders (BERT, MiniLM, bge, e5, arctic-embed, RoBERTa) and
//! DeBERTa-v2/v3 (transformers' layout, and NeMo's model-hub checkpoints: [`hub`]): in fp16 on
//! the GPU ([`gpu`]: cuBLAS for the matrix products, NVRTC kernels for the rest, both loaded
//! at run time, so this builds without CUDA) or in f32 on the CPU ([`cpu`], the reference).
//! CLIP's vision tower ([`vision`]) runs on the same two back-ends, from pixel values.
//!
//! One call ([`Encoder::pooled`]) takes a list of texts and returns one vector per text:
//! texts are tokenized on all CPU threads a chunk ahead of the device (a producer thread),
//! sorted by length and grouped by a budget of padded tokens ([`batching`]), and run. A CUDA
//! out-of-memory error halves the budget, retries, and the smaller budget is kept for later
//! calls.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub mod batching;
pub mod config;
pub mod cpu;
pub mod gpu;
pub mod head;
pub mod hub;
pub mod model_dir;
pub mod stage;
pub mod tensors;
pub mod tokenize;
pub mod video;
pub mod vision;
pub mod weights;

pub use config::{ModelConfig, Pooling};
use tokenize::Tokenizer;
use weights::Weights;

/// What can go wrong loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum EncoderError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Model { path: PathBuf, reason: String },
    #[error("tokenizer: {0}")]
    Tokenize(String),
    #[error("no usable GPU: {0}")]
    NoGpu(String),
    #[error("GPU: {0}")]
    Gpu(String),
    /// An image that could not be made into pixel values.
    #[error("{0}")]
    Image(String),
    /// The device ran out of memory even for one document.
    #[error("GPU out of memory: {0}")]
    OutOfMemory(String),
    /// An encoder loaded for a set-up check ([`Options::check_only`]) was asked to run.
    #[error("this encoder was loaded to check the set-up only (its weights were not read)")]
    CheckOnly,
}

impl EncoderError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> EncoderError {
        EncoderError::Io { path: path.to_path_buf(), source }
    }
}

/// Padded tokens queued on the device per group by default: 0, one pass per group. Measured on
/// an H100 (MiniLM-L6, 98,707 documents, passes of 64 Ki tokens): one wait per pass 1.92 s,
/// one per four passes 2.09 s; the wait costs less than building a bigger group's ids while
/// the device is idle.
const GROUP_TOKENS: usize = 0;

/// Where the encoder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The GPU when a CUDA driver and a device are usable, else the CPU.
    Auto,
    Gpu,
    Cpu,
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Device, String> {
        match s {
            "auto" => Ok(Device::Auto),
            "gpu" | "cuda" => Ok(Device::Gpu),
            "cpu" => Ok(Device::Cpu),
            other => Err(format!("device {other:?}: expected auto, gpu or cpu")),
        }
    }
}

/// How an [`Encoder`] is set up.
#[derive(Debug, Clone)]
pub struct Options {
    pub device: Device,
    /// Longest sequence in tokens (default: sentence-transformers' `max_seq_length`, else the
    /// model's position limit).
    pub max_tokens: Option<usize>,
    /// Padded tokens per forward pass.
    pub token_budget: usize,
    /// Documents per forward pass at most (NeMo's `model_inference_batch_size`).
    pub max_docs: usize,
    /// GPU memory the encoder may use (weights, activations, workspace), bytes.
    pub gpu_memory_bytes: Option<u64>,
    /// Documents tokenized per chunk (the unit that overlaps with the device).
    pub chunk_docs: usize,
    /// Where compiled GPU kernels are cached (`None`: compile every time).
    pub kernel_cache: Option<PathBuf>,
    /// Planning's set-up check: the config, the tokenizer and the weights file's header are
    /// read and checked (every tensor the config implies, with its shape and dtype), on the
    /// CPU, but no weight is read or converted, and the encoder refuses to run
    /// ([`EncoderError::CheckOnly`]). A base-sized model's full load is over a second.
    pub check_only: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            device: Device::Auto,
            max_tokens: None,
            token_budget: 65536,
            max_docs: 1024,
            gpu_memory_bytes: None,
            chunk_docs: 2048,
            kernel_cache: None,
            check_only: false,
        }
    }
}

/// Counters of the last [`Encoder::pooled`] call.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub docs: usize,
    pub tokens: usize,
    pub padded_tokens: usize,
    pub batches: usize,
    /// Time the device side spent (forward passes, copies).
    pub compute: Duration,
    /// Time the device side waited for tokens.
    pub waiting: Duration,
    /// Out-of-memory retries (each halved the budget).
    pub oom_retries: usize,
}

/// Where a loaded model runs: the CPU reference holds its f32 weights; the GPU holds its
/// own copy on the device (the host's fp16 read is dropped once uploaded).
enum Backend {
    Cpu(Box<Weights>),
    Gpu(Box<gpu::GpuModel>),
}

/// The weights as read for one back-end, before it is set up.
enum Loaded {
    Cpu(Weights),
    Gpu(Weights<half::f16>),
}

/// A loaded model, ready to encode.
pub struct Encoder {
    pub config: ModelConfig,
    /// The classification head (runs on the host for both back-ends).
    head: Option<weights::Head>,
    tokenizer: Tokenizer,
    backend: Backend,
    token_budget: AtomicUsize,
    /// Padded tokens of the passes queued on the device before the host waits for them.
    group_tokens: AtomicUsize,
    max_docs: usize,
    chunk_docs: usize,
    stats: std::sync::Mutex<Stats>,
    setup: SetupTimes,
    /// Loaded by [`Options::check_only`]: hollow weights, never run.
    check_only: bool,
}

/// Where an encoder's set-up went, in seconds (logged by the stages: a run's start-up is
/// these, paid by every worker). The model's files are read while the driver creates the
/// GPU's context, so the parts overlap.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetupTimes {
    /// The model's files read: config, weights, tokenizer.
    pub files_s: f64,
    /// The GPU's context created by the driver (0 on the CPU), alongside the files.
    pub context_s: f64,
    /// The rest of the back-end once both were done: cuBLAS, kernels, the weights' upload.
    pub backend_s: f64,
    /// All of it, from the start to the encoder ready.
    pub wall_s: f64,
}

impl SetupTimes {
    /// All of it.
    pub fn total_s(&self) -> f64 {
        self.wall_s
    }
}

impl Encoder {
    /// Load the model in `dir` and set up its back-end. On a GPU, the driver opens the device
    /// on a second thread while the model's files are read (the context takes 0.3 s alone and
    /// over 1 s when several workers ask at once; a DeBERTa-v3-base's files 0.4–0.5 s, four
    /// workers at once on an H200 machine).
    pub fn load(dir: &Path, opts: &Options) -> Result<Encoder, EncoderError> {
        let started = std::time::Instant::now();
        let cache = opts.kernel_cache.as_deref();
        let path = dir.join("model.safetensors");
        // Where the backbone's matrices go decides how they are read: fp16 for the GPU
        // (straight from an fp16 file), f32 for the CPU reference and the set-up check.
        // `auto` on a machine without CUDA's libraries goes to the CPU at once.
        let on_gpu = !opts.check_only
            && match opts.device {
                Device::Cpu => false,
                Device::Gpu => true,
                Device::Auto => gpu::cuda_missing().is_none(),
            };
        let (files, device, files_s) = std::thread::scope(|s| {
            let device = on_gpu.then(|| s.spawn(|| gpu::open_device(cache)));
            let files = (|| -> Result<_, EncoderError> {
                let config = ModelConfig::load(dir)?;
                let weights = if opts.check_only {
                    Loaded::Cpu(Weights::check(&path, &config)?)
                } else if on_gpu {
                    Loaded::Gpu(Weights::load(&path, &config)?)
                } else {
                    Loaded::Cpu(Weights::load(&path, &config)?)
                };
                let max_tokens = opts.max_tokens.unwrap_or(config.default_tokens()).clamp(2, config.max_tokens());
                let tokenizer = Tokenizer::load(&dir.join("tokenizer.json"), max_tokens)?;
                Ok((config, weights, tokenizer))
            })();
            let files_s = started.elapsed().as_secs_f64();
            let device = device.map(|h| h.join().unwrap_or_else(|_| Err(EncoderError::NoGpu("CUDA set-up panicked".into()))));
            (files, device, files_s)
        });
        let (config, weights, tokenizer) = files?;
        let waited = started.elapsed().as_secs_f64();
        let (head, backend) = match (weights, device) {
            (Loaded::Cpu(mut w), _) => (w.head.take(), Backend::Cpu(Box::new(w))),
            (Loaded::Gpu(mut w), Some(dev)) => {
                let head = w.head.take();
                match gpu::GpuModel::on_device(dev, &config, &w, opts.gpu_memory_bytes) {
                    Ok(g) => (head, Backend::Gpu(Box::new(g))),
                    // `auto` without a usable GPU: the CPU reference, read again in f32 (an
                    // fp16 copy would round an f32 checkpoint).
                    Err(EncoderError::NoGpu(_)) if opts.device == Device::Auto => {
                        drop(w);
                        let mut w: Weights = Weights::load(&path, &config)?;
                        (w.head.take(), Backend::Cpu(Box::new(w)))
                    }
                    Err(e) => return Err(e),
                }
            }
            (Loaded::Gpu(_), None) => return Err(EncoderError::NoGpu("the device was not opened".into())),
        };
        let context_s = match &backend {
            Backend::Gpu(g) => g.context_s(),
            Backend::Cpu(_) => 0.0,
        };
        let wall_s = started.elapsed().as_secs_f64();
        let setup = SetupTimes { files_s, context_s, backend_s: wall_s - waited, wall_s };
        Ok(Encoder {
            config,
            head,
            tokenizer,
            backend,
            token_budget: AtomicUsize::new(opts.token_budget.max(8)),
            group_tokens: AtomicUsize::new(GROUP_TOKENS),
            max_docs: opts.max_docs.max(1),
            chunk_docs: opts.chunk_docs.max(1),
            stats: Default::default(),
            setup,
            check_only: opts.check_only,
        })
    }

    /// Where the set-up went.
    pub fn setup_times(&self) -> SetupTimes {
        self.setup
    }

    /// How the GPU kernels were obtained ("compiled" or "cached"); `None` on the CPU.
    pub fn kernels_from(&self) -> Option<&'static str> {
        match &self.backend {
            Backend::Gpu(g) => Some(g.kernels_from()),
            Backend::Cpu(_) => None,
        }
    }

    /// Device milliseconds per forward step (`CURATOR_ENCODER_PROFILE`; GPU only).
    pub fn gpu_profile(&self) -> Vec<(String, f64)> {
        match &self.backend {
            Backend::Gpu(g) => g.profile(),
            Backend::Cpu(_) => Vec::new(),
        }
    }

    /// "gpu" or "cpu".
    pub fn device(&self) -> &'static str {
        match self.backend {
            Backend::Cpu(_) => "cpu",
            Backend::Gpu(_) => "gpu",
        }
    }

    /// Which tokenizer runs (our WordPiece, or the `tokenizers` crate and why).
    pub fn tokenizer(&self) -> String {
        self.tokenizer.describe()
    }

    /// The longest sequence, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.tokenizer.max_tokens()
    }

    /// Padded tokens per forward pass now (smaller than configured after an OOM).
    pub fn token_budget(&self) -> usize {
        self.token_budget.load(Ordering::Relaxed)
    }

    /// Set the padded tokens per forward pass (`tune` sweeps it).
    pub fn set_token_budget(&self, budget: usize) {
        self.token_budget.store(budget.max(8), Ordering::Relaxed);
    }

    /// Padded tokens queued on the device before the host waits (0: wait after every pass,
    /// as benchmarks that copy each pass's vectors back do).
    pub fn set_group_tokens(&self, tokens: usize) {
        self.group_tokens.store(tokens, Ordering::Relaxed);
    }

    /// Counters of the last call.
    pub fn stats(&self) -> Stats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Token ids of `texts` (as [`Encoder::pooled`] would run them).
    pub fn tokenize(&self, texts: &[&str], max_chars: Option<usize>) -> Result<Vec<Vec<u32>>, EncoderError> {
        self.tokenizer.encode(texts, max_chars)
    }

    /// One pooled vector per text, `[texts.len() × hidden]`, in the texts' order.
    pub fn pooled(&self, texts: &[&str], max_chars: Option<usize>, pooling: Pooling) -> Result<Vec<f32>, EncoderError> {
        let h = self.config.hidden_size;
        let mut out = vec![0f32; texts.len() * h];
        let mut stats = Stats { docs: texts.len(), ..Stats::default() };
        std::thread::scope(|scope| -> Result<(), EncoderError> {
            // Tokenize one chunk ahead of the device.
            let (tx, rx) = mpsc::sync_channel::<(usize, Result<Vec<Vec<u32>>, EncoderError>)>(1);
            // A chunk holds at least a few forward passes' worth of documents.
            let chunk = self.chunk_docs.max(self.token_budget() / 32);
            scope.spawn(move || {
                for (k, part) in texts.chunks(chunk).enumerate() {
                    if tx.send((k * chunk, self.tokenizer.encode(part, max_chars))).is_err() {
                        return;
                    }
                }
            });
            loop {
                let waited = Instant::now();
                let Ok((start, ids)) = rx.recv() else { break };
                stats.waiting += waited.elapsed();
                let ids = ids?;
                let began = Instant::now();
                self.run_chunk(&ids, pooling, &mut out[start * h..(start + ids.len()) * h], &mut stats)?;
                stats.compute += began.elapsed();
            }
            Ok(())
        })?;
        if let Ok(mut s) = self.stats.lock() {
            *s = stats;
        }
        Ok(out)
    }

    /// One pooled vector per already tokenized sequence (the forward pass alone: benchmarks
    /// and `tune` use it).
    pub fn pooled_ids(&self, ids: &[Vec<u32>], pooling: Pooling) -> Result<Vec<f32>, EncoderError> {
        let mut out = vec![0f32; ids.len() * self.config.hidden_size];
        let mut stats = Stats { docs: ids.len(), ..Stats::default() };
        let began = Instant::now();
        self.run_chunk(ids, pooling, &mut out, &mut stats)?;
        stats.compute = began.elapsed();
        if let Ok(mut s) = self.stats.lock() {
            *s = stats;
        }
        Ok(out)
    }

    fn run_chunk(&self, ids: &[Vec<u32>], pooling: Pooling, out: &mut [f32], stats: &mut Stats) -> Result<(), EncoderError> {
        if self.check_only {
            return Err(EncoderError::CheckOnly);
        }
        let h = self.config.hidden_size;
        let lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
        stats.tokens += lengths.iter().sum::<usize>();
        let padded = |batch: &[usize]| batch.len() * batching::padded_len(batch.iter().map(|&i| lengths[i]).max().unwrap_or(1).max(1));
        let g = match &self.backend {
            Backend::Gpu(g) => g,
            Backend::Cpu(weights) => {
                for batch in batching::by_token_budget(&lengths, self.token_budget(), self.max_docs) {
                    let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
                    let vecs = cpu::pooled(&self.config, weights, &seqs, pooling);
                    stats.batches += 1;
                    stats.padded_tokens += padded(&batch);
                    for (k, &i) in batch.iter().enumerate() {
                        out[i * h..(i + 1) * h].copy_from_slice(&vecs[k * h..(k + 1) * h]);
                    }
                }
                return Ok(());
            }
        };
        // Passes go to the device in groups of up to `group_tokens` padded tokens: one upload
        // and one download per group, the host never waiting between passes.
        let group_limit = self.group_tokens.load(Ordering::Relaxed);
        let mut pending = batching::by_token_budget(&lengths, self.token_budget(), self.max_docs);
        let mut at = 0;
        while at < pending.len() {
            let mut end = at;
            let mut group_tokens = 0;
            while end < pending.len() && (end == at || group_tokens + padded(&pending[end]) <= group_limit) {
                group_tokens += padded(&pending[end]);
                end += 1;
            }
            let group = &pending[at..end];
            match g.pooled_batches(ids, group, pooling) {
                Ok(vecs) => {
                    let mut row = 0;
                    for batch in group {
                        stats.batches += 1;
                        stats.padded_tokens += padded(batch);
                        for &i in batch {
                            out[i * h..(i + 1) * h].copy_from_slice(&vecs[row * h..(row + 1) * h]);
                            row += 1;
                        }
                    }
                    at = end;
                }
                Err(EncoderError::OutOfMemory(_)) if group.iter().any(|b| b.len() > 1) => {
                    // Halve the passes (this call and later ones) and re-cut what is left.
                    stats.oom_retries += 1;
                    let widest = group.iter().map(|b| padded(b)).max().unwrap_or(8);
                    self.token_budget.fetch_min((widest / 2).max(8), Ordering::Relaxed);
                    let rest: Vec<usize> = pending[at..].iter().flatten().copied().collect();
                    let rest_lengths: Vec<usize> = rest.iter().map(|&i| lengths[i]).collect();
                    let recut = batching::by_token_budget(&rest_lengths, self.token_budget(), self.max_docs);
                    pending.truncate(at);
                    pending.extend(recut.into_iter().map(|b| b.into_iter().map(|k| rest[k]).collect()));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sentence embeddings: pooled vectors, unit length when `normalize`.
    pub fn embed(&self, texts: &[&str], max_chars: Option<usize>, pooling: Pooling, normalize: bool) -> Result<Vec<f32>, EncoderError> {
        let mut v = self.pooled(texts, max_chars, pooling)?;
        if normalize {
            v.chunks_exact_mut(self.config.hidden_size).for_each(head::normalize);
        }
        Ok(v)
    }

    /// The classification head's logits per text, `[texts.len() × outputs]` ([`Encoder::outputs`]).
    pub fn logits(&self, texts: &[&str], max_chars: Option<usize>) -> Result<Vec<f32>, EncoderError> {
        let head = self.head()?;
        let pooled = self.pooled(texts, max_chars, head.pooling())?;
        Ok(head::logits_rows(head, &pooled, self.config.hidden_size))
    }

    /// [`Encoder::logits`] of already tokenized sequences (the classifier's forward pass
    /// alone: benchmarks use it).
    pub fn logits_ids(&self, ids: &[Vec<u32>]) -> Result<Vec<f32>, EncoderError> {
        let head = self.head()?;
        let pooled = self.pooled_ids(ids, head.pooling())?;
        Ok(head::logits_rows(head, &pooled, self.config.hidden_size))
    }

    /// Logits per document of the head (0 without one).
    pub fn outputs(&self) -> usize {
        self.head.as_ref().map_or(0, weights::Head::outputs)
    }

    fn head(&self) -> Result<&weights::Head, EncoderError> {
        self.head.as_ref().ok_or_else(|| EncoderError::Model {
            path: PathBuf::from("config.json"),
            reason: "the model has no classification head (no id2label / num_labels / target_sizes)".into(),
        })
    }
}
