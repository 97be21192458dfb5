#!/usr/bin/env python3
"""PyTorch's side of the CLIP benchmarks (scripts/models/gpu-clip.sh), on the same work as
`clip-check`:

- forward: transformers' CLIPVisionModelWithProjection in fp16 with SDPA attention on the test
  images' pixel values (CLIPImageProcessor, Pillow) in turn, COUNT of them, batches of BATCH.
  Two clocks: (a) pixel values in pinned host memory, copied per batch (non_blocking), embeds
  normalised and copied back once at the end, as `clip-check` times itself; (b) the fp16 inputs
  already on the device, forward only.
- decode: every image file in DIR, K times over, opened with Pillow and preprocessed by
  CLIPImageProcessor in a pool of PROCS processes (NeMo's CPU path).
- --make-photos DIR N: N 1920×1080 photo-like JPEGs (quality 90) for the decode benchmark.

    python3 scripts/models/clip_bench.py --model DIR --images DIR [--count N] [--batch B] [--rounds R]
    python3 scripts/models/clip_bench.py --decode DIR [--decode-copies K] [--procs P] [--model DIR]
    python3 scripts/models/clip_bench.py --make-photos DIR N
"""
import argparse
import json
import os
import time
from pathlib import Path


def make_photos(out, n):
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    for i in range(n):
        path = out / f"photo-{i:03d}.jpg"
        if path.exists():
            continue
        w, h = 1920, 1080
        a, b = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
        t = (np.linspace(0, 1, w)[None, :] + np.linspace(0, 1, h)[:, None]) / 2
        img = (a[None, None, :] * (1 - t[..., None]) + b[None, None, :] * t[..., None]).astype(np.uint8)
        im = Image.fromarray(img)
        d = ImageDraw.Draw(im)
        for _ in range(40):
            x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
            x1, y1 = x0 + int(rng.integers(20, w // 3)), y0 + int(rng.integers(20, h // 3))
            fill = tuple(int(c) for c in rng.integers(0, 256, 3))
            (d.ellipse if rng.random() < 0.5 else d.rectangle)([x0, y0, x1, y1], fill=fill)
        im = im.filter(ImageFilter.GaussianBlur(1.5))
        noise = rng.normal(0, 12, (h, w, 3))
        im = Image.fromarray(np.clip(np.asarray(im) + noise, 0, 255).astype(np.uint8))
        im.save(path, format="JPEG", quality=90)
    print(f"{n} photos in {out}")


_proc = None


def _init(model):
    global _proc
    from transformers import CLIPImageProcessor
    _proc = CLIPImageProcessor.from_pretrained(model, use_fast=False)


def _one(path):
    from PIL import Image
    with Image.open(path) as im:
        _proc(images=im.convert("RGB"), return_tensors="np")
    return 1


def _tv_init():
    import torch
    torch.set_num_threads(1)


def _tv_one(path):
    import torch
    from torchvision.io import decode_jpeg, read_file
    from torchvision.transforms.v2 import functional as F
    from torchvision.transforms import InterpolationMode
    img = F.center_crop(F.resize(decode_jpeg(read_file(path)), 224, interpolation=InterpolationMode.BICUBIC, antialias=True), 224)
    F.normalize(img.float() / 255, [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])
    return 1


def torchvision_gpu(files, batch):
    """torchvision's batched nvJPEG decode on the GPU, then resize (bicubic, antialias), crop
    and normalise on the GPU, per batch; the files read into memory before the clock starts."""
    import torch
    from torchvision.io import decode_jpeg, read_file
    from torchvision.transforms.v2 import functional as F
    from torchvision.transforms import InterpolationMode
    data = [read_file(f) for f in files]
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073], device="cuda")[:, None, None]
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711], device="cuda")[:, None, None]

    def run():
        for i in range(0, len(data), batch):
            imgs = decode_jpeg(data[i:i + batch], device="cuda")
            out = [(F.center_crop(F.resize(x, 224, interpolation=InterpolationMode.BICUBIC, antialias=True), 224).float() / 255 - mean) / std
                   for x in imgs]
            torch.stack(out)
        torch.cuda.synchronize()

    run()
    secs = []
    for _ in range(2):
        t = time.perf_counter()
        run()
        secs.append(time.perf_counter() - t)
    return {"images": len(data), "batch": batch, "seconds": secs, "images_per_s": len(data) / min(secs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--images")
    ap.add_argument("--count", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decode")
    ap.add_argument("--decode-copies", type=int, default=4)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    ap.add_argument("--make-photos", nargs=2, metavar=("DIR", "N"))
    args = ap.parse_args()
    if args.make_photos:
        make_photos(args.make_photos[0], int(args.make_photos[1]))
        return
    report = {}
    if args.images:
        import torch
        import transformers
        from PIL import Image
        from transformers import CLIPImageProcessor, CLIPVisionModelWithProjection

        proc = CLIPImageProcessor.from_pretrained(args.model, use_fast=False)
        files = sorted(p for p in Path(args.images).iterdir() if p.is_file())
        px = torch.cat([proc(images=Image.open(f).convert("RGB"), return_tensors="pt")["pixel_values"] for f in files])
        idx = torch.arange(args.count) % len(files)
        host = px[idx].contiguous().pin_memory()
        # transformers 5 names the dtype `dtype`, 4.x `torch_dtype`.
        kw = {"dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype": torch.float16}
        model = CLIPVisionModelWithProjection.from_pretrained(args.model, attn_implementation="sdpa", **kw).cuda().eval()
        dev = host.cuda().half()

        def run_a():
            outs = []
            for i in range(0, args.count, args.batch):
                x = host[i:i + args.batch].cuda(non_blocking=True).half()
                e = model(pixel_values=x).image_embeds
                outs.append(e / torch.linalg.vector_norm(e, dim=-1, keepdim=True))
            return torch.cat(outs).float().cpu()

        def run_b():
            outs = []
            for i in range(0, args.count, args.batch):
                outs.append(model(pixel_values=dev[i:i + args.batch]).image_embeds)
            torch.cuda.synchronize()
            return outs

        with torch.inference_mode():
            run_b()
            for name, f in [("host_inputs_copy_back", run_a), ("device_inputs_forward_only", run_b)]:
                secs = []
                for _ in range(args.rounds):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    f()
                    torch.cuda.synchronize()
                    secs.append(time.perf_counter() - t)
                report[name] = {"images": args.count, "batch": args.batch, "seconds": secs, "images_per_s_best": args.count / min(secs)}
        report["torch"] = torch.__version__
        report["device"] = torch.cuda.get_device_name()
    if args.decode:
        from multiprocessing import Pool
        files = sorted(str(p) for p in Path(args.decode).iterdir() if p.is_file()) * args.decode_copies
        with Pool(args.procs, initializer=_init, initargs=(args.model,)) as pool:
            pool.map(_one, files[: args.procs])  # warm-up: every worker loaded
            t = time.perf_counter()
            done = sum(pool.map(_one, files, chunksize=4))
            s = time.perf_counter() - t
        report["decode_pil"] = {"images": done, "processes": args.procs, "seconds": s, "images_per_s": done / s}
        try:
            import torchvision  # noqa: F401
        except ImportError:
            report["torchvision"] = "not installed"
        else:
            with Pool(args.procs, initializer=_tv_init) as pool:
                pool.map(_tv_one, files[: args.procs])
                t = time.perf_counter()
                done = sum(pool.map(_tv_one, files, chunksize=4))
                s = time.perf_counter() - t
            report["decode_torchvision_cpu"] = {"images": done, "processes": args.procs, "seconds": s, "images_per_s": done / s}
            import torch
            if torch.cuda.is_available():
                report["decode_torchvision_gpu"] = torchvision_gpu(files, args.batch)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
