#!/usr/bin/env bash
# The GPU model stages on a GPU machine, from a kit (scripts/models/build-gpu-kit.sh):
#
#   scripts/models/gpu-models.sh KIT [parity|speed|run|oom|share|all]...
#
# parity: encoder-check on the GPU against the PyTorch references (embedder and classifier).
# speed:  forward pass alone and tokenize+forward, ours vs PyTorch fp16 (same token ids) and
#         sentence-transformers' encode() if installed, on the kit's corpus.
# run:    curator-host run: read JSONL -> embedder (GPU) -> Parquet on the corpus, docs/s and
#         the GPU's busy % (nvidia-smi every 100 ms).
# oom:    a token budget far over the card (no memory cap): CUDA out-of-memory, halved, recovered.
# share:  embedder + classifier in one pipeline, 4 GB each on one card; the per-process GPU
#         memory (nvidia-smi every 100 ms) against those budgets.
set -euo pipefail
kit="$(cd "$1" && pwd)"; shift
steps="${*:-all}"
work="${TMPDIR:-/tmp}/curator-gpu-models"
mkdir -p "$work"
cd "$work"
model="$kit/minilm16"
want() { [[ " $steps " == *" $1 "* || " $steps " == *" all "* ]]; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
[ -f "$work/minilm-classifier/model.safetensors" ] || python3 -c "import sys; sys.path.insert(0, '$kit'); import fetch; from pathlib import Path; fetch.make_classifier(Path('$model'), Path('$work'))"
clf="$work/minilm-classifier"
docs=$(wc -l < "$kit/corpus.jsonl")

if want parity; then
    echo "== parity (GPU vs PyTorch CPU references)"
    "$kit/encoder-check" "$model" "$kit/encoder_reference.json" --classifier "$clf" --device gpu
fi
if want speed; then
    echo "== speed: ours (forward alone, then tokenize + forward overlapped)"
    "$kit/encoder-check" "$model" "$kit/encoder_reference.json" --device gpu --corpus "$kit/corpus.jsonl" --docs "$docs" --dump-ids "$work/ids.bin"
    echo "== speed: PyTorch on the same token ids"
    python3 "$kit/torch_bench.py" "$model" "$work/ids.bin" --corpus "$kit/corpus.jsonl" --docs "$docs"
fi
sample() { # file: GPU util % every 100 ms until killed
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$1" 2>/dev/null &
    echo $!
}
if want run; then
    echo "== curator-host run: JSONL -> embedder (GPU) -> Parquet, $docs documents"
    mkdir -p in && ln -sf "$kit/corpus.jsonl" in/corpus.jsonl
    cat > embed.yaml <<YAML
source: {path: in}
batch_size: 8192
stages:
  - plugin: embedder
    params: {model: /models/minilm16, device: gpu}
    resources: {gpu_memory_gb: 8}
    grants: {models: $kit}
sink: {path: out-embed, format: parquet, mode: overwrite}
YAML
    pid=$(sample util.txt)
    start=$(date +%s.%N)
    "$kit/curator-host" run embed.yaml --plugins "$kit/plugins" > run.log 2>&1 || { cat run.log; exit 1; }
    end=$(date +%s.%N)
    kill "$pid" || true
    tail -4 run.log
    python3 - "$start" "$end" "$docs" util.txt <<'PY'
import sys
start, end, docs = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
u = [int(x) for x in open(sys.argv[4]).read().split() if x.strip().isdigit()]
busy = [x for x in u if x > 0]
print(f"run: {docs / (end - start):.0f} docs/s wall ({end - start:.1f} s, process start included); "
      f"GPU busy mean {sum(u) / max(len(u), 1):.0f} % over all samples, {sum(busy) / max(len(busy), 1):.0f} % over non-idle samples ({len(busy)}/{len(u)})")
PY
fi
if want oom; then
    echo "== oom: a budget of 64 M tokens per pass and no memory cap"
    "$kit/encoder-check" "$model" "$kit/encoder_reference.json" --device gpu --corpus "$kit/corpus.jsonl" --docs 30000 --budget 67108864 --max-docs 1000000
fi
if want share; then
    echo "== share: embedder + classifier on one card, 4 GB each"
    cat > share.yaml <<YAML
source: {path: in}
batch_size: 8192
stages:
  - plugin: embedder
    params: {model: /models/minilm16, device: gpu}
    resources: {gpu_memory_gb: 4}
    grants: {models: $kit}
  - plugin: classifier
    params: {model: /models/minilm-classifier, device: gpu}
    resources: {gpu_memory_gb: 4}
    grants: {models: $work}
sink: {path: out-share, format: parquet, mode: overwrite}
YAML
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 100 > apps.txt 2>/dev/null &
    apid=$!
    "$kit/curator-host" run share.yaml --plugins "$kit/plugins" > share.log 2>&1 || { cat share.log; exit 1; }
    kill "$apid" || true
    tail -4 share.log
    python3 - apps.txt <<'PY'
import sys, collections
peak = collections.defaultdict(int)
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2 and parts[1].isdigit():
        peak[parts[0]] = max(peak[parts[0]], int(parts[1]))
print("peak GPU memory per worker process (MiB):", dict(peak), "budget 4096 each")
PY
fi
