//! When a stage instance is leaking: a pure rule over its memory after each batch.
//!
//! Two kinds of memory, two rules:
//! - **WASM linear memory** (an in-process instance) never shrinks, so an instance whose
//!   memory grew in most of its recent batches is leaking: [`LeakRule::LinearMemory`].
//! - **A worker process** (a native stage, or WASM with `isolation: process`) is measured as
//!   its anonymous resident memory (the shared batch arenas and mapped files excluded) plus
//!   the GPU memory it holds. Allocators, CUDA caches and model workspaces warm up over the
//!   first batches and then stay; batch sizes move the level up and down. So only memory that
//!   keeps growing well past the level the warm-up reached counts: [`LeakRule::Resident`].
//!   Reloading a GPU model costs seconds, so a false alarm is expensive; the worker's memory
//!   budget (the watchdog) is the backstop for anything this rule lets through.

use std::collections::VecDeque;

/// Which rule watches an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeakRule {
    /// In-process WASM: growth in [`GROWTHS`] of the last [`WINDOW`] batches.
    LinearMemory,
    /// A worker process: after [`WARMUP_BATCHES`], growth in [`GROWTHS`] of the last
    /// [`WINDOW`] batches *and* more than [`resident_allowance`] above the warm-up's peak.
    Resident,
}

/// Batches looked back over.
pub const WINDOW: usize = 10;
/// Batches of the window in which memory must have grown.
pub const GROWTHS: usize = 8;
/// Batches a worker process gets to warm up before its level is taken.
pub const WARMUP_BATCHES: u64 = 20;

/// How far above the warm-up's peak a worker may go before growth counts as a leak: half of
/// that peak, at least 256 MiB.
pub fn resident_allowance(peak: u64) -> u64 {
    (peak / 2).max(256 << 20)
}

/// The memory history of one instance.
#[derive(Debug, Clone)]
pub struct LeakWatch {
    rule: LeakRule,
    grew: VecDeque<bool>,
    last: u64,
    batches: u64,
    /// The highest level seen during warm-up (the resident rule).
    peak: u64,
}

impl LeakWatch {
    /// A fresh instance holding `bytes`.
    pub fn new(rule: LeakRule, bytes: u64) -> LeakWatch {
        LeakWatch { rule, grew: VecDeque::with_capacity(WINDOW + 1), last: bytes, batches: 0, peak: bytes }
    }

    /// Record the memory after a batch; `Some(why)` when the instance should be replaced.
    pub fn observe(&mut self, bytes: u64) -> Option<String> {
        self.batches += 1;
        self.grew.push_back(bytes > self.last);
        self.last = bytes;
        if self.grew.len() > WINDOW {
            self.grew.pop_front();
        }
        let growing = self.grew.len() == WINDOW && self.grew.iter().filter(|g| **g).count() >= GROWTHS;
        let mib = |b: u64| b >> 20;
        match self.rule {
            LeakRule::LinearMemory => {
                growing.then(|| format!("linear memory grew in {GROWTHS}+ of the last {WINDOW} batches (now {} MiB)", mib(bytes)))
            }
            LeakRule::Resident => {
                if self.batches <= WARMUP_BATCHES {
                    self.peak = self.peak.max(bytes);
                    return None;
                }
                let limit = self.peak + resident_allowance(self.peak);
                (growing && bytes > limit).then(|| {
                    format!(
                        "worker memory grew in {GROWTHS}+ of the last {WINDOW} batches to {} MiB, over {} MiB after warm-up + {} MiB",
                        mib(bytes),
                        mib(self.peak),
                        mib(resident_allowance(self.peak))
                    )
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn first_alarm(rule: LeakRule, series: impl IntoIterator<Item = u64>) -> Option<usize> {
        let mut it = series.into_iter();
        let mut w = LeakWatch::new(rule, it.next().unwrap_or(0));
        it.enumerate().find_map(|(i, b)| w.observe(b).map(|_| i + 1))
    }

    #[test]
    fn linear_memory_that_keeps_growing_is_a_leak() {
        assert_eq!(first_alarm(LeakRule::LinearMemory, (0..40).map(|i| 64 * MIB + i * MIB)), Some(10));
        // Growth in 7 of 10 batches is not.
        let steps = (0..60u64).scan(64 * MIB, |m, i| {
            *m += if i % 10 < 7 { MIB } else { 0 };
            Some(*m)
        });
        assert_eq!(first_alarm(LeakRule::LinearMemory, steps), None);
    }

    #[test]
    fn a_gpu_worker_warming_its_caches_is_not_a_leak() {
        // What recycled the embedder: growth in every batch while caches warm up (here 40
        // batches of +8 MiB from 900 MiB), then a plateau with noise of a few pages.
        let warm = (0..40u64).map(|i| 900 * MIB + i * 8 * MIB);
        let plateau = (0..500u64).map(|i| 1220 * MIB + (i % 3) * 4096);
        assert_eq!(first_alarm(LeakRule::LinearMemory, warm.clone().chain(plateau.clone())), Some(10), "the old rule's false alarm");
        assert_eq!(first_alarm(LeakRule::Resident, warm.chain(plateau)), None);
        // Nor is one big batch that raises the level once.
        let jump = (0..30u64).map(|_| 500 * MIB).chain((0..200).map(|_| 1500 * MIB));
        assert_eq!(first_alarm(LeakRule::Resident, jump), None);
    }

    #[test]
    fn a_worker_that_keeps_growing_after_warm_up_is_a_leak() {
        // 600 MiB after warm-up, then +16 MiB a batch: caught once past 600 + 300 MiB.
        let series = (0..20u64).map(|_| 600 * MIB).chain((1..200).map(|i| 600 * MIB + i * 16 * MIB));
        let at = first_alarm(LeakRule::Resident, series).expect("a steady leak is caught");
        assert!((38..=42).contains(&at), "caught at batch {at}");
        assert_eq!(resident_allowance(100 * MIB), 256 * MIB);
        assert_eq!(resident_allowance(2048 * MIB), 1024 * MIB);
    }
}
