#!/usr/bin/env bash
# What scripts/video-gpu.sh needs on a GPU machine without Rust, FFmpeg or network, in
# .device/video-kit/ (carried to it, 64 MiB at most):
#   curator-host, libvideo_decode.so built without the CPU decoder (so it needs no FFmpeg
#   libraries there), clip_split.wasm + motion_filter.wasm, decode-bench (same), the sample
#   videos, a 1080p H.264 test video (FFmpeg's testsrc2, 20 s at 30 fps), and reference frames
#   of it decoded here on the CPU (FFmpeg) for the PSNR check.
#
#   scripts/video-gpu-kit.sh [.device/video-kit]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.device/video-kit}"
rm -rf "$out" && mkdir -p "$out/plugins" "$out/videos"
cargo build --release --locked -p curator-host
cargo build --release --locked -p video_decode --no-default-features --example decode-bench --target-dir target/gpu-kit
cargo build --release --locked -p video_decode --no-default-features --target-dir target/gpu-kit
cargo build --locked --profile guest --target wasm32-wasip2 --target-dir target/wasm -p clip_split -p motion_filter
strip -o "$out/curator-host" target/release/curator-host
strip -o "$out/plugins/libvideo_decode.so" target/gpu-kit/release/libvideo_decode.so
strip -o "$out/decode-bench" target/gpu-kit/release/examples/decode-bench
cp target/wasm/wasm32-wasip2/guest/{clip_split,motion_filter}.wasm "$out/plugins/"
examples/video/make_videos.sh "$out/videos" >/dev/null
ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30:duration=20 \
    -c:v libx264 -preset veryfast -pix_fmt yuv420p "$out/hd.mp4"
# CPU reference frames: the first 30 at full size (luma), the first 5 at full size (RGB) and the
# first 60 at 640x360 (RGB: there the two paths' scalers differ, NVDEC's against swscale's area).
cargo build --release --locked -p video_decode --example decode-bench
target/release/examples/decode-bench --device cpu --width 1920 --height 1080 --color gray --dump "$out/hd-gray.cpu" --dump-frames 30 "$out/hd.mp4"
# (Full-size RGB of all 600 frames would pass the 2 GiB a frame column holds: the first 30
# frames' packets, copied unchanged, make a short file for it.)
ffmpeg -nostdin -v error -y -i "$out/hd.mp4" -c copy -frames:v 30 "$out/hd30.mp4"
target/release/examples/decode-bench --device cpu --width 1920 --height 1080 --color rgb --dump "$out/hd-rgb.cpu" --dump-frames 5 "$out/hd30.mp4"
target/release/examples/decode-bench --device cpu --width 640 --height 360 --color rgb --dump "$out/hd-rgb360.cpu" --dump-frames 60 "$out/hd.mp4"
gzip -9 "$out/hd-gray.cpu" "$out/hd-rgb.cpu" "$out/hd-rgb360.cpu"
du -sh "$out"
# One compressed file to carry (curator-host alone is ~50 MB stripped).
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T2 -6 > "$out.tar.xz"
ls -la "$out.tar.xz"
