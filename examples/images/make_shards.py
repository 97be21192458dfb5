#!/usr/bin/env python3
"""WebDataset shards for the image example, from the repository's test images (standard
library only): every image in tests/parity/images/ and the planted near-copies in
tests/parity/images-planted/ as samples (`NNNNNN.<ext>`, `.json` with its name and source,
`.txt` caption), split over two shards, plus one sample whose `.jpg` is not an image (it goes
to `_rejected/`).

    python3 examples/images/make_shards.py [--out examples/images/shards]
"""
import argparse
import io
import json
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "examples/images/shards"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted((ROOT / "tests/parity/images").iterdir()) + sorted((ROOT / "tests/parity/images-planted").iterdir())
    half = (len(files) + 1) // 2
    for shard, chunk in enumerate([files[:half], files[half:]]):
        with tarfile.open(out / f"{shard:05d}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            for path in chunk:
                key = f"{files.index(path):06d}"
                add(tar, f"{key}.{path.suffix[1:]}", path.read_bytes())
                meta = {"name": path.name, "source": path.parent.name}
                add(tar, f"{key}.json", json.dumps(meta).encode())
                add(tar, f"{key}.txt", f"a test image: {path.stem}".encode())
            if shard == 1:
                add(tar, "999999.jpg", b"<html>404 not found</html>")
                add(tar, "999999.json", b'{"name": "broken"}')
    print(f"wrote {len(files)} samples (and one broken) to {out}")


if __name__ == "__main__":
    main()
