#!/usr/bin/env bash
# GPU MinHash through the host on >= 1 GB of JSONL: docs/s of whole runs and the GPU's busy %
# (nvidia-smi utilization.gpu, sampled every 200 ms during each run), for each kit given, on
# the same card and data, runs interleaved (kit1, kit2, kit1, kit2, ...), best of ROUNDS.
#
#   scripts/gpu-minhash-throughput.sh KIT...     (each KIT built by scripts/build-gpu-kit.sh;
#                                                 e.g. one from before a change, one after)
#   ROUNDS=3 DOCS_PER_SHARD=50000 SHARDS=8       (defaults: 400,000 documents, ~1.3 GB)
#
# The pipeline is the quickstart-style GPU MinHash one: 4 workers, each a quarter of the card
# (gpu_memory_gb), batches of 4,096 documents.
set -euo pipefail
rounds="${ROUNDS:-3}"
per_shard="${DOCS_PER_SHARD:-50000}"
shards="${SHARDS:-8}"
work="${TMPDIR:-/tmp}/curator-gpu-throughput"
rm -rf "$work" && mkdir -p "$work/in"
python3 - "$work/in/shard-0.jsonl" "$per_shard" <<'PY'
import json, random, sys
rng = random.Random(7)
words = "the of and data model training corpus quality filter language document token web page université naïve café straße".split()
with open(sys.argv[1], "w") as out:
    for i in range(int(sys.argv[2])):
        n = rng.randint(100, 900)
        out.write(json.dumps({"id": f"d{i}", "text": " ".join(rng.choice(words) for _ in range(n))}) + "\n")
PY
for k in $(seq 1 $((shards - 1))); do cp "$work/in/shard-0.jsonl" "$work/in/shard-$k.jsonl"; done
echo "input: $(du -sh "$work/in" | cut -f1) in $shards shards, $((per_shard * shards)) documents"
nvidia-smi -L | head -1
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
quarter=$((total_mib / 1024 / 4))
echo "| kit | round | docs | seconds | docs/s | GPU busy % (mean of samples) | GPU busy % (max) | minhash workers' wall time in calls, s (sum of 4) |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
    for kit in "$@"; do
        name="$(basename "$kit")"
        mkdir -p "$work/plugins-$name"
        cp "$kit/libminhash.so" "$work/plugins-$name/"
        cat > "$work/$name.yaml" <<YAML
source: {path: in}
sink: {path: out-$name, mode: overwrite}
batch_size: 4096
stages:
  - plugin: minhash
    params: {device: gpu}
    resources: {gpu_memory_gb: $quarter}
    num_workers: 4
YAML
        (while true; do nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits | head -1; sleep 0.2; done) > "$work/util.log" 2>/dev/null &
        sampler=$!
        t0=$(date +%s.%N)
        "$kit/curator-host" run "$work/$name.yaml" --plugins "$work/plugins-$name" > "$work/run-$name.log" 2>&1 || { cat "$work/run-$name.log"; kill $sampler; exit 1; }
        t1=$(date +%s.%N)
        kill $sampler 2>/dev/null; wait $sampler 2>/dev/null || true
        python3 - "$work/out-$name/_summary.json" "$t0" "$t1" "$work/util.log" "$name" "$round" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = float(sys.argv[3]) - float(sys.argv[2])
u = [float(x) for x in open(sys.argv[4]).read().split() if x.strip().replace(".", "").isdigit()]
mean = sum(u) / len(u) if u else 0.0
st = s["stages"][0]
in_calls = st.get("wall_busy_s", st["busy_s"])  # older summaries had only wall time, as busy_s
print(f"| {sys.argv[5]} | {sys.argv[6]} | {s['docs_in']} | {t:.2f} | {s['docs_in'] / t:,.0f} | {mean:.1f} | {max(u) if u else 0:.0f} | {in_calls:.2f} |")
PY
    done
done
