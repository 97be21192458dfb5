#!/usr/bin/env python3
"""NeMo English heuristic chain: docs/s per core as WASM plugins, natively, and in NeMo Curator.

    scripts/bench-catalogue.py [--docs 100000]

Builds a corpus of DOCS documents of ~3 KB (paragraphs of the quickstart's real text, shuffled),
then measures on one core (taskset -c 0), back to back:
  1. curator, WASM: the preset through curator-host (docs/s over the run's wall time, reading
     and writing included);
  2. curator, native: the same filters compiled natively (curator-heuristics' nemo_chain
     example; scoring time only);
  3. NeMo Curator 1.4.0: its own filter classes in the same order, in one Python process
     (scoring time only, no Ray: a lower bound on its real cost), from the parity venv.
Prints a Markdown table.
"""
import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WORK = os.path.join(ROOT, "target", "bench-catalogue")


def corpus(n, path):
    paras = []
    with open(os.path.join(ROOT, "examples/quickstart/data/docs-000.jsonl"), encoding="utf-8") as f:
        for l in f:
            paras += [p for p in json.loads(l)["text"].split("\n\n") if p.strip()]
    with gzip.open(os.path.join(ROOT, "examples/quickstart/data/docs-001.jsonl.gz"), "rt", encoding="utf-8") as f:
        for l in f:
            paras += [p for p in json.loads(l)["text"].split("\n\n") if p.strip()]
    rng = random.Random(11)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            doc, size = [], 0
            while size < 3000:
                p = rng.choice(paras)
                doc.append(p)
                size += len(p) + 2
            out.write(json.dumps({"id": f"b{i}", "text": "\n\n".join(doc)}, ensure_ascii=False) + "\n")


NEMO_CHAIN = """
import importlib, json, os, sys, time, types, importlib.util
spec = importlib.util.find_spec("nemo_curator"); base = spec.submodule_search_locations[0]
for pkg in ["nemo_curator", "nemo_curator.stages", "nemo_curator.stages.text", "nemo_curator.stages.text.filters",
            "nemo_curator.stages.text.utils", "nemo_curator.stages.text.filters.heuristic",
            "nemo_curator.stages.text.filters.heuristic.repetition"]:
    m = types.ModuleType(pkg); m.__path__ = [os.path.join(base, *pkg.split(".")[1:])]; sys.modules[pkg] = m
s = importlib.import_module("nemo_curator.stages.text.filters.heuristic.string")
r = importlib.import_module("nemo_curator.stages.text.filters.heuristic.repetition.repetition")
chain = [s.NonAlphaNumericFilter(), s.SymbolsToWordsFilter(), s.NumbersFilter(), s.UrlsFilter(), s.WhiteSpaceFilter(),
         s.ParenthesesFilter(), s.BoilerPlateStringFilter(), r.RepeatedLinesFilter(), r.RepeatedParagraphsFilter(),
         r.RepeatedLinesByCharFilter(), r.RepeatedParagraphsByCharFilter(), s.WordCountFilter(), s.PunctuationFilter(),
         s.WordsWithoutAlphabetsFilter(), s.CommonEnglishWordsFilter(), s.MeanWordLengthFilter(), s.LongWordFilter(),
         s.EllipsisFilter()]
chain += [r.RepeatingTopNGramsFilter(n=n, max_repeating_ngram_ratio=x) for n, x in [(2, .2), (3, .18), (4, .16)]]
chain += [r.RepeatingDuplicateNGramsFilter(n=n, max_repeating_duplicate_ngram_ratio=x) for n, x in [(5, .15), (6, .14), (7, .13), (8, .12), (9, .11), (10, .10)]]
chain += [s.BulletsFilter()]
docs = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
t = time.time(); kept = 0
for d in docs:
    if all(f.keep_document(f.score_document(d)) for f in chain): kept += 1
print(len(docs), kept, round(time.time() - t, 3))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--nemo-docs", type=int, default=10_000, help="documents NeMo scores (its rate is per document)")
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    data = os.path.join(WORK, "corpus.jsonl")
    if not os.path.exists(data) or sum(1 for _ in open(data)) != a.docs:
        corpus(a.docs, data)
    mb = os.path.getsize(data) / 1e6
    rows = []

    # 1. WASM through the binary.
    preset = open(os.path.join(ROOT, "examples/presets/nemo-english-heuristics.yaml")).read()
    preset = preset.replace("path: ../quickstart/data", f"path: {data}").replace("path: ../../target/presets/nemo-english", f"path: {WORK}/out")
    pfile = os.path.join(WORK, "preset.yaml")
    open(pfile, "w").write(preset)
    cmd = ["taskset", "-c", "0", os.path.join(ROOT, "target/dist/curator-host"), "run", pfile, "--plugins", os.path.join(ROOT, "target/dist/plugins")]
    subprocess.run(cmd, capture_output=True, check=True)  # warm the compile cache
    best = None
    for _ in range(2):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stderr[-2000:])
        s = json.load(open(os.path.join(WORK, "out/_summary.json")))
        if best is None or s["elapsed_s"] < best["elapsed_s"]:
            best = s
    # (Per-stage busy time is not a compute measure here: on one core the 28 stage threads
    # share it, and a call's wall time includes waiting for the others.)
    wasm_wall = best["docs_in"] / best["elapsed_s"]
    # 2. Native.
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "curator-heuristics", "--example", "nemo_chain"], cwd=ROOT, check=True)
    native = None
    for _ in range(2):
        out = subprocess.run(["taskset", "-c", "0", os.path.join(ROOT, "target/release/examples/nemo_chain"), data], capture_output=True, text=True, check=True).stdout.split()
        n, kept, secs = int(out[0]), int(out[1]), float(out[2])
        native = min(native or 1e9, secs)
    native_rate = n / native
    # 3. NeMo Curator.
    py = os.path.join(ROOT, "target", "parity-venv", "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/parity/make_reference.py")], check=True)
    out = subprocess.run(["taskset", "-c", "0", py, "-c", NEMO_CHAIN, data, str(a.nemo_docs)], capture_output=True, text=True, check=True).stdout.split()
    nemo_rate = int(out[0]) / float(out[2])

    print(f"{a.docs:,} documents, {mb:.0f} MB (~{mb * 1e6 / a.docs / 1000:.1f} KB each), one core; kept by the chain: {best['docs_out']:,} (native: {kept:,})\n")
    print("| run | docs/s | vs native |\n|---|---|---|")
    print(f"| curator native (same filters compiled natively; scoring only) | {native_rate:,.0f} | 1.00x |")
    print(f"| curator WASM, whole run (read + 28 stages + write) | {wasm_wall:,.0f} | {native_rate / wasm_wall:.2f}x slower |")
    print(f"| NeMo Curator 1.4.0 filter classes, one process, no Ray ({a.nemo_docs:,} docs) | {nemo_rate:,.0f} | curator WASM run is {wasm_wall / nemo_rate:.0f}x faster |")


if __name__ == "__main__":
    main()
