//! End-to-end tests: the real `curator-host` binary on real files, with guest stages built
//! from source for wasm32-wasip2 (see `support::guests_dir`).

mod support;

mod bombs;
mod captions;
mod catalogue;
mod cli;
mod compat;
mod dedup;
mod dedup_phases;
mod disk_full;
mod executor;
mod fuzz_smoke;
mod images;
mod io;
mod models;
mod native;
mod nemotron_cc;
mod oci;
mod pipeline_errors;
mod python_stages;
mod quickstart;
mod ray;
mod run_lock;
mod s3;
mod s3_faults;
mod sandbox;
mod scaffold;
mod scheduling;
mod semantic;
mod serve;
mod services;
mod shards;
mod snapshots;
mod stored_vectors;
mod tokens;
mod trust;
mod video;
mod warc;
