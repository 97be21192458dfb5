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
# With CEILING=1, then the machine's own ceiling for work that shares nothing: the shards
# dealt into N slices, N independent one-core runs at once (each pinned to its core) against
# slice 0 alone on core 0, ROUNDS times: N × alone / together is what N cores give a job
# with no serial part (a shared clock or memory budget shows there, not in our engine).
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
if [ "${CEILING:-}" = 1 ]; then
    i=0
    for f in $(ls "$corpus" | sort); do
        mkdir -p "$work/slice$((i % n))"
        ln -s "$corpus/$f" "$work/slice$((i % n))/$f"
        i=$((i + 1))
    done
    for s in $(seq 0 $((n - 1))); do
        sed -e "s|path: $corpus|path: $work/slice$s|" -e "s|path: $work/out1|path: $work/slice-out$s|" "$work/p1.yaml" > "$work/slice$s.yaml"
    done
    for r in $(seq "$rounds"); do
        t0=$(date +%s.%N)
        taskset -c 0 "$host" run "$work/slice0.yaml" > "$work/slice-log0" 2>&1 || { cat "$work/slice-log0" >&2; exit 1; }
        t1=$(date +%s.%N)
        alone=$(echo "$t1 - $t0" | bc -l)
        t0=$(date +%s.%N)
        for s in $(seq 0 $((n - 1))); do
            taskset -c "$s" "$host" run "$work/slice$s.yaml" > "$work/slice-log$s" 2>&1 &
        done
        wait
        t1=$(date +%s.%N)
        together=$(echo "$t1 - $t0" | bc -l)
        echo "ceiling round $r: slice 0 alone $(printf '%.3f' "$alone") s; $n slices at once, one core each, $(printf '%.3f' "$together") s: $(echo "$n * $alone / $together" | bc -l | xargs printf '%.1f')x"
    done
fi
