//! Choosing a GPU stage's batch size (its token budget) from measurements, as the GPU memory
//! guide does by hand: try growing sizes on a sample, measure each one's real peak GPU memory
//! and throughput, keep those under `margin` × the stage's budget, and pick the largest whose
//! throughput is within [`NEAR_BEST`] of the best of them. The host runs the trials
//! (`curator-host tune`); what to try next and what to pick is decided here.

/// A size whose docs/s is at least this share of the best is as good as the best; the
/// largest such size is picked (throughput curves flatten, and noise should not pick a small
/// batch over a large one by a percent).
pub const NEAR_BEST: f64 = 0.95;

/// The largest token budget tried.
pub const MAX_SIZE: usize = 1 << 22;

/// One measured size.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub size: usize,
    /// Peak GPU memory of the stage's worker process, bytes.
    pub peak_bytes: u64,
    pub docs_per_s: f64,
    /// Why the size failed (out of memory, a crash), if it did.
    pub failed: Option<String>,
}

/// What a trial means for the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Fits,
    OverMargin,
    Failed,
}

impl Trial {
    pub fn fit(&self, budget_bytes: u64, margin: f64) -> Fit {
        if self.failed.is_some() {
            Fit::Failed
        } else if self.peak_bytes as f64 > margin * budget_bytes as f64 {
            Fit::OverMargin
        } else {
            Fit::Fits
        }
    }
}

/// The sizes to try, smallest first: powers of two from `start` up to [`MAX_SIZE`].
pub fn sizes(start: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut s = start.max(64).next_power_of_two();
    while s <= MAX_SIZE {
        out.push(s);
        s *= 2;
    }
    out
}

/// Whether to stop trying larger sizes after `trials` (in the order tried): a size failed or
/// went over the margin (larger ones only need more), the last two sizes were both more
/// than 10 % slower than the best so far (past the knee), or the last three sizes peaked at
/// the same memory (the passes no longer grow: another cap, such as documents per pass,
/// holds them).
pub fn stop(trials: &[Trial], budget_bytes: u64, margin: f64) -> bool {
    let Some(last) = trials.last() else { return false };
    if last.fit(budget_bytes, margin) != Fit::Fits {
        return true;
    }
    let best = trials.iter().map(|t| t.docs_per_s).fold(0.0, f64::max);
    let past_knee = trials.len() >= 3 && trials[trials.len() - 2..].iter().all(|t| t.docs_per_s < 0.9 * best);
    past_knee || saturated(trials) >= 3
}

/// How many trials at the end peaked at the same memory as the last one (1 when only the
/// last did).
fn saturated(trials: &[Trial]) -> usize {
    let Some(last) = trials.last() else { return 0 };
    trials.iter().rev().take_while(|t| t.peak_bytes == last.peak_bytes && t.failed.is_none()).count()
}

