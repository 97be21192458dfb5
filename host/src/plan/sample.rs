//! The start of a plan's input, read as a run reads it: what `bench`, `tune` and `plan`'s
//! output estimate look at.

use arrow_array::RecordBatch;

use super::Plan;
use crate::io::IoError;

impl Plan {
    /// The pipeline's input from the start, in its batch size, until `max_docs` documents
    /// (the last batch cut to fit).
    pub fn read_sample(&self, max_docs: usize) -> Result<Vec<RecordBatch>, IoError> {
        let mut out = Vec::new();
        for p in 0..self.partitions.len() {
            let left = max_docs - out.iter().map(RecordBatch::num_rows).sum::<usize>();
            if left == 0 {
                break;
            }
            out.extend(self.read_partition_start(p, left)?);
        }
        Ok(out)
    }

    /// About `max_docs` documents from the starts of up to `spread` partitions spaced evenly
    /// over the input (an input sorted by language or source is not judged by its first file).
    pub fn read_spread_sample(&self, max_docs: usize, spread: usize) -> Result<Vec<RecordBatch>, IoError> {
        let n = self.partitions.len();
        let picks = spread.clamp(1, n.max(1));
        let each = max_docs.div_ceil(picks);
        let mut out = Vec::new();
        for k in 0..picks.min(n) {
            out.extend(self.read_partition_start(k * n / picks, each)?);
        }
        Ok(out)
    }

    /// The first `max_docs` documents of partition `p`, in the plan's batch size.
    fn read_partition_start(&self, p: usize, max_docs: usize) -> Result<Vec<RecordBatch>, IoError> {
        let opts = self.read_options(false);
        let batch_size = self.read_batch_size();
        let mut out = Vec::new();
        let mut docs = 0;
        for part in &self.partitions[p].parts {
            let input = &self.inputs[part.file];
            let part = crate::io::format::ReadPart { files: std::slice::from_ref(input), extent: part.extent, opts: &opts, batch_size };
            let mut r = input.format.open(&part)?;
            while docs < max_docs
                && let Some(b) = r.next_batch(batch_size)?
            {
                let take = b.num_rows().min(max_docs - docs);
                docs += take;
                out.push(b.slice(0, take));
            }
            if docs >= max_docs {
                break;
            }
        }
        Ok(out)
    }
}
