#!/usr/bin/env python3
"""WARC -> text, docs/s on one core: curator (the `warc` source and the `justext` stage, the
real binary, reading and writing included) against NeMo Curator 1.4.0's Common Crawl
extraction (its `CommonCrawlWarcIterator` over warcio, then jusText), on the same WARC files,
back to back; and curator's peak RSS reading 1 file against reading all of them.

    scripts/bench-warc.py [--files 8] [--repeat 4] [--nemo-files 1] [--rounds 3]

Data: examples/common-crawl/make_warc.py with Debian's HTML documentation (python3-doc,
debian-reference-en) and the planted pages, repeated, in Common Crawl's layout (request,
response, metadata per page, one gzip member each). Every side runs under `taskset -c 0`:
  - curator: `curator-host run` (target/dist, built by scripts/build-dist.sh), source -> justext
    (English list) -> JSONL; docs/s over the run's wall time (`_summary.json`), best of --rounds;
  - NeMo, same work: its iterator, its `decode_html`, its `JusTextExtractor.extract_text` with
    the English list (no language detection: curator's stage is told the language);
  - NeMo as shipped: its iterator and `CommonCrawlHTMLExtractor.extract` (cld2 language
    detection, then jusText with that language's list).
NeMo reads --nemo-files of the files (its rate is per record); curator reads them all.
Prints a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "parity"))
from pyenv import ROOT, venv_python  # noqa: E402

WORK = os.path.join(ROOT, "target", "bench-warc")
PINS = ["justext==3.0.2", "lxml==6.1.3", "lxml_html_clean==0.4.6", "warcio==1.8.1", "pycld2==0.42", "charset_normalizer",
        "loguru", "fsspec", "trafilatura==2.3.1", "resiliparse"]

NEMO = r'''
import importlib.util, json, os, sys, time, types
base = importlib.util.find_spec("nemo_curator").submodule_search_locations[0]
# Stand-ins for package __init__ files that import Ray, Torch and friends.
for pkg in ["nemo_curator", "nemo_curator.stages", "nemo_curator.stages.text", "nemo_curator.stages.text.download"]:
    m = types.ModuleType(pkg); m.__path__ = [os.path.join(base, *pkg.split(".")[1:])]; sys.modules[pkg] = m
class DocumentIterator: pass
class DocumentExtractor:
    def __init__(self): pass
sys.modules["nemo_curator.stages.text.download"].DocumentIterator = DocumentIterator
sys.modules["nemo_curator.stages.text.download"].DocumentExtractor = DocumentExtractor
from nemo_curator.stages.text.download.common_crawl.warc_iterator import CommonCrawlWarcIterator
from nemo_curator.stages.text.download.common_crawl.extract import CommonCrawlHTMLExtractor
from nemo_curator.stages.text.download.html_extractors.justext import JusTextExtractor
from nemo_curator.stages.text.download.utils import decode_html
import justext
from loguru import logger
logger.remove()
mode, files = sys.argv[1], sys.argv[2:]
it = CommonCrawlWarcIterator()
shipped = CommonCrawlHTMLExtractor(algorithm="justext")
alg, english = JusTextExtractor(), justext.get_stoplist("English")
t = time.perf_counter(); n = kept = 0
for f in files:
    for rec in it.iterate(f):
        n += 1
        if mode == "shipped":
            kept += shipped.extract(rec) is not None
        else:
            html = decode_html(rec["content"])
            text = alg.extract_text(html, english, "ENGLISH") if html is not None else None
            kept += bool(text)
print(json.dumps({"records": n, "kept": kept, "seconds": time.perf_counter() - t}))
'''


def peak_rss(cmd):
    """Peak RSS (MB) of one run of `cmd`, read by /usr/bin/time (its own process tree's maximum)."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-3000:])
    return int(r.stderr.strip().splitlines()[-1]) / 1024


def pipeline(name, source):
    p = os.path.join(WORK, f"{name}.yaml")
    with open(p, "w") as f:
        f.write(f"source:\n  path: {source}\nstages:\n  - plugin: justext\n    params: {{language: English}}\n"
                f"sink:\n  path: out-{name}\n  mode: overwrite\n")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--nemo-files", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    py = venv_python("bench-warc-venv", PINS, probe="import justext, warcio, pycld2, resiliparse, lxml_html_clean")
    if subprocess.call([py, "-c", "import nemo_curator"], stderr=subprocess.DEVNULL) != 0:
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", "--no-deps", "nemo-curator==1.4.0"])
    data = os.path.join(WORK, "data")
    os.makedirs(WORK, exist_ok=True)
    marker = os.path.join(data, f".made-{a.files}x{a.repeat}")
    if not os.path.exists(marker):
        subprocess.run(["rm", "-rf", data], check=True)
        subprocess.check_call([py, os.path.join(ROOT, "examples/common-crawl/make_warc.py"), "--out", data, "--files", str(a.files), "--repeat", str(a.repeat)])
        open(marker, "w").close()
    files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.endswith(".warc.gz"))
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    host = os.path.join(ROOT, "target/dist/curator-host")
    plugins = os.path.join(ROOT, "target/dist/plugins")
    all_p, one_p = pipeline("all", data), pipeline("one", files[0])
    cmd = lambda p: ["taskset", "-c", "0", host, "run", p, "--plugins", plugins]
    subprocess.run(cmd(one_p), capture_output=True, check=True)  # the plugin's compile cache
    ours, nemo_same, nemo_shipped = [], [], []
    nemo_files = files[: a.nemo_files]
    for _ in range(a.rounds):
        subprocess.run(cmd(all_p), capture_output=True, check=True)
        s = json.load(open(os.path.join(WORK, "out-all", "_summary.json")))
        ours.append((s["docs_in"], s["docs_out"], s["elapsed_s"]))
        for mode, into in (("same", nemo_same), ("shipped", nemo_shipped)):
            r = subprocess.run(["taskset", "-c", "0", py, "-c", NEMO, mode, *nemo_files], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr[-3000:])
            into.append(json.loads(r.stdout.strip().splitlines()[-1]))
    rss_one, rss_all = peak_rss(cmd(one_p)), peak_rss(cmd(all_p))
    rate = [d / t for d, _, t in ours]
    same = [r["records"] / r["seconds"] for r in nemo_same]
    shipped = [r["records"] / r["seconds"] for r in nemo_shipped]
    print(f"{len(files)} WARC files, {mb:.0f} MB gzip, {ours[0][0]:,} HTML responses; one core (taskset -c 0); {a.rounds} rounds\n")
    print("| run | records | kept | docs/s (range over rounds) | curator vs it (paired per round) |\n|---|---|---|---|---|")
    print(f"| curator: warc source -> justext -> JSONL, whole run | {ours[0][0]:,} | {ours[0][1]:,} | {min(rate):,.0f}-{max(rate):,.0f} | |")
    for label, runs, r in (("NeMo 1.4.0: iterator + decode_html + JusTextExtractor (English list)", nemo_same, same),
                           ("NeMo 1.4.0: iterator + CommonCrawlHTMLExtractor.extract (cld2, then jusText)", nemo_shipped, shipped)):
        ratios = [x / y for x, y in zip(rate, r)]
        print(f"| {label} | {runs[0]['records']:,} | {runs[0]['kept']:,} | {min(r):,.1f}-{max(r):,.1f} | **{min(ratios):.1f}-{max(ratios):.1f}x** |")
    print(f"\ncurator's peak RSS (process tree, /usr/bin/time): 1 file {rss_one:.0f} MB, {len(files)} files {rss_all:.0f} MB")


if __name__ == "__main__":
    main()
