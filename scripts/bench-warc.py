#!/usr/bin/env python3
"""WARC -> text on one core: curator (the real binary: the `warc` source, then `justext` or
`main_text`, then JSONL) against NeMo Curator 1.4.0's Common Crawl extraction (its warcio
iterator, then jusText) and datatrove 0.10.1's `WarcReader -> Trafilatura -> JsonlWriter`, on
the same WARC files, back to back, alternating; and curator's peak RSS reading 1 to 64 files.

    scripts/bench-warc.py [--files 8] [--repeat 4] [--subset 2] [--rounds 3]

Data: examples/common-crawl/make_warc.py over Debian's HTML documentation (python3-doc,
debian-reference-en) and the planted pages, repeated, in Common Crawl's layout (request,
response, metadata per page, one gzip member each). Every side runs under `taskset -c 0` and
reads the same --subset files:
  - curator: `curator-host run` (target/dist, scripts/build-dist.sh); its `_summary.json`
    elapsed time, the whole run;
  - NeMo, same work: its iterator, `decode_html`, `JusTextExtractor.extract_text` with the
    English list (curator's stage is told the language; no cld2);
  - NeMo as shipped: its iterator and `CommonCrawlHTMLExtractor.extract` (cld2, then jusText);
  - datatrove as its users run it: `LocalPipelineExecutor` with one task (compared with
    curator's `main_text`, the trafilatura-like extractor).
Prints a Markdown table; ratios are paired per round.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "parity"))
from pyenv import ROOT, venv_python  # noqa: E402

WORK = os.path.join(ROOT, "target", "bench-warc")
PINS = ["justext==3.0.2", "lxml==6.1.3", "lxml_html_clean==0.4.6", "warcio==1.8.1", "pycld2==0.42", "charset_normalizer",
        "loguru", "fsspec", "trafilatura==2.3.1", "resiliparse", "datatrove==0.10.1", "faust-cchardet", "python-magic", "orjson"]

NEMO = r'''
import importlib.util, json, os, sys, time, types
base = importlib.util.find_spec("nemo_curator").submodule_search_locations[0]
# Stand-ins for package __init__ files that import Ray, Torch and friends.
for pkg in ["nemo_curator", "nemo_curator.stages", "nemo_curator.stages.text", "nemo_curator.stages.text.download",
            "nemo_curator.stages.text.download.common_crawl"]:
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

# datatrove as its users run it: WarcReader -> Trafilatura (its defaults: favour_precision,
# deduplicate, a 1 s timeout per page in its sandbox process) -> JsonlWriter, one task.
DATATROVE = r'''
import json, sys, time, os
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.writers import JsonlWriter
out, files = sys.argv[1], sys.argv[2:]
folder = os.path.dirname(files[0])
names = [os.path.basename(f) for f in files]
listing = os.path.join(out + "-paths.txt")
open(listing, "w").write("\n".join(names) + "\n")
t = time.perf_counter()
LocalPipelineExecutor(pipeline=[WarcReader(folder, paths_file=listing), Trafilatura(), JsonlWriter(out)],
                      tasks=1, workers=1, logging_dir=out + "-logs").run()
seconds = time.perf_counter() - t
import gzip, glob
kept = sum(1 for f in glob.glob(os.path.join(out, "*.jsonl.gz")) for _ in gzip.open(f))
print(json.dumps({"kept": kept, "seconds": seconds}))
'''


def debian_docs():
    """The pages the WARC files are made of: without Debian's HTML documentation, make_warc.py
    has only the 80 small planted pages, and every side's time would be mostly start-up."""
    dirs = ["/usr/share/doc/python3.11/html", "/usr/share/debian-reference"]
    if all(os.path.isdir(d) for d in dirs):
        return
    apt = [*(["sudo"] if shutil.which("sudo") else []), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]
    if shutil.which("apt-get"):
        if subprocess.call([*apt, "install", "-y", "-qq", "python3-doc", "debian-reference-en"]) != 0:
            subprocess.call([*apt, "update", "-qq"])
            subprocess.call([*apt, "install", "-y", "-qq", "python3-doc", "debian-reference-en"])
    missing = [d for d in dirs if not os.path.isdir(d)]
    if missing:
        sys.exit(f"bench-warc: {', '.join(missing)} missing: install the Debian packages python3-doc and debian-reference-en")


