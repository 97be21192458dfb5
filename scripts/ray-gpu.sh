#!/usr/bin/env bash
# On a machine with 2 GPUs (no Rust needed): a GPU stage sharded over both cards through
# curator-ray on a local Ray, against one `curator-host run` on one card; both outputs must be
# identical. The stage is `minhash` on the GPU, or with MODELS (a directory holding
# plugins/libembedder.so and minilm16/, as in scripts/models/build-gpu-kit.sh) the `embedder`
# with all-MiniLM-L6-v2. Needs KIT (scripts/ray-gpu-kit.sh: curator-host, libminhash.so, a
# real-text corpus) and Ray importable.
#
#   scripts/ray-gpu.sh KIT OUT [MODELS]
set -euo pipefail
kit="$(cd "$1" && pwd)"; out="$2"; models="${3:+$(cd "$3" && pwd)}"
plugins="$kit/plugins"
stage='  - plugin: minhash
    params: {device: gpu}'
if [ -n "$models" ]; then
    plugins="$models/plugins"
    stage="  - plugin: embedder
    params: {model: /models/minilm16, device: gpu, max_batch_tokens: 65536}
    grants: {models: $models}"
fi
here="$(cd "$(dirname "$0")/.." && pwd)"
work=/tmp/ray-gpu && rm -rf "$work" && mkdir -p "$work/data" "$out"
for k in $(seq 1 "${COPIES:-8}"); do cp "$kit/corpus.jsonl" "$work/data/part-$k.jsonl"; done
for name in single ray; do
    cat > "$work/$name.yaml" <<YAML
source: {path: data}
batch_size: 8192
stages:
$stage
    resources: {gpu_memory_gb: 48}   # 0.6 of an 80 GB card: one task per card
sink: {path: $name, format: parquet, mode: overwrite}
YAML
done
nvidia-smi --query-gpu=index,name,memory.total --format=csv
t0=$(date +%s.%N)
CUDA_VISIBLE_DEVICES=0 "$kit/curator-host" run "$work/single.yaml" --plugins "$plugins" > "$out/single.log" 2>&1
t1=$(date +%s.%N)
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader -lms 200 > "$out/smi.csv" &
smi=$!
PYTHONPATH="$here/python/curator-ray:${PYTHONPATH:-}" RAY_USAGE_STATS_ENABLED=0 python3 -m curator_ray run "$work/ray.yaml" \
    --shards "${SHARDS:-8}" --cpus-per-task "${CPUS_PER_TASK:-16}" --curator "$kit/curator-host" --plugins "$plugins" | tee "$out/ray.log"
t2=$(date +%s.%N)
kill $smi || true
python3 - "$work" "$out" "$t0" "$t1" "$t2" <<'PY'
import json, sys, collections
work, out, t0, t1, t2 = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
m = lambda d: sorted((f["path"], f["checksum"]) for f in json.load(open(f"{work}/{d}/_manifest.json"))["files"])
busy = collections.defaultdict(list)
for line in open(f"{out}/smi.csv"):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 4 and parts[2].endswith("%"):
        busy[parts[1]].append(int(parts[2].rstrip(" %")))
print(f"one card, curator-host run: {t1 - t0:.2f} s; both cards through curator-ray (local Ray start included): {t2 - t1:.2f} s")
for gpu, u in sorted(busy.items()):
    print(f"GPU {gpu}: utilization > 0 in {sum(1 for x in u if x > 0)} of {len(u)} samples, peak {max(u)} %")
print("outputs identical:", m("single") == m("ray"))
PY
