//! Exact dedup's output written during its documents phase (`action: remove`, no stage after
//! the step, a fresh documents phase): the first copy of a text is the one kept (the step's
//! verdict keeps each group's first document by position), so a document's fate depends only
//! on the documents before it. Once a partition and every partition before it are spilled,
//! its batches, kept in memory by the documents phase, are decided against the keys seen so
//! far and written and journaled as the output step writes them; their memory is free again
//! while the next partitions are read. The output step then writes only the partitions not
//! streamed: after a partition with a batch that did not fit in memory, none is.
//!
//! The step's phases still run (its statistics and `_duplicates/` come from them, and they
//! decide the same: the e2e dedup tests hold both paths to the same files).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use arrow_array::BooleanArray;
use curator_core::dedup::ExactHash;

use super::write::{PartitionWriter, Written};
use super::{Ctx, RunError};
use crate::io::journal::Journal;
use crate::task::Task;
use crate::task::{OnDone, Resident, SpillDir};

pub(super) struct ExactStream {
    /// The output's context: its plan's partitions are the ones this run writes.
    ctx: Arc<Ctx>,
    journal: Mutex<Option<Journal>>,
    resident: Arc<Resident>,
    hash: ExactHash,
    /// The step's partitions (run-wide indices) in position order.
    order: Vec<usize>,
    /// Run-wide index → index in the output plan (absent: written by an earlier run).
    local: HashMap<usize, usize>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Into `order`: the next partition to decide.
    next: usize,
    /// Partitions spilled and waiting for an earlier one.
    done: BTreeSet<usize>,
    seen: HashSet<[u8; 16]>,
    stopped: bool,
    error: Option<RunError>,
    removed: u64,
    /// Partitions written (run-wide indices), and what their writers committed.
    streamed: Vec<usize>,
    written: Written,
}

/// What the streamed output did: the partitions it wrote (run-wide indices), what the
/// writers committed (numbered as in the run's plan), documents removed.
pub(super) struct Streamed {
    pub partitions: Vec<usize>,
    pub written: Written,
    pub removed: u64,
}

/// A partition decided and not yet written: its run-wide and output indices, its batches
/// with the rows to keep (`None`: all).
type Decided = (usize, usize, Vec<(Task, Option<BooleanArray>)>);

impl ExactStream {
    pub(super) fn new(ctx: Arc<Ctx>, journal: Option<Journal>, resident: Arc<Resident>, hash: ExactHash, order: Vec<usize>) -> ExactStream {
        let local = ctx.plan.partitions.iter().enumerate().map(|(k, p)| (p.index, k)).collect();
        ExactStream { ctx, journal: Mutex::new(journal), resident, hash, order, local, state: Mutex::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Each change to the state is made whole under the lock; a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the documents spill calls as each partition is marked done.
    pub(super) fn hook(self: &Arc<Self>) -> OnDone {
        let me = self.clone();
        Arc::new(move |partition| me.partition_done(partition))
    }

    /// Decide, in position order, every partition that waited only for this one (under the
    /// lock: the keys must be seen in order), then write them outside it, so that spill
    /// threads write partitions side by side.
    fn partition_done(&self, partition: usize) {
        let mut ready: Vec<Decided> = Vec::new();
        {
            let mut st = self.state();
            if st.stopped {
                return;
            }
            st.done.insert(partition);
            while let Some(&next) = self.order.get(st.next) {
                if !st.done.remove(&next) {
                    break;
                }
                st.next += 1;
                match self.decide(&mut st, next) {
                    Ok(Some(d)) => ready.push(d),
                    Ok(None) => {}
                    Err(e) => {
                        st.error = Some(e);
                        st.stopped = true;
                    }
                }
                if st.stopped {
                    break;
                }
            }
        }
        for (p, local, tasks) in ready {
            let mut writer = PartitionWriter::default();
            let done = tasks.into_iter().try_for_each(|(mut task, keep)| {
                if let Some(keep) = keep {
                    task.batch = arrow_select::filter::filter_record_batch(&task.batch, &keep)
                        .map_err(|e| data_error(&task, &format!("cannot apply the dedup verdict: {e}")))?;
                }
                task.meta.partition = local;
                task.source_columns = false;
                writer.write(&self.ctx, task, &self.journal)
            });
            let mut st = self.state();
            match done {
                Ok(()) => {
                    st.streamed.push(p);
                    st.written.entries.extend(writer.written.entries);
                    st.written.docs_out += writer.written.docs_out;
                }
                Err(e) => {
                    st.error.get_or_insert(e);
                    st.stopped = true;
                }
            }
        }
    }

    /// Partition `p`'s kept batches and the rows of each that no earlier document has the
    /// text of (their keys now seen); `None` when it is not to be written here (an earlier
    /// run wrote it: its keys are seen all the same).
    fn decide(&self, st: &mut State, p: usize) -> Result<Option<Decided>, RunError> {
        let prefix = SpillDir::file_name(p, 0);
        let prefix = &prefix[..prefix.find('-').map_or(0, |i| i + 1)];
        // A batch that did not fit: this partition and every later one go to the output step.
        let Some(tasks) = self.resident.take_partition(prefix).filter(|t| !t.is_empty()) else {
            st.stopped = true;
            return Ok(None);
        };
        let local = self.local.get(&p).copied();
        let mut computed = Vec::new();
        let mut out = Vec::with_capacity(tasks.len());
        for (task, lean) in tasks {
            // The keys the spill computed for its lean batch (same function), else hashed here.
            let rows = task.batch.num_rows();
            let keys = match lean.as_ref().and_then(crate::dedup::lean::key_bytes).filter(|k| k.len() == rows * 16) {
                Some(k) => k,
                None => {
                    computed.clear();
                    crate::dedup::lean::exact_keys(&task.batch, self.hash, &mut computed).map_err(|e| data_error(&task, &e.to_string()))?;
                    &computed[..]
                }
            };
            let keep: Vec<bool> = keys.chunks_exact(16).map(|k| st.seen.insert(k.try_into().unwrap_or_default())).collect();
            let dropped = keep.iter().filter(|k| !**k).count();
            if local.is_some() {
                st.removed += dropped as u64;
            }
            out.push((task, (dropped > 0).then(|| BooleanArray::from(keep))));
        }
        Ok(local.map(|local| (p, local, out)))
    }

    /// The streamed output, or the first failure; the journal is closed (the output step
    /// opens it again for the partitions left).
    pub(super) fn finish(&self) -> Result<Streamed, RunError> {
        let mut st = self.state();
        if let Ok(mut j) = self.journal.lock() {
            j.take();
        }
        if let Some(e) = st.error.take() {
            return Err(e);
        }
        Ok(Streamed { partitions: std::mem::take(&mut st.streamed), written: std::mem::take(&mut st.written), removed: st.removed })
    }
}

fn data_error(task: &Task, message: &str) -> RunError {
    crate::io::IoError::Line { at: task.meta.to_string(), message: message.to_string() }.into()
}
