#!/usr/bin/env python3
"""Random-weight CLIP vision towers and NeMo Curator's two image heads, from a seeded
standard-library RNG (CI builds the same bytes with no PyTorch):

- clip-tiny: 64 wide, 2 layers, 32-pixel patches (50 tokens at 224): the quick one.
- clip-b32-2l: openai/clip-vit-base-patch32's widths (768, 12 heads, MLP 3072, patch 32,
  projection 512) with 2 of its 12 layers.
- clip-l14-2l: openai/clip-vit-large-patch14's widths (1024, 16 heads, MLP 4096, patch 14,
  257 tokens, projection 768) with 2 of its 24 layers.

Each is a transformers `CLIPVisionModelWithProjection` directory (config.json with
model_type clip_vision_model, `vision_model.*` and `visual_projection.weight`), plus
openai's preprocessor_config.json. `--full` gives the towers all their layers (NumPy, F16;
for the GPU machine).

The heads, in NeMo Curator's layouts (nemo_curator/models/aesthetics.py and nsfw.py),
768 inputs (CLIP L/14's projection):
- aesthetic-head: `layers.{0,2,4,6,7}` (768→1024→128→64→16→1, no activations).
- nsfw-head: `norm.mean`, `norm.variance`, `linear_{1..4}` (768→64→512→256→1, ReLU, sigmoid).
and `tiny-aesthetic-head` / `tiny-nsfw-head` of the same layouts over clip-tiny's 32.

    python3 scripts/models/clip_models.py [--out target/models] [--full]
"""
import argparse
import json
import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fetch import write_safetensors  # noqa: E402

SEED = 20261130

# name: (hidden, heads, intermediate, layers, patch, image, projection)
TOWERS = {
    "clip-tiny": (64, 4, 128, 2, 32, 224, 32),
    "clip-b32-2l": (768, 12, 3072, 2, 32, 224, 512),
    "clip-l14-2l": (1024, 16, 4096, 2, 14, 224, 768),
}
FULL_LAYERS = {"clip-b32-2l": ("clip-b32", 12), "clip-l14-2l": ("clip-l14", 24)}

PREPROCESSOR = {
    "crop_size": {"height": 224, "width": 224},
    "do_center_crop": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_processor_type": "CLIPImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"shortest_edge": 224},
}


class Rng:
    """Uniform values with a given standard deviation (NumPy and F16 for the full towers)."""

    def __init__(self, seed, big=False):
        self.r = random.Random(seed)
        self.np = None
        if big:
            import numpy
            self.np = (numpy, numpy.random.default_rng(seed))

    def tensor(self, shape, std, offset=0.0):
        n = 1
        for d in shape:
            n *= d
        a = std * 3 ** 0.5
        if self.np:
            np, rng = self.np
            return ("F16", list(shape), (offset + rng.uniform(-a, a, n)).astype("<f2").tobytes())
        r = self.r.random
        return ("F32", list(shape), struct.pack(f"<{n}f", *[offset + (2.0 * r() - 1.0) * a for _ in range(n)]))


