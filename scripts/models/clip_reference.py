#!/usr/bin/env python3
"""The image stages' parity reference: tests/parity/clip_reference.json.

1. Test images (tests/parity/images/, made with Pillow once and committed): photo-like
   gradients with shapes and grain at several sizes and aspect ratios, as JPEG (4:2:0, two
   qualities), PNG (RGB, grey, RGBA), WebP (lossless) and one smaller than the crop.
2. For each image, what transformers' CLIPImageProcessor (the Pillow one, `use_fast=False`)
   makes of it: the decoded RGB's sha256 (Pillow/libjpeg-turbo), the resized + cropped 8-bit
   image's sha256 and a strided sample of it, and the sha256 of the float32 pixel values.
3. The normalised image embeddings (`image_embeds / ‖image_embeds‖`, NeMo's
   CLIPImageEmbeddings) of scripts/models/clip_models.py's towers, from those pixel values.
4. NeMo Curator's aesthetic and NSFW heads (their module layouts, written out here) on the
   L/14-shaped and tiny towers' embeddings.
5. Planted near-copies for image dedup (tests/parity/images-planted/: a re-encode, a PNG
   saved as JPEG, a small crop) with their cosines to the originals and to the rest.

Needs torch, transformers and Pillow; run scripts/models/clip_models.py first.

    python3 scripts/models/clip_reference.py [--models target/models]
"""
import argparse
import hashlib
import io
import json
import random
from pathlib import Path

IMAGES = Path("tests/parity/images")
OUT = Path("tests/parity/clip_reference.json")
SAMPLE = 4096


