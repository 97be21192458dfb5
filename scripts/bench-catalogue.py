#!/usr/bin/env python3
"""The catalogue's presets: docs/s per core as WASM, as native builds of the same stages, and
beside NeMo Curator and datatrove running the same chains, on one corpus, back to back.

    scripts/bench-catalogue.py [--docs 100000] [--nemo-docs 5000] [--dt-docs 5000]

Builds a corpus of DOCS documents of ~3 KB (paragraphs of the quickstart's real text, shuffled),
then, on one core (taskset -c 0), for each preset (the NeMo English and FineWeb presets, each
as shipped -- filters fused into one stage -- and in its one-stage-per-filter form):
  1. the preset run through curator-host, as WASM plugins and with the native builds of the
     same stage crates as its plugins (docs/s over the run's wall time, reading and writing
     included; best of 3 runs each, interleaved);
  2. `curator-host bench`: each stage timed in process on its own input, as WASM and as the
     same stage crate built natively (target/bench-catalogue/native/), best of --stage-repeat
     passes, summed over stages;
  3. the reference implementation's own classes in one Python process (scoring only, no Ray
     or executor: a lower bound on its real cost): NeMo Curator 1.4.0 for the NeMo chain (the
     parity venv), datatrove 0.10.1 for FineWeb's four quality filters (its venv; the fastText
     language filter is left out on both sides of that comparison).
Prints Markdown tables.
"""
import argparse
import gzip
import json
import os
import random
import re
import shutil
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
import json, sys, time
sys.path.insert(0, sys.argv[3])
import nemo_filters
s, r = nemo_filters.load()
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


DT_CHAIN = """
import json, sys, time
from datatrove.data import Document
from datatrove.pipeline.filters import C4QualityFilter, FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter
chain = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(filter_no_terminal_punct=False), FineWebQualityFilter()]
docs = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
t = time.time(); kept = 0
for i, d in enumerate(docs):
    doc = Document(text=d, id=str(i))
    ok = True
    for f in chain:
        r = f.filter(doc)
        if r is not True and not (isinstance(r, tuple) and r[0]):
            ok = False
            break
    kept += ok
print(len(docs), kept, round(time.time() - t, 3))
"""


def preset_file(name, data, out):
    text = open(os.path.join(ROOT, f"examples/presets/{name}.yaml")).read()
    text = text.replace("path: ../quickstart/data", f"path: {data}")
    text = re.sub(r"path: \.\./\.\./target/presets/\S+", f"path: {out}", text)
    p = os.path.join(WORK, f"{name}.yaml")
    open(p, "w").write(text)
    return p


def native_builds():
    """Every WASM plugin crate built natively (each also exports the C ABI)."""
    crates = []
    for folder in ("plugins", os.path.join("plugins", "catalogue")):
        for d in sorted(os.listdir(os.path.join(ROOT, folder))):
            path = os.path.join(ROOT, folder, d, "Cargo.toml")
            if not os.path.exists(path):
                continue
            manifest = open(path).read()
            if 'kind = "library"' not in manifest and 'kind = "native"' not in manifest:
                crates.append(d)
    subprocess.run(["cargo", "build", "--release", "--quiet", *sum((["-p", c] for c in crates), [])], cwd=ROOT, check=True)
    out = os.path.join(WORK, "native")
    os.makedirs(out, exist_ok=True)
    for c in crates:
        shutil.copy(os.path.join(ROOT, "target/release", f"lib{c}.so"), out)
    return out


def whole_runs(pfile, out, native):
    """Best of 3 whole runs with the WASM plugins and with the native builds, interleaved."""
    host = os.path.join(ROOT, "target/dist/curator-host")
    dirs = {"wasm": os.path.join(ROOT, "target/dist/plugins"), "native": native}
    cmd = lambda d: ["taskset", "-c", "0", host, "run", pfile, "--plugins", d]
    subprocess.run(cmd(dirs["wasm"]), capture_output=True, check=True)  # warm the compile cache
    best = {}
    for _ in range(3):
        for kind, d in dirs.items():
            r = subprocess.run(cmd(d), capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr[-2000:])
            s = json.load(open(os.path.join(out, "_summary.json")))
            if kind not in best or s["elapsed_s"] < best[kind]["elapsed_s"]:
                best[kind] = s
    return best["wasm"], best["native"]


