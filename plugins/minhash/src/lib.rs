//! MinHash signatures for fuzzy deduplication, computed on the GPU.
//!
//! A document's shingles are its character n-grams (`char_ngrams`, default 24, as NeMo
//! Curator); a text shorter than that is one shingle. Each shingle's UTF-8 bytes get a 64-bit
//! base hash (FNV-1a, then the splitmix64 finaliser, low bit set so 0 can mean "no
//! shingle"); hash function i maps a base hash h to `(a_i * h + b_i) >> 32` (64-bit
//! wrapping arithmetic, `a_i` odd, both from a splitmix64 stream of `seed`), and the
//! signature holds the minimum of each function over the shingles: `num_hashes` u32 values
//! (default 260 = 20 bands × 13 rows). The GPU kernel ([`gpu`]) and the CPU path ([`cpu`])
//! do the same integer operations, so their signatures are bit-identical.
//!
//! With `word_ngrams`, shingles are word n-grams instead ([`curator_sdk::shingle`]; CPU only).
//!
//! Output: `minhash_signature`, a binary column: the `num_hashes` values as little-endian u32,
//! 4 bytes each (JSONL sinks write binary columns as hex).

use curator_sdk::prelude::*;
use curator_sdk::shingle::Shingles;

pub mod cpu;
pub mod gpu;

/// Hashes per signature by default: 20 bands × 13 rows.
pub const DEFAULT_HASHES: usize = 260;

/// The hash family's coefficients `(a_i, b_i)`.
pub fn coefficients(seed: u64, n: usize) -> (Vec<u64>, Vec<u64>) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        cpu::mix64(state)
    };
    let mut a = Vec::with_capacity(n);
    let mut b = Vec::with_capacity(n);
    for _ in 0..n {
        a.push(next() | 1);
        b.push(next());
    }
    (a, b)
}

/// Hex form of a signature (the output column): 8 lowercase digits per value, big-endian.
pub fn to_hex(sig: &[u32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = Vec::with_capacity(sig.len() * 8);
    for v in sig {
        for shift in (0..8).rev() {
            s.push(DIGITS[((v >> (shift * 4)) & 0xf) as usize]);
        }
    }
    // Only ASCII digits were pushed.
    String::from_utf8(s).unwrap_or_default()
}

/// MinHash signatures of documents (GPU when available, else CPU; same values either way).
#[stage(name = "minhash", native, cpus = 1.0, gpus = 0.25, memory_mb = 8192, outputs = ["minhash_signature"], batch_size = 16384)]
pub struct MinHash {
    /// Characters per shingle.
    #[param(default = 24, min = 1, max = 4096)]
    pub char_ngrams: usize,
    /// Words per shingle instead of characters (datatrove's mode; 0: characters). Computed
    /// on the CPU.
    #[param(default = 0, min = 0, max = 64)]
    pub word_ngrams: usize,
    /// Hash functions per signature (20 bands × 13 rows = 260).
    #[param(default = 260, min = 1, max = 4096)]
    pub num_hashes: usize,
    /// Seed of the hash family.
    #[param(default = 42)]
    pub seed: u64,
    /// auto (GPU if a CUDA driver is usable, else CPU) | gpu | cpu
    #[param(default = "auto", one_of = ["auto", "gpu", "cpu"])]
    pub device: String,
}

impl Stage for MinHash {
    fn init(&mut self) -> Result<(), StageError> {
        if self.word_ngrams > 0 {
            if self.device == "gpu" {
                return Err(StageError::Failed("word_ngrams signatures are computed on the CPU; use device: cpu or auto".into()));
            }
            self.device = "cpu".into();
        }
        if self.device != "cpu" {
            match gpu::Gpu::shared() {
                Ok(_) => log(Level::Info, "minhash: computing signatures on the GPU"),
                Err(e) if self.device == "gpu" => return Err(StageError::Failed(format!("no usable GPU: {e}"))),
                Err(e) => log(Level::Info, &format!("minhash: no usable GPU ({e}); computing on the CPU")),
            }
        }
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let text = batch.column("text")?;
        let col = text.strings()?;
        let (a, b) = coefficients(self.seed, self.num_hashes);
        let kind = if self.word_ngrams > 0 { Shingles::Words(self.word_ngrams) } else { Shingles::Chars(self.char_ngrams) };
        let sigs = match (self.device.as_str(), gpu::Gpu::shared()) {
            ("cpu", _) | (_, Err(_)) => cpu::signatures_of(&text.data, &text.offsets, kind, &a, &b),
            (_, Ok(g)) => g
                .signatures(&text.data, &text.offsets, self.char_ngrams, &a, &b)
                .map_err(|e| if e.contains("OUT_OF_MEMORY") { StageError::OutOfMemory(e) } else { StageError::Failed(e) })?,
        };
        let bytes: Vec<u8> = sigs.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = Column::binary_fixed("minhash_signature", self.num_hashes * 4, bytes);
        debug_assert_eq!(out.offsets.len(), col.len() + 1);
        Ok(Output::Columns(vec![out]))
    }
}
