#!/usr/bin/env bash
# Megatron-LM's own tools/preprocess_data.py against our megatron sink on the same JSONL, one
# core each (`taskset -c CORE`), alternated ROUNDS times, whole processes; the outputs are
# compared byte for byte.
#
#   scripts/bench-preprocess-data.sh MEGATRON_LM_DIR TOKENIZER_DIR JSONL [HOST]
#
# MEGATRON_LM_DIR: a checkout of NVIDIA/Megatron-LM (its megatron/ and tools/; it needs torch
# and transformers installed). TOKENIZER_DIR: a directory with tokenizer.json and a
# tokenizer_config.json naming eos_token (Megatron's HuggingFaceTokenizer loads it through
# transformers; ours reads the same files). HOST defaults to target/release/curator-host.
# ROUNDS (default 3) and CORE (default 0) from the environment.
set -uo pipefail
meg=$(realpath "$1")
tok=$(realpath "$2")
input=$(realpath "$3")
host=$(realpath "${4:-target/release/curator-host}")
rounds=${ROUNDS:-3}
core=${CORE:-0}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
eos=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['eos_token'])" "$tok/tokenizer_config.json")
mkdir -p "$w/in"
ln -s "$input" "$w/in/bench.jsonl"
printf 'source: {path: %s}\nsink: {path: %s, format: megatron, mode: overwrite, tokens: {tokenizer: %s, eos_token: "%s"}}\n' \
    "$w/in" "$w/ours" "$tok" "$eos" > "$w/ours.yaml"
echo "input: $(wc -l < "$input") documents, $(du -shL "$input" | cut -f1); $(lscpu | sed -n 's/^Model name: *//p')"
python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
elapsed() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 2))" "$1" "$2"; }
for r in $(seq "$rounds"); do
    t0=$(date +%s.%N)
    (cd "$meg" && PYTHONPATH="$meg" taskset -c "$core" python3 tools/preprocess_data.py --input "$input" \
        --output-prefix "$w/meg" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" \
        --append-eod --workers 1 --json-keys text) > "$w/meglog" 2>&1 || { tail -15 "$w/meglog"; exit 1; }
    t1=$(date +%s.%N)
    taskset -c "$core" "$host" run "$w/ours.yaml" > "$w/ourslog" 2>&1 || { tail -5 "$w/ourslog"; exit 1; }
    t2=$(date +%s.%N)
    echo "round $r: preprocess_data.py $(elapsed "$t0" "$t1") s, ours $(elapsed "$t1" "$t2") s ($(grep '^tokens:' "$w/ourslog"))"
done
grep -i "processed" "$w/meglog" | tail -1
cmp "$w/meg_text_document.bin" "$w/ours/bench.bin" && cmp "$w/meg_text_document.idx" "$w/ours/bench.idx" && echo "outputs identical"
