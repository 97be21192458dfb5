#!/usr/bin/env bash
# Build what scripts/gpu-checks.sh needs into DIR (default .device/), for a GPU machine
# without Rust: the host (stripped), the minhash plugin, the native probe, minhash-bench, and
# the GPU test binaries (`tests/gpu.rs` of curator-gpu's users) with the tiny models they read.
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
# The cargo tests that run kernels on the card (they skip without one; gpu-checks.sh runs them
# with CURATOR_REQUIRE_GPU=1). Their paths to the repository's files are compiled in.
mkdir -p "$out/tests"
cargo test --release --locked --no-run --message-format=json -p curator-gpu -p minhash -p curator-vectors -p curator-encoder --test gpu --lib \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("gpu", "curator_gpu"):
        print(m["package_id"].split("#")[0].rsplit("/", 1)[-1] + " " + m["executable"])' \
    | while read -r pkg exe; do cp "$exe" "$out/tests/${pkg}-$(basename "$exe" | cut -d- -f1)"; done
du -sh "$out"