def per_stage(pfile, native, repeat):
    host = os.path.join(ROOT, "target/dist/curator-host")
    cmd = ["taskset", "-c", "0", host, "bench", pfile, "--plugins", os.path.join(ROOT, "target/dist/plugins"), "--native-plugins", native, "--json", "--repeat", str(repeat)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    return json.loads(r.stdout)


def python_rate(py, script, data, n):
    out = subprocess.run(["taskset", "-c", "0", py, "-c", script, data, str(n), os.path.join(ROOT, "scripts/parity")], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]) / float(out[2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--nemo-docs", type=int, default=5_000, help="documents NeMo Curator scores (its rate is per document)")
    ap.add_argument("--dt-docs", type=int, default=5_000, help="documents datatrove filters")
    ap.add_argument("--stage-repeat", type=int, default=3, help="passes per stage in the per-stage timing (best kept)")
    ap.add_argument(
        "--presets",
        default="nemo-english-heuristics,nemo-english-heuristics-stages,fineweb,fineweb-stages",
        help="comma-separated presets to measure",
    )
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    data = os.path.join(WORK, "corpus.jsonl")
    if not os.path.exists(data) or sum(1 for _ in open(data)) != a.docs:
        corpus(a.docs, data)
    mb = os.path.getsize(data) / 1e6
    native = native_builds()
    nemo_py = os.path.join(ROOT, "target", "parity-venv", "bin", "python")
    if not os.path.exists(nemo_py):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/parity/make_reference.py")], check=True)
    dt_py = os.path.join(ROOT, "target", "dt-venv", "bin", "python")
    if not os.path.exists(dt_py):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/parity/make_datatrove_reference.py")], check=True)
    print(f"{a.docs:,} documents, {mb:.0f} MB (~{mb * 1e6 / a.docs / 1000:.1f} KB each), one core (taskset -c 0)\n")
    for name in a.presets.split(","):
        out = os.path.join(WORK, f"out-{name}")
        pfile = preset_file(name, data, out)
        run, native_run = whole_runs(pfile, out, native)
        stages = per_stage(pfile, native, a.stage_repeat)
        wasm_s = sum(s["wasm_s"] or 0 for s in stages)
        native_s = sum(s["native_s"] or 0 for s in stages)
        wall = run["docs_in"] / run["elapsed_s"]
        native_wall = native_run["docs_in"] / native_run["elapsed_s"]
        print(f"### {name} ({len(stages)} stages; kept {run['docs_out']:,} of {run['docs_in']:,})\n")
        print("| stage | docs in | WASM s | native s | WASM / native |\n|---|---|---|---|---|")
        for s in stages:
            ratio = f"{s['wasm_s'] / s['native_s']:.2f}x" if s["wasm_s"] and s["native_s"] else "-"
            label = s["label"] + (" [isolation: process]" if s.get("worker_process") else "")
            print(f"| {label} | {s['docs_in']:,} | {s['wasm_s'] or 0:.2f} | {s['native_s'] or 0:.2f} | {ratio} |")
        print(f"| **all stages** | {a.docs:,} | {wasm_s:.2f} | {native_s:.2f} | **{wasm_s / native_s:.2f}x** |\n")
        print("| run | docs/s per core | ratio |\n|---|---|---|")
        print(f"| curator, whole run as WASM (read, {len(stages)} stage(s), write) | {wall:,.0f} | |")
        print(f"| curator, whole run with native builds of the same stages | {native_wall:,.0f} | WASM {native_wall / wall:.2f}x slower |")
        print(f"| curator, stages only, WASM (`curator-host bench`) | {a.docs / wasm_s:,.0f} | |")
        print(f"| curator, stages only, native builds | {a.docs / native_s:,.0f} | WASM {wasm_s / native_s:.2f}x slower |")
        if name.startswith("nemo-english-heuristics"):
            ref = python_rate(nemo_py, NEMO_CHAIN, data, a.nemo_docs)
            print(f"| NeMo Curator 1.4.0 classes, one process, no Ray ({a.nemo_docs:,} docs) | {ref:,.0f} | curator whole run {wall / ref:.1f}x faster |\n")
        else:
            ref = python_rate(dt_py, DT_CHAIN, data, a.dt_docs)
            quality = [s for s in stages if s["label"] != "language_id"]
            q_wasm = sum(s["wasm_s"] or 0 for s in quality)
            print(f"| datatrove 0.10.1, its 4 quality filters, one process ({a.dt_docs:,} docs) | {ref:,.0f} | curator's same 4 filters as WASM {quality[0]['docs_in'] / q_wasm / ref:.1f}x faster |\n")


if __name__ == "__main__":
    main()
