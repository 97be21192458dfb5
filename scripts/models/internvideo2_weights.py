#!/usr/bin/env python3
"""InternVideo2's vision tower as a `video_embedder` model directory (config.json +
model.safetensors).

    # the published checkpoint (gated on the Hugging Face hub: accept its terms first)
    huggingface-cli download OpenGVLab/InternVideo2-Stage2_1B-224p-f4 \\
        InternVideo2-stage2_1b-224p-f4.pt --revision 4362e1f --local-dir ckpt
    pip install torch numpy
    python3 scripts/models/internvideo2_weights.py convert ckpt/InternVideo2-stage2_1b-224p-f4.pt models/internvideo2

    # seeded weights of the 1B model's shapes (speed runs; numpy only)
    python3 scripts/models/internvideo2_weights.py seeded models/internvideo2-seeded [--depth 40] [--dtype f16]

`convert` keeps the tensors the clip embedding reads, under the checkpoint's own names: the
vision encoder's (`vision_encoder.…`, without the CLIP-distillation decoders and their
position tables, which only training uses) and `vision_proj.…`; the text encoder is dropped.
NeMo Curator's configuration (`internvideo2_mm_config_model.json`, the same as
cosmos-curate's) runs the 224p-f4 checkpoint at 4 frames of 224 px with `origin_num_frames` 4,
so the position table is taken as it is; `--frames N` interpolates it in time as NeMo's
`interpolate_pos_embed_internvideo2_new` does (linear, `align_corners=False`).

The seeded fill is the one the parity reference uses (`scripts/models/internvideo2_reference.py`
imports `seeded` and `rule` from here), so a tower made here equals one made by the tests.
"""
import argparse
import json
import re
import struct
from pathlib import Path

import numpy as np

# The 1B model's tower (pretrain_internvideo2_1b_patch14_224 + the stage-2 projection), as
# NeMo Curator runs it.
CONFIG_1B = dict(model_type="internvideo2", embed_dim=1408, depth=40, num_heads=16, mlp_hidden=6144, patch_size=14,
                 img_size=224, num_frames=4, clip_embed_dim=768, attn_pool_num_heads=16, proj_dim=512)

M64 = (1 << 64) - 1
TRAINING_ONLY = ("clip_decoder", "final_clip_decoder", "clip_pos_embed", "img_pos_embed", "clip_img_pos_embed")