def peak_rss(cmd):
    """Peak RSS (MB) of one run of `cmd`, read by /usr/bin/time (its own process tree's maximum)."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-3000:])
    return int(r.stderr.strip().splitlines()[-1]) / 1024


def pipeline(name, sources, stage):
    p = os.path.join(WORK, f"{name}.yaml")
    paths = "".join(f"\n    - {x}" for x in sources)
    with open(p, "w") as f:
        # `isolation: process`, as examples/common-crawl/pipeline.yaml runs the extractor.
        f.write(f"source:\n  path:{paths}\nstages:\n  - plugin: {stage}\n    params: {{language: English}}\n    isolation: process\n"
                f"sink:\n  path: out-{name}\n  mode: overwrite\n")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=4)
    # Two files: curator's run on one (about 0.6 s) is short enough for a noisy machine's
    # pauses to move a round's ratio by half.
    ap.add_argument("--subset", type=int, default=2, help="files every side reads for the timed comparison")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rss-only", action="store_true", help="only the peak-RSS series")
    a = ap.parse_args()
    py = venv_python("bench-warc-venv", PINS, probe="import justext, warcio, pycld2, resiliparse, lxml_html_clean, datatrove, cchardet, magic, orjson")
    if subprocess.call([py, "-c", "import nemo_curator"], stderr=subprocess.DEVNULL) != 0:
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", "--no-deps", "nemo-curator==1.4.0"])
    debian_docs()
    data = os.path.join(WORK, "data")
    os.makedirs(WORK, exist_ok=True)
    marker = os.path.join(data, f".made-{a.files}x{a.repeat}")
    if not os.path.exists(marker):
        subprocess.run(["rm", "-rf", data], check=True)
        subprocess.check_call([py, os.path.join(ROOT, "examples/common-crawl/make_warc.py"), "--out", data, "--files", str(a.files), "--repeat", str(a.repeat)])
        open(marker, "w").close()
    files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.endswith(".warc.gz"))
    subset = files[: a.subset]
    host = os.path.join(ROOT, "target/dist/curator-host")
    plugins = os.path.join(ROOT, "target/dist/plugins")
    cmd = lambda p: ["taskset", "-c", "0", host, "run", p, "--plugins", plugins]
    if a.rss_only:
        return rss_series(files, cmd)
    ours = {stage: pipeline(f"subset-{stage}", subset, stage) for stage in ("justext", "main_text")}
    for p in ours.values():
        subprocess.run(cmd(p), capture_output=True, check=True)  # the plugins' compile cache
    times = {k: [] for k in ("justext", "main_text", "nemo_same", "nemo_shipped", "datatrove")}
    docs = kept = None
    kept_by = {}
    for _ in range(a.rounds):
        for stage, p in ours.items():
            r = subprocess.run(cmd(p), capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr[-3000:])
            summary = json.load(open(os.path.join(WORK, f"out-subset-{stage}", "_summary.json")))
            docs = summary["docs_in"]
            kept_by[stage] = summary["docs_out"]
            times[stage].append(summary["elapsed_s"])
        for mode in ("same", "shipped"):
            r = subprocess.run(["taskset", "-c", "0", py, "-c", NEMO, mode, *subset], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr[-3000:])
            res = json.loads(r.stdout.strip().splitlines()[-1])
            kept_by[f"nemo_{mode}"] = res["kept"]
            times[f"nemo_{mode}"].append(res["seconds"])
        out = os.path.join(WORK, "out-datatrove")
        subprocess.run(["rm", "-rf", out, out + "-logs"], check=True)
        r = subprocess.run(["taskset", "-c", "0", py, "-c", DATATROVE, out, *subset], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stderr[-3000:])
        res = json.loads(r.stdout.strip().splitlines()[-1])
        kept_by["datatrove"] = res["kept"]
        times["datatrove"].append(res["seconds"])
    mb = sum(os.path.getsize(f) for f in subset) / 1e6
    print(f"{len(subset)} WARC file(s), {mb:.0f} MB gzip, {docs:,} HTML responses (of {a.files} files made); one core (taskset -c 0); {a.rounds} rounds")
    print("curator's time is its whole run (process start, plugin load, read, extract, write JSONL); NeMo's and datatrove's")
    print("exclude interpreter start and imports. Ratio: their seconds / curator's, paired per round.\n")
    print("| run | kept | seconds | HTML docs/s | curator is |\n|---|---|---|---|---|")
    rate = lambda k: f"{docs / max(times[k]):,.0f}-{docs / min(times[k]):,.0f}"
    secs = lambda k: f"{min(times[k]):.2f}-{max(times[k]):.2f}"
    rows = [("curator: warc -> justext -> JSONL", "justext", None),
            ("NeMo 1.4.0: CommonCrawlWarcIterator + decode_html + JusTextExtractor (English list)", "nemo_same", "justext"),
            ("NeMo 1.4.0: CommonCrawlWarcIterator + CommonCrawlHTMLExtractor (cld2, then jusText)", "nemo_shipped", "justext"),
            ("curator: warc -> main_text -> JSONL", "main_text", None),
            ("datatrove 0.10.1: WarcReader -> Trafilatura -> JsonlWriter (1 task)", "datatrove", "main_text")]
    for label, k, vs in rows:
        ratio = ""
        if vs:
            rs = [t / o for t, o in zip(times[k], times[vs])]
            ratio = f"**{min(rs):.1f}-{max(rs):.1f}x faster** (vs curator {vs})"
        print(f"| {label} | {kept_by[k]:,} | {secs(k)} | {rate(k)} | {ratio} |")
    rss_series(files, cmd)


def rss_series(files, cmd):
    """curator's peak RSS reading 1 .. 8x the files (the made files linked again under other
    names): it rises until the pipeline's bounded queues are full, then stays."""
    rss = []
    for n in (1, len(files), 4 * len(files), 8 * len(files)):
        d = os.path.join(WORK, f"rss-{n}")
        if not os.path.isdir(d):
            os.makedirs(d)
            for i in range(n):
                os.symlink(files[i % len(files)], os.path.join(d, f"f{i:04d}.warc.gz"))
        rss.append((n, peak_rss(cmd(pipeline(f"rss-{n}", [d], "justext")))))
    print("\ncurator's peak RSS (process tree, /usr/bin/time), source -> justext -> JSONL, reading N files: "
          + ", ".join(f"{n}: {m:.0f} MB" for n, m in rss))


if __name__ == "__main__":
    main()
