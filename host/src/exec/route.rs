//! Which sink thread writes a partition: chosen when its first batch arrives, the one with the
//! fewest partitions open, then the fewest batches queued (`curator_core::scaling::least_loaded`),
//! and kept for its every
//! batch, so that a sink keeps a partition's batches in order. Sinks that also tokenize (the
//! tokenized formats) do most of a run's work: a fixed `partition % sinks` left some with
//! twice the tokens of others when partitions differ in size.

use std::collections::HashMap;
use std::sync::Mutex;

use crossbeam_channel::Sender;

use super::Task;

/// The sink threads' queues and the partitions routed to each.
pub(crate) struct SinkRoutes {
    txs: Vec<Sender<Task>>,
    routes: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    /// Partition → sink, for every partition seen.
    of: HashMap<usize, usize>,
    /// Partitions each sink has been given whose last batch has not been routed yet.
    open: Vec<usize>,
}

impl SinkRoutes {
    pub fn new(txs: Vec<Sender<Task>>) -> SinkRoutes {
        let open = vec![0; txs.len()];
        SinkRoutes { txs, routes: Mutex::new(Routes { of: HashMap::new(), open }) }
    }

    /// The queue of the sink that writes `t`'s partition.
    pub fn sender(&self, t: &Task) -> &Sender<Task> {
        &self.txs[self.route(t.meta.partition, t.meta.last_of_partition)]
    }

    /// The sink of `partition` (chosen now if this is its first batch); `last`: this is its
    /// last batch, so it no longer counts as open there.
    fn route(&self, partition: usize, last: bool) -> usize {
        // The map stays consistent even if a thread panicked while holding the lock.
        let mut r = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let Routes { of, open } = &mut *r;
        let k = *of.entry(partition).or_insert_with(|| {
            let load: Vec<(usize, usize)> = open.iter().zip(&self.txs).map(|(o, tx)| (*o, tx.len())).collect();
            let k = curator_core::scaling::least_loaded(&load);
            open[k] += 1;
            k
        });
        if last {
            open[k] = open[k].saturating_sub(1);
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_keeps_its_sink_and_new_ones_go_where_fewest_are_open() {
        let txs: Vec<_> = (0..2).map(|_| crossbeam_channel::unbounded().0).collect();
        let r = SinkRoutes::new(txs);
        // A long partition 0 on sink 0; partition 1 on sink 1.
        assert_eq!(r.route(0, false), 0);
        assert_eq!(r.route(1, false), 1);
        // Partition 1 ends; 2 and 3 go to sink 1 while 0 is still open on sink 0.
        assert_eq!(r.route(1, true), 1);
        assert_eq!(r.route(2, true), 1);
        assert_eq!(r.route(3, false), 1);
        assert_eq!(r.route(0, false), 0, "every batch of a partition goes to one sink");
        // Both have one open now: the first sink takes the next.
        assert_eq!(r.route(4, false), 0);
        assert_eq!(r.route(3, true), 1);
        assert_eq!(r.route(0, true), 0);
    }
}
