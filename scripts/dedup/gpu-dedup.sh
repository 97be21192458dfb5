#!/usr/bin/env bash
# Fuzzy dedup with GPU signatures on a GPU machine, next to the CPU path, from a kit:
#
#   scripts/build-gpu-kit.sh .device/kit && python3 scripts/dedup/make-corpus.py .device/corpus
#   (on the GPU machine) scripts/dedup/gpu-dedup.sh KIT CORPUS [SCALE]
#
# 1. GPU and CPU signatures of the corpus (a `minhash` pipeline each): identical bytes?
# 2. fuzzy dedup (NeMo parameters: 24-character shingles, 20 × 13) with device: gpu and
#    device: cpu on the corpus: identical _duplicates/?
# 3. throughput: the corpus repeated SCALE times (fresh ids; default 10), fuzzy dedup with
#    GPU signatures end to end (read, minhash, buckets, components, write), docs/s and the
#    GPU's busy % (nvidia-smi, sampled every 200 ms); the bucket phase's peak RSS beside the
#    plan's estimate; then again without the Jaccard check (NeMo Curator's behaviour).
set -euo pipefail
kit="$(cd "$1" && pwd)"; corpus="$(cd "$2" && pwd)"; scale="${3:-10}"
work="${TMPDIR:-/tmp}/curator-gpu-dedup"
rm -rf "$work" && mkdir -p "$work/plugins" "$work/big"
cp "$kit/libminhash.so" "$work/plugins/"
host="$kit/curator-host"
nvidia-smi -L | head -1
python3 - "$corpus/data" "$work/big" "$scale" <<'PY'
import json, pathlib, sys
src, dst, scale = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
n = 0
outs = [open(dst / f"shard-{k:03d}.jsonl", "w") for k in range(16)]
for rep in range(scale):
    for p in sorted(src.glob("*.jsonl")):
        for line in open(p):
            d = json.loads(line); d["id"] = f"s{rep}-{d['id']}"
            outs[n % 16].write(json.dumps(d, ensure_ascii=False) + "\n"); n += 1
print(f"scaled corpus: {n} documents")
PY
cd "$work"
sig() { cat > "sig-$1.yaml" <<YAML
source: {path: $corpus/data}
batch_size: 4096
stages:
  - plugin: minhash
    params: {device: $1}
    resources: {gpu_memory_gb: $2}
sink: {path: sig-$1, mode: overwrite}
YAML
"$host" run "sig-$1.yaml" --plugins plugins > "sig-$1.log" 2>&1 || { cat "sig-$1.log"; exit 1; }; }
sig gpu 8; sig cpu 0
echo "signatures GPU vs CPU: $(cat sig-gpu/*.jsonl | sha256sum | cut -c1-16) vs $(cat sig-cpu/*.jsonl | sha256sum | cut -c1-16)"
dedup() { # name device input [extra dedup settings]
cat > "$1.yaml" <<YAML
source: {path: $3}
batch_size: 4096
stages:
  - dedup: {method: fuzzy, device: $2, batch_size: 4096${4:-}}
sink: {path: out-$1, mode: overwrite}
YAML
(while true; do nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits | head -1; sleep 0.2; done) > "util-$1.log" 2>/dev/null &
sampler=$!
t0=$(date +%s.%N)
"$host" run "$1.yaml" --plugins plugins > "$1.log" 2>&1 || { cat "$1.log"; kill $sampler; exit 1; }
t1=$(date +%s.%N)
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null || true
"$host" plan "$1.yaml" --plugins plugins --json > "plan-$1.json"
python3 - "out-$1/_summary.json" "$t0" "$t1" "util-$1.log" "$1" "plan-$1.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); t = float(sys.argv[3]) - float(sys.argv[2])
u = [float(x) for x in open(sys.argv[4]).read().split() if x.replace(".", "").isdigit()]
d = s["dedup"]; plan = json.load(open(sys.argv[6]))
b = [p for p in d["phases"] if p["phase"] == "buckets"]
est = [p for p in plan["dedup"]["plan"]["phases"] if p["phase"] == "buckets"][0]["bytes"]
pk = max(p['peak_rss_bytes'] for p in b) / 2**20; st = min(p['start_rss_bytes'] for p in b) / 2**20
print(f"| {sys.argv[5]} | {d['documents']} | {t:.2f} | {d['documents'] / t:,.0f} | {sum(u) / max(len(u), 1):.0f} / {max(u or [0]):.0f} | {d['duplicates']} | {d['candidate_pairs']} / {d['verified_pairs']} / {d['text_checks']} | {pk:.0f} (from {st:.0f}) vs {est / 2**20:.0f} | {' '.join(p['phase'] + ' ' + format(p['seconds'], '.2f') for p in d['phases'])} |")
print(json.dumps({p['phase']: [round(p['seconds'], 2), round(p['start_rss_bytes'] / 2**20), round(p['peak_rss_bytes'] / 2**20), round((p.get('planned_bytes') or 0) / 2**20)] for p in d['phases']}), file=sys.stderr)
PY
}
echo "| run | docs | s | docs/s | GPU busy % mean / max | duplicates | candidate / verified / text-checked pairs | bucket phase peak RSS (RSS at its start) vs plan, MiB | phases (s) |"
echo "|---|---|---|---|---|---|---|---|---|"
dedup gpu gpu "$corpus/data"
dedup cpu cpu "$corpus/data"
dedup gpu-scaled gpu "$work/big"
dedup gpu-scaled-nocheck gpu "$work/big" ", jaccard_threshold: 0"
echo "_duplicates GPU vs CPU: $(sha256sum < out-gpu/_duplicates/part-00000.parquet | cut -c1-16) vs $(sha256sum < out-cpu/_duplicates/part-00000.parquet | cut -c1-16)"
grep -h "minhash " gpu-scaled.log | tail -1
