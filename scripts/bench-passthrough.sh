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
# ROUNDS (default 5) and CORE (default 0) from the environment. With PARQUET=DIR (Snappy
# Parquet shards: make-corpus.py --format parquet), a Parquet -> Parquet row against pyarrow
# (read_table + write_table, one file at a time in one process) writing zstd level 3 as ours
# does, and pyarrow writing its default (Snappy); with PARQUET_SNAPPY=1 as well, ours writing
# Snappy too (`compression: snappy`, hosts from 5018176 on) against pyarrow's Snappy.
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

pipeline() { # SOURCE OUT [SINK FORMAT [COMPRESSION]]
    printf 'source:\n  path: %s\nsink:\n  path: %s\n  mode: overwrite\n  format: %s\n%bstages: []\n' "$1" "$2" "${3:-jsonl}" \
        "${4:+  compression: $4\n}" > "$work/p-$(basename "$2").yaml"
    echo "$work/p-$(basename "$2").yaml"
}
parquet=${PARQUET:+$(realpath "$PARQUET")}
cat > "$work/pa_passthrough.py" <<'PY'
import pathlib, sys
import pyarrow.parquet as pq
src, out, codec = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
out.mkdir(exist_ok=True)
for f in sorted(src.glob("*.parquet")):
    t = pq.read_table(f)
    if codec == "zstd":
        pq.write_table(t, out / f.name, compression="zstd", compression_level=3)
    else:
        pq.write_table(t, out / f.name)
PY
seconds() { # COMMAND...: wall seconds of one run on the chosen core
    local t0 t1
    t0=$(date +%s.%N)
    taskset -c "$core" "$@" > "$work/last.log" 2>&1 || { echo "failed: $*" >&2; tail -5 "$work/last.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

declare -A runs
for _ in $(seq "$rounds"); do
    runs[zstd_floor]+=" $(seconds sh -c "zstd -qdc $corpus/*.jsonl.zst > $work/copy.jsonl")"
    runs[cat_floor]+=" $(seconds sh -c "cat $plain/*.jsonl > $work/copy.jsonl")"
    if [ -n "$parquet" ]; then
        runs[pyarrow_zstd]+=" $(seconds python3 "$work/pa_passthrough.py" "$parquet" "$work/out-pa" zstd)"
        runs[pyarrow_snappy]+=" $(seconds python3 "$work/pa_passthrough.py" "$parquet" "$work/out-pa" snappy)"
    fi
    for i in "${!hosts[@]}"; do
        runs[zst_$i]+=" $(seconds "${hosts[$i]}" run "$(pipeline "$corpus" "$work/out-zst")" --workers 1)"
        runs[plain_$i]+=" $(seconds "${hosts[$i]}" run "$(pipeline "$plain" "$work/out-plain")" --workers 1)"
        if [ -n "$parquet" ]; then
            runs[parquet_$i]+=" $(seconds "${hosts[$i]}" run "$(pipeline "$parquet" "$work/out-pq" parquet)" --workers 1)"
            if [ -n "${PARQUET_SNAPPY:-}" ]; then
                runs[snappy_$i]+=" $(seconds "${hosts[$i]}" run "$(pipeline "$parquet" "$work/out-pqs" parquet snappy)" --workers 1)"
            fi
        fi
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
    if [ -n "$parquet" ]; then
        for codec in zstd snappy; do
            ratio=$(echo "$(median "${runs[pyarrow_$codec]}") / $(median "${runs[parquet_$i]}")" | bc -l)
            printf '| Parquet → Parquet (ours zstd 3) | pyarrow read + write (%s) %s | %s | %s | %.2f× |\n' "$codec" "$(range "${runs[pyarrow_$codec]}")" "${hosts[$i]}" "$(range "${runs[parquet_$i]}")" "$ratio"
        done
        if [ -n "${PARQUET_SNAPPY:-}" ]; then
            ratio=$(echo "$(median "${runs[pyarrow_snappy]}") / $(median "${runs[snappy_$i]}")" | bc -l)
            printf '| Parquet → Parquet (ours snappy) | pyarrow read + write (snappy) %s | %s | %s | %.2f× |\n' "$(range "${runs[pyarrow_snappy]}")" "${hosts[$i]}" "$(range "${runs[snappy_$i]}")" "$ratio"
        fi
    fi
done