/// The size to use: the largest fitting size whose docs/s is within [`NEAR_BEST`] of the best
/// fitting one; `None` when no size fit. Sizes past the point where the passes stopped
/// growing (the same peak as the size before) run the same passes as that size and are
/// measured noise: that size stands for them.
pub fn pick(trials: &[Trial], budget_bytes: u64, margin: f64) -> Option<usize> {
    let run = saturated(trials);
    let trials = if run >= 2 { &trials[..=trials.len() - run] } else { trials };
    let fitting: Vec<&Trial> = trials.iter().filter(|t| t.fit(budget_bytes, margin) == Fit::Fits).collect();
    let best = fitting.iter().map(|t| t.docs_per_s).fold(0.0, f64::max);
    fitting.iter().filter(|t| t.docs_per_s >= NEAR_BEST * best).map(|t| t.size).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    /// Run the sweep against a simulated card: memory and speed as functions of size.
    fn sweep(memory: impl Fn(usize) -> u64, speed: impl Fn(usize) -> f64, oom_at: u64, budget: u64) -> (Vec<Trial>, Option<usize>) {
        let mut trials = Vec::new();
        for size in sizes(1024) {
            let peak = memory(size);
            let failed = (peak > oom_at).then(|| "CUDA out of memory".to_string());
            trials.push(Trial { size, peak_bytes: peak.min(oom_at), docs_per_s: speed(size), failed });
            if stop(&trials, budget, 0.85) {
                break;
            }
        }
        let p = pick(&trials, budget, 0.85);
        (trials, p)
    }

    #[test]
    fn passes_capped_by_documents_stop_the_sweep_and_the_first_capped_size_is_picked() {
        // Measured on an H200 (MiniLM, 8 GB, 1,024 documents per pass at most): from 262,144
        // tokens on, every size ran the same passes (2,602 MiB) and their docs/s was noise;
        // the old rule picked 4,194,304.
        let mib = |m: u64| m << 20;
        let measured = [(65_536, 1164, 40_826.0), (131_072, 1642, 45_623.0), (262_144, 2602, 46_280.0), (524_288, 2602, 45_856.0)];
        let mut trials: Vec<Trial> =
            measured.iter().map(|&(size, peak, docs_per_s)| Trial { size, peak_bytes: mib(peak), docs_per_s, failed: None }).collect();
        assert!(!stop(&trials, 8 * GB, 0.85), "two sizes at one peak may still be noise");
        assert_eq!(pick(&trials, 8 * GB, 0.85), Some(262_144));
        trials.push(Trial { size: 1_048_576, peak_bytes: mib(2602), docs_per_s: 47_965.0, failed: None });
        assert!(stop(&trials, 8 * GB, 0.85), "three sizes at one peak: the passes stopped growing");
        assert_eq!(pick(&trials, 8 * GB, 0.85), Some(262_144), "a faster-by-noise capped size is not picked");
    }

    #[test]
    fn monotone_curve_picks_the_largest_size_under_the_margin() {
        // 1 GB of weights and context + 12 KB per token; speed saturates at 64 K tokens.
        let mem = |s: usize| GB + s as u64 * 12_000;
        let speed = |s: usize| 20_000.0 * (s.min(65_536) as f64 / 65_536.0).sqrt();
        let (trials, p) = sweep(mem, speed, 80 * GB, 4 * GB);
        let p = p.unwrap();
        assert!(mem(p) as f64 <= 0.85 * (4 * GB) as f64);
        assert!(mem(p * 2) as f64 > 0.85 * (4 * GB) as f64 || trials.last().unwrap().size == p);
        // The sweep stopped at the first size over the margin.
        assert_eq!(trials.last().unwrap().fit(4 * GB, 0.85), Fit::OverMargin);
    }

    #[test]
    fn noisy_speeds_still_pick_within_ten_percent_of_the_best_and_never_over_the_margin() {
        let mem = |s: usize| GB / 2 + s as u64 * 12_000;
        for seed in 0..50u64 {
            let noise = |s: usize| {
                let h = (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed.wrapping_mul(0xbf58_476d_1ce4_e5b9);
                0.93 + (h % 1000) as f64 / 1000.0 * 0.14
            };
            let speed = |s: usize| 20_000.0 * (s.min(32_768) as f64 / 32_768.0) * noise(s);
            let (trials, p) = sweep(mem, speed, 80 * GB, 8 * GB);
            let p = p.unwrap();
            let chosen = trials.iter().find(|t| t.size == p).unwrap();
            assert!(chosen.peak_bytes as f64 <= 0.85 * (8 * GB) as f64);
            // Against the true (noise-free) best of the sizes tried.
            let best =
                trials.iter().filter(|t| t.fit(8 * GB, 0.85) == Fit::Fits).map(|t| speed(t.size) / noise(t.size)).fold(0.0, f64::max);
            assert!(speed(p) / noise(p) >= 0.85 * best, "seed {seed}: picked {p}");
        }
    }

    #[test]
    fn an_oom_stops_the_sweep_and_is_never_picked() {
        let mem = |s: usize| GB + s as u64 * 12_000;
        let speed = |s: usize| s as f64; // always faster: only memory stops it
        // The card runs out at 2 GB although the budget says 40 GB.
        let (trials, p) = sweep(mem, speed, 2 * GB, 40 * GB);
        assert!(trials.last().unwrap().failed.is_some());
        let p = p.unwrap();
        assert!(mem(p) <= 2 * GB);
        assert_eq!(trials.iter().filter(|t| t.failed.is_some()).count(), 1);
    }

    #[test]
    fn nothing_fits_means_no_pick() {
        let (_, p) = sweep(|_| 5 * GB, |_| 1.0, 80 * GB, 4 * GB);
        assert_eq!(p, None);
        assert!(pick(&[], GB, 0.85).is_none());
    }

    #[test]
    fn a_slowdown_past_the_knee_stops_the_sweep() {
        let speed = |s: usize| if s <= 8192 { s as f64 } else { 4096.0 };
        // Memory grows with the passes (a flat memory curve would mean capped passes).
        let (trials, p) = sweep(|s| GB + s as u64 * 1000, speed, 80 * GB, 40 * GB);
        assert_eq!(p, Some(8192));
        assert_eq!(trials.last().unwrap().size, 32_768, "stopped two sizes past the best");
    }
}
