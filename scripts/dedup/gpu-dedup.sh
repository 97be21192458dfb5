#!/usr/bin/env bash
# Fuzzy dedup with GPU signatures on a GPU machine, next to the CPU path, from a kit:
#
#   scripts/build-gpu-kit.sh .device/kit && python3 scripts/dedup/make-corpus.py .device/corpus
#   (on the GPU machine) scripts/dedup/gpu-dedup.sh KIT CORPUS [SCALE]
#
# 1. GPU and CPU signatures of the corpus (a `minhash` pipeline each): identical bytes?
# 2. fuzzy dedup (NeMo parameters: 24-character shingles, 20 × 13) with device: gpu and
#    device: cpu on the corpus: identical _duplicates/?
# 3. throughput on SCALE copies of the corpus (default 10), each with its letters permuted
#    (copy k is new text with the corpus's shape; its planted duplicates stay duplicates):
#    - NeMo Curator's workflow (identify, no Jaccard check) with GPU signatures, then the same
#      with CPU signatures on every core (identical _duplicates/?);
#    - our default (pairs checked against their Jaccard, duplicates removed, output written).
#    End to end (process start to exit; ROUNDS alternating GPU / CPU pairs), docs/s, the GPU's busy % (nvidia-smi every 200 ms),
#    each phase's seconds, the bucket phase's peak RSS beside the plan's estimate.
set -euo pipefail
kit="$(cd "$1" && pwd)"; corpus="$(cd "$2" && pwd)"; scale="${3:-10}"
work="${TMPDIR:-/tmp}/curator-gpu-dedup"
rm -rf "$work" && mkdir -p "$work/plugins" "$work/big"
cp "$kit/libminhash.so" "$work/plugins/"
host="$kit/curator-host"
nvidia-smi -L | head -1
python3 - "$corpus/data" "$work/big" "$scale" <<'PY'
# Copy k of the corpus has its letters permuted (a fixed permutation per copy; copy 0 is the
# corpus itself): each copy is new text to every shingle, with the corpus's lengths, its
# planted duplicates and their similarities. One process per copy.
import json, pathlib, random, string, sys
from multiprocessing import Pool
src, dst, scale = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
def copy(rep):
    perm = list(string.ascii_lowercase)
    if rep:
        random.Random(rep).shuffle(perm)
    low = "".join(perm)
    table = str.maketrans(string.ascii_lowercase + string.ascii_uppercase, low + low.upper())
    n = 0
    with open(dst / f"copy-{rep:03d}.jsonl", "w") as out:
        for p in sorted(src.glob("*.jsonl")):
            for line in open(p):
                d = json.loads(line)
                d["id"], d["text"] = f"s{rep}-{d['id']}", d["text"].translate(table)
                out.write(json.dumps(d, ensure_ascii=False) + "\n")
                n += 1
    return n
with Pool(16) as pool:
    print(f"scaled corpus: {sum(pool.map(copy, range(scale)))} documents", end=" ")
PY
# 16 files of whole lines (one per core), the copies one after another.
cat "$work"/big/copy-*.jsonl > "$work/all.jsonl" && rm "$work"/big/copy-*.jsonl
split -n l/16 -d -a 2 --additional-suffix=.jsonl "$work/all.jsonl" "$work/big/shard-" && rm "$work/all.jsonl"
echo "in $(ls "$work/big" | wc -l) files, $(du -sh "$work/big" | cut -f1)"
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
dedup() { # name device input [extra dedup settings] [the minhash stage's resources]
cat > "$1.yaml" <<YAML
source: {path: $3}
batch_size: 4096
stages:
  - dedup: {method: fuzzy, device: $2, batch_size: 4096${4:-}}
${5:+    resources: $5}
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
# NeMo Curator's fuzzy workflow: identify the duplicates' ids, no Jaccard check of the LSH pairs.
dedup nemo-gpu gpu "$work/big" ", jaccard_threshold: 0, action: identify"
dedup nemo-cpu cpu "$work/big" ", jaccard_threshold: 0, action: identify"
# ROUNDS (default 1) more GPU / CPU pairs, alternating, for a range.
for r in $(seq 2 "${ROUNDS:-1}"); do
    dedup "nemo-gpu-$r" gpu "$work/big" ", jaccard_threshold: 0, action: identify"
    dedup "nemo-cpu-$r" cpu "$work/big" ", jaccard_threshold: 0, action: identify"
done
# The same with the minhash workers asking for 4 GB of GPU memory each, not a quarter of a card
# (as before 2026-11-29: as many workers as cores, each with its own CUDA context).
dedup nemo-gpu-many gpu "$work/big" ", jaccard_threshold: 0, action: identify" "{gpu_memory_gb: 4}"
# Without the check, the duplicates removed and the rest written (the output reads the source again).
dedup nemo-remove gpu "$work/big" ", jaccard_threshold: 0"
# Ours by default: LSH pairs checked against their true Jaccard, duplicates removed, the rest written.
dedup gpu-remove gpu "$work/big"
same() { cmp -s "out-$1/_duplicates/part-00000.parquet" "out-$2/_duplicates/part-00000.parquet" && echo same || echo DIFFERENT; }
echo "_duplicates GPU vs CPU: base corpus $(same gpu cpu), scaled $(same nemo-gpu nemo-cpu); GPU workers a core each $(same nemo-gpu nemo-gpu-many); removing $(same nemo-gpu nemo-remove)"
for r in nemo-gpu nemo-cpu nemo-gpu-many nemo-remove gpu-remove; do echo "$r: $(grep -h "minhash " "$r.log" | tail -1)"; done
