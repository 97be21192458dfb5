#!/usr/bin/env python3
"""Build tests/parity/tokenizer_sample.jsonl.gz: real documents in several languages for the
WordPiece differential test (libs/encoder/tests/wordpiece_differential.rs), which runs
Hugging Face `tokenizers` and ours on every document and expects identical ids.

Sources (Debian packages, installed offline):
- the Debian Reference in en, de, fr, es, it, pt, ja, zh-cn (debian-reference-*): the
  paragraphs, list items and literal blocks of its HTML, grouped 1-6 to a document;
- fortunes in en, de, es, it, ru, pl (fortunes, fortunes-*), one fortune to a document.

    apt-get install debian-reference-{en,de,fr,es,it,pt,ja,zh-cn} fortunes fortunes-{de,es,it,ru,pl}
    python3 scripts/parity/make_tokenizer_sample.py [--per-language N]

Deterministic (seeded). Texts keep their markup-free content as the HTML holds it: entities
unescaped, whitespace and line breaks of literal blocks kept.
"""
import argparse
import glob
import gzip
import html
import json
import os
import random
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests/parity/tokenizer_sample.jsonl.gz")
REFERENCE = "/usr/share/doc/debian-reference-common/docs"
FORTUNES = "/usr/share/games/fortunes"
BLOCK = re.compile(r"<(p|li|pre|td|dt|h[1-4])\b[^>]*>(.*?)</\1>", re.S | re.I)
TAG = re.compile(r"<[^>]+>")


def reference_paragraphs(lang):
    paras = []
    for path in sorted(glob.glob(f"{REFERENCE}/*.{lang}.html")):
        with open(path, encoding="utf-8", errors="strict") as f:
            page = f.read()
        for kind, body in BLOCK.findall(page):
            text = html.unescape(TAG.sub("", body))
            if kind.lower() != "pre":
                text = re.sub(r"[ \t\r\n]+", " ", text).strip()
            if len(text) >= 20:
                paras.append(text)
    return paras


def fortunes(folder, suffix_ok):
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        name = os.path.basename(path)
        if os.path.isdir(path) or name.endswith(".dat") or not suffix_ok(name):
            continue
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        docs += [d.strip("\n") for d in re.split(r"\n%\n", text) if len(d.strip()) >= 20]
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-language", type=int, default=900, help="documents per source and language at most")
    args = ap.parse_args()
    rng = random.Random(20261128)
    out = []
    for lang in ["en", "de", "fr", "es", "it", "pt", "ja", "zh-cn"]:
        paras = reference_paragraphs(lang)
        docs, i = [], 0
        while i < len(paras):
            n = rng.randint(1, 6)
            docs.append("\n\n".join(paras[i : i + n]))
            i += n
        rng.shuffle(docs)
        out += [(f"debian-reference.{lang}", d) for d in docs[: args.per_language]]
    english = fortunes(FORTUNES, lambda n: "." not in n or n.endswith(".u8"))
    # A file and its .u8 twin hold the same fortunes.
    english = list(dict.fromkeys(english))
    rng.shuffle(english)
    out += [("fortunes.en", d) for d in english[: 2 * args.per_language]]
    for lang in ["de", "es", "it", "ru", "pl"]:
        docs = list(dict.fromkeys(fortunes(os.path.join(FORTUNES, lang), lambda n: True)))
        rng.shuffle(docs)
        out += [(f"fortunes.{lang}", d) for d in docs[: args.per_language]]
    with gzip.open(OUT, "wt", encoding="utf-8", compresslevel=9) as f:
        for k, (source, text) in enumerate(out):
            f.write(json.dumps({"id": f"{source}.{k}", "text": text}, ensure_ascii=False) + "\n")
    by_source = {}
    for source, _ in out:
        by_source[source] = by_source.get(source, 0) + 1
    print(f"{len(out)} documents, {sum(len(t.encode()) for _, t in out) / 1e6:.1f} MB -> {OUT}")
    for s, n in sorted(by_source.items()):
        print(f"  {s}: {n}")


if __name__ == "__main__":
    main()
