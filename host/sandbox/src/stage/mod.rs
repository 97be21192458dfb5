//! The stage-call seam: what the executor, `bench` and the tests see of a stage instance,
//! whatever runs it.
//!
//! ```text
//!             ┌─ wasm::StageInstance      a WASM component in this process (epoch deadline)
//! StageCall ──┼─ worker::WorkerProcess    a `curator-host worker` process (native or WASM)
//!             └─ worker::ffi::NativeInstance  a native library in this process (bench, tests)
//! ```
//!
//! Every back-end answers a batch with a [`StageOutput`] and fails with a [`StageFailure`];
//! [`StageOutput::apply`] is the one place where an answer is checked and applied, and
//! [`StageFailure::class`] the one place that decides retry, split, replace or give up.

mod failure;
pub mod input;
mod output;
pub mod remove_ids;

use arrow_array::RecordBatch;

pub use failure::{FailureClass, StageFailure};
pub use input::stage_input;
pub use output::{Keep, OutputKind, StageOutput, columns_of, first_column};

/// One instance of a stage, whatever runs it (in process, or a worker process).
pub type Instance = Box<dyn StageCall>;

/// One instance of a stage, ready for batches.
pub trait StageCall: Send {
    /// Process one batch: `input` holds exactly the columns the stage's manifest asks for
    /// ([`stage_input`]). The output is not yet checked: see [`StageOutput::apply`].
    fn call(&mut self, input: &RecordBatch) -> Result<StageOutput, StageFailure>;

    /// Memory the instance holds, in bytes (linear memory, or a worker's anonymous resident
    /// memory plus its GPU memory): what leak detection watches, under [`StageCall::leak_rule`].
    fn memory_bytes(&self) -> usize;

    /// Which rule decides that [`StageCall::memory_bytes`] is leaking.
    fn leak_rule(&self) -> curator_core::leak::LeakRule {
        curator_core::leak::LeakRule::LinearMemory
    }

    /// CPU time the last call used where this thread cannot see it (a worker process says
    /// how long its call took on its CPU); `None`: measure this thread.
    fn last_call_cpu(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether the instance is a worker process (for messages: "a worker process was lost").
    fn is_worker_process(&self) -> bool {
        false
    }

    /// Let the stage clean up, then drop the instance.
    fn teardown(self: Box<Self>);
}

/// Run `inst` on `batch` for a stage reading `wanted`, and apply its checked output.
pub fn call_and_apply(inst: &mut dyn StageCall, batch: &RecordBatch, wanted: &[String]) -> Result<RecordBatch, StageFailure> {
    call_and_apply_kept(inst, batch, wanted).map(|(b, _)| b)
}

/// `call_and_apply`, and whether the answer kept the source's columns
/// (`StageOutput::keeps_source_columns`).
pub fn call_and_apply_kept(inst: &mut dyn StageCall, batch: &RecordBatch, wanted: &[String]) -> Result<(RecordBatch, bool), StageFailure> {
    let out = inst.call(&stage_input(batch, wanted)?)?;
    let kept = out.keeps_source_columns();
    Ok((out.apply(batch)?, kept))
}
