#!/usr/bin/env python3
"""InternVideo2's vision tower on the CPU: ours (`video-embed-bench`) against InternVideo2's own
PyTorch code (`PretrainInternVideo2` + `vision_proj`, f32, unfused as NeMo Curator's
configuration runs it), same seeded weights, same clips, same thread count, alternated rounds.

    pip install torch timm einops numpy opencv-python-headless
    cargo build --release -p curator-encoder --example video-embed-bench
    python3 scripts/bench-internvideo2.py --repo InternVideo [--depth 4] [--clips 4] [--threads 1] [--rounds 3]

The tower has the 1B model's widths (1408, 16 heads, MLP 6144, 4 frames of 224 px: 785
tokens) with `--depth` blocks (40 in the real model; time grows linearly with depth). The clips
are the parity clip's frames (scripts/models/internvideo2_reference.py) made into the input
as NeMo makes them, repeated. Both clocks hold only the forward passes: weights are loaded and
the clips prepared before them. PyTorch runs a clip at a time, as NeMo's stage loops over
clips; ours embeds the call's clips in parallel over the threads it is given.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
from internvideo2_reference import CLIP, FFMPEG, HEIGHT, WIDTH, backbone, build, construct  # noqa: E402
from internvideo2_weights import CONFIG_1B, seeded_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, required=True, help="a checkout of OpenGVLab/InternVideo")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--clips", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench-internvideo2"))
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.set_num_threads(args.threads)
    t = dict(CONFIG_1B, depth=args.depth)
    model_dir = args.work / f"seeded-d{args.depth}"
    if not (model_dir / "model.safetensors").exists():
        seeded_dir(model_dir, args.depth, "f32")
    sample = ROOT / "target/models/transnetv2/sample.mp4"
    raw = subprocess.run([a.replace("{sample}", str(sample)) for a in FFMPEG] + CLIP, check=True, capture_output=True).stdout
    frames = list(np.frombuffer(raw, dtype=np.uint8).reshape(-1, HEIGHT, WIDTH, 3))
    _, one = construct(frames, t["num_frames"], t["img_size"])
    clips = np.concatenate([one] * args.clips)  # [n, T, 3, S, S]
    pixels = args.work / f"pixels-{args.clips}.f32"
    clips.astype("<f4").tofile(pixels)
    vision, proj, _ = build(backbone(args.repo), t)
    exe = ROOT / "target/release/examples/video-embed-bench"
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    ours, theirs = [], []
    for r in range(args.rounds):
        start = time.perf_counter()
        out = []
        for c in range(args.clips):
            x = torch.from_numpy(clips[c : c + 1]).permute(0, 2, 1, 3, 4)
            _, pooled, _, _ = vision(x, None, False)
            v = proj(pooled)
            out.append(v / v.norm(dim=-1, keepdim=True))
        theirs.append(time.perf_counter() - start)
        run = subprocess.run([str(exe), str(model_dir), str(pixels), "1"], env=env, check=True, capture_output=True, text=True)
        ours.append(float(re.search(r"in ([0-9.]+) s", run.stdout).group(1)))
        print(f"round {r}: PyTorch {theirs[-1]:.2f} s, ours {ours[-1]:.2f} s; first values PyTorch "
              f"{' '.join(f'{x:.6f}' for x in out[0][0, :4].tolist())} / ours {run.stdout.split('[:4] ')[1].strip()}")
    print(f"{args.clips} clips, depth {args.depth}, {args.threads} thread(s): PyTorch {min(theirs):.2f}-{max(theirs):.2f} s, "
          f"ours {min(ours):.2f}-{max(ours):.2f} s, ours/PyTorch speed {min(theirs) / min(ours):.2f}x (best rounds), "
          f"{np.median(theirs) / np.median(ours):.2f}x (medians)")


if __name__ == "__main__":
    main()
