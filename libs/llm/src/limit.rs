//! How many requests a client keeps in flight per service. A server batches what is in
//! flight (vLLM's continuous batching), so too few leave its batch half empty and too many
//! only queue. The policy is additive increase, multiplicative decrease: one more request
//! per window of answers whose latency stays within `tolerance` of the best seen, half as
//! many on a 429 or 503 (the server says it is full) or a latency past it.

use std::sync::{Condvar, Mutex};

use crate::shared_limit::SharedLimit;

/// The policy, as a value: what the limit becomes after each event.
#[derive(Debug, Clone, PartialEq)]
pub struct Aimd {
    pub limit: f64,
    pub min: f64,
    pub max: f64,
    /// Latency past `tolerance` × the best seen counts as overload.
    pub tolerance: f64,
    best_latency_s: Option<f64>,
}

impl Aimd {
    pub fn new(initial: usize, max: usize) -> Aimd {
        let max = max.max(1) as f64;
        Aimd { limit: (initial.max(1) as f64).min(max), min: 1.0, max, tolerance: 3.0, best_latency_s: None }
    }

    /// An answer came back after `latency_s`.
    pub fn answered(&mut self, latency_s: f64) {
        let best = self.best_latency_s.map_or(latency_s, |b| b.min(latency_s));
        self.best_latency_s = Some(best);
        if latency_s <= best * self.tolerance {
            self.limit = (self.limit + 1.0 / self.limit).min(self.max);
        } else {
            self.overloaded();
        }
    }

    /// The server said it is full (429, 503).
    pub fn overloaded(&mut self) {
        self.limit = (self.limit / 2.0).max(self.min);
    }

    /// Requests allowed in flight now.
    pub fn allowed(&self) -> usize {
        self.limit.floor() as usize
    }
}

/// The limit shared by a client's threads: `acquire` blocks while the policy's limit is
/// reached. With a [`SharedLimit`], the limit and the count are those of every worker of the
/// service; a waiting thread looks again every 2 ms (other processes' answers wake no
/// condition variable here) and at once when one of this process's requests ends.
pub struct Limit {
    state: Mutex<(Aimd, usize)>,
    freed: Condvar,
    shared: Option<SharedLimit>,
}

/// One request in flight; dropping it frees its place.
pub struct Permit<'a>(&'a Limit);

impl Limit {
    pub fn new(policy: Aimd) -> Limit {
        Limit { state: Mutex::new((policy, 0)), freed: Condvar::new(), shared: None }
    }

    /// A limit kept with the service's other workers in `shared`.
    pub fn shared(policy: Aimd, shared: SharedLimit) -> Limit {
        Limit { shared: Some(shared), ..Limit::new(policy) }
    }

    /// Whether the limit is the service's, across workers.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    pub fn acquire(&self) -> Permit<'_> {
        if let Some(sh) = &self.shared {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            while !sh.try_acquire() {
                s = self.freed.wait_timeout(s, std::time::Duration::from_millis(2)).unwrap_or_else(|e| e.into_inner()).0;
            }
            return Permit(self);
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.1 >= s.0.allowed() {
            s = self.freed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.1 += 1;
        Permit(self)
    }

    pub fn answered(&self, latency_s: f64) {
        match &self.shared {
            Some(sh) => sh.answered(latency_s),
            None => self.update(|a| a.answered(latency_s)),
        }
    }

    pub fn overloaded(&self) {
        match &self.shared {
            Some(sh) => sh.overloaded(),
            None => self.update(Aimd::overloaded),
        }
    }

    /// The limit now.
    pub fn allowed(&self) -> usize {
        match &self.shared {
            Some(sh) => sh.allowed(),
            None => self.state.lock().unwrap_or_else(|e| e.into_inner()).0.allowed(),
        }
    }

    fn update(&self, f: impl FnOnce(&mut Aimd)) {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()).0);
        self.freed.notify_all();
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Some(sh) = &self.0.shared {
            sh.release();
            // Taken so a waiter between its check and its wait cannot miss this wake-up.
            drop(self.0.state.lock().unwrap_or_else(|e| e.into_inner()));
            self.0.freed.notify_all();
            return;
        }
        let mut s = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        s.1 -= 1;
        drop(s);
        self.0.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_one_per_window_while_latency_holds() {
        let mut a = Aimd::new(4, 64);
        for _ in 0..4 {
            a.answered(1.0);
        }
        assert_eq!(a.allowed(), 4, "{a:?}"); // 4 + 4 × 1/4.x is just under 5
        for _ in 0..2 {
            a.answered(1.2);
        }
        assert_eq!(a.allowed(), 5);
        for _ in 0..10_000 {
            a.answered(2.5);
        }
        assert_eq!(a.allowed(), 64, "capped at max");
    }

    #[test]
    fn halves_on_overload_and_on_latency_past_tolerance() {
        let mut a = Aimd::new(32, 64);
        a.answered(1.0);
        a.overloaded();
        assert_eq!(a.allowed(), 16);
        a.answered(3.5);
        assert_eq!(a.allowed(), 8);
        for _ in 0..10 {
            a.overloaded();
        }
        assert_eq!(a.allowed(), 1, "never below one");
    }

    #[test]
    fn acquire_waits_for_a_free_place() {
        let limit = std::sync::Arc::new(Limit::new(Aimd::new(1, 1)));
        let first = limit.acquire();
        let l2 = limit.clone();
        let waiter = std::thread::spawn(move || {
            let _p = l2.acquire();
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "a second request waits while the limit is one");
        drop(first);
        waiter.join().unwrap();
    }
}
