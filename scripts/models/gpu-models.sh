#!/usr/bin/env bash
# The GPU model stages on a GPU machine, from a kit (scripts/models/build-gpu-kit.sh):
#
#   scripts/models/gpu-models.sh KIT [parity|speed|run|oom|share|all]...
#
# parity: encoder-check on the GPU against the PyTorch references (embedder and classifier).
# speed:  forward pass alone (embedder, then classifier) and tokenize+forward, ours vs PyTorch fp16 (same token ids, same
#         batches, at each budget in $BUDGETS) and sentence-transformers' encode() when ST=1;
#         the tokenizer on one core against the tokenizers crate.
# startup: curator-host run on 200 documents with a cold, then a warm kernel cache.
# io:     the same JSONL -> Parquet (and -> JSONL) with no stage: the host's own ceiling.
# run:    curator-host run: read JSONL -> embedder (GPU) -> Parquet on the corpus, docs/s and
#         the GPU's busy % (nvidia-smi every 100 ms), with the stage's defaults, then tuned.
# oom:    a token budget far over the card (no memory cap): CUDA out-of-memory, halved, recovered.
# share:  embedder + classifier in one pipeline, 4 GB each on one card; the per-process GPU
#         memory (nvidia-smi every 100 ms) against those budgets.
# workers: the run step with 1, 2, 3 and 4 embedder workers (num_workers).
# scale:  the run step with the stage's defaults on one GPU (CUDA_VISIBLE_DEVICES=0), then on
#         every GPU of the machine.
# st:     sentence-transformers' encode() on the corpus (the end-to-end baseline).
# semantic: embedder then semantic dedup on the GPU and on the CPU; removed sets compared.
# stored: NeMo's workflow: embed once into Parquet (`stored/`), then semantic dedup from the
#         stored vectors in a second pipeline, GPU then CPU, each timed whole (read, k-means,
#         pairwise pass, output written); removed sets compared.
# tune:   curator-host tune for the embedder (budget 8 GB) and the classifier (4 GB), a hand
#         sweep of the forward pass (encoder-check --budget) beside it, and --apply on a copy.
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
# Settings: REPEAT (corpus copies), SHARDS (input files), BUDGETS, ST, ST_DOCS, SUMMARY (stage table),
# EMBED_CPUS (the defaults runs' `cpus` per embedder worker, in place of the stage's own).
# The kit's corpus REPEAT times (default 8), with fresh ids (what travels to the GPU machine is capped).
# A corpus or an in/ made with other settings is made again (they are cached between calls).
if [ "$(cat "$work/corpus.repeat" 2>/dev/null)" != "${REPEAT:-8}" ]; then
    rm -rf "$work/corpus.jsonl" "$work/in" "$work/in.shards"
    echo "${REPEAT:-8}" > "$work/corpus.repeat"
fi
if [ ! -f "$work/corpus.jsonl" ]; then
    python3 - "$kit/corpus.jsonl" "$work/corpus.jsonl" "${REPEAT:-8}" <<'PY'
import json, sys
out = open(sys.argv[2], "w")
for rep in range(int(sys.argv[3])):
    for line in open(sys.argv[1]):
        d = json.loads(line); d["id"] = f"c{rep}-{d['id']}"
        out.write(json.dumps(d, ensure_ascii=False) + "\n")
PY
fi
corpus="$work/corpus.jsonl"
docs=$(wc -l < "$corpus")
# in/: the corpus as SHARDS files (default 1; a partition per file, so one reader and one
# writer per file), as a sharded dataset arrives.
make_input() {
    [ -d in ] && [ "$(cat in.shards 2>/dev/null)" = "${SHARDS:-1}" ] && return 0
    rm -rf in && mkdir -p in && echo "${SHARDS:-1}" > in.shards
    if [ "${SHARDS:-1}" = 1 ]; then ln -sf "$corpus" in/corpus.jsonl; else split -n "l/$SHARDS" -d -a 3 --additional-suffix=.jsonl "$corpus" in/part-; fi
}

if want parity; then
    echo "== parity (GPU vs PyTorch CPU references)"
    "$kit/encoder-check" "$model" "$kit/encoder_reference.json" --classifier "$clf" --device gpu
