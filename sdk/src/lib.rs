//! # curator-sdk: write a curator stage
//!
//! A stage is a params struct plus one of three traits:
//!
//! * [`Filter`]: keep or drop each document;
//! * [`Map`]: rewrite the text of each document;
//! * [`Stage`]: anything else, a whole [`Batch`] at a time.
//!
//! The [`stage`] attribute derives the params parsing, generates the params JSON Schema,
//! embeds the manifest in the `curator-manifest` custom section and, on `wasm32`, exports
//! the component. Build with `cargo build --release --target wasm32-wasip2` and drop the
//! `.wasm` file into a plugins directory.
//!
//! ```ignore
//! use curator_sdk::prelude::*;
//!
//! /// Keeps documents with between `min_words` and `max_words` words.
//! #[stage(name = "word_count_filter", cpus = 1.0)]
//! pub struct WordCount {
//!     #[param(default = 50)]
//!     min_words: usize,
//!     #[param(default = 100000)]
//!     max_words: usize,
//! }
//!
//! impl Filter for WordCount {
//!     fn keep(&self, doc: &Doc) -> bool {
//!         (self.min_words..=self.max_words).contains(&doc.words())
//!     }
//! }
//! ```
//!
//! The same source compiles natively: [`native::NativeStage`] runs a stage in-process for
//! unit tests and benchmarks.

mod batch;
#[cfg(not(target_arch = "wasm32"))]
mod context;
mod doc;
mod runner;
pub mod shingle;
pub mod text;

#[cfg(target_arch = "wasm32")]
mod guest;

pub mod native;

/// The native (C ABI) stage contract; see `sdk/include/curator_stage.h`.
#[cfg(not(target_arch = "wasm32"))]
pub mod abi;

pub use batch::{Batch, BatchError, Column, ColumnType, Output, StrColumn};

/// The column a stage names a document's failure in (utf8; null where the document is
/// fine), for a stage that answers for some documents of a call and not others (a model
/// server that refused one request): the host takes those documents out of the batch and
/// dead-letters them with the reason (or stops the run, without `ignore_failures`).
pub const ROW_ERROR_COLUMN: &str = "_error";
#[cfg(feature = "macros")]
pub use curator_sdk_macros::stage;
pub use doc::Doc;
pub use runner::{
    Filter, Map, Rewrite, Runner, Score, Stage, StageDef, StageError, granted_path, load_granted, read_granted, score_filter,
};

/// Re-exported for the code the [`stage`] attribute generates.
pub use serde;
pub use serde_json;

/// Everything a stage author needs: `use curator_sdk::prelude::*;`
pub mod prelude {
    #[cfg(feature = "macros")]
    pub use crate::stage;
    pub use crate::{
        Batch, Column, ColumnType, Doc, Filter, Map, Output, Rewrite, Score, Stage, StageError, load_granted, read_granted, score_filter,
    };
    pub use crate::{Level, log};
    pub use std::borrow::Cow;
}

/// Log levels for [`log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Send a log line to the host (the only output channel a sandboxed stage has).
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    guest::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

/// Not public API: used by the code the [`stage`] attribute generates.
#[doc(hidden)]
pub mod __private {
    #[cfg(target_arch = "wasm32")]
    pub use crate::guest::{bindings, process, setup, teardown};
    pub use crate::runner::{Probe, ViaFilter, ViaMap, ViaRewrite, ViaScore, ViaStage};
}
