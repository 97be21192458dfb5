//! `curator-host`: the CLI's library. Registry, planner, the stage-call seam and its
//! back-ends (sandboxed WASM in process, worker processes), IO and the executor.

pub mod dedup;
pub mod exec;
#[doc(hidden)]
pub mod fuzz;
pub mod gpu;
pub mod install;
pub mod metrics;
pub mod oci;
pub mod plan;
pub mod plugin_facts;
pub mod registry;
pub mod scaffold;
pub mod stage;
pub mod task;
pub mod trust;
pub mod tune;
pub mod wasm;
pub mod worker;

// Readers, writers and OS probes: a crate of their own below this one.
pub use curator_io as io;
pub use curator_io::os;