fi
if want speed; then
    # Ours and PyTorch on the same token ids and the same batches, one budget after another.
    for budget in ${BUDGETS:-65536 16384}; do
        echo "== speed: ours, budget $budget (forward alone two ways, then tokenize + forward overlapped)"
        "$kit/encoder-check" "$model" "$kit/encoder_reference.json" --classifier "$clf" --device gpu --corpus "$corpus" --docs "$docs" \
            --budget "$budget" --dump-ids "$work/ids.bin"
        echo "== speed: PyTorch, same ids, same batches (budget $budget)"
        python3 "$kit/torch_bench.py" "$model" "$work/ids.bin" --budget "$budget" --classifier "$clf" ${ST:+--corpus "$corpus" --docs "$docs"}
        ST=
    done
    if [ -x "$kit/tokenizer-bench" ]; then
        echo "== tokenizer, one core: tokenizers crate vs ours on the corpus"
        "$kit/tokenizer-bench" "$model/tokenizer.json" "$corpus" --docs 5000 --rounds 2
        "$kit/tokenizer-bench" "$model/tokenizer.json" "$corpus" --docs 5000 --rounds 2 --max-tokens 256
    fi
fi
if want startup; then
    echo "== start-up: curator-host run on 200 documents, a cold kernel cache then a warm one"
    mkdir -p in-small && head -200 "$corpus" > in-small/small.jsonl
    cat > small.yaml <<YAML
source: {path: in-small}
stages:
  - plugin: embedder
    params: {model: /models/minilm16, device: gpu}
    grants: {models: $kit}
sink: {path: out-small, format: parquet, mode: overwrite}
YAML
    export CURATOR_CACHE_DIR="$work/cache"
    rm -rf "$CURATOR_CACHE_DIR"
    for pass in cold warm warm; do
        start=$(date +%s.%N)
        "$kit/curator-host" run small.yaml --plugins "$kit/plugins" > "small-$pass.log" 2>&1 || { cat "small-$pass.log"; exit 1; }
        end=$(date +%s.%N)
        echo "$pass cache: $(python3 -c "print(f'{$end - $start:.2f}')") s for the whole run (process start to exit)"
    done
    ls "$CURATOR_CACHE_DIR/kernels" || true
    grep -h "embedder:" small-warm.log | head -2 || true
    unset CURATOR_CACHE_DIR
