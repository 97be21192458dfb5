#!/usr/bin/env bash
# Tokenized sinks against the tools' own tokenizers, on one core, whole process (start-up,
# reading, tokenizing, writing, fsync), alternated ROUNDS times. Prints wall seconds (min–max),
# tokens/s and the ratio ours / theirs:
#
#   scripts/bench-tokens.sh CORPUS_DIR TOKENIZER_JSON EOS_TOKEN
#
# - ours: `curator-host run` with `format: megatron` over the corpus's `*.jsonl.zst` shards
#   (decompression included);
# - megatron: `scripts/parity/tokens_reference.py megatron` on the same documents
#   decompressed (plain JSONL, the easier input): preprocess_data.py's encode loop and
#   megatron-core's IndexedDatasetBuilder, with the `tokenizers` package called directly — a
#   faster baseline than preprocess_data.py itself, whose HuggingFaceTokenizer goes through
#   transformers' PreTrainedTokenizerFast per document;
# - datatrove: `tokens_reference.py datatrove` (DocumentTokenizer, batches of 10,000 through
#   `encode_batch`, RAYON_NUM_THREADS=1 and the one core).
# The outputs of each round are compared byte for byte (ours against megatron's).
# ROUNDS (default 3), CORE (default 0) and HOST (default target/release/curator-host) from
# the environment.
set -euo pipefail
corpus=$(realpath "$1")
tokenizer=$(realpath "$2")
eos=$3
rounds=${ROUNDS:-3}
core=${CORE:-0}
host=$(realpath "${HOST:-target/release/curator-host}")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shopt -s nullglob
zst=("$corpus"/*.jsonl.zst)
[ ${#zst[@]} -gt 0 ] || { echo "no *.jsonl.zst in $corpus" >&2; exit 1; }
mkdir -p "$work/plain"
for f in "${zst[@]}"; do zstd -qdc "$f" > "$work/plain/$(basename "${f%.zst}")"; done
plain=("$work"/plain/*.jsonl)
cat > "$work/ours.yaml" <<YAML
source:
  path: $corpus
sink:
  path: $work/ours
  format: megatron
  mode: overwrite
  tokens: {tokenizer: $tokenizer, eos_token: "$eos"}
YAML
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > "$work/last.log" 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
declare -A times
for ((r = 0; r < rounds; r++)); do
    times[ours]+=" $(secs taskset -c "$core" "$host" run "$work/ours.yaml")"
    tokens=$(sed -n 's/^tokens: \([0-9]*\) .*/\1/p' "$work/last.log")
    times[megatron]+=" $(secs taskset -c "$core" python3 "$here/parity/tokens_reference.py" megatron --tokenizer "$tokenizer" --eos "$eos" --out "$work/ref" "${plain[@]}")"
    times[datatrove]+=" $(RAYON_NUM_THREADS=1 secs taskset -c "$core" python3 "$here/parity/tokens_reference.py" datatrove --tokenizer "$tokenizer" --eos "$eos" --out "$work/dt" "${plain[@]}")"
done
# One builder over every file (theirs) against one file per shard (ours): the merged ids agree.
"$host" megatron-merge --input "$work/ours" --output-prefix "$work/merged" > /dev/null
cmp -s "$work/merged.bin" "$work/ref.bin" && same=yes || same=NO
docs=$(cat "${plain[@]}" | wc -l)
printf '%s documents, %s tokens, %s shards, one core (%s); merged .bin equal to the reference: %s\n' "$docs" "$tokens" "${#zst[@]}" "$core" "$same"
printf '| %-9s | %-15s | %-14s | %-12s |\n' "run" "wall s (min–max)" "tokens/s (best)" "ours ×"
best_ours=$(tr ' ' '\n' <<< "${times[ours]}" | sed '/^$/d' | sort -g | head -1)
for k in ours megatron datatrove; do
    sorted=$(tr ' ' '\n' <<< "${times[$k]}" | sed '/^$/d' | sort -g)
    lo=$(head -1 <<< "$sorted"); hi=$(tail -1 <<< "$sorted")
    printf '| %-9s | %6.2f–%-8.2f | %14.0f | %12.1f |\n' "$k" "$lo" "$hi" "$(echo "$tokens / $lo" | bc -l)" "$(echo "$lo / $best_ours" | bc -l)"
done
