//! Batches a dedup step's documents phase keeps in memory for its output, up to a byte
//! budget, so the output does not read (and decode) its source a second time. What does not
//! fit is read again or replayed from the spill as before; a partition is replayed from
//! memory only when every one of its batches was kept.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Task;

/// The documents phase's batches kept for the output, by spill file name.
pub struct Resident {
    budget: u64,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    tasks: HashMap<String, Task>,
    bytes: u64,
    /// Batches refused for want of room (their partitions are read again).
    refused: u64,
}

/// A task's memory as the budget counts it: its batch's and its branch batches' buffers.
fn task_bytes(task: &Task) -> u64 {
    let side: usize = task.side.iter().map(|(_, b)| b.get_array_memory_size()).sum();
    (task.batch.get_array_memory_size() + side) as u64
}

impl Resident {
    /// A store that keeps at most `budget` bytes of batches.
    pub fn new(budget: u64) -> Resident {
        Resident { budget, held: Mutex::new(Held::default()) }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic elsewhere while holding the lock leaves a map that is still consistent.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep a copy of `task` (its buffers are shared, not copied) under spill file `name`,
    /// if it fits the budget; whether it was kept.
    pub fn keep(&self, name: String, task: &Task) -> bool {
        let bytes = task_bytes(task);
        let mut h = self.held();
        if h.bytes + bytes > self.budget {
            h.refused += 1;
            return false;
        }
        h.bytes += bytes;
        let copy = Task {
            meta: task.meta.clone(),
            batch: task.batch.clone(),
            dead: task.dead.clone(),
            side: task.side.clone(),
            source_columns: task.source_columns,
        };
        h.tasks.insert(name, copy);
        true
    }

    /// The batch kept under `name`, given up by the store.
    pub fn take(&self, name: &str) -> Option<Task> {
        let mut h = self.held();
        let task = h.tasks.remove(name)?;
        h.bytes -= task_bytes(&task);
        Some(task)
    }

    /// The batches kept under every one of `names`, in that order, when all of them were
    /// kept; otherwise none (and those that were kept are given up: the partition is read
    /// again whole).
    pub fn take_all<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Option<Vec<Task>> {
        let mut h = self.held();
        let mut out = Vec::new();
        let mut whole = true;
        for name in names {
            match h.tasks.remove(name) {
                Some(t) => {
                    h.bytes -= task_bytes(&t);
                    out.push(t);
                }
                None => whole = false,
            }
        }
        whole.then_some(out)
    }

    /// (batches held, bytes held, batches refused).
    pub fn counts(&self) -> (usize, u64, u64) {
        let h = self.held();
        (h.tasks.len(), h.bytes, h.refused)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{RecordBatch, StringArray};
    use curator_core::TaskMeta;

    use super::*;

    fn task(seq: u64, text: &str) -> Task {
        let batch = RecordBatch::try_from_iter([("text", Arc::new(StringArray::from(vec![text; 100])) as _)]).unwrap();
        let meta = TaskMeta { seq, partition: 0, source: "s".into(), first_row: seq * 100, num_rows: 100, last_of_partition: false };
        Task::new(meta, batch)
    }

    #[test]
    fn keeps_within_the_budget_and_gives_back_whole_partitions_only() {
        let one = task_bytes(&task(0, "hello world"));
        let r = Resident::new(one * 2);
        assert!(r.keep("a-0".into(), &task(0, "hello world")));
        assert!(r.keep("a-1".into(), &task(1, "hello world")));
        assert!(!r.keep("b-0".into(), &task(0, "hello world")), "a third batch does not fit");
        assert_eq!(r.counts(), (2, one * 2, 1));
        // Partition b was not kept whole: nothing comes back, and nothing stays.
        assert!(r.take_all(["b-0"]).is_none());
        let a = r.take_all(["a-0", "a-1"]).expect("partition a was kept whole");
        assert_eq!(a.iter().map(|t| t.meta.seq).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(r.counts(), (0, 0, 1));
        // Room given back is room again.
        assert!(r.keep("c-0".into(), &task(0, "hello world")));
        assert!(r.take("c-0").is_some() && r.take("c-0").is_none());
    }

    #[test]
    fn a_partly_kept_partition_frees_what_it_held() {
        let one = task_bytes(&task(0, "x"));
        let r = Resident::new(one);
        assert!(r.keep("p-0".into(), &task(0, "x")));
        assert!(r.take_all(["p-0", "p-1"]).is_none());
        assert_eq!(r.counts().1, 0);
    }
}
