#!/usr/bin/env python3
"""lxml's trees (libxml2's HTML parser, the one jusText, NeMo Curator and trafilatura run) of
Debian's HTML documentation, the planted pages and generated tag soup (misnested, unclosed,
stray and self-closing tags, tables, forms, raw-text elements, comments, seeded), written for
curator-html's tree parity test (`libs/html/tests/tree_parity.rs`), which builds its own
trees of the same pages and compares them element for element and text for text.

    python3 scripts/parity/compare_tree.py OUT.jsonl [--soup 3000] [--seed 1]

Writes one line per page: {"name", "html", "events"}, an event being "+tag", "-tag" or the
text of a text node (text of HTML whitespace only, and comments, left out). Needs lxml 6.1.3
(libxml2 2.14.6) in this Python.
"""
import argparse
import json
import os
import random

import lxml.html

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WS = " \t\n\r\x0c"
TAGS = ["html", "head", "body", "title", "p", "div", "span", "a", "b", "i", "u", "ul", "ol", "li", "table", "tbody", "thead", "tr",
        "td", "th", "caption", "h1", "h2", "h3", "br", "img", "hr", "script", "style", "form", "input", "select", "option", "optgroup",
        "pre", "dl", "dt", "dd", "font", "center", "noscript", "iframe", "textarea", "section", "article", "nav", "header", "meta",
        "link", "blockquote", "address", "fieldset", "legend", "small", "strong", "em", "code", "xmp", "col", "colgroup", "label"]
WORDS = ["alpha", "beta", "gamma", "delta", "x", "the end", "a &amp; b", "1 &lt; 2", "caf\u00e9", "\u00a0"]


def events(el, out):
    if isinstance(el.tag, str):
        out.append("+" + el.tag)
        if el.text and el.text.strip(WS):
            out.append(el.text)
        for c in el:
            events(c, out)
        out.append("-" + el.tag)
    if el.tail and el.tail.strip(WS):
        out.append(el.tail)


def lxml_events(html):
    """The document's events; None when lxml refuses it (an empty document)."""
    try:
        try:
            root = lxml.html.document_fromstring(html)
        except ValueError:  # an XML declaration naming an encoding: bytes, as jusText does then
            root = lxml.html.document_fromstring(html.encode("utf-8"))
    except lxml.etree.ParserError:
        return None
    out = []
    node = root
    while node.getprevious() is not None:
        node = node.getprevious()
    while node is not None:
        events(node, out)
        node = node.getnext()
    return out


def soup(rng):
    parts = ["<!DOCTYPE html>"] if rng.random() < 0.5 else []
    for _ in range(rng.randint(5, 60)):
        r = rng.random()
        t = rng.choice(TAGS)
        if r < 0.4:
            attrs = "".join(f' {rng.choice(["class", "id", "href", "rel"])}="{rng.choice(WORDS)}"' for _ in range(rng.randint(0, 2)))
            parts.append(f"<{t}{attrs}{'/' if rng.random() < 0.1 else ''}>")
        elif r < 0.65:
            parts.append(f"</{t}>")
        elif r < 0.95:
            parts.append(rng.choice(WORDS) + rng.choice(["", " ", "\n"]))
        else:
            parts.append("<!-- c -->")
    return "".join(parts)


def pages(n_soup, seed):
    for root in ["/usr/share/doc/python3.11/html", "/usr/share/debian-reference"]:
        for d, _, fs in sorted(os.walk(root)):
            for f in sorted(fs):
                if f.endswith((".html", ".htm")):
                    with open(os.path.join(d, f), "rb") as fh:
                        yield os.path.join(d, f), fh.read().decode("utf-8", "replace")
    with open(os.path.join(ROOT, "tests", "parity", "justext_planted.jsonl")) as fh:
        for line in fh:
            r = json.loads(line)
            yield r["name"], r["html"]
    rng = random.Random(seed)
    for i in range(n_soup):
        yield f"soup-{i}", soup(rng)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--soup", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open(args.out, "w") as out:
        for name, html in pages(args.soup, args.seed):
            ev = lxml_events(html)
            if ev is not None:
                out.write(json.dumps({"name": name, "html": html, "events": ev}) + "\n")


if __name__ == "__main__":
    main()
