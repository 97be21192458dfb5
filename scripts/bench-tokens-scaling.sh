#!/usr/bin/env bash
# How our tokenized sink scales with cores: `format: megatron` over a corpus's shards on one
# core (`taskset -c 0`) and on N (`taskset -c 0-(N-1)`), alternated ROUNDS times, whole
# process (start-up, reading, tokenizing, writing, fsync). Prints each round's wall seconds,
# the run's own tokens line and the ratio, then compares every `.bin` of the two outputs.
#
#   scripts/bench-tokens-scaling.sh CORPUS_DIR TOKENIZER_JSON EOS_TOKEN [N]
#
# N defaults to every core of the machine. The corpus wants many shards (a partition is
# tokenized on one core: 128 shards for 16 cores keep them all busy to the end). HOST
# (default target/release/curator-host) and ROUNDS (default 3) from the environment.
set -euo pipefail
corpus=$(realpath "$1")
tokenizer=$(realpath "$2")
eos=$3
n=${4:-$(nproc)}
rounds=${ROUNDS:-3}
host=$(realpath "${HOST:-target/release/curator-host}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for cores in 1 "$n"; do
    cat > "$work/p$cores.yaml" <<YAML
source:
  path: $corpus
sink:
  path: $work/out$cores
  format: megatron
  mode: overwrite
  tokens: {tokenizer: $tokenizer, eos_token: "$eos"}
YAML
done
echo "$(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'); corpus $corpus"
for r in $(seq "$rounds"); do
    line="round $r"
    declare -A wall=()
    for cores in 1 "$n"; do
        t0=$(date +%s.%N)
        taskset -c "0-$((cores - 1))" "$host" run "$work/p$cores.yaml" > "$work/log$cores" 2>&1 || { cat "$work/log$cores" >&2; exit 1; }
        t1=$(date +%s.%N)
        wall[$cores]=$(echo "$t1 - $t0" | bc -l)
        line+=" | $cores core(s): $(printf '%.3f' "${wall[$cores]}") s, $(grep '^tokens:' "$work/log$cores")"
    done
    echo "$line | ratio $(echo "${wall[1]} / ${wall[$n]}" | bc -l | xargs printf '%.1f')x"
done
differ=0
for f in "$work/out1"/*.bin; do
    cmp -s "$f" "$work/out$n/$(basename "$f")" || { echo "DIFF $(basename "$f")"; differ=1; }
done
[ "$differ" = 0 ] && echo "every .bin written on $n cores equals the one-core run's"