def fnv1a(name: str) -> int:
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def seeded(name: str, n: int, centre: float, scale: float) -> np.ndarray:
    """splitmix64(fnv1a(name) + (i + 1) * golden) >> 40 as u in [0, 1); centre + scale * (2u - 1)
    in f64, rounded to f32. curator-test-support's `seeded_values` is the same rule."""
    with np.errstate(over="ignore"):
        z = np.uint64(fnv1a(name)) + (np.arange(n, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return (centre + scale * (2.0 * u - 1.0)).astype(np.float32)


def rule(name: str, shape: tuple) -> tuple:
    """(centre, scale) of a seeded tensor: unit-variance products, norms near one, small biases."""
    last = name.rsplit(".", 1)[-1]
    if len(shape) >= 2 and last == "weight":
        return 0.0, float(2.0 ** np.round(np.log2((3.0 / int(np.prod(shape[1:]))) ** 0.5)))
    if last == "weight":  # a norm's scale
        return 1.0, 0.125
    if last == "gamma":  # layer scale
        return 0.0, 0.25
    if last in ("cls_token", "pos_embed"):
        return 0.0, 0.25
    return 0.0, 0.0625  # biases


def shapes(c: dict) -> dict:
    """Every tensor the embedding reads, by name, for config `c`."""
    d, m, p = c["embed_dim"], c["mlp_hidden"], c["patch_size"]
    tokens = 1 + c["num_frames"] * (c["img_size"] // p) ** 2
    v = "vision_encoder."
    out = {v + "patch_embed.proj.weight": (d, 3, 1, p, p), v + "patch_embed.proj.bias": (d,),
           v + "cls_token": (1, 1, d), v + "pos_embed": (1, tokens, d)}
    for i in range(c["depth"]):
        b = f"{v}blocks.{i}."
        out.update({b + "norm1.weight": (d,), b + "attn.qkv.weight": (3 * d, d), b + "attn.q_norm.weight": (d,),
                    b + "attn.k_norm.weight": (d,), b + "attn.proj.weight": (d, d), b + "attn.proj.bias": (d,),
                    b + "ls1.gamma": (d,), b + "norm2.weight": (d,), b + "mlp.fc1.weight": (m, d),
                    b + "mlp.fc1.bias": (m,), b + "mlp.fc2.weight": (d, m), b + "mlp.fc2.bias": (d,),
                    b + "ls2.gamma": (d,)})
    cp = v + "clip_projector."
    for n in ("norm1_q", "norm1_k", "norm1_v"):
        out.update({f"{cp}{n}.weight": (d,), f"{cp}{n}.bias": (d,)})
    for x in "qkv":
        out.update({f"{cp}cross_attn.{x}.weight": (d, d), f"{cp}cross_attn.{x}_bias": (d,)})
    out.update({cp + "cross_attn.proj.weight": (c["clip_embed_dim"], d), cp + "cross_attn.proj.bias": (c["clip_embed_dim"],),
                "vision_proj.weight": (c["proj_dim"], c["clip_embed_dim"]), "vision_proj.bias": (c["proj_dim"],)})
    return out


DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}


def write_dir(out: Path, config: dict, tensors) -> None:
    """config.json and model.safetensors (`tensors`: (name, numpy array) pairs, written in turn)."""
    out.mkdir(parents=True, exist_ok=True)
    items = list(tensors)
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for name, a in items:
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        at += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = out / "model.safetensors.tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, a in items:
            f.write(np.ascontiguousarray(a).tobytes())
    tmp.replace(out / "model.safetensors")
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")


def convert(checkpoint: Path, out: Path, frames: int | None) -> None:
    import torch

    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    state = ckpt.get("model") or ckpt.get("module") or ckpt
    keep = {k: v for k, v in state.items()
            if (k.startswith("vision_encoder.") and not any(t in k for t in TRAINING_ONLY)) or k.startswith("vision_proj.")}
    keep = {k.replace(".ls1.weight", ".ls1.gamma").replace(".ls2.weight", ".ls2.gamma"): v for k, v in keep.items()}
    d = keep["vision_encoder.cls_token"].shape[-1]
    p = keep["vision_encoder.patch_embed.proj.weight"].shape[-1]
    depth = 1 + max(int(m.group(1)) for k in keep if (m := re.match(r"vision_encoder\.blocks\.(\d+)\.", k)))
    pos = keep["vision_encoder.pos_embed"]
    grid = 224 // p
    origin = (pos.shape[1] - 1) // (grid * grid)
    if frames and frames != origin:
        # NeMo's interpolate_pos_embed_internvideo2_new, in time only.
        tokens = pos[:, 1:].reshape(1, origin, -1, d).permute(0, 2, 3, 1).reshape(-1, d, origin)
        tokens = torch.nn.functional.interpolate(tokens.float(), size=frames, mode="linear")
        tokens = tokens.reshape(1, -1, d, frames).permute(0, 3, 1, 2).reshape(1, -1, d)
        keep["vision_encoder.pos_embed"] = torch.cat([pos[:, :1].float(), tokens], dim=1)
        origin = frames
    config = dict(CONFIG_1B, embed_dim=d, depth=depth, patch_size=p, num_frames=origin,
                  mlp_hidden=keep["vision_encoder.blocks.0.mlp.fc1.weight"].shape[0],
                  clip_embed_dim=keep["vision_proj.weight"].shape[1], proj_dim=keep["vision_proj.weight"].shape[0])
    want = shapes(config)
    missing = sorted(set(want) - set(keep))
    if missing:
        raise SystemExit(f"{checkpoint}: not InternVideo2's stage-2 checkpoint: {missing[:5]} missing")
    for k, shape in want.items():
        if tuple(keep[k].shape) != shape:
            raise SystemExit(f"{checkpoint}: {k} has shape {tuple(keep[k].shape)}, expected {shape}")
    write_dir(out, config, ((k, keep[k].float().numpy()) for k in want))
    print(f"{out}: {len(want)} tensors, {depth} blocks, {origin} frames")


def seeded_dir(out: Path, depth: int, dtype: str) -> None:
    config = dict(CONFIG_1B, depth=depth)
    kind = np.float16 if dtype == "f16" else np.float32
    tensors = ((name, seeded(name, int(np.prod(s)), *rule(name, s)).reshape(s).astype(kind)) for name, s in shapes(config).items())
    write_dir(out, config, tensors)
    print(f"{out}: seeded, {depth} blocks, {dtype}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("checkpoint", type=Path)
    c.add_argument("out", type=Path)
    c.add_argument("--frames", type=int, default=None, help="interpolate the position table to this many frames")
    s = sub.add_parser("seeded")
    s.add_argument("out", type=Path)
    s.add_argument("--depth", type=int, default=CONFIG_1B["depth"])
    s.add_argument("--dtype", choices=["f32", "f16"], default="f16")
    args = ap.parse_args()
    if args.cmd == "convert":
        convert(args.checkpoint, args.out, args.frames)
    else:
        seeded_dir(args.out, args.depth, args.dtype)


if __name__ == "__main__":
    main()
