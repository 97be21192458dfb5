#!/usr/bin/env python3
"""Score tests/parity/fixture.jsonl with NeMo Curator's own heuristic filters.

The repetition filters are configured as in NeMo Curator's English pipeline
(`RepeatingTopNGramsFilter(n=2)` …). NeMo's RepeatingTopNGramsFilter breaks ties between
equally frequent n-grams by Python's hash-set order, which changes with PYTHONHASHSEED: the
scoring runs under two seeds and marks scores that differ between them as `unstable`.

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
    sys.modules["nemo_curator.stages.text.filters.heuristic.repetition"] = types.ModuleType("repetition")
    sys.modules["nemo_curator.stages.text.filters.heuristic.repetition"].__path__ = [os.path.join(base, "stages/text/filters/heuristic/repetition")]
    rep = importlib.import_module("nemo_curator.stages.text.filters.heuristic.repetition.repetition")
    filters = {}
    for name, cls in inspect.getmembers(string, inspect.isclass):
        if issubclass(cls, doc_filter.DocumentFilter) and cls is not doc_filter.DocumentFilter and cls.__module__ == string.__name__:
            try:
                filters[name] = cls()
            except TypeError:
                pass  # needs arguments (e.g. SubstringFilter): covered by our own tests
    for name in ["RepeatedLinesFilter", "RepeatedParagraphsFilter", "RepeatedLinesByCharFilter", "RepeatedParagraphsByCharFilter"]:
        filters[name] = getattr(rep, name)()
    for n, r in [(2, 0.2), (3, 0.18), (4, 0.16)]:
        filters[f"RepeatingTopNGramsFilter(n={n})"] = rep.RepeatingTopNGramsFilter(n=n, max_repeating_ngram_ratio=r)
    for n, r in [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)]:
        filters[f"RepeatingDuplicateNGramsFilter(n={n})"] = rep.RepeatingDuplicateNGramsFilter(n=n, max_repeating_duplicate_ngram_ratio=r)
    text_utils = importlib.import_module("nemo_curator.stages.text.utils.text_utils")

    def top_ngram_candidates(text, n):
        """Every score RepeatingTopNGramsFilter can give, one per tied most frequent n-gram."""
        words = text.strip().split()
        if len(words) < n:
            return [1.0]
        ngrams = text_utils.get_ngrams(words, n)
        freq = {}
        for g in ngrams:
            freq[g] = freq.get(g, 0) + 1
        top = max(freq.values())
        nchar = len(text)
        return sorted({(nchar - len(text.replace(" ".join(g), ""))) / nchar for g, c in freq.items() if c == top})

    out = []
    with open(os.path.join(ROOT, "tests/parity/fixture.jsonl"), encoding="utf-8") as f:
        docs = [json.loads(l) for l in f]
    for d in docs:
        row = {"id": d["id"], "scores": {}, "keep": {}, "errors": {}, "candidates": {}}
        for n in (2, 3, 4):
            row["candidates"][f"RepeatingTopNGramsFilter(n={n})"] = top_ngram_candidates(d["text"], n)
        for name, flt in sorted(filters.items()):
            try:
                s = flt.score_document(d["text"])
                row["scores"][name] = s
                row["keep"][name] = bool(flt.keep_document(s))
            except Exception as e:  # noqa: BLE001 - recorded as NeMo's behaviour
                row["errors"][name] = type(e).__name__
        out.append(row)
    json.dump(out, sys.stdout, ensure_ascii=False)


def main():
    py = ensure_venv()
    runs = []
    for seed in ("0", "1"):
        env = dict(os.environ, CURATOR_PARITY_IN_VENV="1", PYTHONHASHSEED=seed)
        runs.append(json.loads(subprocess.check_output([py, __file__], env=env)))
    path = os.path.join(ROOT, "tests/parity/nemo_reference.jsonl")
    unstable = 0
    with open(path, "w", encoding="utf-8") as f:
        for a, b in zip(*runs):
            a["unstable"] = sorted(k for k in a["scores"] if a["scores"][k] != b["scores"].get(k))
            unstable += len(a["unstable"])
            f.write(json.dumps(a, ensure_ascii=False) + "\n")
    names = sorted(runs[0][0]["scores"]) if runs[0] else []
    print(f"{NEMO}: {len(names)} filters on {len(runs[0])} documents ({unstable} scores change with the hash seed) -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    if os.environ.get("CURATOR_PARITY_IN_VENV"):
        score_in_venv()
    else:
        main()
