//! A native stage for the tests: upper-cases text, or misbehaves on documents containing
//! `trigger` according to `mode`, inside its worker process.

use curator_sdk::prelude::*;

/// Upper-cases text and adds a `text_len` column; misbehaves on documents containing `trigger`.
#[stage(name = "native_probe", native, cpus = 1.0, memory_mb = 256)]
pub struct NativeProbe {
    /// none | fail | panic | segfault | abort | leak (grows past the RAM budget) | oom | slow |
    /// gpu_hog (allocates `gpu_gb` GiB on the GPU and holds it) | fail_init (refuses to start) |
    /// fail_init_late (the first `starts` set-ups start, planning's check included; the others
    /// refuse after 2 s) |
    /// warm (every batch, triggered or not, keeps `warm_mb` MiB more for the first
    /// `warm_batches` batches, as caches warming up do) | threads (two threads of its own spin) |
    /// gate (every batch, triggered or not, waits until `<marker>.go` exists, having created
    /// `<marker>.waiting`: the test decides when the run goes on)
    #[param(one_of = ["none", "fail", "panic", "segfault", "abort", "leak", "oom", "slow", "gpu_hog", "fail_init", "fail_init_late", "warm", "threads", "gate"])]
    pub mode: String,
    /// MiB kept per batch in `warm` mode.
    #[param(default = 2)]
    pub warm_mb: usize,
    /// Batches that grow in `warm` mode.
    #[param(default = 15)]
    pub warm_batches: usize,
    /// GiB to allocate in `gpu_hog` mode.
    #[param(default = 8)]
    pub gpu_gb: usize,
    /// The path prefix of the files whose creation elects the set-ups that start, in
    /// `fail_init_late` mode (`<marker>.1` … `<marker>.<starts>`); in `threads` mode,
    /// `<marker>.cpu` receives the CPU seconds the two threads measured of themselves.
    pub marker: Option<String>,
    /// How many set-ups start in `fail_init_late` mode.
    #[param(default = 2)]
    pub starts: usize,
    /// Misbehave only on documents containing this.
    #[param(default = "TRIGGER")]
    pub trigger: String,
    #[state]
    warm: Vec<Vec<u8>>,
}

impl Stage for NativeProbe {
    fn init(&mut self) -> Result<(), StageError> {
        if self.mode == "fail_init" {
            return Err(StageError::Failed("refusing to start on purpose".into()));
        }
        if self.mode == "fail_init_late" {
            let marker = self.marker.as_deref().unwrap_or("native_probe.marker");
            let elected =
                (1..=self.starts).any(|j| std::fs::OpenOptions::new().write(true).create_new(true).open(format!("{marker}.{j}")).is_ok());
            if !elected {
                std::thread::sleep(std::time::Duration::from_secs(2));
                return Err(StageError::Failed("refusing to start, late, on purpose".into()));
            }
        }
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        if self.mode == "gate" {
            let marker = self.marker.as_deref().unwrap_or("native_probe.marker");
            let go = std::path::PathBuf::from(format!("{marker}.go"));
            if !go.exists() {
                std::fs::write(format!("{marker}.waiting"), b"").map_err(|e| StageError::Failed(format!("{marker}.waiting: {e}")))?;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while !go.exists() {
                    if std::time::Instant::now() > deadline {
                        return Err(StageError::Failed(format!("{} never appeared", go.display())));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
        if self.mode == "warm" && self.warm.len() < self.warm_batches {
            // Touched, so that it is resident, and kept.
            let mut v = vec![0u8; self.warm_mb << 20];
            for i in (0..v.len()).step_by(4096) {
                v[i] = 1;
            }
            self.warm.push(v);
        }
        let text = batch.column("text")?.strings()?;
        let mut triggered = false;
        let mut upper = Vec::with_capacity(text.len());
        let mut lens = Vec::with_capacity(text.len());
        for i in 0..text.len() {
            let t = text.get(i).unwrap_or_default();
            triggered |= t.contains(self.trigger.as_str());
            upper.push(t.to_uppercase());
            lens.push(t.len() as i64);
        }
        if triggered {
            match self.mode.as_str() {
                "fail" => return Err(StageError::Failed("refusing this batch on purpose".into())),
                "panic" => panic!("native probe panicked on purpose"),
                "segfault" => {
                    // SAFETY: none; this is the point.
                    unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u64>(), 1) };
                }
                "abort" => {
                    eprintln!("native probe aborting on purpose");
                    std::process::abort()
                }
                "leak" => {
                    // Touch 1 GiB so that it is resident, and keep it.
                    let mut v = vec![0u8; 1 << 30];
                    for i in (0..v.len()).step_by(4096) {
                        v[i] = 1;
                    }
                    std::mem::forget(v);
                    std::thread::sleep(std::time::Duration::from_secs(2));
                }
                "oom" if batch.num_rows > 1 => return Err(StageError::OutOfMemory("CUDA out of memory (pretend)".into())),
                "slow" => std::thread::sleep(std::time::Duration::from_secs(30)),
                "threads" => {
                    // Two threads of their own work while the calling thread only waits: the
                    // call's CPU is theirs. Each measures its own CPU time; their sum goes to
                    // `<marker>.cpu` for the test to hold the run summary against (the work's
                    // duration depends on the processor, so no constant can stand for it).
                    let spin = || {
                        let mut x = 1u64;
                        for _ in 0..400_000_000u64 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                        thread_cpu_s()
                    };
                    let spent = std::thread::scope(|s| {
                        let a = s.spawn(spin);
                        let b = s.spawn(spin);
                        a.join().unwrap_or(0.0) + b.join().unwrap_or(0.0)
                    });
                    if let Some(marker) = &self.marker {
                        std::fs::write(format!("{marker}.cpu"), spent.to_string())
                            .map_err(|e| StageError::Failed(format!("{marker}.cpu: {e}")))?;
                    }
                }
                "gpu_hog" => {
                    curator_gpu::require(&[curator_gpu::CudaLib::Driver]).map_err(|e| StageError::Failed(e.into()))?;
                    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| StageError::Failed(format!("{e:?}")))?;
                    let stream = ctx.default_stream();
                    let held = stream.alloc_zeros::<u8>(self.gpu_gb << 30).map_err(|e| StageError::Failed(format!("{e:?}")))?;
                    eprintln!(
                        "native probe holds {} GiB of GPU memory (budget {:?} bytes)",
                        self.gpu_gb,
                        curator_sdk::native::context().gpu_memory_budget_bytes
                    );
                    std::thread::sleep(std::time::Duration::from_secs(20));
                    drop(held);
                }
                _ => {}
            }
        }
        Ok(Output::Columns(vec![Column::utf8("text", upper.iter().map(String::as_str)), Column::int64("text_len", &lens)]))
    }
}

/// The calling thread's CPU time so far, in seconds (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a constant the kernel knows.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0.0;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}
