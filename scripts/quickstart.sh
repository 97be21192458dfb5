#!/usr/bin/env bash
# README command 1: build what the quickstart needs (a lean host and its two WASM stages,
# nothing else), then run examples/quickstart/pipeline.yaml on the bundled data. The lean host
# (`--no-default-features`) leaves out Parquet and dedup steps (`parquet`) and object stores,
# plugin URLs and OCI registries (`remote`): about 40 % less to compile. The full host and
# every other plugin build with scripts/build-dist.sh, or with the test suite (README command 2).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
# The two guests build beside the host, at low priority: the host's build is one long chain
# (cranelift, then wasmtime, then the host) that leaves a core idle much of the time.
# Both target directories exist before the two cargo processes start: each creates a missing
# one through a temporary name and a rename, and on a fresh clone those raced.
mkdir -p target/wasm
nice -n 19 cargo build --locked --profile guest --target wasm32-wasip2 --target-dir target/wasm -p word_count_filter -p unicode_normalize &
guests=$!
trap 'kill "$guests" 2>/dev/null || true' EXIT
cargo build --release --locked -p curator-host --no-default-features
wait "$guests"
trap - EXIT
mkdir -p target/quickstart/plugins
cp target/wasm/wasm32-wasip2/guest/word_count_filter.wasm target/wasm/wasm32-wasip2/guest/unicode_normalize.wasm target/quickstart/plugins/
# First-party plugins, signed with this checkout's build key, which the host trusts.
scripts/sign-build.sh target/release/curator-host target/quickstart/plugins
target/release/curator-host run examples/quickstart/pipeline.yaml --plugins target/quickstart/plugins
echo "output: examples/quickstart/out/ (the full host and every plugin, into target/dist/: scripts/build-dist.sh)"
