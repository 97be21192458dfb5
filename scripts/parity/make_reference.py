#!/usr/bin/env python3
"""Score tests/parity/fixture.jsonl with NeMo Curator's own heuristic filters.

Installs nemo-curator (pinned, from PyPI, without its Ray/Torch dependency tree: the heuristic
filters are plain Python) into target/parity-venv, loads the filter modules without running
the package's heavy __init__ files, and writes tests/parity/nemo_reference.jsonl: per document,
each filter's score and keep decision at its default parameters (or the exception it raised).

    python3 scripts/parity/make_reference.py
"""
import json
import os
import subprocess
import sys
import venv

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV = os.path.join(ROOT, "target", "parity-venv")
NEMO = "nemo-curator==1.4.0"


def ensure_venv():
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        venv.create(VENV, with_pip=True)
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", "--no-deps", NEMO])
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", "regex", "loguru"])
    return py


def score_in_venv():
    import importlib
    import importlib.util
    import inspect
    import types

    spec = importlib.util.find_spec("nemo_curator")
    base = spec.submodule_search_locations[0]
    # Stand-ins for package __init__ files that import Ray, Torch and friends.
    for pkg in ["nemo_curator", "nemo_curator.stages", "nemo_curator.stages.text", "nemo_curator.stages.text.filters",
                "nemo_curator.stages.text.utils", "nemo_curator.stages.text.filters.heuristic"]:
        m = types.ModuleType(pkg)
        m.__path__ = [os.path.join(base, *pkg.split(".")[1:])]
        sys.modules[pkg] = m
    doc_filter = importlib.import_module("nemo_curator.stages.text.filters.doc_filter")
    string = importlib.import_module("nemo_curator.stages.text.filters.heuristic.string")
    filters = {}
    for name, cls in inspect.getmembers(string, inspect.isclass):
        if issubclass(cls, doc_filter.DocumentFilter) and cls is not doc_filter.DocumentFilter and cls.__module__ == string.__name__:
            try:
                filters[name] = cls()
            except TypeError:
                pass  # needs arguments (e.g. SubstringFilter): covered by our own tests
    out = []
    with open(os.path.join(ROOT, "tests/parity/fixture.jsonl"), encoding="utf-8") as f:
        docs = [json.loads(l) for l in f]
    for d in docs:
        row = {"id": d["id"], "scores": {}, "keep": {}, "errors": {}}
        for name, flt in sorted(filters.items()):
            try:
                s = flt.score_document(d["text"])
                row["scores"][name] = s
                row["keep"][name] = bool(flt.keep_document(s))
            except Exception as e:  # noqa: BLE001 - recorded as NeMo's behaviour
                row["errors"][name] = type(e).__name__
        out.append(row)
    path = os.path.join(ROOT, "tests/parity/nemo_reference.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for row in out:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{NEMO}: {len(filters)} filters ({', '.join(sorted(filters))}) on {len(out)} documents -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    if os.environ.get("CURATOR_PARITY_IN_VENV"):
        score_in_venv()
    else:
        py = ensure_venv()
        env = dict(os.environ, CURATOR_PARITY_IN_VENV="1")
        sys.exit(subprocess.call([py, __file__], env=env))
