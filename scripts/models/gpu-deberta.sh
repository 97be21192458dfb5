#!/usr/bin/env bash
# DeBERTa classifiers on a GPU machine (issue: NeMo's own classifiers). Two halves:
#
#   scripts/models/gpu-deberta.sh build KIT            # here: binaries and a real-text corpus into KIT
#   scripts/models/gpu-deberta.sh KIT [parity|speed|mdeberta|run|variants|all]...   # on the GPU machine, repo root
#
# parity:   deberta-check on the GPU against transformers' references (tests/parity/deberta_reference.json)
#           for the three tiny layouts (transformers, NeMo fc, NeMo multi-head); at a trained model's
#           query/key scale, GPU vs our CPU f32 path, and ours and autocast vs transformers f32 on the corpus.
# speed:    a deberta-v3-base-sized NeMo classifier (random weights, scripts/models/deberta_models.py --size
#           base): forward pass alone on the corpus (max_chars 2000), ours then PyTorch (autocast as NeMo
#           runs it, and .half()) on the same token ids and batches; GPU logits vs our CPU f32 path on 300
#           documents and vs PyTorch fp16 on all.
# variants: DeBERTa's fused attention kernels (CURATOR_ENCODER_DEBERTA_KERNEL default, ring, shared):
#           each one's parity, then their forward passes alternated (ROUNDS, default 3); by name
#           only, not part of `all`.
# mdeberta: the same at mDeBERTa-v3-base's size (250k vocabulary): GPU vs CPU f32 (fp16 range) and speed.
# run:      curator-host run JSONL -> classifier (domain-style: max_chars 2000, 512 tokens) -> JSONL on
#           REPEAT copies of the corpus (default 6, ~113k docs), GPU busy % sampled every 100 ms, RUNS times
#           (default 1; with BASELINE_PLUGINS=DIR an earlier plugin build, with BASELINE_ENV="NAME=VALUE"
#           this build under that environment, alternates with this one); then
#           NeMo's DomainClassifier path in PyTorch (tokenize + sort + batches of 256, autocast) on the same docs
#           (NEMO=0 skips it; NEMO=each runs it after every run of ours).
set -euo pipefail
if [ "${1:-}" = build ]; then
    out="${2:-.device/deberta-kit}"
    cargo build --release --locked -p curator-host -p classifier
    cargo build --release --locked -p curator-encoder --example deberta-check
    rm -rf "$out" && mkdir -p "$out/plugins"
    strip -o "$out/curator-host" target/release/curator-host
    strip -o "$out/deberta-check" target/release/examples/deberta-check
    strip -o "$out/plugins/libclassifier.so" target/release/libclassifier.so
    [ -f "$out.corpus/data/shard-000.jsonl" ] || python3 scripts/dedup/make-corpus.py "$out.corpus" --docs 20000 --shards 1 >/dev/null
    xz -T2 -6 -c "$out.corpus/data/shard-000.jsonl" > "$out/corpus.jsonl.xz"
    # What travels to the GPU machine is capped (64 MiB with the working tree): compressed.
    xz -T2 -6 "$out/curator-host" "$out/deberta-check" "$out/plugins/libclassifier.so"
    du -sh "$out"/* "$out"/plugins/*
    exit 0
fi
packed="$(cd "$1" && pwd)"; shift
kit="${TMPDIR:-/tmp}/curator-gpu-deberta-kit"
mkdir -p "$kit/plugins"
for f in curator-host deberta-check plugins/libclassifier.so; do
    [ -f "$kit/$f" ] || { xz -dc "$packed/$f.xz" > "$kit/$f"; chmod +x "$kit/$f"; }
done
cp "$packed/corpus.jsonl.xz" "$kit/"
steps="${*:-all}"
want() { [[ " $steps " == *" $1 "* || " $steps " == *" all "* ]]; }
work="${TMPDIR:-/tmp}/curator-gpu-deberta"
mkdir -p "$work"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
[ -f "$work/corpus.jsonl" ] || xz -dc "$kit/corpus.jsonl.xz" > "$work/corpus.jsonl"
corpus="$work/corpus.jsonl"
python3 scripts/models/deberta_models.py --out "$work/models" >/dev/null
if want parity; then
    for name in hf nemo complexity; do
        echo "== parity: deberta-tiny-$name on the GPU vs transformers (f32, CPU)"
        "$kit/deberta-check" "$work/models/deberta-tiny-$name" --device gpu --reference tests/parity/deberta_reference.json --name "deberta-tiny-$name"
    done
    # The references' models have query/key weights 2.5x a trained model's scale (sharp random
    # attention, which fp16 rounds far more than a trained model's); the same models at 1x on
    # real text, GPU vs our CPU f32 path (which equals transformers to 1e-4).
    python3 scripts/models/deberta_models.py --out "$work/models-qk1" --qk-gain 1 >/dev/null
    python3 scripts/models/deberta_models.py --out "$work/models-qk1" --qk-gain 1 --size base >/dev/null
    for name in deberta-tiny-hf deberta-tiny-nemo deberta-tiny-complexity deberta-nemo-base; do
        echo "== parity: $name (query/key gain 1) on the GPU vs our CPU f32 path, real text"
        "$kit/deberta-check" "$work/models-qk1/$name" --device gpu --corpus "$corpus" --docs 2000 --max-chars 2000 --cpu-docs "${CPU_DOCS:-1000}" --rounds 1 \
            | grep -A5 vs_cpu_f32
    done
    # Every document of the corpus, ours (GPU) and NeMo's autocast path each against
    # transformers' f32 model on the same ids.
    echo "== parity: deberta-nemo-base (gain 1), ours and autocast vs transformers f32, whole corpus"
    "$kit/deberta-check" "$work/models-qk1/deberta-nemo-base" --device gpu --corpus "$corpus" --docs 20000 --max-chars 2000 --cpu-docs 0 \
        --rounds 1 --dump-ids "$work/ids-qk1.json" >/dev/null
    python3 scripts/models/deberta_bench.py "$work/models-qk1/deberta-nemo-base" "$work/ids-qk1.json" --rounds 1 --vs-f32 \
        | python3 -c "import json, sys; d = json.load(sys.stdin); [print(k, d[k]) for k in ('ours_vs_torch_f32', 'autocast_vs_torch_f32')]"
fi
if want speed || want run || [[ " $steps " == *" variants "* ]]; then
    python3 scripts/models/deberta_models.py --out "$work/models" --size base >/dev/null
fi
base="$work/models/deberta-nemo-base"
if want speed; then
    for budget in ${BUDGETS:-65536}; do
        echo "== speed: ours, deberta-v3-base size, budget $budget, max_chars 2000 (forward alone; GPU vs CPU f32 on 300 docs)"
        "$kit/deberta-check" "$base" --device gpu --corpus "$corpus" --docs "${DOCS:-20000}" --max-chars 2000 --budget "$budget" \
            --max-docs "${MAX_DOCS:-1024}" --cpu-docs "${CPU_DOCS:-300}" --rounds 3 --dump-ids "$work/ids.json"
        echo "== speed: PyTorch on the same ids and batches"
        python3 scripts/models/deberta_bench.py "$base" "$work/ids.json" --rounds 3
    done
    echo "== profile: device milliseconds per step of our forward pass (5,000 documents, one round; events slow it)"
    CURATOR_ENCODER_PROFILE=1 "$kit/deberta-check" "$base" --device gpu --corpus "$corpus" --docs 5000 --max-chars 2000 --rounds 1 | grep -A30 profile_ms
fi
if [[ " $steps " == *" variants "* ]]; then  # asked for by name only (not in `all`)
    # DeBERTa's fused attention kernels side by side (CURATOR_ENCODER_DEBERTA_KERNEL, KERNELS to
    # choose): each one's parity (the tiny references; base size at query/key gain 1 vs our CPU
    # f32 path), then the forward pass alone, the kernels alternated ROUNDS times (default 3).
    python3 scripts/models/deberta_models.py --out "$work/models-qk1" --qk-gain 1 --size base >/dev/null
    for k in ${KERNELS:-default ring shared}; do
        for name in hf nemo complexity; do
            echo "== variants: $k, parity, deberta-tiny-$name vs transformers"
            CURATOR_ENCODER_DEBERTA_KERNEL=$k "$kit/deberta-check" "$work/models/deberta-tiny-$name" --device gpu \
                --reference tests/parity/deberta_reference.json --name "deberta-tiny-$name" | grep -E "max_logit|same_arg|passed|failed" || true
        done
        echo "== variants: $k, parity, deberta-nemo-base (gain 1) vs our CPU f32 path"
        CURATOR_ENCODER_DEBERTA_KERNEL=$k "$kit/deberta-check" "$work/models-qk1/deberta-nemo-base" --device gpu --corpus "$corpus" \
            --docs 2000 --max-chars 2000 --cpu-docs "${CPU_DOCS:-300}" --rounds 1 | grep -A3 vs_cpu_f32
    done
    for r in $(seq "${ROUNDS:-3}"); do
        for k in ${KERNELS:-default ring shared}; do
            echo "== variants round $r: $k, forward pass alone (best of 3), docs/s"
            CURATOR_ENCODER_DEBERTA_KERNEL=$k "$kit/deberta-check" "$base" --device gpu --corpus "$corpus" --docs "${DOCS:-20000}" \
                --max-chars 2000 --budget 65536 --max-docs "${MAX_DOCS:-1024}" --cpu-docs 0 --rounds 3 \
                | python3 -c "import json, sys; d = json.load(sys.stdin); print(d['forward']['rounds_s'], round(d['forward']['docs_per_s']))"
        done
    done
fi
if want mdeberta; then
    python3 scripts/models/deberta_models.py --out "$work/models" --size mdeberta >/dev/null
    echo "== mDeBERTa-v3-base size: GPU vs CPU f32 on 200 docs, speed"
    "$kit/deberta-check" "$work/models/deberta-nemo-mdeberta" --device gpu --corpus "$corpus" --docs 5000 --max-chars 2000 --cpu-docs "${CPU_DOCS:-200}" --rounds 2
    python3 scripts/models/deberta_models.py --out "$work/models-qk1" --qk-gain 1 --size mdeberta >/dev/null
    echo "== mDeBERTa-v3-base size, query/key gain 1: GPU vs CPU f32"
    "$kit/deberta-check" "$work/models-qk1/deberta-nemo-mdeberta" --device gpu --corpus "$corpus" --docs 2000 --max-chars 2000 --cpu-docs "${CPU_DOCS:-200}" --rounds 1 | grep -A5 vs_cpu_f32
fi
if want run; then
    rm -rf in && mkdir -p in
    python3 - "$corpus" in/corpus.jsonl "${REPEAT:-6}" <<'PY'
import json, sys
out = open(sys.argv[2], "w")
for rep in range(int(sys.argv[3])):
    for line in open(sys.argv[1]):
        d = json.loads(line); d["id"] = f"c{rep}-{d['id']}"
        out.write(json.dumps(d, ensure_ascii=False) + "\n")
PY
    docs=$(wc -l < in/corpus.jsonl)
    cat > run.yaml <<YAML
source: {path: in}
stages:
  - plugin: classifier
    params: {model: /models/deberta-nemo-base, device: gpu, max_chars: 2000, max_seq_length: 512, label_field: domain_pred}
    resources: {gpu_memory_gb: ${GPU_GB:-24}}
    grants: {models: $work/models}
sink: {path: out-run, format: jsonl, mode: overwrite}
YAML
    # One timed run of the pipeline with the plugins in $1, labelled $2 (environment $3, if given).
    run_once() {
        rm -rf out-run
        nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > util.txt 2>/dev/null &
        sampler=$!
        start=$(date +%s.%N)
        env ${3:-} "$kit/curator-host" run run.yaml --plugins "$1" > run.log 2>&1 || { tail -30 run.log; kill $sampler; exit 1; }
        end=$(date +%s.%N)
        kill $sampler || true
        python3 - "$start" "$end" "$docs" util.txt "$2" <<'PY'
import sys
start, end, docs = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
busy = [int(x) for x in open(sys.argv[4]).read().split() if x.strip().isdigit()]
print(f"{sys.argv[5]}: {docs / (end - start):.0f} docs/s ({end - start:.2f} s, process start to exit); GPU busy mean {sum(busy) / max(len(busy), 1):.0f} % over {len(busy)} samples, {sum(1 for x in busy if x > 0) / max(len(busy), 1) * 100:.0f} % of samples non-zero")
PY
        grep -h "classifier:" run.log | head -"${LOG_LINES:-2}" || true
        # The host's own account: when the first batch reached the sink, each stage's busy time.
        grep -h -A3 -E "first batch at the sink|^STAGE" run.log | grep -v "^--" | sed -E 's/^[0-9T:.-]+Z +//' || true
    }
    # BASELINE_PLUGINS=DIR (a directory holding an earlier build's libclassifier.so, or its .xz):
    # that build and this one alternate, RUNS times each, same binary, same documents.
    if [ -n "${BASELINE_PLUGINS:-}" ]; then
        mkdir -p "$kit/baseline-plugins"
        for f in "$BASELINE_PLUGINS"/*; do
            case "$f" in *.xz) xz -dc "$f" > "$kit/baseline-plugins/$(basename "${f%.xz}")" ;; *) cp "$f" "$kit/baseline-plugins/" ;; esac
        done
    fi
    echo "== run: curator-host run, $docs documents, JSONL -> classifier (GPU) -> JSONL"
    nemo() {
        echo "== run: NeMo's DomainClassifier path in PyTorch on the same documents"
        python3 scripts/models/deberta_bench.py "$base" --corpus in/corpus.jsonl --docs "$docs" --max-chars 2000 --batch 256
    }
    for r in $(seq "${RUNS:-1}"); do
        [ -z "${BASELINE_PLUGINS:-}" ] || run_once "$kit/baseline-plugins" "baseline run $r"
        # BASELINE_ENV="NAME=VALUE ...": this build under that environment alternates with it as is.
        [ -z "${BASELINE_ENV:-}" ] || run_once "$kit/plugins" "baseline run $r ($BASELINE_ENV)" "$BASELINE_ENV"
        run_once "$kit/plugins" "ours run $r"
        # NEMO=each: NeMo's path after every run of ours (its time drifts from call to call).
        [ "${NEMO:-1}" != each ] || nemo
    done
    [ "${NEMO:-1}" != 1 ] || nemo
fi
