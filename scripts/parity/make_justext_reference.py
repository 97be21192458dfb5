#!/usr/bin/env python3
"""jusText's kept paragraphs on real and planted pages, by the Python `justext` package called
as NeMo Curator's Common Crawl extraction calls it, for curator-html's parity test, which runs
this script at test time (so the reference is made from the pages this machine has, whatever
version of Debian's packages holds them, by jusText at the pinned version below).

Pages:
  - Debian's HTML documentation: the Python 3.11 manual (python3.11-doc, ~530 pages) and the
    Debian Reference (debian-reference-en): real, well-formed, navigation-heavy pages;
  - planted pages (tests/parity/justext_planted.jsonl, written here from a seed): an article
    of real prose wrapped in generated boilerplate (menus, link lists, cookie banners,
    footers with a copyright sign, sidebars, forms, scripts, comments, tables, <br><br>).

Writes OUT (default target/tmp/justext_reference.jsonl): per page its name, the file it was
read from (Debian's pages; none for planted ones), the number of paragraphs and the FNV-1a 64
hash of each kept paragraph's text (English stop words, jusText's and NeMo Curator's default
parameters).

    apt-get install python3-doc debian-reference-en
    python3 scripts/parity/make_justext_reference.py [OUT] [--write-planted]

--write-planted first writes tests/parity/justext_planted.jsonl again from its seed (the
planted pages are ours, so they are committed; the Debian pages are not).
"""
import glob
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from pyenv import ROOT, venv_python  # noqa: E402

PINS = ["justext==3.0.2", "lxml==6.1.3", "lxml_html_clean==0.4.6"]
ROOTS = {"python3.11-doc": "/usr/share/doc/python3.11/html", "debian-reference": "/usr/share/debian-reference"}
PLANTED = os.path.join(ROOT, "tests", "parity", "justext_planted.jsonl")
OUT = os.path.join(ROOT, "target", "tmp", "justext_reference.jsonl")

CODE = r'''
import json, sys, justext
sl = justext.get_stoplist("English")
def fnv(s):
    h = 0xcbf29ce484222325
    for b in s.encode("utf-8"):
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h
def nemo_justext(html):
    # The calls of NeMo Curator's JusTextExtractor.extract_text (nemo_curator 1.x), which
    # differ from justext.justext() in one step: every paragraph's class is set to its
    # context-free class *before* the revision, so the first "good headings" pass sees the
    # classes of the paragraphs after a heading (justext.justext leaves them empty there).
    import lxml.sax
    dom = justext.core.preprocessor(justext.core.html_to_dom(html))
    handler = justext.core.ParagraphMaker()
    lxml.sax.saxify(dom, handler)
    ps = handler.paragraphs
    justext.core.classify_paragraphs(ps, sl)
    for p in ps:
        p.class_type = p.cf_class
    justext.core.revise_paragraph_classification(ps)
    return ps
for line in sys.stdin:
    page = json.loads(line)
    ps = nemo_justext(page["html"])
    print(json.dumps({"page": page["name"], "path": page.get("path"), "paragraphs": len(ps),
                      "kept": [fnv(p.text) for p in ps if not p.is_boilerplate]}))
'''


def debian_pages():
    for root_name, root in ROOTS.items():
        files = sorted(glob.glob(os.path.join(root, "**", "*.html"), recursive=True))
        if root_name == "debian-reference":
            files = [f for f in files if f.endswith(".en.html")]
        for f in files:
            data = open(f, "rb").read()
            yield {"name": f"{root_name}/{os.path.relpath(f, root)}", "path": f, "html": data.decode("utf-8", "replace")}


PROSE = [
    "The river rises in the hills to the north of the town and flows for about forty miles before it reaches the sea.",
    "In the early years of the century the mill was the largest employer in the valley, and most of the families who lived there had at least one member who worked in it.",
    "When the railway arrived in 1862, the town grew quickly, and by the end of the decade its population had doubled.",
    "The new school was built on land that had been given by one of the old families, on the condition that it would always be open to children from every part of the parish.",
    "It is not clear why the bridge was never finished, but the accounts that survive suggest that the money simply ran out before the second arch could be built.",
    "Most of the houses in the old quarter were rebuilt after the fire, although a few of them still have the stone cellars that were there before it.",
    "Visitors who come in the spring can walk along the path by the water and see the birds that return to the marshes every year.",
    "The library holds a collection of letters that were written by the people who lived here during the war, and many of them have been published in a small book.",
    "There is a market in the square on every Saturday morning, where farmers from the villages sell what they have grown and made.",
    "After the harbour was closed to the large ships, the fishermen moved their boats to the smaller bay on the other side of the point.",
    "Die Stadt liegt an einem Fluss, der in den Bergen entspringt und nach vielen Kilometern in das Meer fließt.",
    "Le village est connu pour son église, qui a été construite au douzième siècle et qui est encore utilisée aujourd'hui.",
]
MENU = ["Home", "News", "About us", "Products", "Services", "Contact", "Blog", "Careers", "Support", "Events", "Shop", "Login"]


