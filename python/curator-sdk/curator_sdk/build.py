"""`curator-sdk build STAGE.py`: one Python stage into one plugin file.

1. The stage's module is imported here, in native CPython, and its manifest derived from the
   class (name, params schema, resources): a mistake is reported before anything is built.
2. componentize-py (pinned: `COMPONENTIZE_PY`) builds a WASM component of curator's WIT world
   (`wit/stage.wit`, the same file the Rust SDK binds) from a two-line app module that imports
   the stage; it runs the imports once at build time and stores the initialised interpreter,
   so an instance starts from that snapshot. Modules the stage imports from the stage's folder
   or this environment's site-packages (pure Python) are bundled.
3. The manifest JSON is appended as the `curator-manifest` custom section, where curator-host
   reads it without instantiating the component.
4. With `--key`, the file is signed (`curator-host plugin sign`), like any plugin.
"""

import argparse
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

from .stage import stages_in

COMPONENTIZE_PY = "0.25.1"
MANIFEST_SECTION = "curator-manifest"
WIT = Path(__file__).resolve().parent / "wit"


class BuildError(Exception):
    pass


def load_module(path: Path):
    """Import the stage file as a module named after it (its folder first on the path)."""
    if not path.is_file():
        raise BuildError(f"{path}: no such file")
    name = path.stem
    if not name.isidentifier():
        raise BuildError(f"{path}: the file name must be a Python module name")
    sys.path.insert(0, str(path.parent.resolve()))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise BuildError(f"{path}: importing it failed: {type(e).__name__}: {e}") from e
    return module


def find_stage(module, path: Path, wanted: str = None):
    found = stages_in(module)
    if wanted:
        found = [c for c in found if c.__name__ == wanted]
        if not found:
            raise BuildError(f"{path}: no stage class named {wanted}")
    if not found:
        raise BuildError(f"{path}: defines no stage (a subclass of curator_sdk.Filter, Map, Score or Stage)")
    if len(found) > 1:
        names = ", ".join(c.__name__ for c in found)
        raise BuildError(f"{path}: defines several stages ({names}); choose one with --stage")
    return found[0]


def _leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def custom_section(name: str, data: bytes) -> bytes:
    """A WASM custom section (id 0): a component or module may carry any number of them."""
    n = name.encode("utf-8")
    payload = _leb128(len(n)) + n + data
    return b"\x00" + _leb128(len(payload)) + payload


def componentize(app_dir: Path, app: str, paths, out: Path) -> None:
    try:
        from importlib.metadata import version

        have = version("componentize-py")
    except Exception:  # noqa: BLE001 - reported below
        have = None
    if have != COMPONENTIZE_PY:
        raise BuildError(
            f"componentize-py {COMPONENTIZE_PY} is needed (found {have or 'none'}): "
            f"python3 -m pip install componentize-py=={COMPONENTIZE_PY}"
        )
    args = ["-d", str(WIT), "-w", "stage", "componentize", app, "-p", str(app_dir)]
    for p in paths:
        args += ["-p", str(p)]
    args += ["-o", str(out)]
    run = [sys.executable, "-c", "import sys, componentize_py; sys.argv[0] = 'componentize-py'; componentize_py.script()", *args]
    done = subprocess.run(run, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"componentize-py failed (exit {done.returncode}):\n{done.stderr.strip() or done.stdout.strip()}")


def build(path: Path, out_dir: Path, stage: str = None, key: Path = None, host: str = None) -> Path:
    path = Path(path)
    module = load_module(path)
    cls = find_stage(module, path, stage)
    manifest = cls.manifest_json()
    json.loads(manifest)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{cls.manifest()['name']}.wasm"
    sdk_root = Path(__file__).resolve().parent.parent
    search = [path.parent.resolve(), sdk_root]
    search += [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()] if Path(p).is_dir()]
    with tempfile.TemporaryDirectory(prefix="curator-sdk-build-") as tmp:
        tmp = Path(tmp)
        app = "curator_stage_app"
        (tmp / f"{app}.py").write_text(
            f"from {module.__name__} import {cls.__name__} as _Stage\n"
            "from curator_sdk._guest import world\n\n"
            "WitWorld = world(_Stage)\n"
        )
        built = tmp / "component.wasm"
        componentize(tmp, app, search, built)
        data = built.read_bytes() + custom_section(MANIFEST_SECTION, manifest.encode("utf-8"))
        partial = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        partial.write_bytes(data)
        partial.replace(target)
    if key is not None:
        host = host or shutil.which("curator-host")
        if not host:
            raise BuildError("--key: curator-host is not on PATH (give it with --host)")
        done = subprocess.run([host, "plugin", "sign", str(target), "--key", str(key)], capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(f"signing {target} failed: {done.stderr.strip()}")
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="curator-sdk", description="Build Python stages into curator plugin files.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build STAGE.py into NAME.wasm (a sandboxed WASM component with its manifest)")
    b.add_argument("stage_file", type=Path)
    b.add_argument("-o", "--out", type=Path, default=Path("."), help="the folder the plugin file goes to (default: .)")
    b.add_argument("--stage", help="the stage class, when the file defines several")
    b.add_argument("--key", type=Path, help="sign the plugin with this secret key (`curator-host plugin keygen`)")
    b.add_argument("--host", help="the curator-host binary that signs (default: the one on PATH)")
    m = sub.add_parser("manifest", help="print the manifest STAGE.py's stage would carry")
    m.add_argument("stage_file", type=Path)
    m.add_argument("--stage")
    args = parser.parse_args(argv)
    try:
        if args.command == "manifest":
            cls = find_stage(load_module(args.stage_file), args.stage_file, args.stage)
            print(json.dumps(cls.manifest(), indent=2))
            return 0
        target = build(args.stage_file, args.out, args.stage, args.key, args.host)
    except (BuildError, TypeError) as e:
        print(f"curator-sdk: {e}", file=sys.stderr)
        return 1
    print(f"built {target} ({target.stat().st_size} bytes)")
    return 0
