#!/usr/bin/env python3
"""The images pipeline of `scripts/models/gpu-clip.sh run` in PyTorch, as its best users run it
(the baseline of `curator-host run` WebDataset -> image_embedder -> aesthetic_filter ->
nsfw_filter -> WebDataset): a DataLoader whose workers read the WebDataset tar shards, JPEGs
decoded on the GPU in batches (torchvision.io.decode_jpeg, nvJPEG, as NeMo Curator's DALI
decode does), resized and cropped there as CLIPImageProcessor does (shortest side to 224,
bicubic with antialiasing, centre crop, CLIP's mean and std), transformers'
CLIPVisionModelWithProjection in fp16 with SDPA attention, NeMo's aesthetic MLP and NSFW
model on the normalised embeddings (the same safetensors heads the stages load), and the kept
samples written back as WebDataset shards with their scores in the `.json`.

    python3 scripts/models/clip_e2e_torch.py --shards DIR --model DIR --aesthetic DIR --nsfw DIR \
        --out DIR [--batch 256] [--workers 8] [--nsfw-threshold 1.5] [--aesthetic-threshold -100]

Prints one JSON line: images, kept, seconds (process start excluded, model load included, the
clock stopping when the last shard is written), images/s.
"""
import argparse
import io
import json
import os
import tarfile
import time
from pathlib import Path

import torch


class Shards(torch.utils.data.IterableDataset):
    """Samples of the tar files (key, image bytes, json bytes); each worker reads its own files."""

    def __init__(self, files):
        self.files = files

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        files = self.files if info is None else self.files[info.id :: info.num_workers]
        for f in files:
            sample, key = {}, None
            with tarfile.open(f) as t:
                for m in t:
                    if not m.isfile():
                        continue
                    k, _, ext = m.name.partition(".")
                    if key is not None and k != key:
                        yield key, sample
                        sample = {}
                    key = k
                    sample[ext] = t.extractfile(m).read()
            if key is not None:
                yield key, sample


def collate(items):
    return items


def load_heads(aesthetic_dir, nsfw_dir, dev):
    from safetensors.torch import load_file

    a = load_file(os.path.join(aesthetic_dir, "model.safetensors"))
    n = load_file(os.path.join(nsfw_dir, "model.safetensors"))
    a = {k: v.to(dev, torch.float32) for k, v in a.items()}
    n = {k: v.to(dev, torch.float32) for k, v in n.items()}

    def aesthetic(x):
        for i in (0, 2, 4, 6, 7):
            x = torch.nn.functional.linear(x, a[f"layers.{i}.weight"], a[f"layers.{i}.bias"])
        return x[:, 0]

    def nsfw(x):
        x = (x - n["norm.mean"]) / torch.sqrt(n["norm.variance"])
        for i in (1, 2, 3):
            x = torch.relu(torch.nn.functional.linear(x, n[f"linear_{i}.weight"], n[f"linear_{i}.bias"]))
        return torch.sigmoid(torch.nn.functional.linear(x, n["linear_4.weight"], n["linear_4.bias"]))[:, 0]

    return aesthetic, nsfw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--aesthetic", required=True)
    ap.add_argument("--nsfw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--nsfw-threshold", type=float, default=1.5)
    ap.add_argument("--aesthetic-threshold", type=float, default=-100.0)
    a = ap.parse_args()
    t0 = time.time()
    from torchvision.io import ImageReadMode, decode_jpeg
    from transformers import CLIPVisionModelWithProjection

    dev = "cuda"
    model = CLIPVisionModelWithProjection.from_pretrained(a.model, attn_implementation="sdpa", torch_dtype=torch.float16).to(dev).eval()
    aesthetic, nsfw = load_heads(a.aesthetic, a.nsfw, dev)
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073], device=dev)[None, :, None, None]
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711], device=dev)[None, :, None, None]
    files = sorted(str(p) for p in Path(a.shards).glob("*.tar"))
    loader = torch.utils.data.DataLoader(
        Shards(files), batch_size=a.batch, num_workers=a.workers, collate_fn=collate, prefetch_factor=4, persistent_workers=False
    )
    os.makedirs(a.out, exist_ok=True)
    out = tarfile.open(os.path.join(a.out, "00000.tar"), "w")
    images = kept = 0

    def prepare(imgs):
        # CLIPImageProcessor: shortest side to 224 (bicubic, antialiased), centre crop 224;
        # images of one size (a batch of photos from one camera, say) in one call.
        h, w = imgs.shape[-2:]
        s = 224 / min(h, w)
        nh, nw = max(224, round(h * s)), max(224, round(w * s))
        x = torch.nn.functional.interpolate(imgs.float(), size=(nh, nw), mode="bicubic", antialias=True, align_corners=False)
        top, left = (nh - 224) // 2, (nw - 224) // 2
        return x[:, :, top : top + 224, left : left + 224]

    def pixel_values(decoded):
        if all(d.shape == decoded[0].shape for d in decoded):
            return prepare(torch.stack(decoded))
        return torch.cat([prepare(d[None]) for d in decoded])

    with torch.inference_mode():
        for batch in loader:
            keys = [k for k, s in batch]
            data = [torch.frombuffer(bytearray(s.get("jpg") or s.get("jpeg")), dtype=torch.uint8) for _, s in batch]
            decoded = decode_jpeg(data, device=dev, mode=ImageReadMode.RGB)
            pixels = pixel_values(decoded).clamp_(0, 255).div_(255).sub_(mean).div_(std).half()
            emb = model(pixel_values=pixels).image_embeds.float()
            emb = emb / emb.norm(dim=-1, keepdim=True)
            aes, bad = aesthetic(emb), nsfw(emb)
            keep = (aes >= a.aesthetic_threshold) & (bad < a.nsfw_threshold)
            aes, bad, keep = aes.tolist(), bad.tolist(), keep.tolist()
            images += len(batch)
            for (key, sample), s_a, s_n, k in zip(batch, aes, bad, keep):
                if not k:
                    continue
                kept += 1
                meta = json.loads(sample.get("json", b"{}") or b"{}")
                meta.update({"aesthetic_score": s_a, "nsfw_score": s_n})
                for ext, payload in [("jpg", sample.get("jpg") or sample.get("jpeg")), ("json", json.dumps(meta).encode())]:
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(payload)
                    out.addfile(info, io.BytesIO(payload))
            del keys
    out.close()
    secs = time.time() - t0
    print(json.dumps({"images": images, "kept": kept, "seconds": round(secs, 2), "images_per_s": round(images / secs)}))


if __name__ == "__main__":
    main()
