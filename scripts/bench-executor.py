#!/usr/bin/env python3
"""Executor benchmark: peak memory against input size, and throughput against cores.

Runs the real binary on a generated JSONL corpus with the quickstart's two stages
(unicode_normalize, word_count_filter), reads each run's `_summary.json` and prints a
Markdown table. Cores are limited with `taskset`, which the executor sees (it sizes itself
from the process's CPU affinity). Standard library only, so it also runs on the GPU machine.

    scripts/bench-executor.py [--bin target/dist/curator-host] [--plugins target/dist/plugins]
                              [--mb 100] [--cores 1,2] [--work DIR]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time

WORDS = (
    "the of and to in is was for on that with as by at from his her it an were are which this be "
    "data model training text corpus quality filter language document token web page crawl "
    "université naïve café résumé straße über mañana déjà façade coöperate"
).split()


def make_corpus(path, megabytes, seed=7):
    """`megabytes` of JSONL in 16 files; ~3 KB documents cycled from 4,000 distinct texts."""
    rng = random.Random(seed)
    texts = []
    for _ in range(4000):
        n = rng.randint(20, 900)
        texts.append(" ".join(rng.choice(WORDS) for _ in range(n)))
    os.makedirs(path, exist_ok=True)
    target = megabytes * 1_000_000 // 16
    doc = 0
    for f in range(16):
        written = 0
        with open(os.path.join(path, f"shard-{f:02}.jsonl"), "w", encoding="utf-8") as out:
            while written < target:
                line = json.dumps({"id": f"d{doc}", "text": texts[doc % len(texts)], "url": f"https://example.com/{doc}"}) + "\n"
                out.write(line)
                written += len(line.encode())
                doc += 1
    return doc


def pipeline(work, data, out):
    p = os.path.join(work, f"pipeline-{os.path.basename(out)}.yaml")
    with open(p, "w") as f:
        f.write(
            f"source:\n  path: {data}\n  blocksize: 16MB\nbatch_size: 512\n"
            f"stages:\n  - plugin: unicode_normalize\n    params: {{form: nfc}}\n"
            f"  - plugin: word_count_filter\n    params: {{min_words: 50}}\n"
            f"sink:\n  path: {out}\n  mode: overwrite\n"
        )
    return p


def run(binary, plugins, pipe, out, cores=None, workers=None):
    cmd = [binary, "run", pipe, "--plugins", plugins]
    if workers:
        cmd += ["--workers", str(workers)]
    if cores:
        cmd = ["taskset", "-c", f"0-{cores - 1}"] + cmd
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        sys.exit(f"run failed ({' '.join(cmd)}):\n{r.stderr[-3000:]}")
    with open(os.path.join(out, "_summary.json")) as f:
        s = json.load(f)
    s["wall_s"] = wall
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/dist/curator-host")
    ap.add_argument("--plugins", default="target/dist/plugins")
    ap.add_argument("--mb", type=int, default=100, help="size of the 1x corpus in MB")
    ap.add_argument("--cores", default="1,2", help="core counts to compare (taskset)")
    ap.add_argument("--work", default="target/bench-executor")
    ap.add_argument("--skip-memory", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    work = os.path.abspath(a.work)
    rows = []

    one = os.path.join(work, "data-1x")
    if not os.path.exists(one):
        make_corpus(one, a.mb)
    # Throughput against cores, on the 1x corpus (warm page cache: one untimed run first).
    cores = [int(c) for c in a.cores.split(",")]
    out = os.path.join(work, "out-cores")
    pipe = pipeline(work, one, out)
    run(a.bin, a.plugins, pipe, out, cores=max(cores))
    base = None
    for c in cores:
        best = None
        for _ in range(2):
            s = run(a.bin, a.plugins, pipe, out, cores=c)
            rate = s["docs_in"] / s["elapsed_s"]
            if best is None or rate > best[0]:
                best = (rate, s)
        rate, s = best
        base = base or rate
        mb_s = a.mb / s["elapsed_s"]
        rows.append((f"{c} core(s): docs/s (best of 2)", f"{rate:,.0f} docs/s, {mb_s:,.0f} MB/s, {s['elapsed_s']:.2f} s", f"{rate / base:.2f}x"))

    if not a.skip_memory:
        ten = os.path.join(work, "data-10x")
        if not os.path.exists(ten):
            make_corpus(ten, a.mb * 10, seed=8)
        rss = []
        for name, data in (("1x", one), ("10x", ten)):
            out = os.path.join(work, f"out-{name}")
            s = run(a.bin, a.plugins, pipeline(work, data, out), out, workers=2)
            rss.append(s["peak_rss_mb"])
            rows.append((f"peak RSS, {name} input ({a.mb * (10 if name == '10x' else 1)} MB, 2 workers)", f"{s['peak_rss_mb']:.0f} MiB ({s['docs_in']:,} docs, {s['elapsed_s']:.1f} s)", f"{s['peak_rss_mb'] / rss[0]:.2f}x"))
        shutil.rmtree(ten, ignore_errors=True)

    print("| measurement | value | ratio |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
