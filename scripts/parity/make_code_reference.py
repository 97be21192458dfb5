#!/usr/bin/env python3
"""Score real source files with NeMo Curator's own code filters.

Builds tests/parity/code_fixture.jsonl from files installed on this machine (Python's standard
library, C headers, shell scripts, HTML documentation, XML, JavaScript from npm's own
modules) plus a few crafted edge cases, then runs NeMo Curator 1.4.0's
PythonCommentToCodeFilter, GeneralCommentToCodeFilter (comment_parser 1.2.4),
NumberOfLinesOfCodeFilter, XMLHeaderFilter, AlphaFilter, HTMLBoilerplateFilter
(BeautifulSoup 4.15) and PerExtensionFilter (NeMo's code_meta.csv, copied to
tests/parity/nemo_code_meta.csv: NeMo Curator's data, Apache-2.0) on them and writes
tests/parity/code_reference.jsonl. Reuses the venv of make_reference.py.

    python3 scripts/parity/make_code_reference.py
"""
import glob
import json
import os
import random
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))
EXTRA = ["comment_parser==1.2.4", "beautifulsoup4==4.15.0", "python-magic==0.4.24"]

# (language as NeMo names it, extension, MIME type for comment_parser, glob, how many)
SOURCES = [
    ("Python", "py", "text/x-python", "/usr/lib/python3.11/*.py", 40),
    ("C", "h", "text/x-c", "/usr/include/*.h", 25),
    ("Shell", "sh", "text/x-shellscript", "/usr/bin/*", 15),
    ("HTML", "html", "text/html", "/usr/share/doc/**/*.html", 20),
    ("XML", "xml", "text/xml", "/usr/share/**/*.xml", 10),
    ("JavaScript", "js", "application/javascript", "/usr/lib/node_modules/npm/lib/**/*.js", 15),
]
CRAFTED = [
    ("Python", "py", "text/x-python", 's = """never closed\nx = 1\n'),
    ("Python", "py", "text/x-python", "def f(x:\n    return x\n"),
    ("Python", "py", "text/x-python", "# only a comment\n"),
    ("Python", "py", "text/x-python", "class A:\n    r'''Raw \\n doc.'''\n    def m(self): '''One-liner.'''\n\n\nasync def g():\n    \"\"\"\n    Indented\n      more\n    \"\"\"\n"),
    ("C", "c", "text/x-c", "/* never closed\nint x;\n"),
    ("C", "c", "text/x-c", 'char *s = "/* not a comment */"; // real\nint y; /* multi\n line */\n'),
    ("JavaScript", "js", "application/javascript", "let a = 1 / 2; // half\nlet s = '/* no */';\n/* yes */\n"),
    ("HTML", "html", "text/html", "<html><body><script>var x = '</p>';</script><p>Short.</p></body></html>"),
    ("XML", "xml", "text/xml", '<?xml version="1.0"?>\n<a><!-- note --><b>text</b></a>\n'),
    ("Shell", "sh", "text/x-shellscript", "#!/bin/sh\necho \"# not\" # yes\necho \\# escaped\n"),
    ("Go", "go", "text/x-go", "package main\n// doc\nvar s = `// raw`\n/* block */\n"),
]


def text_file(path, limit=16_000):
    try:
        with open(path, "rb") as f:
            b = f.read(limit + 1)
        if len(b) > limit or b"\0" in b:
            return None
        return b.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def build_fixture():
    rng = random.Random(11)
    rows = []
    for lang, ext, mime, pattern, n in SOURCES:
        paths = sorted(glob.glob(pattern, recursive=True))
        rng.shuffle(paths)
        picked = 0
        for p in paths:
            t = text_file(p)
            if not t or len(t) < 50:
                continue
            if lang == "Shell" and not t.startswith(("#!/bin/sh", "#!/bin/bash")):
                continue
            rows.append({"id": f"c{len(rows):03}", "language": lang, "extension": ext, "mime": mime, "path": p, "text": t})
            picked += 1
            if picked == n:
                break
    for lang, ext, mime, t in CRAFTED:
        rows.append({"id": f"c{len(rows):03}", "language": lang, "extension": ext, "mime": mime, "path": "crafted", "text": t})
    with open(os.path.join(ROOT, "tests/parity/code_fixture.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return rows


def run_in_venv():
    import importlib
    import importlib.util
    import types
    import warnings

    warnings.simplefilter("ignore")
    spec = importlib.util.find_spec("nemo_curator")
    base = spec.submodule_search_locations[0]
    for pkg in ["nemo_curator", "nemo_curator.stages", "nemo_curator.stages.text", "nemo_curator.stages.text.filters",
                "nemo_curator.stages.text.utils", "nemo_curator.stages.text.filters.heuristic",
                "nemo_curator.stages.text.filters.heuristic.code"]:
        m = types.ModuleType(pkg)
        m.__path__ = [os.path.join(base, *pkg.split(".")[1:])]
        sys.modules[pkg] = m
    sys.modules["sentencepiece"] = types.ModuleType("sentencepiece")  # only TokenizerFertilityFilter needs it
    code = importlib.import_module("nemo_curator.stages.text.filters.heuristic.code.code")
    meta = os.path.join(base, "utils", "code_meta.csv")
    rows = [json.loads(line) for line in open(os.path.join(ROOT, "tests/parity/code_fixture.jsonl"), encoding="utf-8")]
    import contextlib
    import io

    for r in rows:
        t = r["text"]
        filters = {
            "NumberOfLinesOfCodeFilter": code.NumberOfLinesOfCodeFilter(),
            "XMLHeaderFilter": code.XMLHeaderFilter(),
            "AlphaFilter": code.AlphaFilter(),
            "HTMLBoilerplateFilter": code.HTMLBoilerplateFilter(),
            "GeneralCommentToCodeFilter": code.GeneralCommentToCodeFilter(language=r["mime"]),
        }
        if r["language"] != "XML":  # not in code_meta.csv (NeMo raises)
            # NeMo selects the CSV's rows by the language as given: the CSV spells it in lower case
            filters["PerExtensionFilter"] = code.PerExtensionFilter(lang=r["language"].lower(), extension=r["extension"], metadata_file=meta)
        if r["language"] == "Python":
            filters["PythonCommentToCodeFilter"] = code.PythonCommentToCodeFilter()
        out = {"id": r["id"], "scores": {}, "keep": {}}
        for name, flt in filters.items():
            with contextlib.redirect_stdout(io.StringIO()):
                s = flt.score_document(t)
            out["scores"][name] = s
            out["keep"][name] = bool(flt.keep_document(s))
        sys.stdout.write(json.dumps(out) + "\n")


def main():
    from make_reference import ensure_venv

    py = ensure_venv()
    subprocess.check_call([py, "-m", "pip", "install", "--quiet", *EXTRA])
    rows = build_fixture()
    data = subprocess.check_output([py, __file__], env=dict(os.environ, CURATOR_PARITY_IN_VENV="1"))
    meta = subprocess.check_output([py, "-c", "import importlib.util, os; print(os.path.join(importlib.util.find_spec('nemo_curator').submodule_search_locations[0], 'utils', 'code_meta.csv'))"]).decode().strip()
    shutil.copyfile(meta, os.path.join(ROOT, "tests/parity/nemo_code_meta.csv"))
    path = os.path.join(ROOT, "tests/parity/code_reference.jsonl")
    with open(path, "wb") as f:
        f.write(data)
    print(f"{len(rows)} source files -> tests/parity/code_fixture.jsonl; NeMo's scores -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    if os.environ.get("CURATOR_PARITY_IN_VENV"):
        run_in_venv()
    else:
        main()
