//! `curator-core`: the data model and the pure policy of curator.
//!
//! Invariant: this crate does no IO, starts no threads and knows nothing about wasmtime,
//! tokio or Arrow execution. It is what a stage manifest, a pipeline file and a resource
//! request *mean*; the host decides what to do with them.

pub mod dedup;
pub mod io_spec;
pub mod leak;
pub mod manifest;
pub mod params;
pub mod partition;
pub mod pipeline;
pub mod pipeline_edit;
pub mod placement;
pub mod resources;
pub mod scaling;
pub mod service;
pub mod shard;
pub mod spec_error;
pub mod step;
pub mod task;
pub mod trust;
pub mod tune;

pub use dedup::{DedupAction, DedupMethod, DedupSpec};
pub use manifest::{
    ABI_MAJOR, ABI_MINOR, Abi, DirectoryRequest, MANIFEST_SECTION, Manifest, ManifestError, Permissions, PluginKind, WIT_PACKAGE,
    abi_compatible,
};
pub use params::{ParamError, validate_params};
pub use pipeline::{Isolation, PipelineSpec, SinkSpec, SourceSpec, SpecError, SpecErrors, StageSpec, Step};
pub use resources::{MemoryBudget, ResourceError, ResourceOverride, Resources, Runs, call_defaults, memory_budget, on_cpu_instead};
pub use task::TaskMeta;
