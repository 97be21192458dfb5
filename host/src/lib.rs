//! `curator-host`: the CLI's library. Registry, sandboxed WASM runtime, IO and executor.

pub mod columns;
pub mod exec;
pub mod gpu;
pub mod io;
pub mod metrics;
pub mod native;
pub mod plan;
pub mod registry;
pub mod wasm;
pub mod wasm_worker;
