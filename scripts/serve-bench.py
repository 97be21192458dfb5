#!/usr/bin/env python3
"""The shards of a pipeline one after another, as processes of their own (`curator-host run
--shard I/N`, cold) and as requests to one `curator-host serve` (warm: compiled plugins, stage
instances and loaded models kept between shards), on the same input and the same machine.

    python3 scripts/serve-bench.py --curator target/release/curator-host --pipeline P.yaml \
        --shards 8 [--plugins DIR] [--workers W] [--rounds 2]

Rounds alternate the order (cold first, then warm first). The clock of a mode starts before
its first shard (the server's start included) and stops after its last; the input's files are
read from the page cache on both sides after a first untimed pass. Prints a table (per mode
and round: total, first shard, mean of the others) and whether the two modes' outputs are the
same files (merged manifests' checksums).
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def pipeline_copy(src, sink, name):
    """`src` with its sink's path replaced by `sink`, beside it (relative paths still hold)."""
    with open(src) as f:
        yaml = f.read()
    yaml, n = re.subn(r"(?m)^(sink:\n(?:  .*\n)*?  path: ).*$", lambda m: m.group(1) + sink, yaml)
    if n != 1:
        sys.exit(f"{src}: no `sink:` section with a `path:` to replace")
    path = os.path.join(os.path.dirname(os.path.abspath(src)), f".serve-bench-{name}.yaml")
    with open(path, "w") as f:
        f.write(yaml)
    return path


def merged(curator, out):
    subprocess.run([curator, "merge", out], check=True, capture_output=True)
    with open(os.path.join(out, "_manifest.json")) as f:
        return sorted((x["path"], x["checksum"]) for x in json.load(f)["files"])


def cold(curator, pipeline, shards, extra):
    times = []
    for i in range(shards):
        t = time.time()
        p = subprocess.run([curator, "run", pipeline, "--shard", f"{i}/{shards}"] + extra, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"cold shard {i}: exit {p.returncode}\n{p.stderr[-3000:]}")
        times.append(time.time() - t)
    return times


def request(sock, argv):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock)
        s.sendall((json.dumps({"argv": argv, "cwd": os.getcwd()}) + "\n").encode())
        return json.loads(s.makefile("rb").readline())


def warm(curator, pipeline, shards, extra, dir):
    sock = os.path.join(dir, "serve.sock")
    log = open(os.path.join(dir, "serve.log"), "w")
    t0 = time.time()
    server = subprocess.Popen([curator, "serve", "--socket", sock], stdout=log, stderr=log)
    try:
        while True:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(sock)
                break
            except OSError:
                if server.poll() is not None:
                    sys.exit(f"curator-host serve exited {server.returncode}")
                time.sleep(0.01)
        times = []
        for i in range(shards):
            t = time.time() if i else t0
            r = request(sock, ["run", pipeline, "--shard", f"{i}/{shards}"] + extra)
            if r["code"] != 0:
                sys.exit(f"warm shard {i}: exit {r['code']}\n{r['stderr'][-3000:]}")
            times.append(time.time() - t)
        return times
    finally:
        server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--curator", required=True)
    ap.add_argument("--pipeline", required=True)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--plugins", action="append", default=[])
    ap.add_argument("--workers", type=int)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    curator = os.path.abspath(a.curator)
    extra = [x for p in a.plugins for x in ("--plugins", os.path.abspath(p))]
    if a.workers:
        extra += ["--workers", str(a.workers)]
    dir = tempfile.mkdtemp(prefix="serve-bench-")
    copies = []
    try:
        # An untimed pass: plugins compiled into the cache, input in the page cache, GPU up.
        first = pipeline_copy(a.pipeline, os.path.join(dir, "untimed"), "untimed")
        copies.append(first)
        cold(curator, first, 1, extra)
        rows, outputs = [], {}
        for r in range(a.rounds):
            for mode in ("cold", "warm") if r % 2 == 0 else ("warm", "cold"):
                out = os.path.join(dir, f"{mode}-{r}")
                p = pipeline_copy(a.pipeline, out, f"{mode}-{r}")
                copies.append(p)
                t = time.time()
                times = cold(curator, p, a.shards, extra) if mode == "cold" else warm(curator, p, a.shards, extra, dir)
                total = time.time() - t
                rows.append((mode, r, total, times[0], sum(times[1:]) / max(1, len(times) - 1)))
                outputs.setdefault(mode, merged(curator, out))
        print(f"{a.pipeline}: {a.shards} shards one after another, {a.rounds} round(s)")
        print(f"{'mode':>5} {'round':>5} {'total s':>8} {'first s':>8} {'others s':>9}")
        for mode, r, total, first_s, rest in rows:
            print(f"{mode:>5} {r:>5} {total:>8.2f} {first_s:>8.2f} {rest:>9.3f}")
        c = [t for m, _, t, *_ in rows if m == "cold"]
        w = [t for m, _, t, *_ in rows if m == "warm"]
        print(f"cold / warm: {min(c) / max(w):.2f}-{max(c) / min(w):.2f}x (range over rounds)")
        print(f"same output files: {'yes' if outputs['cold'] == outputs['warm'] else 'NO'}")
    finally:
        for p in copies:
            os.remove(p)
        shutil.rmtree(dir, ignore_errors=True)


if __name__ == "__main__":
    main()