def planted_pages(n=80, seed=20261128):
    rng = random.Random(seed)

    def links(k, sep=" "):
        return sep.join(f'<a href="/{w.lower().replace(" ", "-")}">{w}</a>' for w in rng.sample(MENU, k))

    pages = []
    for i in range(n):
        parts = ["<!DOCTYPE html>" if rng.random() < 0.8 else "", "<html><head><title>Page %d</title>" % i,
                 "<script>var x = '<p>not text</p>';</script><style>p { color: red }</style></head><body>"]
        parts.append(rng.choice([f"<div class=nav>{links(6, ' | ')}</div>", f"<ul>{''.join('<li>' + links(1) + '</li>' for _ in range(5))}</ul>",
                                 f"<nav>{links(4)}</nav>"]))
        if rng.random() < 0.4:
            parts.append("<div id=cookie>We use cookies to improve your experience. <button>Accept</button> <a href=/privacy>Privacy</a></div>")
        heading = rng.choice(["h1", "h2", "h3"])
        parts.append(f"<{heading}>{rng.choice(['A short history', 'The town', 'Notes', 'Around the bay'])}</{heading}>")
        body = []
        for _ in range(rng.randint(1, 6)):
            sentences = rng.sample(PROSE, rng.randint(1, 4))
            shape = rng.random()
            text = " ".join(sentences)
            if shape < 0.5:
                body.append(f"<p>{text}</p>")
            elif shape < 0.65:
                body.append(f"<div>{text.replace('. ', '.<br><br>', 1)}</div>")
            elif shape < 0.75:
                body.append(f"<p>{text} <a href=/more>Read more</a></p>")
            elif shape < 0.85:
                body.append(f"<blockquote>{text}<!-- note --> </blockquote>")
            else:
                body.append(f"<table><tr><td>{text}</td><td>{links(2)}</td></tr></table>")
            if rng.random() < 0.2:
                body.append(f"<p><em>{rng.choice(['Figure 1.', 'Updated.', 'See also:'])}</em></p>")
        parts.extend(body)
        if rng.random() < 0.5:
            parts.append(f"<form action=/s><input name=q> <select><option>All</option><option>News</option></select> Search the site</form>")
        parts.append(rng.choice([f"<aside><h4>Related</h4>{links(3, '<br>')}</aside>", f"<div class=side>{links(5)}</div>", ""]))
        parts.append(f"<footer><p>Copyright &copy; {2000 + i % 25} Example Town Council. {links(3)}</p></footer></body></html>")
        html = "\n".join(parts)
        pages.append({"name": f"planted/{i:03d}.html", "html": html})
    return pages


def main():
    args = [a for a in sys.argv[1:] if a != "--write-planted"]
    out_path = os.path.abspath(args[0]) if args else OUT
    if "--write-planted" in sys.argv[1:]:
        with open(PLANTED, "w") as f:
            for p in planted_pages():
                f.write(json.dumps({"name": p["name"], "html": p["html"]}) + "\n")
    with open(PLANTED) as f:
        planted = [json.loads(line) for line in f if line.strip()]
    py = venv_python("justext-venv", PINS, probe="import justext, lxml_html_clean")
    pages = list(debian_pages()) + planted
    stdin = "".join(json.dumps(p) + "\n" for p in pages)
    out = subprocess.run([py, "-c", CODE], input=stdin.encode(), capture_output=True, check=True).stdout
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    part = f"{out_path}.{os.getpid()}"
    with open(part, "wb") as f:
        f.write(out)
    os.replace(part, out_path)
    print(f"{len(pages)} pages ({len(planted)} planted) -> {out_path}")


if __name__ == "__main__":
    main()
