#!/usr/bin/env python3
"""A real-text corpus with planted duplicates, for dedup benchmarks.

    apt-get install python3-doc fortunes fortunes-de manpages-de manpages-fr manpages-es
    python3 scripts/dedup/make-corpus.py OUT_DIR [--docs 120000] [--shards 8] [--scale 1]
        [--lengths uniform|tail] [--format jsonl|jsonl.zst|parquet]

Base documents are real text from Debian packages: sections of the Python documentation,
every installed man page (English, German, French, Spanish, …; groff markup stripped),
and fortunes (grouped), cut into documents of 60-300 words (`--words`). Then copies are planted, as a crawl has them:

  * exact copies (10 % of the base documents get one),
  * near-duplicates: words replaced until the word 5-gram Jaccard with the original is
    drawn from [0.80, 0.98] (10 %),
  * near-misses: the same edits down to Jaccard [0.55, 0.78] (5 %),
  * chains A ~ B ~ C (3 %).

`--lengths tail` cuts documents to a long tail of lengths instead (log-normal around the
low end of `--words`, up to 20 times its high end), as crawls have them. Everything is
shuffled into `--shards` files under OUT_DIR/data/ with a fixed seed: JSONL, JSONL compressed
with zstd (`--format jsonl.zst`, the `zstd` tool, level 3) or Snappy Parquet (pyarrow);
OUT_DIR/planted.json says what was planted. `--languages en` keeps English sources only (the
Python documentation and the untranslated man pages), for the same benchmark on English text. `--scale K` repeats the corpus K times with fresh ids (for memory-flatness runs:
every copy is an exact duplicate of scale 1). Deterministic.
"""
import argparse
import gzip
import json
import pathlib
import random
import re
import subprocess

WORD = re.compile(r"[^\W_]+")


def shingles(text, n=5):
    w = [x.lower() for x in WORD.findall(text)]
    if not w:
        return set()
    if len(w) <= n:
        return {" ".join(w)}
    return {" ".join(w[i:i + n]) for i in range(len(w) - n + 1)}


def jaccard(a, b):
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def python_docs():
    root = pathlib.Path("/usr/share/doc/python3-dev/html/_sources")
    for p in sorted(root.rglob("*.txt")):
        text = p.read_text(encoding="utf-8", errors="replace")
        for para in re.split(r"\n\s*\n", text):
            para = re.sub(r"^\.\. .*$|^[=\-~^*]{3,}$", "", para, flags=re.M).strip()
            if len(para) > 40:
                yield " ".join(para.split())


def man_pages(english_only=False):
    root = pathlib.Path("/usr/share/man")
    for p in sorted(root.rglob("*.gz")):
        # English pages lie in man1..man9; translations in a folder per language (de, ru, ja, ...).
        if not english_only or p.relative_to(root).parts[0].startswith("man"):
            try:
                raw = gzip.decompress(p.read_bytes()).decode("utf-8", errors="replace")
            except OSError:
                continue
            for para in re.split(r"\n\.(?:PP|SH|SS|P|TP|IP|LP)\b.*\n", raw):
                para = re.sub(r"^\.[A-Za-z]+ ?", "", para, flags=re.M)
                para = re.sub(r"\\f[BIRP]|\\\(..|\\[-e&]|\\", " ", para)
                para = " ".join(para.split())
                if len(para) > 40:
                    yield para


def fortunes():
    for root in [pathlib.Path("/usr/share/games/fortunes")]:
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.name.endswith(".dat") and not p.name.endswith(".u8"):
                for f in p.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
                    f = " ".join(f.split())
                    if f:
                        yield f


