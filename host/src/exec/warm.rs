//! Stage instances kept between the runs of one serving host (`curator-host serve`), so that
//! the next run of the same stages starts without starting worker processes, loading models
//! or running `setup` again: what a Ray actor or a NeMo Curator worker keeps between tasks.
//!
//! An instance is kept under the key of everything it was started with (plugin file and its
//! identity, params, limits, worker context, GPU assignment), and given only to a worker that
//! would have started exactly the same instance. The pool never holds more than the last
//! run's instances: a run starts by stopping the kept instances of stages it does not run
//! (their memory and GPU share are for this run's stages), and ends by stopping the kept
//! instances it did not take. An instance that was recycled, lost or part of a failed run is
//! stopped as before, never kept.

use std::sync::Mutex;

use crate::plan::PlannedStage;
use crate::plugin_facts::FileId;

use crate::stage::Instance;

/// What a stage's instances are started from, whatever worker runs them: kept instances of
/// stages a run does not have are stopped when it starts.
pub fn stage_key(stage: &PlannedStage) -> String {
    format!(
        "{}|{:?}|{}|{}|{:?}|{:?}",
        stage.plugin.path.display(),
        FileId::of(&stage.plugin.path),
        stage.label,
        stage.params,
        stage.isolation,
        stage.grants.iter().map(|g| (&g.name, &g.host_path, g.writable)).collect::<Vec<_>>(),
    )
}

/// What a run asks the pool for, per stage.
pub(crate) struct Wanted {
    /// [`stage_key`].
    pub stage: String,
    /// For a GPU stage, the start (key) of each of its workers.
    pub gpu_starts: Option<std::collections::HashSet<String>>,
}

struct Kept {
    /// [`stage_key`] and the worker's own start (limits, context).
    stage: String,
    key: String,
    /// The run that last returned it.
    run: u64,
    inst: Instance,
}

/// The instances a serving host keeps between runs.
#[derive(Default)]
pub struct WarmPool {
    kept: Mutex<Vec<Kept>>,
    /// Runs started so far.
    runs: Mutex<u64>,
    /// Instances the current run took from the pool.
    reused: std::sync::atomic::AtomicUsize,
    /// Setup checks passed (by [`stage_key`]): planning checks a stage once per serving host.
    checked: Mutex<std::collections::HashSet<String>>,
    /// Model servers kept between runs.
    pub services: super::services::ServicePool,
}

impl std::fmt::Debug for WarmPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmPool").field("kept", &self.kept_count()).finish()
    }
}

impl WarmPool {
    pub fn new() -> WarmPool {
        WarmPool::default()
    }

    /// Instances kept now.
    pub fn kept_count(&self) -> usize {
        self.kept.lock().map_or(0, |k| k.len())
    }

    /// Whether the setup check of the stage with [`stage_key`] `stage` passed earlier in
    /// this host.
    pub fn setup_checked(&self, stage: &str) -> bool {
        self.checked.lock().is_ok_and(|c| c.contains(stage))
    }

    /// Remember that the setup check of the stage with [`stage_key`] `stage` passed.
    pub fn record_setup_check(&self, stage: String) {
        if let Ok(mut c) = self.checked.lock() {
            c.insert(stage);
        }
    }

    /// A run that asks for `wanted` starts: stop what it will not use (the instances of
    /// stages it does not have, and a GPU stage's instances started for another placement).
    /// Returns the run's number.
    pub(crate) fn begin(&self, wanted: Vec<Wanted>) -> u64 {
        let by_stage: std::collections::HashMap<String, Option<std::collections::HashSet<String>>> =
            wanted.into_iter().map(|w| (w.stage, w.gpu_starts)).collect();
        let stale = self.take_where(|k| match by_stage.get(&k.stage) {
            None => true,
            Some(Some(starts)) => !starts.contains(&k.key),
            Some(None) => false,
        });
        stop(stale, "a stage this run does not have, or a GPU placement it does not make");
        self.reused.store(0, std::sync::atomic::Ordering::Relaxed);
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        *runs += 1;
        *runs
    }

    /// A run ends: stop the instances it did not take back.
    pub(crate) fn end(&self, run: u64) {
        let unused = self.take_where(|k| k.run < run);
        stop(unused, "not used by the last run");
        tracing::info!(
            "{} stage instance(s) reused from the run before, {} kept for the next",
            self.reused.load(std::sync::atomic::Ordering::Relaxed),
            self.kept_count()
        );
    }

