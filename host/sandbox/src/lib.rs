//! `curator-sandbox`: where curator runs plugin code. The trust check a plugin file passes
//! before anything reads it (`trust`, `plugin_facts`), the search path (`registry`), the
//! stage-call seam every back-end implements (`stage`), WASM instances in this process
//! (`wasm`) and worker processes for native stages and `isolation: process` (`worker`).
//! Below the planner and the executor (`curator-host`), which only call it; it never decides
//! what runs where.

pub mod plugin_facts;
pub mod registry;
pub mod stage;
pub mod trust;
pub mod wasm;
pub mod worker;

// Readers, writers and OS probes: the crate below.
pub use curator_io as io;
pub use curator_io::os;
