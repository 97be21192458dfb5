#!/usr/bin/env python3
"""Regenerate the bundled quickstart input from text shipped in Debian packages.

    apt-get install python3-doc fortunes fortunes-de && python3 make_data.py

Documents: sections of the Python tutorial and FAQ (python3-doc, long prose), and English
and German fortunes (short, many below the pipeline's 50-word minimum). Some German texts
are stored in decomposed Unicode (NFD), as text scraped from macOS often is, so the
quickstart's unicode_normalize stage has real work to do. The output is deterministic.
"""
import gzip
import json
import pathlib
import random
import re
import unicodedata

HERE = pathlib.Path(__file__).parent
SOURCES = pathlib.Path("/usr/share/doc/python3-dev/html/_sources")
FORTUNES = pathlib.Path("/usr/share/games/fortunes")


def rst_sections(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    parts = re.split(r"\n(?=[^\n]+\n[=\-~^*]{3,}\n)", text)
    for i, part in enumerate(parts):
        body = re.sub(r"\n[=\-~^*]{3,}\n", "\n", part)
        body = re.sub(r"^\.\. .*$", "", body, flags=re.M)
        body = re.sub(r"\n{3,}", "\n\n", body).strip()
        if len(body) > 40:
            yield i, body


def fortunes(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    for i, f in enumerate(text.split("\n%\n")):
        f = f.strip()
        if f:
            yield i, f


def main():
    rng = random.Random(42)
    docs = []
    for sub in ["tutorial", "faq", "howto"]:
        for p in sorted((SOURCES / sub).glob("*.rst.txt")):
            for i, body in rst_sections(p):
                url = f"https://docs.python.org/3/{sub}/{p.name[:-8]}.html#{i}"
                docs.append({"text": body, "source": "python-docs", "url": url})
    for name in ["computers", "science", "literature", "wisdom"]:
        for i, f in fortunes(FORTUNES / name):
            docs.append({"text": f, "source": f"fortunes/{name}", "url": None})
    for name in ["computer", "wissenschaft", "literatur", "sprichworte"]:
        p = FORTUNES / "de" / name
        if p.exists():
            for i, f in fortunes(p):
                text = unicodedata.normalize("NFD", f) if i % 2 else f
                docs.append({"text": text, "source": f"fortunes-de/{name}", "url": None})
    rng.shuffle(docs)
    budget = 900_000
    picked, size = [], 0
    for d in docs:
        n = len(json.dumps(d, ensure_ascii=False).encode()) + 1
        if size + n > budget:
            continue
        picked.append(d)
        size += n
    for i, d in enumerate(picked):
        d["id"] = f"qs-{i:05d}"
    half = len(picked) // 2
    lines = [json.dumps({"id": d["id"], **{k: v for k, v in d.items() if k != "id"}}, ensure_ascii=False) + "\n" for d in picked]
    (HERE / "data" / "docs-000.jsonl").write_text("".join(lines[:half]), encoding="utf-8")
    with gzip.GzipFile(HERE / "data" / "docs-001.jsonl.gz", "wb", mtime=0) as f:
        f.write("".join(lines[half:]).encode("utf-8"))
    print(f"{len(picked)} documents, {size} bytes uncompressed")


if __name__ == "__main__":
    main()