fi
sample() { # file: "time, GPU index, util %" for every GPU every 100 ms until killed
    nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader,nounits -lms 100 > "$1" 2>/dev/null &
    echo $!
}
run_embed() { # tag [num_workers] [defaults]: JSONL -> embedder (GPU) -> Parquet; docs/s and GPU busy
    if [ "${3:-}" = defaults ]; then
        local cpus=""
        [ -z "${EMBED_CPUS:-}" ] || cpus="    resources: {cpus: $EMBED_CPUS}"$'\n'
        cat > "embed-$1.yaml" <<YAML
source: {path: in}
stages:
  - plugin: embedder
    params: {model: /models/minilm16}
${cpus}    grants: {models: $kit}
sink: {path: out-embed-$1, format: parquet, mode: overwrite}
YAML
    else
        cat > "embed-$1.yaml" <<YAML
source: {path: in}
batch_size: 8192
stages:
  - plugin: embedder
    params: {model: /models/minilm16, device: gpu, max_batch_tokens: 65536}
    resources: {gpu_memory_gb: 8}
${2:+    num_workers: $2
}    grants: {models: $kit}
sink: {path: out-embed-$1, format: parquet, mode: overwrite}
YAML
    fi
    pid=$(sample "util-$1.txt")
    start=$(date +%s.%N)
    "$kit/curator-host" run "embed-$1.yaml" --plugins "$kit/plugins" > "run-$1.log" 2>&1 || { cat "run-$1.log"; exit 1; }
    end=$(date +%s.%N)
    kill "$pid" || true
    python3 - "$start" "$end" "$docs" "util-$1.txt" "$1" "run-$1.log" <<'PY'
import re, sys
from datetime import datetime
start, end, docs = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
per_gpu = {}  # index -> [(unix time, util %)]
for line in open(sys.argv[4]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 3 and parts[2].isdigit():
        t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        per_gpu.setdefault(parts[1], []).append((t, int(parts[2])))
u = [x for s in per_gpu.values() for _, x in s]
busy = [x for x in u if x > 0]
print(f"{sys.argv[5]}: {docs / (end - start):.0f} docs/s wall ({end - start:.1f} s, process start included); "
      f"GPU busy mean {sum(u) / max(len(u), 1):.0f} %, {sum(busy) / max(len(busy), 1):.0f} % over non-idle samples ({len(busy)}/{len(u)})")
# The run's fixed part: process start to a card's first busy sample, its last busy sample to exit.
for gpu, samples in sorted(per_gpu.items()):
    on = [t for t, x in samples if x > 0]
    if on:
        print(f"  GPU {gpu}: first busy {on[0] - start:.2f} s after start, last busy {end - on[-1]:.2f} s before exit, "
              f"busy {100 * len(on) / max(1, sum(1 for t, _ in samples if on[0] <= t <= on[-1])):.0f} % of the samples between")
m = re.search(r"first batch at the sink ([0-9.]+)s", open(sys.argv[6]).read())
if m:
    print(f"  first batch at the sink {m.group(1)} s after the run started")
PY
    grep "wrote" "run-$1.log" | tail -1
    [ -z "${SUMMARY:-}" ] || grep -B1 -A6 "STAGE" "run-$1.log" | head -12
}
if want run; then
    echo "== curator-host run: JSONL -> embedder (GPU) -> Parquet, $docs documents, the stage's defaults"
    make_input
    run_embed defaults "" defaults
    grep -h "recycling" run-defaults.log | head -3 || true
    echo "== the same, tuned (max_batch_tokens 65536, batch_size 8192, 8 GB)"
    run_embed placed
fi
if want io; then
    echo "== io: the same JSONL -> Parquet with no stage (the host's reading and writing alone), then to JSONL"
    make_input
    for fmt in parquet jsonl; do
        printf 'source: {path: in}\nstages: []\nsink: {path: out-io-%s, format: %s, mode: overwrite}\n' "$fmt" "$fmt" > "io-$fmt.yaml"
        start=$(date +%s.%N)
        "$kit/curator-host" run "io-$fmt.yaml" > "io-$fmt.log" 2>&1 || { cat "io-$fmt.log"; exit 1; }
        end=$(date +%s.%N)
        echo "io -> $fmt: $(python3 -c "print(f'{$docs / ($end - $start):.0f}')") docs/s wall ($(python3 -c "print(f'{$end - $start:.1f}')") s)"
    done
fi
if want oom; then
    echo "== oom: a budget of 64 M tokens per pass and no memory cap"
    "$kit/encoder-check" "$model" "$kit/encoder_reference.json" --device gpu --corpus "$corpus" --docs 30000 --budget 67108864 --max-docs 1000000
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

if want workers; then
    make_input
    echo "== workers: JSONL -> embedder (GPU) -> Parquet with 1..4 workers"
    for n in 1 2 3 4; do run_embed "workers-$n" "$n"; done
fi
if want tune; then
    make_input
    echo "== tune: embedder (8 GB) and classifier (4 GB)"
    cat > tune.yaml <<YAML
# tune me (this comment must survive --apply)
source: {path: in}
batch_size: 4096
stages:
  - plugin: embedder
    params: {model: /models/minilm16, device: gpu}
    resources: {gpu_memory_gb: 8}
    grants: {models: $kit}
  - plugin: classifier
    params:
      model: /models/minilm-classifier  # random head
      device: gpu
    resources: {gpu_memory_gb: 4}
    grants: {models: $work}
sink: {path: out-tune, format: parquet, mode: overwrite}
YAML
    "$kit/curator-host" tune tune.yaml --plugins "$kit/plugins" --sample 20000 --apply 2>/dev/null
    echo "-- the file after --apply:"; cat tune.yaml; echo "-- backup kept: $(ls tune.yaml.backup)"
    echo "== hand sweep: the forward pass alone at each budget (encoder-check, same corpus, 20000 docs)"
    head -20000 "$corpus" > sweep.jsonl
    for b in 2048 4096 8192 16384 32768 65536 131072 262144; do
        "$kit/encoder-check" "$model" "$kit/encoder_reference.json" --device gpu --corpus sweep.jsonl --docs 20000 --budget "$b" \
          | python3 -c "import json,sys; r=json.load(sys.stdin); print(f'budget {r[\"budget\"]}: forward {r[\"forward_docs_per_s\"]:.0f} docs/s, tokenize+forward {r[\"embed_docs_per_s\"]:.0f} docs/s')"
    done
fi
if want scale; then
    make_input
    echo "== scale: JSONL -> embedder -> Parquet with the stage's defaults, one GPU, then all $(nvidia-smi -L | wc -l)"
    # The kernel cache warmed first, so that neither side pays NVRTC's compile.
    mkdir -p warm-in && head -2000 "$corpus" > warm-in/w.jsonl
    printf 'source: {path: warm-in}\nstages:\n  - plugin: embedder\n    params: {model: /models/minilm16}\n    grants: {models: %s}\nsink: {path: out-warm, format: parquet, mode: overwrite}\n' "$kit" > warm.yaml
    "$kit/curator-host" run warm.yaml --plugins "$kit/plugins" > warm.log 2>&1 || { cat warm.log; exit 1; }
    CUDA_VISIBLE_DEVICES=0 run_embed one-gpu "" defaults
    run_embed all-gpus "" defaults
fi
if want st; then
    echo "== sentence-transformers encode (fp16, batch_size 1024) on the corpus (ST_DOCS=${ST_DOCS:-all} documents)"
    python3 - "$corpus" "$model" "${ST_DOCS:-0}" <<'PY' 2>&1 | grep -v Loading
import itertools, json, sys, time
from sentence_transformers import SentenceTransformer
limit = int(sys.argv[3]) or None  # ST_DOCS: the first N documents (0: all)
texts = [json.loads(l)["text"] for l in itertools.islice(open(sys.argv[1]), limit)]
st = SentenceTransformer(sys.argv[2], device="cuda")
st.half()
st.encode(texts[:2048], batch_size=1024)
t = time.perf_counter()
st.encode(texts, batch_size=1024)
print(f"sentence-transformers encode: {len(texts) / (time.perf_counter() - t):.0f} docs/s ({len(texts)} documents, tokenizing included)")
PY
fi
if want twogpu; then
    make_input
    echo "== twogpu: an embedder with gpus: 1 on a machine with $(nvidia-smi -L | wc -l) GPUs"
    cat > twogpu.yaml <<YAML
source: {path: in}
batch_size: 8192
stages:
  - plugin: embedder
    params: {model: /models/minilm16, device: gpu, max_batch_tokens: 65536}
    resources: {gpus: 1}
    grants: {models: $kit}
sink: {path: out-twogpu, format: parquet, mode: overwrite}
YAML
    nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader -lms 200 > apps2.txt 2>/dev/null &
    apid=$!
    start=$(date +%s.%N)
    "$kit/curator-host" run twogpu.yaml --plugins "$kit/plugins" > twogpu.log 2>&1 || { cat twogpu.log; exit 1; }
    end=$(date +%s.%N)
    kill "$apid" || true
    grep -E "workers|wrote" twogpu.log | tail -3
    python3 - apps2.txt "$start" "$end" "$docs" <<'PY'
import sys, collections
per_gpu = collections.defaultdict(set)
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 3:
        per_gpu[parts[0][-8:]].add(parts[1])
print("worker processes per GPU:", {g: sorted(p) for g, p in per_gpu.items()})
print(f"{int(sys.argv[4]) / (float(sys.argv[3]) - float(sys.argv[2])):.0f} docs/s wall")
PY
fi
if want semantic; then
    make_input
    echo "== semantic: embedder (GPU) -> dedup semantic (GPU, then CPU), $docs documents, 100 clusters"
    for dev in gpu cpu; do
        cat > "sem-$dev.yaml" <<YAML
source: {path: in}
batch_size: 8192
stages:
  - plugin: embedder
    params: {model: /models/minilm16, device: gpu, max_batch_tokens: 65536}
    resources: {gpu_memory_gb: 8}
    grants: {models: $kit}
  - dedup: {method: semantic, n_clusters: 100, eps: [0.01, 0.05], device: $dev, action: identify}
sink: {path: out-sem-$dev, mode: overwrite}
YAML
        "$kit/curator-host" run "sem-$dev.yaml" --plugins "$kit/plugins" > "sem-$dev.log" 2>&1 || { tail -20 "sem-$dev.log"; exit 1; }
        grep -E "dedup \(|wrote" "sem-$dev.log" | tail -2
    done
    python3 - out-sem-gpu out-sem-cpu <<'PY'
import json, sys
def load(d):
    s = json.load(open(f"{d}/_summary.json"))["dedup"]
    return s
g, c = load(sys.argv[1]), load(sys.argv[2])
for name, s in (("gpu", g), ("cpu", c)):
    print(name, "duplicates", s["duplicates"], "per eps", s["semantic"]["duplicates"], "phases", [(p["phase"], round(p["seconds"], 2)) for p in s["phases"]])
try:
    import pyarrow.parquet as pq
    a = set(pq.read_table(f"{sys.argv[1]}/_duplicates/part-00000.parquet").column("id").to_pylist())
    b = set(pq.read_table(f"{sys.argv[2]}/_duplicates/part-00000.parquet").column("id").to_pylist())
    print(f"removed sets: gpu {len(a)}, cpu {len(b)}, Jaccard {len(a & b) / max(len(a | b), 1):.4f}")
except ImportError:
    print("(no pyarrow: removed sets not compared)")
PY
fi
if want stored; then
    make_input
    echo "== stored: embedder (GPU) -> Parquet, then semantic dedup from the stored vectors, $docs documents"
    printf 'source: {path: in}\nstages:\n  - plugin: embedder\n    params: {model: /models/minilm16, device: gpu}\n    grants: {models: %s}\nsink: {path: stored, format: parquet, mode: overwrite}\n' "$kit" > stored-embed.yaml
    start=$(date +%s.%N)
    "$kit/curator-host" run stored-embed.yaml --plugins "$kit/plugins" > stored-embed.log 2>&1 || { tail -20 stored-embed.log; exit 1; }
    end=$(date +%s.%N)
    echo "embed -> Parquet: $(python3 -c "print(f'{$end - $start:.1f}')") s wall; stored/: $(du -sh stored | cut -f1)"
    if [ -n "${STORED_NOISE:-}" ]; then
        # The corpus repeats its texts REPEAT times, so its vectors repeat too; give every copy
        # its own: half of them near their original (cosine ~0.995), half far (~0.85).
        python3 - stored <<'PY'
import glob, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
rng = np.random.default_rng(7)
for f in sorted(glob.glob(f"{sys.argv[1]}/*.parquet")):
    t = pq.read_table(f)
    col = t.column("embedding").combine_chunks()
    d = col.type.list_size
    x = col.values.to_numpy(zero_copy_only=False).reshape(-1, d)
    sigma = np.where(rng.random(len(x)) < 0.5, 0.005, 0.03).astype(np.float32)[:, None]
    x = x + rng.standard_normal(x.shape, dtype=np.float32) * sigma
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    arr = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel(), pa.float32()), d)
    pq.write_table(t.set_column(t.schema.get_field_index("embedding"), "embedding", arr), f)
