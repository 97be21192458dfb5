#!/usr/bin/env python3
"""Served models, one machine: `curator-host run` with a `services:` llama.cpp server and
`llm_generate`, against a Python client driving the same server with the same requests at the
same concurrency (a thread pool posting /v1/chat/completions, as vLLM's benchmark_serving
does over HTTP). Both clocks include starting the server and waiting until it answers, every
request, and stopping it; the cache is off on our side. Alternated rounds; completion tokens
per second and wall seconds.

    python3 scripts/bench-served.py [--host target/release/curator-host] [--plugins DIR]
        [--docs 400] [--max-tokens 32] [--concurrency 8] [--rounds 3]

Needs `pip install 'llama-cpp-python[server]' gguf` (the tiny model is made with
scripts/models/tiny_gguf.py).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_cmd(model: str, port: int) -> list:
    return [sys.executable, "-m", "llama_cpp.server", "--model", model, "--port", str(port), "--n_ctx", "4096", "--n_threads", "1"]


def baseline(model, texts, a) -> tuple:
    port = free_port()
    t0 = time.perf_counter()
    srv = subprocess.Popen(server_cmd(model, port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2).read()
            break
        except Exception:
            time.sleep(0.1)

    def ask(text):
        body = {"model": model, "messages": [{"role": "user", "content": "Rewrite this: " + text}],
                "max_tokens": a.max_tokens, "temperature": 0.0, "seed": 7}
        req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(req, timeout=600).read())["usage"]["completion_tokens"]

    with ThreadPoolExecutor(a.concurrency) as pool:
        tokens = sum(pool.map(ask, texts))
    srv.terminate()
    srv.wait()
    return time.perf_counter() - t0, tokens


def ours(model, inp, out, a) -> tuple:
    yaml = f"""services:
  llm:
    command: {' '.join(server_cmd(model, 0)).replace('--port 0', '--port {port}')}
    resources: {{cpus: 1}}
source: {{path: {inp}}}
stages:
  - plugin: llm_generate
    service: llm
    params: {{prompt: "Rewrite this: {{text}}", max_tokens: {a.max_tokens}, temperature: 0.0, seed: 7, cache: false, initial_in_flight: {a.concurrency}, max_in_flight: {a.concurrency}}}
    batch_size: {a.docs}
sink: {{path: {out}, mode: overwrite}}
"""
    p = os.path.join(os.path.dirname(inp), "pipeline.yaml")
    open(p, "w").write(yaml)
    t0 = time.perf_counter()
    subprocess.run([a.host, "run", p, "--plugins", a.plugins, "--workers", "1"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    tokens = sum(json.loads(l)["llm_completion_tokens"] for l in open(os.path.join(out, "in.jsonl")))
    return wall, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default=os.path.join(ROOT, "target/release/curator-host"))
    ap.add_argument("--plugins", default=os.path.join(ROOT, "target/native/llm-plugins"))
    ap.add_argument("--docs", type=int, default=400)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-served-")
    model = os.path.join(d, "tiny.gguf")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts/models/tiny_gguf.py"), model], check=True)
    texts = [f"Document {i}: " + " ".join(f"word{j % 97}" for j in range(20 + (i * 37) % 200)) for i in range(a.docs)]
    inp = os.path.join(d, "in.jsonl")
    with open(inp, "w") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": str(i), "text": t}) + "\n")
    rows = {"python client": [], "curator-host": []}
    for r in range(a.rounds):
        rows["python client"].append(baseline(model, texts, a))
        rows["curator-host"].append(ours(model, inp, os.path.join(d, "out"), a))
    print(f"{a.docs} documents, max_tokens {a.max_tokens}, concurrency {a.concurrency}, {a.rounds} alternated rounds")
    print("| run | wall s (min–max) | completion tokens | tokens/s (best) |")
    print("|---|---|---|---|")
    for name, v in rows.items():
        walls = [w for w, _ in v]
        print(f"| {name} | {min(walls):.2f}–{max(walls):.2f} | {v[0][1]} | {v[0][1] / min(walls):.0f} |")


if __name__ == "__main__":
    main()
