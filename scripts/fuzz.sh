#!/usr/bin/env bash
# Run every fuzz target under libFuzzer (cargo fuzz) for SECONDS each (default 600), JOBS at a
# time (default 1). The committed seeds are fuzz/corpus/<target>/; what the fuzzer finds
# grows in fuzz/corpus-work/<target>/ (not committed; keep it between runs);
# a crash lands in fuzz/artifacts/<target>/: copy it to fuzz/regressions/<target>/ so the
# test suite (tests/e2e/fuzz_smoke.rs) replays it forever, and fix it.
#
#   scripts/fuzz.sh [SECONDS] [JOBS] [TARGET...]
#
# Needs cargo-fuzz (installed here if missing) and a nightly toolchain for the sanitizer;
# without nightly it runs on stable with RUSTC_BOOTSTRAP=1 and no sanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
jobs="${2:-1}"
shift $(( $# > 2 ? 2 : $# ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(jsonl_reader parquet_reader pipeline_yaml plugin_manifest guest_output worker_output)
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
if rustup toolchain list | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
    flags=()
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
    flags=(--sanitizer none)
fi
cd fuzz
"${fuzz[@]}" build -O --debug-assertions "${flags[@]}"
mkdir -p logs
run() {
    local t="$1"
    mkdir -p "corpus-work/$t" "artifacts/$t"
    local rc=0
    # -rss_limit_mb: a harness that allocates without bound fails as a crash.
    "${fuzz[@]}" run -O --debug-assertions "${flags[@]}" "$t" "corpus-work/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -max_len=65536 \
        -artifact_prefix="artifacts/$t/" > "logs/$t.log" 2>&1 || rc=$?
    echo "$t: exit $rc, $(grep -E '^#[0-9]+' "logs/$t.log" | tail -1)"
    return $rc
}
status=0
running=0
for t in "${targets[@]}"; do
    run "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || status=1
        running=$((running - 1))
    fi
done
while [ "$running" -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
done
exit $status
