#!/usr/bin/env python3
"""Dedup benchmarks: curator against its peers on one corpus, one run each, same machine.

    python3 scripts/dedup/make-corpus.py /tmp/corpus
    pip install rensa datasketch datatrove spacy orjson 'xxhash<4'   # datatrove 0.10 hashes str, which xxhash 4 refuses
    python3 scripts/dedup/bench.py /tmp/corpus [--host target/dist/curator-host] [--plugins target/dist/plugins]

Workloads (rows of the table, markdown on stdout, JSON in OUT/bench.json):
  exact:  curator `dedup: {method: exact}` end to end (read, hash, group, write), on all cores
          and pinned to one core (taskset), vs a Python md5 keep-first loop (one core);
  fuzzy:  curator `dedup: {method: fuzzy, word_ngrams: 5}` (14 × 8, CPU) on all cores and on
          one core, vs rensa and datasketch (LSH 14 × 8, keep-first, one core) and datatrove's
          MinHash dedup (its four stages, 14 × 8, one process).
Precision and recall are measured on the documents each tool removes, against the ids
that must go: components of the pairs whose word 5-gram Jaccard is ≥ 0.8, found with a
sensitive LSH (32 bands × 4 rows of 128 rensa hashes) and checked exactly.
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

WORD = re.compile(r"[^\W_]+")


def shingles(text, n=5):
    w = [x.lower() for x in WORD.findall(text)]
    if not w:
        return []
    if len(w) <= n:
        return [" ".join(w)]
    return list({" ".join(w[i:i + n]) for i in range(len(w) - n + 1)})


def load(corpus):
    docs = []
    for p in sorted((corpus / "data").glob("shard-*.jsonl")):
        with open(p) as f:
            for line in f:
                d = json.loads(line)
                docs.append((d["id"], d["text"]))
    return docs


def timed(cmd, env=None):
    """(seconds, peak RSS MiB of the process tree's largest process, stdout)."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    rss = int(r.stderr.strip().splitlines()[-1]) / 1024
    return dt, rss, r.stdout


def curator(host, plugins, corpus, work, stage, tag, one_core):
    out = work / f"out-{tag}"
    pipe = work / f"{tag}.yaml"
    pipe.write_text(f"source: {{path: {corpus / 'data'}}}\nbatch_size: 1000\nstages:\n  - dedup: {stage}\nsink: {{path: {out}, mode: overwrite}}\n")
    cmd = [host, "run", str(pipe), "--plugins", plugins]
    if one_core:
        cmd = ["taskset", "-c", "0"] + cmd
    dt, rss, _ = timed(cmd)
    removed = set()
    import pyarrow.parquet as pq  # noqa: E402 (only the curator rows need it)
    for p in (out / "_duplicates").glob("*.parquet"):
        removed |= set(pq.read_table(p, columns=["id"]).column("id").to_pylist())
    summary = json.loads((out / "_summary.json").read_text())
    return dt, rss, removed, summary


PY_MD5 = r'''
import hashlib, json, sys, pathlib
seen = set(); kept = 0; out = open(sys.argv[2], "w")
for p in sorted((pathlib.Path(sys.argv[1]) / "data").glob("shard-*.jsonl")):
    for line in open(p):
        d = json.loads(line)
        h = hashlib.md5(d["text"].encode()).digest()
        if h not in seen:
            seen.add(h); out.write(line); kept += 1
print(kept)
'''

PY_LSH = r'''
import json, re, sys, pathlib
WORD = re.compile(r"[^\W_]+")
def shingles(text, n=5):
    w = [x.lower() for x in WORD.findall(text)]
    if not w: return []
    if len(w) <= n: return [" ".join(w)]
    return list({" ".join(w[i:i+n]) for i in range(len(w)-n+1)})
tool, corpus, out = sys.argv[1], sys.argv[2], open(sys.argv[3], "w")
if tool == "rensa":
    from rensa import RMinHash, RMinHashLSH
    lsh = RMinHashLSH(threshold=0.8, num_perm=112, num_bands=14)
    def sig(sh):
        m = RMinHash(num_perm=112, seed=42); m.update(sh); return m
else:
    from datasketch import MinHash, MinHashLSH
    lsh = MinHashLSH(num_perm=112, params=(14, 8))
    def sig(sh):
        m = MinHash(num_perm=112, seed=42)
        m.update_batch([s.encode() for s in sh]); return m
removed = []
k = 0
for p in sorted((pathlib.Path(corpus) / "data").glob("shard-*.jsonl")):
    for line in open(p):
        d = json.loads(line); m = sig(shingles(d["text"]))
        if lsh.query(m):
            removed.append(d["id"])
        else:
            lsh.insert(k if tool == "rensa" else d["id"], m); out.write(line)
        k += 1
print(json.dumps(removed))
'''


def truth(docs):
    """Ids that must go: non-first members of components of pairs with Jaccard >= 0.8."""
    from rensa import RMinHash, RMinHashLSH
    lsh = RMinHashLSH(threshold=0.4, num_perm=128, num_bands=32)
    sigs = []
    for k, (_, t) in enumerate(docs):
        m = RMinHash(num_perm=128, seed=1)
        m.update(shingles(t))
        sigs.append(m)
        lsh.insert(k, m)
    parent = list(range(len(docs)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    sets = {}

    def S(k):
        if k not in sets:
            sets[k] = set(shingles(docs[k][1]))
        return sets[k]
    pairs = 0
    for k in range(len(docs)):
        for j in lsh.query(sigs[k]):
            if j <= k:
                continue
            a, b = S(k), S(j)
            if min(len(a), len(b)) < 0.8 * max(len(a), len(b)):
                continue
            pairs += 1
            if len(a & b) >= 0.8 * len(a | b):
                ra, rb = find(k), find(j)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    return {docs[k][0] for k in range(len(docs)) if find(k) != k}, pairs


# datatrove's MinHash dedup as its docs run it: signatures, buckets, clusters, filter, each a
# LocalPipelineExecutor stage (one task at a time, one process), 14 buckets × 8 hashes of its
# own word 5-grams; the removed documents' ids come from the filter's exclusion writer.
PY_DATATROVE = r'''
import gzip, json, pathlib, sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers.jsonl import JsonlWriter
corpus, work = pathlib.Path(sys.argv[1]) / "data", pathlib.Path(sys.argv[2])
config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8)
read = lambda: JsonlReader(str(corpus), glob_pattern="shard-*.jsonl", text_key="text", id_key="id")
# Each stage logs apart: an executor skips the tasks its logging directory says are done.
run = lambda name, pipeline, tasks=1: LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1, logging_dir=str(work / "logs" / name)).run()
run("signatures", [read(), MinhashDedupSignature(output_folder=str(work / "sigs"), config=config)])
run("buckets", [MinhashDedupBuckets(input_folder=str(work / "sigs"), output_folder=str(work / "buckets"), config=config)], config.num_buckets)
run("clusters", [MinhashDedupCluster(input_folder=str(work / "buckets"), output_folder=str(work / "remove"), config=config)])
run("filter", [read(), MinhashDedupFilter(input_folder=str(work / "remove"), exclusion_writer=JsonlWriter(str(work / "removed")))])
removed = [json.loads(l)["id"] for f in sorted((work / "removed").glob("*.jsonl.gz")) for l in gzip.open(f, "rt")]
print(json.dumps(removed))
'''


def pr(removed, want):
    tp = len(removed & want)
    return (tp / len(removed) if removed else 1.0), (tp / len(want) if want else 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--host", default="target/dist/curator-host")
    ap.add_argument("--plugins", default="target/dist/plugins")
    ap.add_argument("--skip-peers", action="store_true")
    a = ap.parse_args()
    corpus = pathlib.Path(a.corpus).resolve()
    host = str(pathlib.Path(a.host).resolve())
    plugins = str(pathlib.Path(a.plugins).resolve())
    docs = load(corpus)
    n = len(docs)
    size = sum(p.stat().st_size for p in (corpus / "data").glob("shard-*.jsonl"))
    cores = os.cpu_count()
    work = pathlib.Path(tempfile.mkdtemp(prefix="dedup-bench-"))
    rows = []
    exact_want = set()
    first = {}
    for i, t in docs:
        if t in first:
            exact_want.add(i)
        else:
            first[t] = i
    t0 = time.perf_counter()
    fuzzy_want, pairs = truth(docs)
    print(f"truth: {len(fuzzy_want)} ids to remove ({pairs} pairs checked, {time.perf_counter() - t0:.0f}s)", file=sys.stderr)

    def row(workload, tool, cores_used, dt, rss, removed, want):
        p, r = pr(removed, want)
        rows.append({"workload": workload, "tool": tool, "cores": cores_used, "seconds": round(dt, 2),
                     "docs_per_s": round(n / dt), "docs_per_s_per_core": round(n / dt / cores_used),
                     "peak_rss_mib": round(rss), "removed": len(removed), "precision": round(p, 4), "recall": round(r, 4)})
        print(rows[-1], file=sys.stderr)

    for one in (False, True):
        c = 1 if one else cores
        dt, rss, removed, _ = curator(host, plugins, corpus, work, "{method: exact}", f"exact-{c}", one)
        row("exact", "curator", c, dt, rss, removed, exact_want)
        dt, rss, removed, s = curator(host, plugins, corpus, work, "{method: fuzzy, word_ngrams: 5, device: cpu}", f"fuzzy-{c}", one)
        row("fuzzy word 5-grams 14x8", "curator", c, dt, rss, removed, fuzzy_want)
    if not a.skip_peers:
        (work / "md5.py").write_text(PY_MD5)
        dt, rss, _ = timed([sys.executable, str(work / "md5.py"), str(corpus), str(work / "md5.jsonl")])
        row("exact", "python md5 keep-first", 1, dt, rss, exact_want, exact_want)
        (work / "lsh.py").write_text(PY_LSH)
        for tool in ("rensa", "datasketch"):
            dt, rss, out = timed([sys.executable, str(work / "lsh.py"), tool, str(corpus), str(work / f"{tool}.jsonl")])
            row("fuzzy word 5-grams 14x8", tool, 1, dt, rss, set(json.loads(out)), fuzzy_want)
        (work / "dt_minhash.py").write_text(PY_DATATROVE)  # not datatrove.py: it would import itself
        dt, rss, out = timed([sys.executable, str(work / "dt_minhash.py"), str(corpus), str(work / "datatrove")])
        row("fuzzy word 5-grams 14x8", "datatrove MinHash", 1, dt, rss, set(json.loads(out.strip().splitlines()[-1])), fuzzy_want)
    print(f"corpus: {n} documents, {size / 1e6:.1f} MB JSONL, {len(exact_want)} exact and {len(fuzzy_want)} fuzzy ids to remove; {cores} cores\n")
    print("| workload | tool | cores | s | docs/s | docs/s per core | peak RSS MiB | removed | precision | recall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['tool']} | {r['cores']} | {r['seconds']} | {r['docs_per_s']} | {r['docs_per_s_per_core']} | {r['peak_rss_mib']} | {r['removed']} | {r['precision']} | {r['recall']} |")
    (corpus / "bench.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
