#!/usr/bin/env bash
# Build what scripts/models/gpu-models.sh needs into a kit for a GPU machine without Rust:
# the host and the embedder/classifier plugins (stripped), encoder-check, all-MiniLM-L6-v2 in
# fp16, the PyTorch references, the scripts, and a real-text corpus (scripts/dedup/make-corpus.py,
# 15k documents; gpu-models.sh repeats it eight times with fresh ids: ~113k). Packs it as KIT.tar.xz
# (what travels to the GPU machine, working tree included, must stay under 64 MiB).
#
#   scripts/models/build-gpu-kit.sh .device/models-kit [DOCS]
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-.device/models-kit}"; docs="${2:-15000}"
cargo build --release --locked -p curator-host -p embedder -p classifier
cargo build --release --locked -p curator-encoder --example encoder-check --example tokenizer-bench
rm -rf "$out" && mkdir -p "$out/plugins"
strip -o "$out/curator-host" target/release/curator-host
strip -o "$out/encoder-check" target/release/examples/encoder-check
[ -z "${KIT_TOKENIZER_BENCH:-}" ] || strip -o "$out/tokenizer-bench" target/release/examples/tokenizer-bench
strip -o "$out/plugins/libembedder.so" target/release/libembedder.so
# The classifier plugin stays behind (the 64 MiB limit): gpu-models.sh's `share` and `tune`
# steps need it; build a kit with it (KIT_CLASSIFIER=1) for those.
[ -z "${KIT_CLASSIFIER:-}" ] || strip -o "$out/plugins/libclassifier.so" target/release/libclassifier.so
python3 scripts/models/fetch.py --fp16 "$out/minilm16"
rm -f "$out/minilm16/README.md" "$out/minilm16/data_config.json" "$out/minilm16/vocab.txt"
cp tests/parity/encoder_reference.json scripts/models/fetch.py scripts/models/torch_bench.py scripts/models/gpu-models.sh "$out/"
[ -f "$out.corpus/data/shard-000.jsonl" ] || python3 scripts/dedup/make-corpus.py "$out.corpus" --docs "$docs" --shards 1 >/dev/null
cp "$out.corpus/data/shard-000.jsonl" "$out/corpus.jsonl"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T2 -9e > "$out.tar.xz"
ls -la "$out.tar.xz"
