#!/usr/bin/env python3
"""Run datatrove's own quality filters over tests/parity/fixture.jsonl.

Installs datatrove (pinned, from PyPI, with spaCy: datatrove splits English words and
sentences with `spacy.blank("en")`) into target/dt-venv and writes
tests/parity/datatrove_reference.jsonl: per document and filter configuration, the keep
decision, datatrove's reason for dropping, and for C4QualityFilter the rewritten text. It also
records spaCy's word count and, per kept C4 line, its sentence count, so a tokenizer
difference shows up as such rather than as a filter difference.

    python3 scripts/parity/make_datatrove_reference.py
"""
import json
import os
import subprocess
import sys
import venv

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV = os.path.join(ROOT, "target", "dt-venv")
PINS = ["datatrove==0.10.1", "spacy==3.8.18"]


def ensure_venv():
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        venv.create(VENV, with_pip=True)
    if subprocess.call([py, "-c", "import datatrove, spacy"], stderr=subprocess.DEVNULL) != 0:
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", *PINS])
    return py


def run_in_venv():
    from datatrove.data import Document
    from datatrove.pipeline.filters import C4QualityFilter, FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter
    from datatrove.utils.text import split_into_words

    filters = {
        "GopherQualityFilter": GopherQualityFilter,
        "GopherRepetitionFilter": GopherRepetitionFilter,
        "C4QualityFilter": C4QualityFilter,
        "C4QualityFilter(filter_no_terminal_punct=False)": lambda: C4QualityFilter(filter_no_terminal_punct=False),
        "FineWebQualityFilter": FineWebQualityFilter,
    }
    filters = {k: v() for k, v in filters.items()}
    with open(os.path.join(ROOT, "tests/parity/fixture.jsonl"), encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    out = sys.stdout
    for d in docs:
        row = {"id": d["id"], "words": len(split_into_words(d["text"])) if d["text"] else 0, "results": {}}
        for name, flt in filters.items():
            doc = Document(text=d["text"], id=d["id"])
            try:
                r = flt.filter(doc)
            except Exception as e:  # noqa: BLE001 - datatrove's own behaviour, recorded
                row["results"][name] = {"error": type(e).__name__}
                continue
            keep, reason = (r, None) if isinstance(r, bool) else r
            res = {"keep": bool(keep), "reason": reason}
            if name.startswith("C4") and keep:
                res["text"] = doc.text
            row["results"][name] = res
        # FineWeb's chain after language ID: each filter sees the previous one's output
        # (C4QualityFilter rewrites the text before FineWebQualityFilter reads it).
        doc = Document(text=d["text"], id=d["id"])
        chain = {"keep": True, "reason": None}
        for step in (filters["GopherRepetitionFilter"], filters["GopherQualityFilter"],
                     filters["C4QualityFilter(filter_no_terminal_punct=False)"], filters["FineWebQualityFilter"]):
            try:
                r = step.filter(doc)
            except Exception as e:  # noqa: BLE001
                chain = {"error": type(e).__name__}
                break
            keep, reason = (r, None) if isinstance(r, bool) else r
            if not keep:
                chain = {"keep": False, "reason": reason}
                break
        if chain.get("keep"):
            chain["text"] = doc.text
        row["fineweb_chain"] = chain
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


def main():
    py = ensure_venv()
    path = os.path.join(ROOT, "tests/parity/datatrove_reference.jsonl")
    data = subprocess.check_output([py, __file__], env=dict(os.environ, CURATOR_PARITY_IN_VENV="1"))
    with open(path, "wb") as f:
        f.write(data)
    rows = [json.loads(line) for line in data.decode().splitlines()]
    kept = {k: sum(1 for r in rows if r["results"][k].get("keep")) for k in rows[0]["results"]}
    chain = sum(1 for r in rows if r["fineweb_chain"].get("keep"))
    print(f"{' '.join(PINS)}: {len(rows)} documents -> {os.path.relpath(path, ROOT)}; kept per filter: {kept}; FineWeb chain keeps {chain}")


if __name__ == "__main__":
    if os.environ.get("CURATOR_PARITY_IN_VENV"):
        run_in_venv()
    else:
        main()
