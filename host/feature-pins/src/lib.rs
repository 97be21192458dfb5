//! No code: see Cargo.toml. This crate only pins the features of curator-host's dependencies.
