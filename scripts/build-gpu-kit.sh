#!/usr/bin/env bash
# Build what scripts/gpu-checks.sh needs into DIR (default .device/), for a GPU machine
# without Rust: the host (stripped), the minhash plugin, the native probe, minhash-bench.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.device}"
cargo build --release --locked -p curator-host -p minhash -p native_probe
cargo build --release --locked -p minhash --example minhash-bench
rm -rf "$out" && mkdir -p "$out"
strip -o "$out/curator-host" target/release/curator-host
cp target/release/libminhash.so target/release/libnative_probe.so "$out/"
strip -o "$out/minhash-bench" target/release/examples/minhash-bench
cp scripts/gpu-checks.sh "$out/"
du -sh "$out"
