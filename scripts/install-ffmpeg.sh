#!/usr/bin/env bash
# FFmpeg for the video stages, installed from Debian's packages when missing: the development
# libraries the CPU decoder and the clip encoder build against (libavcodec, libavformat,
# libswscale; clang for their bindings) and the ffmpeg/ffprobe tools that make the sample and
# test videos. Called by scripts/build-dist.sh and scripts/test.sh.
set -euo pipefail
need=()
pkg-config --exists libavcodec libavformat libavutil libswscale 2>/dev/null ||
    need+=(pkg-config libavcodec-dev libavformat-dev libavutil-dev libswscale-dev)
{ command -v clang >/dev/null && ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; } || need+=(clang libclang-dev)
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || need+=(ffmpeg)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "FFmpeg's development libraries are needed for the video stages: install ${need[*]} (Debian names)" >&2
    exit 1
fi
apt=($(command -v sudo || true) env DEBIAN_FRONTEND=noninteractive apt-get)
"${apt[@]}" install -y -qq "${need[@]}" >/dev/null || { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq "${need[@]}" >/dev/null; }
