#!/usr/bin/env python3
"""Stages written in Python, what the sandbox costs: the two NeMo filters ported to Python
(examples/python-stages) as WASM components in curator-host, beside the same classes looped
in native CPython, beside NeMo Curator 1.4.0's own filter classes, on one corpus, one core.

    scripts/bench-python-stages.py [--rounds 3]

Corpus: real text with a long tail of lengths and scripts -- every paragraph of CPython's
documentation sources (Debian's python3-doc), each whole source file as one document more
(up to ~300 KB), and the language-ID test set (30 languages: CJK, Cyrillic, Arabic, ...),
written as a gzip-compressed JSONL shard. On one core (taskset -c 0), alternating, per round:
  1. `curator-host bench`: each stage timed in process on its own input (the call and the
     conversion of its input and output; not reading or writing; instances started before);
  2. native CPython (this interpreter): `keep(score(text))` over the same texts, as a list
     already in memory, with the same classes (`curator_sdk` imported from the checkout);
  3. NeMo Curator's own classes (target/parity-venv, as scripts/parity/make_reference.py
     makes it, with pandas added): what its ScoreFilter stage does per batch --
     `df.text.apply(score_document)`, then `.apply(keep_document)` -- on a DataFrame already
     in memory (no executor, reader or writer: a lower bound on its real cost).
Then worker start-up: `curator-host run` of a one-document pipeline with the component
compiled (the cache warm), whole process wall time, beside the same with a Rust stage.
Prints Markdown tables: best and range over the rounds.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "bench-python-stages"
HOST = ROOT / "target" / "release" / "curator-host"
GUESTS = ROOT / "target" / "wasm" / "wasm32-wasip2" / "guest"
ONE_CORE = ["taskset", "-c", "0"]

STAGES = [
    ("py_word_count", "WordCount", "word_count", {"min_words": 50, "max_words": 100000}, "WordCountFilter()"),
    (
        "py_repeating_top_ngrams",
        "RepeatingTopNGrams",
        "repeating_top_ngrams",
        {"n": 2, "max_repeating_ngram_ratio": 0.2},
        "RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.2)",
    ),
]


def corpus(path: Path) -> list:
    texts = [json.loads(l)["text"] for l in open(ROOT / "tests/langid/testset.jsonl", encoding="utf-8")]
    src = Path("/usr/share/doc/python3.11/html/_sources")
    if not src.is_dir():
        sys.exit("needs Debian's python3-doc (apt-get install python3-doc)")
    for f in sorted(src.rglob("*.rst.txt")):
        text = f.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        texts += [p.strip() for p in text.split("\n\n") if p.strip()]
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for i, t in enumerate(texts):
            out.write(json.dumps({"id": f"d{i}", "text": t}, ensure_ascii=False) + "\n")
    return texts


def build_plugins(plugins: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python/curator-sdk"))
    for _, _, module, _, _ in STAGES:
        subprocess.run([sys.executable, "-m", "curator_sdk", "build", str(ROOT / f"examples/python-stages/{module}.py"), "-o", str(plugins)], check=True, env=env)


def host_bench(pipeline: Path, plugins: Path) -> list:
    out = subprocess.run([*ONE_CORE, str(HOST), "bench", str(pipeline), "--plugins", str(plugins), "--json", "--repeat", "1"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


NATIVE = """
import sys, time, json
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import importlib
texts = json.load(open(sys.argv[3]))
res = []
for module, cls, params in json.loads(sys.argv[4]):
    s = getattr(importlib.import_module(module), cls)(**params)
    score, keep = s.score, s.keep
    t = time.perf_counter()
    kept = [t_ for t_ in texts if keep(score(t_))]
    res.append((time.perf_counter() - t, len(kept)))
    texts = kept
print(json.dumps(res))
"""

NEMO = """
import json, sys, time
import pandas as pd
sys.path.insert(0, sys.argv[3])
import nemo_filters
s, r = nemo_filters.load()
WordCountFilter, RepeatingTopNGramsFilter = s.WordCountFilter, r.RepeatingTopNGramsFilter
df = pd.DataFrame({"text": json.load(open(sys.argv[1]))})
res = []
for expr in json.loads(sys.argv[2]):
    f = eval(expr)
    t = time.perf_counter()
    scores = df["text"].apply(f.score_document)
    mask = scores.apply(f.keep_document)
    res.append((time.perf_counter() - t, int(mask.sum())))
    df = df[mask.astype(bool)]
