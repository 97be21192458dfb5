//! `curator-host`: the CLI's library. Registry, planner, the stage-call seam and its
//! back-ends (sandboxed WASM in process, worker processes), IO and the executor.

pub mod exec;
#[doc(hidden)]
pub mod fuzz;
pub mod install;
pub mod oci;
pub mod plan;
pub mod plugin_facts;
pub mod registry;
pub mod scaffold;
pub mod stage;
pub mod trust;
pub mod tune;
pub mod wasm;
pub mod worker;

// Readers, writers and OS probes: a crate of their own below this one.
pub use curator_io as io;
pub use curator_io::os;
// What a run shares below the engine, and the dedup step's mechanism: crates of their own.
pub use curator_dedup as dedup;
pub use curator_run::{gpu, metrics, task};
