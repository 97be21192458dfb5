#!/usr/bin/env python3
"""Build the `curator-host` wheel from a dist folder (scripts/build-dist.sh makes target/dist/).

    python3 scripts/build-wheel.py [--dist target/dist] [--out target/wheels]

The wheel has maturin's layout for a binary: `curator-host` in the scripts scheme (pip puts
it in the environment's `bin/`), and the first-party plugins with the key they are signed
with in the data scheme, under `share/curator/` (pip puts them in the environment's prefix),
where an installed `curator-host` looks for them (`host/io/src/os.rs::installed`). So
`pip install curator_host-….whl` is all a node needs, e.g. in a Ray `runtime_env`.

Its platform tag is manylinux for the newest glibc symbol version the files use. A native
plugin that needs a shared library outside the manylinux set (the FFmpeg-linked video
stages) is left out, and the script says so: those need the system's FFmpeg, as from source.
"""

import argparse
import base64
import hashlib
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "curator_host"
# The shared libraries every manylinux platform provides (PEP 600's policy, x86-64).
MANYLINUX_LIBS = {
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "librt.so.1",
    "libpthread.so.0",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "ld-linux-x86-64.so.2",
}


def version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1]
    found = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M)
    if not found:
        sys.exit("no version in Cargo.toml's [workspace.package]")
    return found.group(1)


def readelf(args, path: Path) -> str:
    return subprocess.run(["readelf", *args, str(path)], check=True, capture_output=True, text=True).stdout


def needed(path: Path) -> list:
    return re.findall(r"\(NEEDED\).*\[(.+?)\]", readelf(["-d"], path))


def glibc(path: Path) -> tuple:
    versions = [tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", readelf(["-V"], path))]
    return max(versions, default=(2, 17))[:2]


def stripped(path: Path) -> bytes:
    """The binary without its line tables (a third of its size; symbols, so backtraces name
    functions, are kept), or as it is where binutils' objcopy is missing."""
    out = path.with_name(path.name + ".stripped")
    try:
        subprocess.run(["objcopy", "--strip-debug", str(path), str(out)], check=True, capture_output=True)
        return out.read_bytes()
    except (OSError, subprocess.CalledProcessError):
        return path.read_bytes()
    finally:
        out.unlink(missing_ok=True)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", type=Path, default=ROOT / "target/dist")
    ap.add_argument("--out", type=Path, default=ROOT / "target/wheels")
    a = ap.parse_args()
    host = a.dist / "curator-host"
    if not host.is_file():
        sys.exit(f"{host} is missing: run scripts/build-dist.sh first")
    ver = version()
    data_dir = f"{NAME}-{ver}.data"
    info_dir = f"{NAME}-{ver}.dist-info"

    files = [(f"{data_dir}/scripts/curator-host", host, 0o755)]
    newest = glibc(host)
    left_out = []
    for f in sorted((a.dist / "plugins").iterdir()):
        if f.suffix == ".minisig":
            continue
        if f.suffix == ".so":
            outside = [lib for lib in needed(f) if lib not in MANYLINUX_LIBS]
            if outside:
                left_out.append(f"{f.name} (needs {', '.join(outside)})")
                continue
            newest = max(newest, glibc(f))
        sig = f.with_name(f.name + ".minisig")
        files.append((f"{data_dir}/data/share/curator/plugins/{f.name}", f, 0o644))
        if sig.exists():
            files.append((f"{data_dir}/data/share/curator/plugins/{sig.name}", sig, 0o644))
    for key in sorted((a.dist / "trust").glob("*.pub")):
        files.append((f"{data_dir}/data/share/curator/trust/{key.name}", key, 0o644))

    tag = f"py3-none-manylinux_{newest[0]}_{newest[1]}_x86_64"
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            "Name: curator-host",
            f"Version: {ver}",
            "Summary: curator's engine for curating LLM training data: the curator-host binary and its first-party plugins",
            "License: Apache-2.0",
            "Requires-Python: >=3.8",
            "",
        ]
    )
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: curator scripts/build-wheel.py", "Root-Is-Purelib: false", f"Tag: {tag}", ""])

    a.out.mkdir(parents=True, exist_ok=True)
    target = a.out / f"{NAME}-{ver}-{tag}.whl"
    records = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:

        def add(name: str, data: bytes, mode: int) -> None:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            records.append(record_line(name, data))

        for name, path, mode in files:
            add(name, stripped(path) if name.endswith("/curator-host") else path.read_bytes(), mode)
        add(f"{info_dir}/METADATA", metadata.encode(), 0o644)
        add(f"{info_dir}/WHEEL", wheel.encode(), 0o644)
        records.append(f"{info_dir}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{info_dir}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(records) + "\n")
    target.write_bytes(buf.getvalue())
    plugins = sum(1 for n, _, _ in files if "/plugins/" in n and not n.endswith(".minisig"))
    print(f"built {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: curator-host and {plugins} plugin(s), {target.stat().st_size / 1e6:.1f} MB")
    for name in left_out:
        print(f"left out: {name}; it is outside manylinux (install it from source beside the system's libraries)")


if __name__ == "__main__":
    main()
