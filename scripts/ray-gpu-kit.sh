#!/usr/bin/env bash
# What scripts/ray-gpu.sh needs on a GPU machine without Rust or network: curator-host and the
# minhash plugin (stripped), a real-text corpus, and the Ray wheel with the dependencies that
# machine lacks (Python 3.12), split in two parts (each call to the machine carries at most 64
# MiB): KIT.tar.xz, KIT-ray-a, KIT-ray-b.
#
#   scripts/ray-gpu-kit.sh .device/ray-kit
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.device/ray-kit}"
cargo build --release --locked -p curator-host -p minhash
rm -rf "$out" && mkdir -p "$out/plugins" "$out.whl"
strip -o "$out/curator-host" target/release/curator-host
strip -o "$out/plugins/libminhash.so" target/release/libminhash.so
corpus=.device/models-kit.corpus/data/shard-000.jsonl
[ -f "$corpus" ] || python3 scripts/dedup/make-corpus.py .device/models-kit.corpus --docs 56000 --shards 1 >/dev/null
cp "$corpus" "$out/corpus.jsonl"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T2 -6 > "$out.tar.xz"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$out.whl" \
    ray==2.60.0 jsonschema jsonschema-specifications referencing rpds-py
tar -C "$out.whl" -cf - . > "$out.whl.tar"
rm -rf "$out-ray-a" "$out-ray-b" && mkdir -p "$out-ray-a" "$out-ray-b"
split -b 45M "$out.whl.tar" "$out.whl.tar."
mv "$out.whl.tar.aa" "$out-ray-a/"
mv "$out.whl.tar.ab" "$out-ray-b/"
ls -la "$out.tar.xz" "$out-ray-a" "$out-ray-b"