def make_images():
    from PIL import Image, ImageDraw, ImageFilter

    IMAGES.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)

    def scene(w, h):
        img = Image.new("RGB", (w, h))
        px = img.load()
        a, b = [rng.randrange(256) for _ in range(3)], [rng.randrange(256) for _ in range(3)]
        for y in range(h):
            for x in range(w):
                t = (x / w + y / h) / 2
                px[x, y] = tuple(int(a[c] * (1 - t) + b[c] * t) for c in range(3))
        d = ImageDraw.Draw(img)
        for _ in range(12):
            x0, y0 = rng.randrange(w), rng.randrange(h)
            x1, y1 = x0 + rng.randrange(8, w // 2), y0 + rng.randrange(8, h // 2)
            fill = tuple(rng.randrange(256) for _ in range(3))
            (d.ellipse if rng.random() < 0.5 else d.rectangle)([x0, y0, x1, y1], fill=fill)
        img = img.filter(ImageFilter.GaussianBlur(1.2))
        grain = Image.effect_noise((w, h), 24).convert("RGB")
        return Image.blend(img, grain, 0.12)

    made = {
        "photo-640x480-q90.jpg": (scene(640, 480), dict(format="JPEG", quality=90)),
        "wide-1000x562-q75.jpg": (scene(1000, 562), dict(format="JPEG", quality=75)),
        "tall-250x401-q95.jpg": (scene(250, 401), dict(format="JPEG", quality=95)),
        "scene-333x250.png": (scene(333, 250), dict(format="PNG")),
        "grey-300x300.png": (scene(300, 300).convert("L"), dict(format="PNG")),
        "alpha-260x200.png": (scene(260, 200).convert("RGBA"), dict(format="PNG")),
        "small-120x90.png": (scene(120, 90), dict(format="PNG")),
        "lossless-320x240.webp": (scene(320, 240), dict(format="WEBP", lossless=True)),
    }
    for name, (img, opts) in made.items():
        if name.endswith("alpha-260x200.png"):
            img.putalpha(Image.linear_gradient("L").resize(img.size))
        path = IMAGES / name
        if not path.exists():
            img.save(path, **opts)
    return sorted(IMAGES.iterdir())


PLANTED = Path("tests/parity/images-planted")


def make_planted():
    """Near-copies of three test images, as image dedup should find them: a JPEG re-encoded at
    a lower quality, a PNG saved as JPEG, and a photo with 2 % trimmed off each side."""
    from PIL import Image

    PLANTED.mkdir(parents=True, exist_ok=True)
    made = {}
    for name, of, edit, opts in [
        ("photo.reencoded-q80.jpg", "photo-640x480-q90.jpg", None, dict(quality=80)),
        ("scene.as-jpeg-q95.jpg", "scene-333x250.png", None, dict(quality=95)),
        ("wide.cropped.jpg", "wide-1000x562-q75.jpg", "crop", dict(quality=90)),
    ]:
        img = Image.open(IMAGES / of).convert("RGB")
        if edit == "crop":
            w, h = img.size
            img = img.crop((w // 50, h // 50, w - w // 50, h - h // 50))
        path = PLANTED / name
        if not path.exists():
            img.save(path, format="JPEG", **opts)
        made[name] = of
    return made


def sha(b):
    return hashlib.sha256(b).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="target/models")
    args = ap.parse_args()
    import numpy as np
    import torch
    import transformers
    from PIL import Image
    from safetensors.torch import load_file
    from transformers import CLIPImageProcessor, CLIPVisionModelWithProjection

    models = Path(args.models)
    proc = CLIPImageProcessor.from_pretrained(models / "clip-tiny", use_fast=False)
    towers = {n: CLIPVisionModelWithProjection.from_pretrained(models / n).eval() for n in ["clip-tiny", "clip-b32-2l", "clip-l14-2l"]}
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "pillow": Image.__version__, "images": {}}
    pixels = {}
    for path in make_images():
        img = Image.open(path)
        rgb = img.convert("RGB")
        crop = proc(images=rgb, do_rescale=False, do_normalize=False, return_tensors="np")["pixel_values"][0]
        crop = np.ascontiguousarray(crop.transpose(1, 2, 0)).round().astype(np.uint8)
        px = proc(images=rgb, return_tensors="np")["pixel_values"][0].astype("<f4")
        pixels[path.name] = px
        flat = crop.tobytes()
        idx = np.linspace(0, len(flat) - 1, SAMPLE).astype(np.int64)
        out["images"][path.name] = {
            "size": list(img.size),
            "mode": img.mode,
            "decoded_sha256": sha(rgb.tobytes()),
            "crop_sha256": sha(flat),
            "crop_sample": bytes(crop.reshape(-1)[idx]).hex(),
            "pixel_sha256": sha(px.tobytes()),
            "embeddings": {},
        }
    names = sorted(pixels)
    batch = torch.from_numpy(np.stack([pixels[n] for n in names]))
    for name, model in towers.items():
        with torch.no_grad():
            e = model(pixel_values=batch).image_embeds
            e = e / torch.linalg.vector_norm(e, dim=-1, keepdim=True)
        for n, v in zip(names, e):
            out["images"][n]["embeddings"][name] = [round(float(x), 7) for x in v]

    # NeMo Curator's heads (nemo_curator/models/aesthetics.py MLP, nsfw.py NSFWModel), with the
    # dimensions taken from the weights.
    def aesthetic(path, e):
        w = load_file(str(path / "model.safetensors"))
        x = e
        for i in [0, 2, 4, 6, 7]:
            x = x @ w[f"layers.{i}.weight"].T + w[f"layers.{i}.bias"]
        return x.squeeze(1)

    def nsfw(path, e):
        w = load_file(str(path / "model.safetensors"))
        x = (e - w["norm.mean"]) / w["norm.variance"].sqrt()
        for i in [1, 2, 3]:
            x = torch.relu(x @ w[f"linear_{i}.weight"].T + w[f"linear_{i}.bias"])
        return torch.sigmoid(x @ w["linear_4.weight"].T + w["linear_4.bias"]).squeeze(1)

    # The planted near-copies: each one's cosine to its original and its largest to any other
    # image (through the L/14-shaped tower), the margin image dedup's eps must fall in.
    planted = make_planted()
    tower = towers["clip-l14-2l"]
    def embed(path):
        px = proc(images=Image.open(path).convert("RGB"), return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            e = tower(pixel_values=px).image_embeds[0]
        return e / torch.linalg.vector_norm(e)
    base = {n: embed(IMAGES / n) for n in names}
    out["planted"] = {}
    for name, of in planted.items():
        e = embed(PLANTED / name)
        others = max(float(e @ v) for n, v in base.items() if n != of)
        out["planted"][name] = {"copy_of": of, "cosine": round(float(e @ base[of]), 6), "max_cosine_to_others": round(others, 6)}

    for tower, prefix in [("clip-l14-2l", ""), ("clip-tiny", "tiny-")]:
        e = torch.tensor([out["images"][n]["embeddings"][tower] for n in names])
        for head, f in [("aesthetic", aesthetic), ("nsfw", nsfw)]:
            scores = f(models / f"{prefix}{head}-head", e)
            for n, s in zip(names, scores):
                out["images"][n].setdefault("scores", {})[f"{prefix}{head}"] = round(float(s), 7)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}: {len(names)} images")


if __name__ == "__main__":
    main()
