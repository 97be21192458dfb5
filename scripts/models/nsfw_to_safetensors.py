#!/usr/bin/env python3
"""LAION's CLIP-based NSFW detector as NeMo Curator downloads it (`clip_autokeras_binary_nsfw.pth`,
a PyTorch state dict of NeMo's `NSFWModel`: norm.mean, norm.variance, linear_1..4) to the
`.safetensors` the `nsfw_filter` stage reads. Needs torch and safetensors.

    python3 scripts/models/nsfw_to_safetensors.py clip_autokeras_binary_nsfw.pth ~/models/clip-autokeras-binary-nsfw/
"""
import argparse
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pth")
    ap.add_argument("out_dir")
    args = ap.parse_args()
    import torch
    from safetensors.torch import save_file

    state = torch.load(args.pth, map_location="cpu", weights_only=True)
    want = {"norm.mean", "norm.variance"} | {f"linear_{i}.{p}" for i in range(1, 5) for p in ("weight", "bias")}
    missing = want - set(state)
    if missing:
        raise SystemExit(f"{args.pth}: not NeMo's NSFWModel state dict (missing {sorted(missing)})")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: state[k].float().contiguous() for k in want}, str(out / "model.safetensors"))
    print(out / "model.safetensors")


if __name__ == "__main__":
    main()
