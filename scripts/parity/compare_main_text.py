#!/usr/bin/env python3
"""curator's `main_text` (and `justext`) against trafilatura, by word overlap, page by page.

trafilatura runs with datatrove's settings (its `Trafilatura` extractor: favor_precision,
no comments, deduplicate, no images, no tables left out). Overlap is word-level F1: for the
multisets of words A (ours) and B (trafilatura's), 2|A∩B| / (|A|+|B|); 1.0 when both are
empty. Pages: the jusText parity set (Debian's Python manual and Debian Reference, the planted
pages). Prints the distribution and writes one line per page to target/compare-main-text.tsv.

    python3 scripts/parity/compare_main_text.py
"""
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from make_justext_reference import debian_pages  # noqa: E402
from pyenv import ROOT, venv_python  # noqa: E402

CODE = r'''
import json, sys
from trafilatura import extract
for line in sys.stdin:
    p = json.loads(line)
    t = extract(p["html"], favor_precision=True, include_comments=False, deduplicate=True, include_images=False) or ""
    print(json.dumps({"name": p["name"], "text": t}))
'''


def f1(a, b):
    ca, cb = collections.Counter(a.split()), collections.Counter(b.split())
    if not ca and not cb:
        return 1.0
    common = sum((ca & cb).values())
    return 2 * common / (sum(ca.values()) + sum(cb.values()))


def main():
    py = venv_python("trafilatura-venv", ["trafilatura==2.3.1", "lxml_html_clean"], probe="import trafilatura, lxml_html_clean")
    planted = [json.loads(l) for l in open(os.path.join(ROOT, "tests/parity/justext_planted.jsonl"), encoding="utf-8")]
    pages = [{"name": p["name"], "html": p["html"]} for p in debian_pages()] + planted
    stdin = "".join(json.dumps(p) + "\n" for p in pages).encode()
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "curator-html", "--example", "extract_pages"], cwd=ROOT, check=True)
    ours = subprocess.run([os.path.join(ROOT, "target/release/examples/extract_pages")], input=stdin, capture_output=True, check=True).stdout
    theirs = subprocess.run([py, "-c", CODE], input=stdin, capture_output=True, check=True).stdout
    ours = {r["name"]: r for r in map(json.loads, ours.decode().splitlines())}
    theirs = {r["name"]: r["text"] for r in map(json.loads, theirs.decode().splitlines())}
    rows = []
    for p in pages:
        o, t = ours[p["name"]], theirs[p["name"]]
        rows.append((p["name"], f1(o["main_text"], t), f1(o["justext"], t), len(o["main_text"].split()), len(t.split())))
    out = os.path.join(ROOT, "target", "compare-main-text.tsv")
    with open(out, "w") as f:
        f.write("page\tmain_text_f1\tjustext_f1\tmain_text_words\ttrafilatura_words\n")
        for r in rows:
            f.write(f"{r[0]}\t{r[1]:.3f}\t{r[2]:.3f}\t{r[3]}\t{r[4]}\n")
    for label, col in (("main_text", 1), ("justext", 2)):
        for group in ("python3.11-doc", "debian-reference", "planted", "all"):
            xs = sorted(r[col] for r in rows if group == "all" or r[0].startswith(group))
            if not xs:
                continue
            q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]
            print(f"{label:9} vs trafilatura, {group:16} {len(xs):4} pages: mean {sum(xs) / len(xs):.3f}, p10 {q(0.1):.3f}, "
                  f"median {q(0.5):.3f}, >= 0.8 on {sum(x >= 0.8 for x in xs) / len(xs):.0%}")
    print(f"per page: {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