PY
        echo "STORED_NOISE: every stored vector perturbed (half at sigma 0.005, half at 0.03 per dimension)"
    fi
    for dev in gpu cpu; do
        printf 'source: {path: stored}\nstages:\n  - dedup: {method: semantic, device: %s}\nsink: {path: out-stored-%s, format: parquet, mode: overwrite}\n' "$dev" "$dev" > "stored-$dev.yaml"
        start=$(date +%s.%N)
        "$kit/curator-host" run "stored-$dev.yaml" > "stored-$dev.log" 2>&1 || { tail -20 "stored-$dev.log"; exit 1; }
        end=$(date +%s.%N)
        echo "semantic from stored vectors, device $dev: $(python3 -c "print(f'{$end - $start:.1f}')") s wall (read, k-means, pairwise, output)"
        grep -E "dedup \(|wrote" "stored-$dev.log" | tail -2
    done
    python3 - out-stored-gpu out-stored-cpu <<'PY'
import json, sys
for d in sys.argv[1:]:
    s = json.load(open(f"{d}/_summary.json"))["dedup"]
    print(d, "duplicates", s["duplicates"], "clusters", s["semantic"].get("clusters"), "phases", [(p["phase"], round(p["seconds"], 2)) for p in s["phases"]])
try:
    import pyarrow.parquet as pq
    a, b = (set(pq.read_table(f"{d}/_duplicates/part-00000.parquet").column("id").to_pylist()) for d in sys.argv[1:])
    print(f"removed sets: gpu {len(a)}, cpu {len(b)}, Jaccard {len(a & b) / max(len(a | b), 1):.4f}")
except ImportError:
    print("(no pyarrow: removed sets not compared)")
PY
fi
