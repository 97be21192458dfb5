#!/usr/bin/env bash
# rustc for the workspace's own crates, with clippy's lints and every warning an error:
# CI sets RUSTC_WORKSPACE_WRAPPER to this file, so README commands 1 and 2 lint what they
# compile, in the same pass (`cargo clippy` would type-check every dependency a second time,
# in check mode: six minutes of CI). Cargo calls it as `clippy-rustc.sh <rustc> <args>…`.
# Dependencies are not wrapped; their lints are capped as usual. bash, not sh: dash drops the
# environment variables whose names have a `-`, such as CARGO_BIN_EXE_curator-host.
exec clippy-driver "$@" -D warnings
