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
    /// The lean form the spill wrote of a kept batch, where it wrote one (its keys: what a
    /// streamed output decides by, not computed twice).
    lean: HashMap<String, arrow_array::RecordBatch>,
    bytes: u64,
    /// Batches refused for want of room (their partitions are read again).
    refused: u64,
    /// The spill file names' partition prefixes (`NNNNNNNN-`) of the refused batches.
    refused_partitions: std::collections::HashSet<String>,
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
        self.keep_with(name, task, None)
    }

    /// [`Resident::keep`], with the lean form the spill wrote of the batch (given back by
    /// [`Resident::take_partition`]).
    pub fn keep_with(&self, name: String, task: &Task, lean: Option<arrow_array::RecordBatch>) -> bool {
        let bytes = task_bytes(task) + lean.as_ref().map_or(0, |b| b.get_array_memory_size() as u64);
        let mut h = self.held();
        if h.bytes + bytes > self.budget {
            h.refused += 1;
            if let Some((prefix, _)) = name.split_once('-') {
                h.refused_partitions.insert(prefix.to_string());
            }
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
        if let Some(lean) = lean {
            h.lean.insert(name.clone(), lean);
        }
        h.tasks.insert(name, copy);
        true
    }

    /// The task kept under `name` and its lean form, out of the store (its bytes freed).
    fn remove(h: &mut Held, name: &str) -> Option<(Task, Option<arrow_array::RecordBatch>)> {
        let task = h.tasks.remove(name)?;
        let lean = h.lean.remove(name);
        h.bytes -= task_bytes(&task) + lean.as_ref().map_or(0, |b| b.get_array_memory_size() as u64);
        Some((task, lean))
    }

    /// The batch kept under `name`, given up by the store.
    pub fn take(&self, name: &str) -> Option<Task> {
        Resident::remove(&mut self.held(), name).map(|(t, _)| t)
    }

    /// The batches kept under every one of `names`, in that order, when all of them were
    /// kept; otherwise none (and those that were kept are given up: the partition is read
    /// again whole).
    pub fn take_all<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Option<Vec<Task>> {
        let mut h = self.held();
        let mut out = Vec::new();
        let mut whole = true;
        for name in names {
            match Resident::remove(&mut h, name) {
                Some((t, _)) => out.push(t),
                None => whole = false,
            }
        }
        whole.then_some(out)
    }

    /// Every batch kept of the partition whose spill file names start `prefix` (`NNNNNNNN-`),
    /// in name order (their sequence), each with its lean form where the spill kept one,
    /// given up by the store; none when one of its batches was refused.
    pub fn take_partition(&self, prefix: &str) -> Option<Vec<(Task, Option<arrow_array::RecordBatch>)>> {
        let mut h = self.held();
        if h.refused_partitions.contains(prefix.trim_end_matches('-')) {
            return None;
        }
        let mut names: Vec<String> = h.tasks.keys().filter(|n| n.starts_with(prefix)).cloned().collect();
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        out.extend(names.iter().filter_map(|name| Resident::remove(&mut h, name)));
        Some(out)
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
    fn a_partition_is_taken_whole_in_order_unless_a_batch_was_refused() {
        let one = task_bytes(&task(0, "x"));
        let r = Resident::new(one * 3);
        assert!(r.keep("00000001-0000000001.arrow".into(), &task(1, "x")));
        assert!(r.keep("00000001-0000000000.arrow".into(), &task(0, "x")));
        assert!(r.keep("00000002-0000000000.arrow".into(), &task(0, "x")));
        assert!(!r.keep("00000002-0000000001.arrow".into(), &task(1, "x")), "over the budget");
        let p1 = r.take_partition("00000001-").expect("partition 1 was kept whole");
        assert_eq!(p1.iter().map(|(t, _)| t.meta.seq).collect::<Vec<_>>(), [0, 1]);
        assert!(r.take_partition("00000002-").is_none(), "one of partition 2's batches was refused");
        assert_eq!(r.counts().0, 1, "partition 2's kept batch stays for the output");
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