    /// A kept instance started with exactly `key`, if there is one.
    pub(crate) fn take(&self, key: &str) -> Option<Instance> {
        let mut kept = self.kept.lock().ok()?;
        let at = kept.iter().position(|k| k.key == key)?;
        self.reused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(kept.swap_remove(at).inst)
    }

    /// Keep `inst` (started with `key`, for `stage`) for the next run.
    pub(crate) fn keep(&self, stage: String, key: String, run: u64, inst: Instance) {
        match self.kept.lock() {
            Ok(mut kept) => kept.push(Kept { stage, key, run, inst }),
            Err(_) => inst.teardown(),
        }
    }

    fn take_where(&self, f: impl Fn(&Kept) -> bool) -> Vec<Kept> {
        let Ok(mut kept) = self.kept.lock() else { return Vec::new() };
        let (gone, stay): (Vec<Kept>, Vec<Kept>) = std::mem::take(&mut *kept).into_iter().partition(|k| f(k));
        *kept = stay;
        gone
    }
}

impl Drop for WarmPool {
    fn drop(&mut self) {
        let all = self.take_where(|_| true);
        stop(all, "the host stops");
    }
}

fn stop(kept: Vec<Kept>, why: &str) {
    if !kept.is_empty() {
        tracing::debug!("stopping {} kept instance(s): {why}", kept.len());
    }
    for k in kept {
        k.inst.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An instance that counts its teardowns.
    struct Counted(Arc<AtomicUsize>);
    impl crate::stage::StageCall for Counted {
        fn call(&mut self, _: &arrow_array::RecordBatch) -> Result<crate::stage::StageOutput, crate::stage::StageFailure> {
            Err(crate::stage::StageFailure::Failed("not called".into()))
        }
        fn memory_bytes(&self) -> usize {
            0
        }
        fn teardown(self: Box<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn cpu(stage: &str) -> Wanted {
        Wanted { stage: stage.into(), gpu_starts: None }
    }

    #[test]
    fn a_gpu_stages_instances_placed_otherwise_are_stopped_before_the_run() {
        let stopped = Arc::new(AtomicUsize::new(0));
        let pool = WarmPool::new();
        let run1 = pool.begin(vec![cpu("g")]);
        pool.keep("g".into(), "g|card 0".into(), run1, Box::new(Counted(stopped.clone())));
        pool.keep("g".into(), "g|card 1".into(), run1, Box::new(Counted(stopped.clone())));
        pool.end(run1);
        // The next run places the stage on card 1 and card 2: card 0's worker holds memory it
        // will not use, and goes first.
        let starts = ["g|card 1".to_string(), "g|card 2".to_string()].into_iter().collect();
        let run2 = pool.begin(vec![Wanted { stage: "g".into(), gpu_starts: Some(starts) }]);
        assert_eq!((pool.kept_count(), stopped.load(Ordering::Relaxed)), (1, 1));
        assert!(pool.take("g|card 1").is_some());
        pool.end(run2);
    }

    #[test]
    fn a_kept_instance_goes_only_to_the_same_start_and_the_pool_holds_one_runs_worth() {
        let stopped = Arc::new(AtomicUsize::new(0));
        let inst = || -> Instance { Box::new(Counted(stopped.clone())) };
        let pool = WarmPool::new();
        let (a, b) = ("a".to_string(), "b".to_string());
        let run1 = pool.begin(vec![cpu(&a), cpu(&b)]);
        pool.keep(a.clone(), format!("{a}|w0"), run1, inst());
        pool.keep(a.clone(), format!("{a}|w1"), run1, inst());
        pool.keep(b.clone(), format!("{b}|w0"), run1, inst());
        pool.end(run1);
        assert_eq!((pool.kept_count(), stopped.load(Ordering::Relaxed)), (3, 0), "returned by the run that ends: kept");

        // The next run has stage a only: b's instance is stopped before it starts.
        let run2 = pool.begin(vec![cpu(&a)]);
        assert_eq!((pool.kept_count(), stopped.load(Ordering::Relaxed)), (2, 1));
        assert!(pool.take(&format!("{a}|w9")).is_none(), "another worker's start gets nothing");
        let w0 = pool.take(&format!("{a}|w0")).expect("the same start gets the kept instance");
        pool.keep(a.clone(), format!("{a}|w0"), run2, w0);
        // Worker 1's instance was not taken by run 2: stopped at its end.
        pool.end(run2);
        assert_eq!((pool.kept_count(), stopped.load(Ordering::Relaxed)), (1, 2));
        drop(pool);
        assert_eq!(stopped.load(Ordering::Relaxed), 3, "a host that stops stops what it kept");
    }
}
