#!/usr/bin/env bash
# The GPU half of the video measurements, on a machine with an NVIDIA GPU (no Rust, FFmpeg or
# network needed): run from the folder scripts/video-gpu-kit.sh made.
#
#   1. NVDEC vs FFmpeg (CPU, decoded on the build machine) on the same packets: PSNR of the
#      first 30 frames at 1920x1080 (luma), 5 at 1920x1080 (RGB) and 60 at 640x360 (RGB, where
#      the scalers differ).
#   2. NVDEC throughput, 1080p H.264 to 48x27 RGB, on 1, 2, 4, 8 and 16 concurrent streams,
#      with the decoder engines' busy % (nvidia-smi dmon) for the largest.
#   3. The same file through FFmpeg on all cores as a baseline (OpenCV's FFmpeg, one process
#      per core), when python3 has cv2.
#   4. The pipeline (video source → video_decode on the GPU → clip_split → motion_filter) on
#      the sample videos: the clips must be those the CPU path finds.
#
#   bash scripts/video-gpu.sh KIT_DIR
set -uo pipefail
kit="${1:-.}"
cd "$kit"
gunzip -kf hd-gray.cpu.gz hd-rgb.cpu.gz hd-rgb360.cpu.gz
echo "== 1. NVDEC frames vs FFmpeg's"
./decode-bench --device gpu --width 1920 --height 1080 --color gray --compare hd-gray.cpu hd.mp4
./decode-bench --device gpu --width 1920 --height 1080 --color rgb --compare hd-rgb.cpu hd30.mp4
./decode-bench --device gpu --width 640 --height 360 --color rgb --compare hd-rgb360.cpu hd.mp4
echo "== 2. NVDEC throughput (1080p H.264 -> 48x27 RGB)"
files=(hd.mp4 hd.mp4 hd.mp4 hd.mp4)
for n in 1 2 4 8 16; do
    if [ "$n" = 16 ]; then nvidia-smi dmon -s u -d 1 > dmon.txt 2>&1 & dmon=$!; fi
    if [ "$n" = 1 ]; then (sleep 2; echo "GPU memory of one stream: $(nvidia-smi --query-compute-apps=used_memory --format=csv,noheader)") & fi
    ./decode-bench --device gpu --streams "$n" "${files[@]}"
    if [ "$n" = 16 ]; then kill "$dmon" 2>/dev/null; echo "nvidia-smi dmon during 16 streams (dec = NVDEC busy %):"; head -2 dmon.txt; tail -n +3 dmon.txt | sort -k5 -n | tail -4; fi
done
echo "== 3. baseline: FFmpeg through OpenCV, one process per core"
python3 - <<'PY' || echo "(no cv2 here)"
import cv2, multiprocessing as mp, os, time
def work(_):
    cap = cv2.VideoCapture("hd.mp4", cv2.CAP_FFMPEG)
    cap.set(cv2.CAP_PROP_HW_ACCELERATION, cv2.VIDEO_ACCELERATION_NONE)
    n = 0
    while True:
        ok = cap.grab()
        if not ok:
            break
        ok, _ = cap.retrieve()
        n += 1
    return n
for procs in (1, os.cpu_count()):
    t = time.time()
    with mp.Pool(procs) as p:
        n = sum(p.map(work, range(procs * 2)))
    dt = time.time() - t
    print(f"OpenCV/FFmpeg CPU, {procs} processes: {n} frames in {dt:.2f} s: {n / dt:.0f} frames/s")
PY
echo "== 4. the pipeline with NVDEC"
rm -rf out && mkdir -p out
cat > gpu.yaml <<'Y'
source: {path: videos, format: video, file_extensions: [.mp4, .mkv]}
stages:
  - plugin: video_decode
    params: {device: gpu, fps: 0, width: 32, height: 24}
  - plugin: clip_split
    params: {method: scene, min_clip_s: 0.5, max_clip_s: 0, keep_frames: true}
  - plugin: motion_filter
    params: {score_only: true}
sink: {path: out/index}
Y
./curator-host run gpu.yaml --plugins plugins 2>&1 | grep -v "not signed" | tail -8
cat out/index/*.jsonl | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    print(d["id"], round(d["start_s"], 4), round(d["end_s"], 4), d["num_frames"], round(d["motion_global_mean"], 5))'
echo "== 5. the pipeline's NVDEC busy: 32 x 1080p H.264 through video_decode (16 workers) -> clip_split"
rm -rf many out5 && mkdir -p many
for i in $(seq -w 1 32); do ln -s "$PWD/hd.mp4" "many/hd$i.mp4"; done
cat > many.yaml <<'Y'
source: {path: many, format: video}
stages:
  - plugin: video_decode
    params: {device: gpu, fps: 0}
    resources: {cpus: 1, gpu_memory_gb: 1}
  - plugin: clip_split
    params: {method: fixed, clip_len_s: 5, stride_s: 5, keep_frames: false}
sink: {path: out5}
Y
nvidia-smi dmon -s u -d 1 > dmon5.txt 2>&1 & dmon=$!
start=$(date +%s.%N)
./curator-host run many.yaml --plugins plugins 2>&1 | grep -E "^video_decode|^read "
end=$(date +%s.%N)
kill "$dmon" 2>/dev/null
python3 -c "print(f'pipeline: {32 * 600} frames of 1080p in {$end - $start:.2f} s: {32 * 600 / ($end - $start):.0f} frames/s (whole run, start-up included)')"
echo "NVDEC busy % per second of the run:"; tail -n +3 dmon5.txt | awk '{print $5}' | tr '\n' ' '; echo
