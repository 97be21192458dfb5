//! One watchdog thread per worker process: every 50 ms it stops the worker when its resident
//! memory is over budget or a call has run past its time limit, and every 500 ms (with a GPU
//! budget and NVML) when its GPU memory is over budget. The reason is kept, so the host can
//! say why its worker died.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::stage::StageFailure;

/// Limits the host enforces on one worker process.
#[derive(Debug, Clone)]
pub struct WorkerLimits {
    /// Resident memory budget (MiB); the watchdog stops the worker above it.
    pub memory_mb: u64,
    /// Wall-clock limit per call.
    pub timeout: Duration,
    /// CPUs to pin the worker to (empty: no pinning).
    pub cpus: Vec<usize>,
    /// `CUDA_VISIBLE_DEVICES` for the worker.
    pub cuda_visible_devices: Option<String>,
    /// GPU memory budget (bytes); the NVML watchdog stops the worker above it (+ tolerance).
    pub gpu_memory_budget_bytes: Option<u64>,
}

/// GPU memory tolerance over the declared budget: the CUDA context itself (300–500 MiB on
/// H100/H200) is not part of what a framework's allocator counts, and allocators round up;
/// 512 MiB or 5 %, whichever is more.
pub fn gpu_tolerance_bytes(budget: u64) -> u64 {
    (512u64 << 20).max(budget / 20)
}

/// What the host and the watchdog share about one worker.
pub(super) struct Watch {
    pub pid: u32,
    pub reason: Mutex<Option<StageFailure>>,
    pub busy_since: Mutex<Option<Instant>>,
    pub stop: AtomicBool,
    /// GPU memory the worker held at the last NVML look (every 500 ms), bytes.
    pub gpu_bytes: AtomicU64,
    pub stderr_tail: Mutex<std::collections::VecDeque<String>>,
}

impl Watch {
    pub fn new(pid: u32) -> Watch {
        Watch {
            pid,
            reason: Mutex::new(None),
            busy_since: Mutex::new(None),
            stop: AtomicBool::new(false),
            gpu_bytes: AtomicU64::new(0),
            stderr_tail: Mutex::new(Default::default()),
        }
    }

    pub fn set_busy(&self, busy: bool) {
        if let Ok(mut b) = self.busy_since.lock() {
            *b = busy.then(Instant::now);
        }
    }
}

/// GPU memory process `pid` uses on all devices (NVML), bytes.
pub fn gpu_used_by(nvml: &nvml_wrapper::Nvml, pid: u32) -> u64 {
    let n = nvml.device_count().unwrap_or(0);
    let mut total = 0;
    for i in 0..n {
        let Ok(d) = nvml.device_by_index(i) else { continue };
        for p in d.running_compute_processes().unwrap_or_default() {
            if p.pid == pid
                && let nvml_wrapper::enums::device::UsedGpuMemory::Used(b) = p.used_gpu_memory
            {
                total += b;
            }
        }
    }
    total
}

/// The watchdog loop; returns when the worker is gone, stopped, or `watch.stop` is set.
pub(super) fn watchdog(watch: &Watch, limits: &WorkerLimits) {
    // A worker with a GPU (a budget or a device of its own) is watched through NVML.
    let nvml = (limits.gpu_memory_budget_bytes.is_some() || limits.cuda_visible_devices.is_some())
        .then(|| nvml_wrapper::Nvml::init().ok())
        .flatten();
    let mut tick = 0u64;
    while !watch.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        tick += 1;
        let Some(rss) = crate::os::rss_bytes(watch.pid) else { return }; // the process is gone
        let rss_mb = rss >> 20;
        let mut verdict = None;
        if rss_mb > limits.memory_mb {
            verdict = Some(StageFailure::Watchdog {
                reason: format!("resident memory {rss_mb} MiB is over its budget of {} MiB", limits.memory_mb),
                memory: true,
            });
        }
        let busy = watch.busy_since.lock().ok().and_then(|b| *b);
        if verdict.is_none() && busy.is_some_and(|t| t.elapsed() > limits.timeout) {
            verdict = Some(StageFailure::WorkerTimeout(limits.timeout));
        }
        let gpu_used = match &nvml {
            Some(nvml) if tick.is_multiple_of(10) => {
                let used = gpu_used_by(nvml, watch.pid);
                watch.gpu_bytes.store(used, Ordering::Relaxed);
                Some(used)
            }
            _ => None,
        };
        if verdict.is_none()
            && let (Some(used), Some(budget)) = (gpu_used, limits.gpu_memory_budget_bytes)
            && used > budget + gpu_tolerance_bytes(budget)
        {
            verdict = Some(StageFailure::Watchdog {
                reason: format!(
                    "GPU memory {} MiB is over its budget of {} MiB (+{} MiB tolerance)",
                    used >> 20,
                    budget >> 20,
                    gpu_tolerance_bytes(budget) >> 20
                ),
                memory: true,
            });
        }
        if let Some(v) = verdict {
            tracing::warn!("stopping worker process {}: {v}", watch.pid);
            if let Ok(mut r) = watch.reason.lock() {
                *r = Some(v);
            }
            crate::os::kill(watch.pid);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_tolerance_is_the_larger_of_512_mib_and_5_percent() {
        assert_eq!(gpu_tolerance_bytes(1 << 30), 512 << 20);
        assert_eq!(gpu_tolerance_bytes(40 << 30), 2 << 30);
    }
}
