"""CLIP pixel values of JPEG photos as GPU pipelines in Python make them, for `clip-check --pixels`
(issue: images at the card's speed, parity against what NeMo runs).

  --mode nemo:        nvJPEG on the GPU (torchvision.io.decode_jpeg(device="cuda"), the library
                      DALI's mixed decoder calls, as NeMo Curator's ImageReaderStage decodes),
                      then transformers' CLIPImageProcessor (Pillow's bicubic resize, centre crop,
                      normalise), as NeMo's CLIP embedder preprocesses.
  --mode torchvision: nvJPEG, then the resize (bicubic, antialiased), crop and normalisation on
                      the GPU with torchvision.

Writes the values as little-endian float32, [n x 3 x S x S], the photos in name order.

    python3 scripts/models/torch_gpu_pixels.py --photos DIR --model DIR --mode nemo --out FILE
"""
import argparse
from pathlib import Path

import numpy as np
import torch
import torchvision
from torchvision.io import decode_jpeg
from torchvision.transforms.v2 import functional as F
from transformers import CLIPImageProcessor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["nemo", "torchvision"], required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    proc = CLIPImageProcessor.from_pretrained(args.model)
    files = sorted(p for p in Path(args.photos).iterdir() if p.is_file())
    data = [torchvision.io.read_file(str(p)) for p in files]
    images = decode_jpeg(data, device="cuda")  # one batched nvJPEG call
    if args.mode == "nemo":
        hwc = [img.permute(1, 2, 0).cpu().numpy() for img in images]
        pixels = proc(images=hwc, return_tensors="np")["pixel_values"].astype(np.float32)
    else:
        side = proc.crop_size["height"]
        short = proc.size.get("shortest_edge", side)
        mean = torch.tensor(proc.image_mean, device="cuda").view(3, 1, 1)
        std = torch.tensor(proc.image_std, device="cuda").view(3, 1, 1)
        out = []
        for img in images:
            x = F.resize(img, [short], interpolation=F.InterpolationMode.BICUBIC, antialias=True)
            x = F.center_crop(x, [side, side]).float() / 255.0
            out.append(((x - mean) / std).cpu().numpy())
        pixels = np.stack(out).astype(np.float32)
    pixels.astype("<f4").tofile(args.out)
    print(f"{len(files)} photos, {args.mode}: {pixels.shape} -> {args.out}")


if __name__ == "__main__":
    main()