def tower(rng, h, heads, inter, layers, patch, image, proj):
    t = {}
    p = "vision_model."
    t[p + "embeddings.class_embedding"] = rng.tensor([h], 0.5)
    t[p + "embeddings.patch_embedding.weight"] = rng.tensor([h, 3, patch, patch], 1.0 / (3 * patch * patch) ** 0.5)
    t[p + "embeddings.position_embedding.weight"] = rng.tensor([(image // patch) ** 2 + 1, h], 0.5)
    t[p + "pre_layrnorm.weight"] = rng.tensor([h], 0.1, 1.0)
    t[p + "pre_layrnorm.bias"] = rng.tensor([h], 0.05)
    std = 1.0 / h ** 0.5
    for l in range(layers):
        q = f"{p}encoder.layers.{l}."
        for n in ["q_proj", "k_proj", "v_proj", "out_proj"]:
            # Query/key weights larger than a trained init's, so attention is far from uniform.
            t[f"{q}self_attn.{n}.weight"] = rng.tensor([h, h], 2.0 * std if n in ("q_proj", "k_proj") else std)
            t[f"{q}self_attn.{n}.bias"] = rng.tensor([h], 0.1)
        t[q + "layer_norm1.weight"] = rng.tensor([h], 0.1, 1.0)
        t[q + "layer_norm1.bias"] = rng.tensor([h], 0.05)
        t[q + "mlp.fc1.weight"] = rng.tensor([inter, h], std)
        t[q + "mlp.fc1.bias"] = rng.tensor([inter], 0.05)
        t[q + "mlp.fc2.weight"] = rng.tensor([h, inter], 1.0 / inter ** 0.5)
        t[q + "mlp.fc2.bias"] = rng.tensor([h], 0.05)
        t[q + "layer_norm2.weight"] = rng.tensor([h], 0.1, 1.0)
        t[q + "layer_norm2.bias"] = rng.tensor([h], 0.05)
    t[p + "post_layernorm.weight"] = rng.tensor([h], 0.1, 1.0)
    t[p + "post_layernorm.bias"] = rng.tensor([h], 0.05)
    t["visual_projection.weight"] = rng.tensor([proj, h], std)
    return t


def config(h, heads, inter, layers, patch, image, proj):
    return {
        "architectures": ["CLIPVisionModelWithProjection"],
        "model_type": "clip_vision_model",
        "hidden_act": "quick_gelu",
        "hidden_size": h,
        "image_size": image,
        "intermediate_size": inter,
        "layer_norm_eps": 1e-05,
        "num_attention_heads": heads,
        "num_channels": 3,
        "num_hidden_layers": layers,
        "patch_size": patch,
        "projection_dim": proj,
        "torch_dtype": "float32",
    }


def heads(rng, dim):
    """NeMo's aesthetic MLP and NSFW model over `dim` inputs, random weights; the last layer's
    bias puts the scores around the middle of a useful range."""
    aes = {}
    widths = [dim, 1024, 128, 64, 16, 1] if dim == 768 else [dim, 48, 24, 16, 8, 1]
    for i, (a, b) in zip([0, 2, 4, 6, 7], zip(widths, widths[1:])):
        aes[f"layers.{i}.weight"] = rng.tensor([b, a], 1.0 / a ** 0.5)
        aes[f"layers.{i}.bias"] = rng.tensor([b], 0.05)
    # The variance of a unit vector's coordinates (about 1/dim), so normalised inputs are O(1).
    var = 1.0 / dim
    nsfw = {"norm.mean": rng.tensor([dim], 0.2 * var ** 0.5), "norm.variance": rng.tensor([dim], 0.3 * var, var)}
    widths = [dim, 64, 512, 256, 1] if dim == 768 else [dim, 16, 32, 16, 1]
    for i, (a, b) in enumerate(zip(widths, widths[1:]), start=1):
        nsfw[f"linear_{i}.weight"] = rng.tensor([b, a], 1.5 / a ** 0.5)
        nsfw[f"linear_{i}.bias"] = rng.tensor([b], 0.05)
    return aes, nsfw


def write(dest: Path, tensors, cfg=None):
    dest.mkdir(parents=True, exist_ok=True)
    if cfg is not None:
        (dest / "config.json").write_text(json.dumps(cfg, indent=2))
        (dest / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def make(out: Path, full=False):
    made = []
    for i, (name, dims) in enumerate(TOWERS.items()):
        if full and name in FULL_LAYERS:
            name, layers = FULL_LAYERS[name]
            dims = dims[:3] + (layers,) + dims[4:]
        elif full:
            continue
        dest = out / name
        if not (dest / "model.safetensors").exists():
            write(dest, tower(Rng(SEED + i, big=full), *dims), config(*dims))
        made.append(dest)
    if not full:
        for prefix, dim, seed in [("", 768, SEED + 10), ("tiny-", 32, SEED + 11)]:
            aes, nsfw = heads(Rng(seed), dim)
            for name, t in [("aesthetic-head", aes), ("nsfw-head", nsfw)]:
                dest = out / f"{prefix}{name}"
                if not (dest / "model.safetensors").exists():
                    write(dest, t)
                made.append(dest)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="target/models")
    ap.add_argument("--full", action="store_true", help="B/32 and L/14 with all their layers (NumPy, F16)")
    args = ap.parse_args()
    for d in make(Path(args.out), args.full):
        print(d)


if __name__ == "__main__":
    main()