def documents(lo=60, hi=300, tail=None, english_only=False):
    """Paragraphs joined into documents of `lo`-`hi` words, source by source; with `tail` (a
    random.Random), each document's length is drawn from a long tail instead."""
    def length():
        return hi if tail is None else int(min(20 * hi, max(lo // 2, tail.lognormvariate(0, 1.1) * lo)))

    for source in (python_docs(), man_pages(english_only), fortunes() if not english_only else iter(())):
        buf, words, want = [], 0, length()
        for para in source:
            buf.append(para)
            words += para.count(" ") + 1
            if words >= want:
                ws = " ".join(buf).split(" ")
                k = 0
                while k < len(ws):
                    piece = ws[k:k + want]
                    if len(piece) >= min(lo, want):
                        yield " ".join(piece)
                    k += want
                    want = length()
                buf, words = [], 0


def edit_until(text, lo, hi, rng):
    """Replace words until Jaccard(original, edited) falls in [lo, hi]; None if it skips over."""
    orig = shingles(text)
    words = text.split(" ")
    target = rng.uniform(lo, hi)
    while True:
        k = rng.randrange(len(words))
        words[k] = "x%05d" % rng.randrange(100000)
        t = " ".join(words)
        j = jaccard(orig, shingles(t))
        if j <= target:
            return (t, j) if j >= lo else (None, j)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--docs", type=int, default=120000, help="documents in total (about)")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--words", default="60-300", help="document length in words, LO-HI (200-700 gives ~2.7 KB documents)")
    ap.add_argument("--lengths", choices=["uniform", "tail"], default="uniform")
    ap.add_argument("--format", choices=["jsonl", "jsonl.zst", "parquet"], default="jsonl")
    ap.add_argument("--languages", choices=["all", "en"], default="all",
                    help="all: every installed man page's language (CJK and Cyrillic among them); en: English only")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.words.split("-"))
    rng = random.Random(a.seed)
    seen = set()
    base = []
    for d in documents(lo, hi, random.Random(a.seed + 1) if a.lengths == "tail" else None, a.languages == "en"):
        if d not in seen:
            seen.add(d)
            base.append(d)
    want_base = int(a.docs / 1.31)
    if len(base) > want_base:
        rng.shuffle(base)
        base = base[:want_base]
    docs = [("base", t) for t in base]
    planted = {"exact": 0, "near": [], "miss": [], "chains": 0}
    picks = list(range(len(base)))
    rng.shuffle(picks)
    n = len(base)
    cut = [int(n * f) for f in (0.10, 0.20, 0.25, 0.28)]
    for i in picks[:cut[0]]:
        docs.append(("exact", base[i]))
        planted["exact"] += 1
    for i in picks[cut[0]:cut[1]]:
        t, j = edit_until(base[i], 0.80, 0.98, rng)
        if t:
            docs.append(("near", t))
            planted["near"].append(round(j, 4))
    for i in picks[cut[1]:cut[2]]:
        t, j = edit_until(base[i], 0.55, 0.78, rng)
        if t:
            docs.append(("miss", t))
            planted["miss"].append(round(j, 4))
    for i in picks[cut[2]:cut[3]]:
        b, _ = edit_until(base[i], 0.82, 0.9, rng)
        if b:
            c, _ = edit_until(b, 0.82, 0.9, rng)
            if c:
                docs += [("chain", b), ("chain", c)]
                planted["chains"] += 1
    rng.shuffle(docs)
    out = pathlib.Path(a.out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    files = [open(out / "data" / f"shard-{s:03d}.jsonl", "w") for s in range(a.shards)]
    k = 0
    for rep in range(a.scale):
        for i, (kind, t) in enumerate(docs):
            files[k % a.shards].write(json.dumps({"id": f"r{rep}-{i:07d}", "text": t, "planted": kind}, ensure_ascii=False) + "\n")
            k += 1
    for f in files:
        f.close()
    shards = sorted((out / "data").glob("shard-*.jsonl"))
    if a.format == "jsonl.zst":
        for p in shards:
            subprocess.run(["zstd", "-q", "-3", "--rm", "-f", str(p)], check=True)
    elif a.format == "parquet":
        import pyarrow.json as pj
        import pyarrow.parquet as pq
        for p in shards:
            pq.write_table(pj.read_json(p), p.with_suffix(".parquet"), compression="snappy")
            p.unlink()
    size = sum(p.stat().st_size for p in (out / "data").glob("shard-*"))
    summary = {"documents": k, "bytes": size, "base": n, "exact": planted["exact"], "near": len(planted["near"]),
               "miss": len(planted["miss"]), "chains": planted["chains"]}
    (out / "planted.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