print(json.dumps(res))
"""


def nemo_python() -> str:
    py = ROOT / "target/parity-venv/bin/python"
    if not py.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts/parity/make_reference.py")], check=True)
    if subprocess.run([str(py), "-c", "import pandas"], capture_output=True).returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "pandas"], check=True)
    return str(py)


def startup(plugins: Path) -> dict:
    """Whole `curator-host run` wall time on one document, compile cache warm (best of 5)."""
    d = WORK / "one"
    (d / "data").mkdir(parents=True, exist_ok=True)
    (d / "data/one.jsonl").write_text(json.dumps({"id": "a", "text": "one two three"}) + "\n")
    out = {}
    for plugin, where in [("py_word_count", plugins), ("word_count_filter", GUESTS)]:
        p = d / f"{plugin}.yaml"
        p.write_text(f"source: {{path: data}}\nstages:\n  - plugin: {plugin}\n    params: {{min_words: 1}}\nsink: {{path: out-{plugin}, mode: overwrite}}\n")
        best = None
        for _ in range(6):
            t = time.perf_counter()
            subprocess.run([str(HOST), "run", str(p), "--plugins", str(where), "--workers", "1"], check=True, capture_output=True)
            took = time.perf_counter() - t
            best = took if best is None else min(best, took)
        out[plugin] = best
    return out


def main() -> None:
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--rounds", type=int, default=3)
    args = a.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    data = WORK / "data"
    data.mkdir(exist_ok=True)
    texts = corpus(data / "corpus.jsonl.gz")
    texts_json = WORK / "texts.json"
    texts_json.write_text(json.dumps(texts, ensure_ascii=False))
    mb = sum(len(t.encode()) for t in texts) / 1e6
    plugins = WORK / "plugins"
    build_plugins(plugins)
    pipeline = WORK / "pipeline.yaml"
    stages = "".join(f"  - plugin: {p}\n    params: {json.dumps(params)}\n" for p, _, _, params, _ in STAGES)
    pipeline.write_text(f"source: {{path: data}}\nbatch_size: 1000\nstages:\n{stages}sink: {{path: out, mode: overwrite}}\n")
    nemo = nemo_python()
    native_arg = json.dumps([[m, c, p] for _, c, m, p, _ in STAGES])
    nemo_arg = json.dumps([e for *_, e in STAGES])
    rows = {p: {"wasm": [], "native": [], "nemo": [], "kept": set()} for p, *_ in STAGES}
    for _ in range(args.rounds):
        for s in host_bench(pipeline, plugins):
            rows[s["label"]]["wasm"].append(s["wasm_s"])
            rows[s["label"]]["kept"].add(("curator", s["docs_out"]))
        nat = subprocess.run([*ONE_CORE, sys.executable, "-c", NATIVE, str(ROOT / "python/curator-sdk"), str(ROOT / "examples/python-stages"), str(texts_json), native_arg], check=True, capture_output=True, text=True)
        for (label, *_), (took, kept) in zip(STAGES, json.loads(nat.stdout)):
            rows[label]["native"].append(took)
            rows[label]["kept"].add(("native", kept))
        ref = subprocess.run([*ONE_CORE, nemo, "-c", NEMO, str(texts_json), nemo_arg, str(ROOT / "scripts/parity")], check=True, capture_output=True, text=True)
        for (label, *_), (took, kept) in zip(STAGES, json.loads(ref.stdout)):
            rows[label]["nemo"].append(took)
            rows[label]["kept"].add(("nemo", kept))
    print(f"{len(texts):,} documents, {mb:.1f} MB of text (gzip JSONL), one core (taskset -c 0), {args.rounds} rounds, Python {sys.version.split()[0]} native\n")
    print("| stage | curator (WASM) s | native CPython loop s | NeMo ScoreFilter work s | WASM ÷ native time | NeMo ÷ WASM time | kept (curator / native / NeMo) |")
    print("|---|---|---|---|---|---|---|")
    fmt = lambda xs: f"{min(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"
    for label, r in rows.items():
        kept = dict(sorted(r["kept"]))
        print(
            f"| {label} | {fmt(r['wasm'])} | {fmt(r['native'])} | {fmt(r['nemo'])} | {min(r['wasm']) / min(r['native']):.2f} | "
            f"{min(r['nemo']) / min(r['wasm']):.2f} | {kept.get('curator')} / {kept.get('native')} / {kept.get('nemo')} |"
        )
    s = startup(plugins)
    print("\n| one-document run, whole process, compile cache warm (best of 6) | s |\n|---|---|")
    print(f"| py_word_count (Python component, {os.path.getsize(plugins / 'py_word_count.wasm') / 1e6:.0f} MB) | {s['py_word_count']:.3f} |")
    print(f"| word_count_filter (Rust component) | {s['word_count_filter']:.3f} |")


if __name__ == "__main__":
    main()
