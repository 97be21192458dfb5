#!/usr/bin/env bash
# CLIP image embeddings on a GPU machine (issue: images/CLIP). Two halves:
#
#   scripts/models/gpu-clip.sh build KIT             # here: binaries and plugins into KIT (xz; SYMBOLS=1 keeps symbol tables)
#   scripts/models/gpu-clip.sh KIT [parity|speed|decode|nemo|profile|run|all|hang]...   # on the GPU machine, repo root
#   (carry KIT; for the text-path check carry KIT.minilm alone, with `parity`: both pass 64 MiB)
#
# parity: encoder-check on MiniLM (the text path shares the fused attention kernel) against the
#         PyTorch references; clip-check on the GPU for the random-weight towers of scripts/models/clip_models.py
#         (tiny, B/32's and L/14's widths with two layers): GPU fp16 vs our CPU f32 path (which
#         equals transformers: libs/encoder/tests/clip.rs) on the committed test images, and
#         the GPU path from the files (JPEGs decoded by nvJPEG) vs transformers' embeddings of
#         Pillow's pixels (tests/parity/clip_reference.json).
# speed:  ViT-L/14 at full depth (random weights, clip_models.py --full): ours (clip-check) then
#         transformers fp16 SDPA (clip_bench.py) on the same pixel values and batches, alternated.
# decode: 1920x1080 JPEGs decoded + preprocessed for CLIP: ours on all cores vs Pillow +
#         CLIPImageProcessor in a pool of as many processes; then (clip-check --device gpu on
#         ViT-L/14) the same photos through nvJPEG + the resize kernels: embeddings against the
#         host-made pixels' through the same tower, preprocessing alone, decode + embed.
#         (The kit carries libnvjpeg.so.13 from the nvidia-nvjpeg wheel for machines without it.)
# nemo:   the decode step's photos as NeMo Curator's GPU path makes their pixels (nvJPEG, then
#         CLIPImageProcessor; and nvJPEG + torchvision's GPU resize), through the same L/14 as
#         ours from the JPEGs (scripts/models/torch_gpu_pixels.py, clip-check --pixels).
# profile: decode + embed (the decode step's GPU half) with the CUDA driver's 8 hardware queues
#         and with 32 (CUDA_DEVICE_MAX_CONNECTIONS), alternated; then with CURATOR_ENCODER_PROFILE=1
#         (host and device milliseconds per step) under scripts/models/cupti_trace.c (host
#         milliseconds per CUDA API call it sees; TRACE_CSV=DIR: every kernel, copy and memset
#         into DIR), built here with nvcc where CUPTI is found.
# run:    curator-host run WebDataset (IMAGES samples of the files in RUN_IMAGES: the test images,
#         or RUN_PHOTOS=1 the decode step's 1080p JPEGs) -> image_embedder (GPU,
#         L/14) -> aesthetic_filter -> nsfw_filter -> WebDataset, GPU busy % sampled every 100 ms;
#         then (TORCH=0 skips it) the same shards through scripts/models/clip_e2e_torch.py (PyTorch:
#         DataLoader, nvJPEG via torchvision, transformers fp16 SDPA, the same heads).
#         IMAGE_BATCH=512MB sets the source's image_batch_bytes, EMBED_BATCH the embedder's batch_size.
#         STACKS_AFTER="SECS ...": if the run is still going SECS seconds in, every thread's stack
#         of the host and its workers is printed (for hangs; gdb or cuda-gdb).
set -euo pipefail
if [ "${1:-}" = build ]; then
    out="${2:-.device/clip-kit}"
    cargo build --release --locked -p curator-host -p image_embedder
    cargo build --release --locked -p curator-encoder --example clip-check --example encoder-check
    cargo build --locked --profile guest --target wasm32-wasip2 --target-dir target/wasm -p aesthetic_filter -p nsfw_filter
    rm -rf "$out" && mkdir -p "$out/plugins"
    strip ${SYMBOLS:+--strip-debug} -o "$out/curator-host" target/release/curator-host
    strip -o "$out/clip-check" target/release/examples/clip-check
    strip -o "$out/encoder-check" target/release/examples/encoder-check
    # The text path shares the attention kernel: MiniLM in fp16 checks it against PyTorch (a
    # kit of its own: with it this one would pass the 64 MiB the device takes).
    rm -rf "$out.minilm" && mkdir -p "$out.minilm"
    python3 scripts/models/fetch.py --fp16 "$out.minilm/minilm-fp16" >/dev/null
    xz -T2 -6 -c "$out/encoder-check" > "$out.minilm/encoder-check.xz"
    # SYMBOLS=1 keeps the symbol tables of the host and the embedder (stacks name functions).
    strip ${SYMBOLS:+--strip-debug} -o "$out/plugins/libimage_embedder.so" target/release/libimage_embedder.so
    cp target/wasm/wasm32-wasip2/guest/aesthetic_filter.wasm target/wasm/wasm32-wasip2/guest/nsfw_filter.wasm "$out/plugins/"
    xz -T2 -6 "$out/curator-host" "$out/clip-check" "$out/plugins/libimage_embedder.so"
    # nvJPEG for machines whose CUDA install lacks it (the wheel is on PyPI).
    wheel="$(mktemp -d)"
    python3 -m pip download --no-deps --quiet -d "$wheel" nvidia-nvjpeg
    python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], 'wb').write(z.read('nvidia/cu13/lib/libnvjpeg.so.13'))" "$wheel"/*.whl "$out/libnvjpeg.so.13"
    xz -T2 -6 "$out/libnvjpeg.so.13" && rm -rf "$wheel"
    rm "$out/encoder-check"
    du -sh "$out"/* "$out"/plugins/*
    exit 0
fi
packed="$(cd "$1" && pwd)"; shift
kit="${TMPDIR:-/tmp}/curator-gpu-clip-kit"
mkdir -p "$kit/plugins"
for f in curator-host clip-check plugins/libimage_embedder.so; do
    [ -f "$kit/$f" ] || { xz -dc "$packed/$f.xz" > "$kit/$f"; chmod +x "$kit/$f"; }
done
cp "$packed"/plugins/*.wasm "$kit/plugins/"
if ! ldconfig -p | grep -q 'libnvjpeg.so.13 '; then
    mkdir -p "$kit/lib" && xz -dc "$packed/libnvjpeg.so.13.xz" > "$kit/lib/libnvjpeg.so.13"
    export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "nvJPEG: the kit's (none installed)"
fi
steps="${*:-all}"
want() { [[ " $steps " == *" $1 "* || " $steps " == *" all "* ]]; }
work="${TMPDIR:-/tmp}/curator-gpu-clip"
mkdir -p "$work"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
python3 scripts/models/clip_models.py --out "$work/models" >/dev/null
if want parity; then
    if [ -d "$packed.minilm" ]; then
        echo "== parity: the text path's attention (shared kernel): MiniLM fp16 on the GPU vs PyTorch references"
        xz -dc "$packed.minilm/encoder-check.xz" > "$kit/encoder-check" && chmod +x "$kit/encoder-check"
        "$kit/encoder-check" "$packed.minilm/minilm-fp16" tests/parity/encoder_reference.json --device gpu | head -12
    fi
    for name in clip-b32-2l clip-l14-2l; do  # (clip-tiny's heads of 16 dimensions are CPU-only)
        echo "== parity: $name, GPU fp16 vs our CPU f32 path"
        "$kit/clip-check" "$work/models/$name" --images tests/parity/images --device gpu --count 64 --batch 32 --rounds 1 \
            --reference tests/parity/clip_reference.json | python3 -c "import json, sys; r = json.load(sys.stdin); print(json.dumps({k: r.get(k) for k in ('parity_vs_cpu_f32', 'parity_vs_transformers')}, indent=1))"
    done
fi
if want speed || want run || want decode; then
    python3 scripts/models/clip_models.py --out "$work/models" --full >/dev/null
fi
l14="$work/models/clip-l14"
if want speed; then
    for round in 1 2; do
        echo "== speed round $round: ours (clip-check), ViT-L/14, ${COUNT:-4096} images, batch ${BATCH:-256}"
        "$kit/clip-check" "$l14" --images tests/parity/images --device gpu --count "${COUNT:-4096}" --batch "${BATCH:-256}" --rounds 3
        echo "== speed round $round: transformers fp16 SDPA on the same pixel values and batches"
        python3 scripts/models/clip_bench.py --model "$l14" --images tests/parity/images --count "${COUNT:-4096}" --batch "${BATCH:-256}" --rounds 3
    done
    echo "== profile: device milliseconds per step of our passes (2,048 images, one round; events slow it)"
    CURATOR_ENCODER_PROFILE=1 "$kit/clip-check" "$l14" --images tests/parity/images --device gpu --count 2048 --batch "${BATCH:-256}" --rounds 1 | grep -A14 profile_ms
fi
if want decode; then
    python3 scripts/models/clip_bench.py --make-photos "$work/photos" "${PHOTOS:-64}"
    echo "== decode: ours, 1920x1080 JPEGs -> CLIP input, all cores"
    "$kit/clip-check" "$work/models/clip-tiny" --images tests/parity/images --device cpu --count 8 --batch 8 --rounds 1 \
        --decode "$work/photos" --decode-copies 8 | grep -A5 '"decode"'
    echo "== decode: Pillow + CLIPImageProcessor, one process per core"
    python3 scripts/models/clip_bench.py --model "$work/models/clip-tiny" --decode "$work/photos" --decode-copies 8 --batch "${BATCH:-256}"
    echo "== decode on the GPU: nvJPEG + resize kernels, ViT-L/14 (the CPU figure above is repeated first)"
    [ -d "$l14" ] || python3 scripts/models/clip_models.py --out "$work/models" --full >/dev/null
    "$kit/clip-check" "$l14" --images tests/parity/images --device gpu --count 256 --batch "${BATCH:-256}" --rounds 1 \
        --decode "$work/photos" --decode-copies "${GPU_COPIES:-64}" | python3 -c "import json, sys; r = json.load(sys.stdin); print(json.dumps({k: r.get(k) for k in ('decode', 'gpu_decode_parity', 'gpu_decode')}, indent=1))"
fi
if want nemo; then
    # Parity against what NeMo Curator runs: its photos decoded by nvJPEG (DALI's mixed decoder;
    # torchvision's decode_jpeg on the GPU here) and preprocessed by CLIPImageProcessor, and the
    # all-GPU torchvision variant; each pixel set through the same full-depth L/14 as ours.
    python3 scripts/models/clip_bench.py --make-photos "$work/photos" "${PHOTOS:-64}"
    [ -d "$l14" ] || python3 scripts/models/clip_models.py --out "$work/models" --full >/dev/null
    for mode in nemo torchvision; do
        echo "== parity: ours (nvJPEG + our resize kernels) vs $mode pixels, ViT-L/14"
        python3 scripts/models/torch_gpu_pixels.py --photos "$work/photos" --model "$l14" --mode "$mode" --out "$work/pixels-$mode.f32"
        "$kit/clip-check" "$l14" --images tests/parity/images --device gpu --count 64 --batch 64 --rounds 1 \
            --decode "$work/photos" --decode-copies 1 --pixels "$work/pixels-$mode.f32" | python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin).get('gpu_decode_parity'), indent=1))"
    done
fi
if want profile; then
    python3 scripts/models/clip_bench.py --make-photos "$work/photos" "${PHOTOS:-64}"
    [ -d "$l14" ] || python3 scripts/models/clip_models.py --out "$work/models" --full >/dev/null
    decode() {
        "$kit/clip-check" "$l14" --images tests/parity/images --device gpu --count 256 --batch "${BATCH:-256}" --rounds 1 \
            --decode "$work/photos" --decode-copies "${GPU_COPIES:-64}" | python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin).get('gpu_decode')))"
    }
    configs="${PROFILE_CONFIGS:-8 32}"  # CUDA_DEVICE_MAX_CONNECTIONS
    for round in $(seq 1 "${PROFILE_ROUNDS:-2}"); do
        for c in $configs; do
            echo "== profile round $round: decode + embed, ViT-L/14; CUDA_DEVICE_MAX_CONNECTIONS=$c"
            CUDA_DEVICE_MAX_CONNECTIONS=$c decode
        done
    done
    # The toolkit's CUPTI first (its headers match nvcc's cuda.h), else the one a wheel ships.
    cupti="$(dirname "$( (ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* 2>/dev/null; find / -name 'libcupti.so*' 2>/dev/null) | head -1)")"
    inc="$(dirname "$( (ls /usr/local/cuda/extras/CUPTI/include/cupti.h 2>/dev/null; find / -name cupti.h 2>/dev/null) | head -1)")"
    trace=""
    if command -v nvcc >/dev/null && [ -n "$cupti" ] && [ -n "$inc" ]; then
        newest() { grep -ho "} CUpti_Activity$1[0-9]*;" "$inc"/cupti_activity*.h | tr -d '}; ' | sort -V | tail -1; }
        nvcc -shared -Xcompiler -fPIC -o "$work/libcupti_trace.so" scripts/models/cupti_trace.c -I"$inc" -L"$cupti" -lcupti \
            -DKERNEL_T="$(newest Kernel)" -DMEMCPY_T="$(newest Memcpy)" -DMEMSET_T="$(newest Memset)" \
            -Xlinker -rpath="$cupti" && trace="$work/libcupti_trace.so"
    fi
    for c in ${TRACE_CONFIGS-$configs}; do
        echo "== profile: host and device ms per step; CUDA_DEVICE_MAX_CONNECTIONS=$c${trace:+; CUDA API calls (cupti_trace)}"
        [ -z "$trace" ] || export CUDA_INJECTION64_PATH="$trace" CUPTI_TRACE_TOP="${CUPTI_TRACE_TOP:-18}"
        # With TRACE_CSV=DIR, every kernel, copy and memset of the run into DIR/trace-CONFIG.csv.
        [ -z "${TRACE_CSV:-}" ] || export CUPTI_TRACE_CSV="$TRACE_CSV/trace-connections-$c.csv"
        CUDA_DEVICE_MAX_CONNECTIONS=$c CURATOR_ENCODER_PROFILE=1 decode || true  # (the tracer may crash the exit)
        unset CUDA_INJECTION64_PATH CUPTI_TRACE_CSV
    done
fi
if [[ " $steps " == *" hang "* ]]; then
    # The multi-worker hang (docs/src/images.md): two embedder workers decoding on one card
    # (32 hardware queues) while a small CUDA program starts and ends on the card every ~0.4 s,
    # each run stopped after HANG_SECS (default 140; stacks of a still-running one at
    # HANG_SECS - 40), with nvJPEG's memory from our pools (CURATOR_NVJPEG_POOL=1) and then,
    # as the control, from nvJPEG's own allocators with the card shared anyway. Not part of `all`.
    printf '#include <cuda_runtime.h>\nint main() { void* p; cudaMalloc(&p, 64 << 20); cudaMemset(p, 1, 64 << 20); cudaDeviceSynchronize(); cudaFree(p); return 0; }\n' > "$work/churn.cu"
    nvcc -o "$work/churn" "$work/churn.cu"
    secs="${HANG_SECS:-140}"
    for variant in "pooled CURATOR_NVJPEG_POOL=1" "control CURATOR_NVJPEG_POOL=0 CURATOR_NVJPEG_SHARED=1"; do
        ( n=0; while :; do "$work/churn"; n=$((n + 1)); echo $n > "$work/churn.n"; sleep 0.3; done ) &
        churn=$!
        set +e
        env ${variant#* } EMBED_CPUS="${EMBED_CPUS:-8}" CUDA_DEVICE_MAX_CONNECTIONS=32 RUN_PHOTOS=1 TORCH=0 STACKS_AFTER=$((secs - 40)) \
            timeout "$secs" bash "$0" "$packed" run > "$work/hang.log" 2>&1
        rc=$?
        set -e
        kill $churn; wait $churn 2>/dev/null || true
        # Whatever a stopped run left on the card (a worker hung in the driver outlives its host).
        for d in /proc/[0-9]*; do
            tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q "curator-gpu-clip-ki[t]/curator-host" && kill -9 "${d#/proc/}" 2>/dev/null
        done
        echo "== hang test, ${variant%% *}: exit $rc$( [ $rc = 124 ] && echo ' (stopped: still running)'), $(cat "$work/churn.n") CUDA processes ended meanwhile"
        grep -E "^ours:|image_embedder:" "$work/hang.log" | cut -c1-240 | head -3 || true
        [ ! -s "$work/stacks.txt" ] || grep -E "^=== pid|nvjpeg|nvcuvid|cuMem|cuStream|cuCtx" "$work/stacks.txt" | cut -c1-200 | head -30
        rm -f "$work/stacks.txt"
    done
fi
if want run; then
    src=tests/parity/images
    if [ -n "${RUN_PHOTOS:-}" ]; then
        python3 scripts/models/clip_bench.py --make-photos "$work/photos" "${PHOTOS:-64}"
        src="$work/photos"
    fi
    # The shards of an earlier run with the same images are used again (runs in one call
    # compare configurations on the same files).
    made="$work/shards/.made-${IMAGES:-50000}-$(basename "$src")-${PHOTOS:-64}"
    [ -f "$made" ] || { rm -rf "$work/shards" && mkdir -p "$work/shards"; }
    [ -f "$made" ] || python3 - "$work/shards" "${IMAGES:-50000}" "$src" <<'PY'
import io, json, sys, tarfile
from pathlib import Path
files = sorted(Path(sys.argv[3]).iterdir())
blobs = [(f.suffix[1:], f.read_bytes(), f.name) for f in files]
out, n = Path(sys.argv[1]), int(sys.argv[2])
per = 5000
for s in range(0, n, per):
    with tarfile.open(out / f"{s // per:05d}.tar", "w") as t:
        for i in range(s, min(n, s + per)):
            ext, data, name = blobs[i % len(blobs)]
            for member, payload in [(f"{i:08d}.{ext}", data), (f"{i:08d}.json", json.dumps({"name": name}).encode())]:
                info = tarfile.TarInfo(member); info.size = len(payload); t.addfile(info, io.BytesIO(payload))
print(n, "samples")
PY
    touch "$made"
    cat > "$work/run.yaml" <<YAML
source: {path: $work/shards${IMAGE_BATCH:+, image_batch_bytes: $IMAGE_BATCH}}
stages:
  - plugin: image_embedder
    params: {model: /models/clip-l14, device: gpu}
    resources: {gpu_memory_gb: ${GPU_GB:-16}${EMBED_CPUS:+, cpus: $EMBED_CPUS}}${EMBED_BATCH:+
    batch_size: $EMBED_BATCH}
    grants: {models: $work/models}
  - plugin: aesthetic_filter
    params: {model: /models/aesthetic-head, score_threshold: -100}
    grants: {models: $work/models}${FILTER_WORKERS:+
    num_workers: $FILTER_WORKERS}
  - plugin: nsfw_filter
    params: {model: /models/nsfw-head, score_threshold: 1.5}
    grants: {models: $work/models}
sink: {path: $work/out-run, format: webdataset, mode: overwrite}
YAML
    echo "== run: curator-host run, ${IMAGES:-50000} images, WebDataset -> CLIP L/14 (GPU) -> aesthetic -> NSFW -> WebDataset"
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$work/util.txt" 2>/dev/null &
    sampler=$!
    start=$(date +%s.%N)
    "$kit/curator-host" run "$work/run.yaml" --plugins "$kit/plugins" > "$work/run.log" 2>&1 &
    host=$!
    trap 'kill $host 2>/dev/null' EXIT
    trap 'kill $host 2>/dev/null; exit 1' TERM INT
    if [ -n "${STACKS_AFTER:-}" ]; then
        # A stalled run: every thread's stack of the host and its workers at each of the
        # STACKS_AFTER seconds ("40 70"), with gdb or cuda-gdb (which also attaches to programs
        # without GPU code), and the kernel's view of each thread.
        dbg="$(command -v gdb || command -v cuda-gdb || true)"
        ( last=0
          for at in $STACKS_AFTER; do
              sleep $((at - last)); last=$at
              kill -0 $host 2>/dev/null || exit 0
              echo "##### $at s"
              # The host's descendants, from /proc (the machine may have no pgrep).
              tree=" $host "
              for _ in 1 2 3; do
                  for d in /proc/[0-9]*; do
                      pp="$(awk '/^PPid:/ {print $2}' "$d/status" 2>/dev/null)"
                      [[ "$tree" == *" $pp "* && "$tree" != *" ${d#/proc/} "* ]] && tree="$tree${d#/proc/} "
                  done
              done
              for p in $tree; do
                  echo "=== pid $p: $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-120)"
                  for t in /proc/$p/task/*; do
                      echo "--- $(cat $t/comm) wchan=$(cat $t/wchan 2>/dev/null) syscall=$(cut -d' ' -f1 $t/syscall 2>/dev/null)"
                  done
                  # (The workers' stacks; the host's threads wait on them.)
                  [ -z "$dbg" ] || [ "$p" = "$host" ] || timeout 90 "$dbg" -p "$p" -batch -ex 'thread apply all bt 30' 2>/dev/null | grep -E '^(Thread|#)' | cut -c1-220
              done
          done > "$work/stacks.txt" 2>&1 ) &
    fi
    wait $host || { tail -30 "$work/run.log"; [ ! -s "$work/stacks.txt" ] || head -600 "$work/stacks.txt"; kill $sampler; exit 1; }
    [ ! -s "$work/stacks.txt" ] || { echo "== stacks at ${STACKS_AFTER} s (the run was still going)"; head -600 "$work/stacks.txt"; }
    end=$(date +%s.%N)
    kill $sampler || true
    python3 - "$start" "$end" "${IMAGES:-50000}" "$work/util.txt" <<'PY'
import sys
start, end, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
u = [int(x) for x in open(sys.argv[4]).read().split() if x.strip().isdigit()]
print(f"ours: {n / (end - start):.0f} images/s ({end - start:.1f} s, process start to exit); GPU busy mean {sum(u) / max(len(u), 1):.0f} % over {len(u)} samples")
PY
    grep -h "image_embedder:" "$work/run.log" | head -2 || true
    tail -8 "$work/run.log"
    if [ "${TORCH:-1}" = 1 ]; then
        # The same shards, model and heads through PyTorch (scripts/models/clip_e2e_torch.py:
        # DataLoader workers read the tars, nvJPEG decodes on the GPU, transformers fp16 SDPA).
        echo "== run: the same in PyTorch (DataLoader + torchvision nvJPEG + transformers), ${IMAGES:-50000} images"
        nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$work/util-torch.txt" 2>/dev/null &
        sampler=$!
        python3 scripts/models/clip_e2e_torch.py --shards "$work/shards" --model "$l14" --aesthetic "$work/models/aesthetic-head" \
            --nsfw "$work/models/nsfw-head" --out "$work/out-torch" --batch "${BATCH:-256}" --workers "${TORCH_WORKERS:-8}" \
            --nsfw-threshold 1.5 --aesthetic-threshold -100 | tee "$work/torch.json"
        kill $sampler || true
        python3 - "$work/util-torch.txt" <<'PY'
import sys
u = [int(x) for x in open(sys.argv[1]).read().split() if x.strip().isdigit()]
print(f"PyTorch: GPU busy mean {sum(u) / max(len(u), 1):.0f} % over {len(u)} samples")
PY
    fi
fi
