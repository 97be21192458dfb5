#!/usr/bin/env bash
# The engine's floor: a pipeline with no stages (read → write JSONL) against copying the same
# bytes, on one core, alternated ROUNDS times, whole process (start-up, planning, manifest,
# fsync included). Prints a table of wall seconds (min–max) and the ratio floor / ours.
#
#   scripts/bench-passthrough.sh CORPUS_DIR [HOST ...]
#
# CORPUS_DIR holds `*.jsonl.zst` shards (scripts/dedup/make-corpus.py --format jsonl.zst); the
# plain-JSONL row decompresses them once into a temporary folder beside the outputs. Each HOST (default
# target/release/curator-host) is a curator-host binary: give two to compare builds in one run.
# ROUNDS (default 5) and CORE (default 0) from the environment.
set -euo pipefail
corpus=$(realpath "$1")
shift
hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(target/release/curator-host)
rounds=${ROUNDS:-5}
core=${CORE:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

shopt -s nullglob
zst=("$corpus"/*.jsonl.zst)
[ ${#zst[@]} -gt 0 ] || { echo "no *.jsonl.zst in $corpus" >&2; exit 1; }
plain="$work/plain"
mkdir -p "$plain"
for f in "${zst[@]}"; do
    zstd -qdc "$f" > "$plain/$(basename "${f%.zst}")"
done
text_mb=$(cat "$plain"/*.jsonl | wc -c | awk '{printf "%.0f", $1 / 1e6}')

pipeline() { # SOURCE OUT
    printf 'source:\n  path: %s\nsink:\n  path: %s\n  mode: overwrite\nstages: []\n' "$1" "$2" > "$work/p-$(basename "$2").yaml"
    echo "$work/p-$(basename "$2").yaml"
}
seconds() { # COMMAND...: wall seconds of one run on the chosen core
    local t0 t1
    t0=$(date +%s.%N)
    taskset -c "$core" "$@" > /dev/null 2>&1
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

declare -A runs
for _ in $(seq "$rounds"); do
    runs[zstd_floor]+=" $(seconds sh -c "zstd -qdc $corpus/*.jsonl.zst > $work/copy.jsonl")"
    runs[cat_floor]+=" $(seconds sh -c "cat $plain/*.jsonl > $work/copy.jsonl")"
    for i in "${!hosts[@]}"; do
        runs[zst_$i]+=" $(seconds "${hosts[$i]}" run "$(pipeline "$corpus" "$work/out-zst")" --workers 1)"
        runs[plain_$i]+=" $(seconds "${hosts[$i]}" run "$(pipeline "$plain" "$work/out-plain")" --workers 1)"
    done
done

range() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f–%.2f", lo, hi}'; }
median() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "corpus: $corpus (${#zst[@]} shards, $text_mb MB of JSONL), core $core, $rounds alternated rounds, wall s (min–max)"
echo
echo "| workload | floor | host | ours | floor / ours (medians) |"
echo "|---|---|---|---|---|"
for i in "${!hosts[@]}"; do
    for kind in zst plain; do
        floor=$([ $kind = zst ] && echo zstd_floor || echo cat_floor)
        label=$([ $kind = zst ] && echo "zstd JSONL → JSONL" || echo "plain JSONL → JSONL")
        floor_name=$([ $kind = zst ] && echo '`zstd -dc > file`' || echo '`cat > file`')
        ratio=$(echo "$(median "${runs[$floor]}") / $(median "${runs[${kind}_$i]}")" | bc -l)
        printf '| %s | %s %s | %s | %s | %.0f %% |\n' "$label" "$floor_name" "$(range "${runs[$floor]}")" "${hosts[$i]}" "$(range "${runs[${kind}_$i]}")" "$(echo "$ratio * 100" | bc -l)"
    done
done
