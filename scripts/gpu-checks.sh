#!/usr/bin/env bash
# GPU acceptance checks for native stages, run on a machine with an NVIDIA GPU:
#   1. GPU MinHash signatures are bit-identical to the CPU path (minhash-bench, 12,000 docs),
#      and GPU vs one-core CPU docs/s;
#   2. the same through the host: a pipeline with 4 minhash workers, each given a quarter of
#      the card (gpu_memory_gb), run at once on one GPU (nvidia-smi process list sampled during
#      the run), and its output equals a CPU run's byte for byte;
#   3. the NVML watchdog stops a worker that allocates past its GPU budget.
#
#   scripts/gpu-checks.sh DIR   where DIR holds curator-host, libminhash.so,
#                               libnative_probe.so and minhash-bench (see scripts/build-gpu-kit.sh)
set -uo pipefail
kit="$(cd "${1:?usage: gpu-checks.sh DIR}" && pwd)"
work="${TMPDIR:-/tmp}/curator-gpu-checks"
rm -rf "$work" && mkdir -p "$work/plugins" "$work/probe" "$work/in"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
host="$kit/curator-host"
cp "$kit/libminhash.so" "$work/plugins/"
cp "$kit/libnative_probe.so" "$work/probe/"

echo "## GPUs"
nvidia-smi -L
"$host" gpus

echo; echo "## 0. The GPU cargo tests (kernels on the card against the CPU paths)"
for t in "$kit"/tests/*; do
    [ -x "$t" ] || continue
    echo "### $(basename "$t")"
    CURATOR_REQUIRE_GPU=1 "$t" --test-threads 1 --nocapture 2>&1 | grep -E 'test result|panicked|cosine|max \|Δ\||FAILED|^skipped' | head -20
done

echo; echo "## 1. MinHash: GPU vs CPU (bit-identity, throughput)"
"$kit/minhash-bench" 12000

echo; echo "## 2. Four quarter-card minhash workers on one GPU"
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
quarter=$(( total_mib / 1024 / 4 ))
echo "card: ${total_mib} MiB; gpu_memory_gb per worker: ${quarter}"
python3 - "$work/in" <<'PY'
import json, random, sys
rng = random.Random(5)
words = "the of and data model training corpus quality filter language document token web page université naïve café straße".split()
for f in range(8):
    with open(f"{sys.argv[1]}/shard-{f}.jsonl", "w") as out:
        for i in range(15000):
            n = rng.randint(100, 900)
            out.write(json.dumps({"id": f"s{f}-{i}", "text": " ".join(rng.choice(words) for _ in range(n))}) + "\n")
PY
pipeline() { # $1 out dir, $2 device, $3 resources line, $4 workers
cat > "$work/$1.yaml" <<YAML
source: {path: in}
sink: {path: $1, mode: overwrite}
batch_size: 4096
stages:
  - plugin: minhash
    params: {device: $2}
    resources: $3
    num_workers: $4
YAML
}
pipeline out-gpu gpu "{gpu_memory_gb: $quarter}" 4
pipeline out-cpu cpu "{gpu_memory_gb: 1}" 14
( for _ in $(seq 1 200); do nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; echo "--"; sleep 0.2; done ) > "$work/smi.log" 2>&1 &
sampler=$!
"$host" run "$work/out-gpu.yaml" --plugins "$work/plugins" 2>&1 | grep -v 'INFO' | tail -4
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
echo "largest nvidia-smi compute-process snapshot during the run:"
awk 'BEGIN{RS="--\n"} {n=gsub(/\n/,"\n"); if (n>best) {best=n; snap=$0}} END{print snap}' "$work/smi.log"
echo "worker placement (from the run's log):"
CURATOR_LOG=info "$host" run "$work/out-gpu.yaml" --plugins "$work/plugins" --dry-run | head -3
"$host" run "$work/out-cpu.yaml" --plugins "$work/plugins" 2>&1 | grep -v 'INFO' | tail -3
echo "GPU output vs CPU output (checksum of each file, from _manifest.json):"
python3 - "$work" <<'PY'
import json, sys
g = {f["path"]: f["checksum"] for f in json.load(open(f"{sys.argv[1]}/out-gpu/_manifest.json"))["files"]}
c = {f["path"]: f["checksum"] for f in json.load(open(f"{sys.argv[1]}/out-cpu/_manifest.json"))["files"]}
docs = sum(f["documents"] for f in json.load(open(f"{sys.argv[1]}/out-gpu/_manifest.json"))["files"])
print(f"{sum(g[p] == c.get(p) for p in g)} of {len(g)} files identical ({docs} documents)")
PY

echo; echo "## 3. Watchdog: a worker allocating past its GPU budget"
printf '%s\n' '{"id":"a","text":"fine"}' '{"id":"b","text":"TRIGGER"}' '{"id":"c","text":"fine too"}' > "$work/in-hog.jsonl"
mkdir -p "$work/hog" && mv "$work/in-hog.jsonl" "$work/hog/"
cat > "$work/hog.yaml" <<YAML
source: {path: hog}
sink: {path: out-hog, mode: overwrite}
batch_size: 1
execution: {ignore_failures: true}
stages:
  - plugin: native_probe
    params: {mode: gpu_hog, gpu_gb: 8}
    resources: {gpu_memory_gb: 2}
    num_workers: 1
YAML
( for _ in $(seq 1 60); do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; sleep 0.25; done ) > "$work/smi-hog.log" 2>&1 &
sampler=$!
"$host" run "$work/hog.yaml" --plugins "$work/probe" 2>&1 | grep -E 'watchdog|dead-lettered|STAGE|native_probe ' | head -8
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
echo "peak GPU memory of a probe worker seen by nvidia-smi: $(sort -t, -k2 -n "$work/smi-hog.log" | tail -1)"
echo "dead letter:"; cat "$work"/out-hog/_dead_letter/*.jsonl; echo
