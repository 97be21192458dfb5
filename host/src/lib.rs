//! `curator-host`: the CLI's library. The planner and the executor, over the crates below:
//! `curator-sandbox` (registry, the stage-call seam, WASM and worker processes), `curator-io`,
//! `curator-run` and `curator-dedup`.

pub mod exec;
#[doc(hidden)]
pub mod fuzz;
pub mod install;
pub mod oci;
pub mod plan;
pub mod scaffold;
pub mod tune;

// Where plugin code runs (trust, registry, the stage-call seam, WASM, worker processes): a
// crate of its own below this one.
pub use curator_sandbox::{plugin_facts, registry, stage, trust, wasm, worker};
// Readers, writers and OS probes: a crate of their own below this one.
pub use curator_io as io;
pub use curator_io::os;
// What a run shares below the engine, and the dedup step's mechanism: crates of their own.
pub use curator_dedup as dedup;
pub use curator_run::{gpu, metrics, task};
