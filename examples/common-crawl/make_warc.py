#!/usr/bin/env python3
"""Build a Common Crawl-shaped WARC from local HTML pages, with the `warcio` package (the
library NeMo Curator reads WARC files with): per page a `request`, a `response` (HTTP 200,
text/html) and a `metadata` record, each its own gzip member, as Common Crawl lays them out;
plus records a crawl holds that are not pages (a robots.txt, a 404, an image). Some pages
are written twice under another URL, so a dedup step has copies to find.

    python3 examples/common-crawl/make_warc.py                 # the example's data/
    python3 examples/common-crawl/make_warc.py --out DIR --files 4 --repeat 8 [HTML ...]

Pages: the HTML files and directories given, else the planted pages of the jusText parity test
(tests/parity/justext_planted.jsonl) and Debian's HTML documentation where it is installed
(python3-doc, debian-reference-en). warcio is installed with pip if missing.
"""
import argparse
import glob
import io
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEBIAN = ["/usr/share/doc/python3.11/html", "/usr/share/debian-reference"]

try:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "warcio"])
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter


def pages(sources):
    """(url, html bytes) of every page."""
    out = []
    if not sources:
        with open(os.path.join(ROOT, "tests/parity/justext_planted.jsonl"), encoding="utf-8") as f:
            for line in f:
                p = json.loads(line)
                out.append((f"http://town.example/{p['name']}", p["html"].encode("utf-8")))
        sources = [d for d in DEBIAN if os.path.isdir(d)]
    for s in sources:
        files = sorted(glob.glob(os.path.join(s, "**", "*.html"), recursive=True)) if os.path.isdir(s) else [s]
        for f in files:
            rel = os.path.relpath(f, s if os.path.isdir(s) else os.path.dirname(f))
            out.append((f"http://{os.path.basename(s.rstrip('/')) or 'local'}.example/{rel}", open(f, "rb").read()))
    return out


def write_page(w, url, body, status="200 OK", content_type="text/html; charset=utf-8"):
    host = url.split("/")[2]
    req = StatusAndHeaders(f"GET /{url.split('/', 3)[-1]} HTTP/1.1", [("Host", host), ("User-Agent", "curator-example")], is_http_request=True)
    w.write_record(w.create_warc_record(url, "request", payload=io.BytesIO(b""), http_headers=req))
    headers = StatusAndHeaders(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
    w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))
    meta = w.create_warc_record(url, "metadata", payload=io.BytesIO(b"fetchTimeMs: 120\r\n"), warc_content_type="application/warc-fields")
    w.write_record(meta)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sources", nargs="*", help="HTML files or directories (default: see above)")
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    ap.add_argument("--files", type=int, default=2, help="WARC files to spread the pages over")
    ap.add_argument("--repeat", type=int, default=1, help="write every page this many times (each under its own URL)")
    ap.add_argument("--copies", type=float, default=0.05, help="share of pages also written under a second URL")
    a = ap.parse_args()
    rng = random.Random(7)
    all_pages = pages(a.sources)
    os.makedirs(a.out, exist_ok=True)
    writers = []
    for i in range(a.files):
        f = open(os.path.join(a.out, f"CC-MAIN-example-{i:05d}.warc.gz"), "wb")
        writers.append((f, WARCWriter(f, gzip=True)))
    n = 0
    for r in range(a.repeat):
        for url, body in all_pages:
            u = url if r == 0 else f"{url}?r={r}"
            _, w = writers[n % a.files]
            write_page(w, u, body)
            if rng.random() < a.copies:
                write_page(w, u.replace(".example/", ".example/mirror/"), body)
            if n % 50 == 0:
                host = u.split("/")[2]
                write_page(w, f"http://{host}/robots.txt", b"User-agent: *\nDisallow:\n", content_type="text/plain")
                write_page(w, f"http://{host}/missing", b"<html><body>Not found</body></html>", status="404 Not Found")
                write_page(w, f"http://{host}/logo.png", b"\x89PNG\r\n\x1a\n", content_type="image/png")
            n += 1
    for f, _ in writers:
        f.close()
    size = sum(os.path.getsize(f.name) for f, _ in writers)
    print(f"{n} pages ({len(all_pages)} distinct) in {a.files} WARC files, {size / 1e6:.1f} MB -> {a.out}")


if __name__ == "__main__":
    main()
