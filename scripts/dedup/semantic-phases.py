#!/usr/bin/env python3
"""Semantic dedup in phases against one machine, same input, same run (needs pyarrow):

    python3 scripts/dedup/semantic-phases.py --host target/release/curator-host \
        [--docs 200000] [--dim 128] [--files 8] [--buckets 2] [--rounds 2] [--cores-per-node C]

Writes --docs seeded unit embeddings (float32, clustered, with planted near-copies) as Parquet,
then, alternating, runs `curator-host run` (one machine, device: cpu) and the four phases
(2 docs shards, --buckets bucket shards started together, components, 2 output shards,
merge). Prints each run's wall time (process start to exit, summed over a phase's jobs for
docs/output; the bucket phase is the slowest of its concurrent jobs), the bucket phase's
k-means rounds, and whether `_duplicates/` is byte-identical to one machine's.

With --cores-per-node C, each job is pinned (taskset) as a node of C cores would be: one
machine and every docs, components and output job on cores 0..C-1, bucket shard J on cores
J·C..(J+1)·C-1, so the bucket phase has M nodes' cores where one machine has one node's.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import numpy as np

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # JSONL then (a GPU machine without pyarrow)
    pa = None


def corpus(path, docs, dim, files, seed=7):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, docs // 500), dim)).astype(np.float32)
    labels = rng.integers(0, len(centres), docs)
    v = centres[labels] + 0.8 * rng.standard_normal((docs, dim)).astype(np.float32)
    copies = np.arange(3, docs, 11)
    v[copies] = v[copies - 1] + 0.01 * rng.standard_normal((len(copies), dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    os.makedirs(path)
    for f, rows in enumerate(np.array_split(np.arange(docs), files)):
        if pa is None:
            with open(os.path.join(path, f"part-{f:03}.jsonl"), "w") as out:
                for i in rows:
                    out.write(json.dumps({"id": f"d{i:08}", "text": "", "embedding": [round(float(x), 7) for x in v[i]]}) + "\n")
            continue
        emb = pa.FixedSizeListArray.from_arrays(pa.array(v[rows].ravel(), pa.float32()), dim)
        ids = pa.array([f"d{i:08}" for i in rows])
        table = pa.table({"id": ids, "text": pa.array([""] * len(rows)), "embedding": emb})
        pq.write_table(table, os.path.join(path, f"part-{f:03}.parquet"))


def digest(out):
    with open(os.path.join(out, "_duplicates", "part-00000.parquet"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


PIN = None  # cores per node, when jobs are pinned


def pinned(argv, node=0):
    if PIN is None:
        return argv
    return ["taskset", "-c", f"{node * PIN}-{(node + 1) * PIN - 1}"] + argv


def timed(argv, cwd):
    argv = pinned(argv)
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cores-per-node", type=int)
    a = ap.parse_args()
    global PIN
    PIN = a.cores_per_node
    host = os.path.abspath(a.host)
    work = tempfile.mkdtemp(prefix="semantic-phases-")
    try:
        corpus(os.path.join(work, "data"), a.docs, a.dim, a.files)
        stage = "{method: semantic, action: identify, device: cpu}"
        for name in ("single", "phased"):
            with open(os.path.join(work, f"{name}.yaml"), "w") as f:
                f.write(f"source: {{path: data}}\nstages:\n  - dedup: {stage}\nsink: {{path: {name}, mode: overwrite}}\n")
        node = f", {PIN} cores per node" if PIN else ""
        print(f"{a.docs} documents × {a.dim} dims in {a.files} {'Parquet' if pa else 'JSONL'} files, {os.cpu_count()} cores{node}")
        print("| run | wall s | docs phase s | k-means + pairwise s (phases: the bucket phase) | rounds | _duplicates |")
        print("|---|---|---|---|---|---|")
        want = None
        for r in range(a.rounds):
            shutil.rmtree(os.path.join(work, "single"), ignore_errors=True)
            t, _ = timed([host, "run", "single.yaml"], work)
            want = digest(os.path.join(work, "single"))
            with open(os.path.join(work, "single", "_summary.json")) as f:
                phases = json.load(f).get("dedup", {}).get("phases", [])
            fit = sum(p["seconds"] for p in phases if p["phase"] in ("kmeans", "pairwise"))
            print(f"| one machine (round {r + 1}) | {t:.2f} | | {fit:.2f} | | {want} |", flush=True)
            shutil.rmtree(os.path.join(work, "phased"), ignore_errors=True)
            t0 = time.perf_counter()
            docs = sum(timed([host, "run", "phased.yaml", "--phase", "docs", "--shard", f"{i}/2"], work)[0] for i in range(2))
            tb = time.perf_counter()
            jobs = [
                subprocess.Popen(
                    pinned([host, "run", "phased.yaml", "--phase", "buckets", "--shard", f"{j}/{a.buckets}"], j),
                    cwd=work,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for j in range(a.buckets)
            ]
            logs = [p.communicate()[1] for p in jobs]
            if any(p.returncode for p in jobs):
                raise SystemExit("a bucket shard failed:\n" + "\n".join(l[-2000:] for l in logs))
            buckets = time.perf_counter() - tb
            rounds = re.search(r"in (\d+) round\(s\)", logs[0])
            timed([host, "run", "phased.yaml", "--phase", "components"], work)
            for i in range(2):
                timed([host, "run", "phased.yaml", "--phase", "output", "--shard", f"{i}/2"], work)
            timed([host, "merge", "phased"], work)
            total = time.perf_counter() - t0
            got = digest(os.path.join(work, "phased"))
            same = "identical" if got == want else f"DIFFERS ({got})"
            print(f"| phases, {a.buckets} bucket shards (round {r + 1}) | {total:.2f} | {docs:.2f} | {buckets:.2f} | {rounds.group(1) if rounds else '?'} | {same} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
