#!/usr/bin/env python3
"""Run NeMo Curator's own document modifiers over the parity fixture plus crafted cases.

Uses the venv of make_reference.py (nemo-curator 1.4.0, loaded without its Ray/Torch
package __init__s) and adds ftfy (UnicodeReformatter wraps ftfy.fix_text). Writes
tests/parity/modifier_cases.jsonl (the crafted inputs: markdown, quotes, URLs, newlines,
mojibake, HTML entities, terminal escapes, control characters) and
tests/parity/modifier_reference.jsonl: per document, each modifier configuration's output
where it differs from the input.

    python3 scripts/parity/make_modifier_reference.py
"""
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))
FTFY = "ftfy==6.3.1"

CASES = [
    # markdown
    "This is **bold** and *italic* and _under_ text.\nA [link](https://example.com/page) here.",
    "**unclosed bold and *half* _ok_\n* list item\n* another *item*",
    "snake_case_name and file_name.txt, 2*3*4 = 24, **a** **b**",
    # quotes
    '"A quoted sentence."',
    '"First line"\nsecond line"',
    '"First line\nsecond line"',
    '""',
    '"x"',
    ' "spaced" ',
    # URLs
    "See https://example.com/a?b=1 and www.example.org/path, or HTTP://UPPER.CASE/x.",
    "Mail me at user@example.com; ftp://files.example.com stays.",
    # newlines
    "a\n\n\n\nb\r\n\r\n\r\n\r\nc\n\n\nd",
    "one\n\ntwo\n\n\n",
    # boilerplate paragraphs
    "Privacy policy and terms of use apply.\n\nThe actual article text is here.\n\nMore text.",
    "Intro.\n\nWe use cookies on this site.\n\nBody text.\n\nFooter.",
    "Body.\n\nMore body.\n\nThis site uses cookies. Privacy Policy.",
    "Lorem ipsum dolor sit amet.\n\nText.",
    "Cookie policy.\n\nPrivacy policy.",
    # lines
    "Advertisement\nReal line one.\nRead more\n\nReal line two.\nShare this article",
    # slicing
    "Header junk. Introduction: the real content starts here and goes on. References: [1] A. Author.",
    "No markers in this one at all, just text.",
    # mojibake and unicode
    "cafÃ© Ã¼ber naÃ¯ve donâ€™t â€œquotedâ€\x9d",
    "The Mona Lisa doesnâ€™t have eyebrows.",
    "ÃƒÂ©tÃƒÂ© double-encoded",
    "Ã  la carte, Â£5, Â°C, 10Â½",
    "Ð¡Ð¿Ð°ÑÐ¸Ð±Ð¾ (Russian mojibake)",
    "â€” an em dash and â€¦ an ellipsis",
    "Legit: café, naïve, São Paulo, Ærøskøbing, ½ cup, ±5 °C, Ã alone, Â.",
    "Tom &amp; Jerry &lt;3 &quot;cartoons&quot; &eacute;t&eacute; &#233; &#x2014; &nbsp;end",
    "<p>Tom &amp; Jerry</p> keeps entities because of the tag",
    "\x1b[31mred text\x1b[0m and \x1b[1;32mbold green\x1b[0m",
    "control\x00chars\x07here\x0b and\ufeffBOM\u200b zero width",
    "C1 controls: \x80 \x93quoted\x94 \x85",
    "ligatures: ﬁne ﬂow; width: ＡＢＣ１２３; curly ‘single’ “double”",
    "line\r\nbreaks\rhere\u2028and\u2029there\x85end",
    "decomposed: cafe\u0301 vs café; Ǆ ﬃ",
    "mixed: â€œSmart quotesâ€\x9d and real “smart quotes” together",
    "Ã¡Ã©Ã\xadÃ³Ãº Ã±",
    "Hello wÃ¶rld, Ã¤Ã¶Ã¼ÃŸ Ã„Ã–Ãœ",
    "Price: 5â‚¬ or â‚¬5",
    "ðŸ˜€ emoji mojibake",
]


def run_in_venv():
    import importlib
    import importlib.util
    import types

    spec = importlib.util.find_spec("nemo_curator")
    base = spec.submodule_search_locations[0]
    for pkg in ["nemo_curator", "nemo_curator.stages", "nemo_curator.stages.text", "nemo_curator.stages.text.modifiers",
                "nemo_curator.stages.text.modifiers.string", "nemo_curator.stages.text.modifiers.unicode",
                "nemo_curator.stages.text.utils"]:
        m = types.ModuleType(pkg)
        m.__path__ = [os.path.join(base, *pkg.split(".")[1:])]
        sys.modules[pkg] = m
    mod = lambda name: importlib.import_module(f"nemo_curator.stages.text.modifiers.{name}")  # noqa: E731
    c4, lines, md, nl = mod("string.c4"), mod("string.line_remover"), mod("string.markdown_remover"), mod("string.newline_normalizer")
    quote, sl, url, uni = mod("string.quotation_remover"), mod("string.slicer"), mod("string.url_remover"), mod("unicode.unicode_reformatter")
    modifiers = {
        "BoilerPlateStringModifier": lambda: c4.BoilerPlateStringModifier(),
        "BoilerPlateStringModifier(remove_if_at_top_or_bottom=False)": lambda: c4.BoilerPlateStringModifier(remove_if_at_top_or_bottom=False),
        "LineRemover(patterns=['Advertisement', 'Read more', 'Share this article', ''])":
            lambda: lines.LineRemover(patterns=["Advertisement", "Read more", "Share this article", ""]),
        "MarkdownRemover": lambda: md.MarkdownRemover(),
        "NewlineNormalizer": lambda: nl.NewlineNormalizer(),
        "QuotationRemover": lambda: quote.QuotationRemover(),
        "Slicer(left='Introduction:', right='References:', include_left=False, include_right=False)":
            lambda: sl.Slicer(left="Introduction:", right="References:", include_left=False, include_right=False),
        "Slicer(left=10, right=-10)": lambda: sl.Slicer(left=10, right=-10),
        "Slicer(left=5, strip=False)": lambda: sl.Slicer(left=5, strip=False),
        "UrlRemover": lambda: url.UrlRemover(),
        "UnicodeReformatter": lambda: uni.UnicodeReformatter(),
        "UnicodeReformatter(normalization='NFC', uncurl_quotes=True, fix_line_breaks=True, fix_latin_ligatures=True, fix_character_width=True)":
            lambda: uni.UnicodeReformatter(normalization="NFC", uncurl_quotes=True, fix_line_breaks=True, fix_latin_ligatures=True,
                                           fix_character_width=True),
    }
    docs = [json.loads(line) for line in open(os.path.join(ROOT, "tests/parity/fixture.jsonl"), encoding="utf-8")]
    docs += [json.loads(line) for line in open(os.path.join(ROOT, "tests/parity/modifier_cases.jsonl"), encoding="utf-8")]
    for d in docs:
        changed = {}
        for name, make in modifiers.items():
            out = make().modify_document(d["text"])
            if out != d["text"]:
                changed[name] = out
        sys.stdout.write(json.dumps({"id": d["id"], "changed": changed}, ensure_ascii=False) + "\n")


def main():
    from make_reference import ensure_venv

    py = ensure_venv()
    subprocess.check_call([py, "-m", "pip", "install", "--quiet", FTFY])
    with open(os.path.join(ROOT, "tests/parity/modifier_cases.jsonl"), "w", encoding="utf-8") as f:
        for i, t in enumerate(CASES):
            f.write(json.dumps({"id": f"m{i:03}", "text": t}, ensure_ascii=False) + "\n")
    data = subprocess.check_output([py, __file__], env=dict(os.environ, CURATOR_PARITY_IN_VENV="1"))
    path = os.path.join(ROOT, "tests/parity/modifier_reference.jsonl")
    with open(path, "wb") as f:
        f.write(data)
    rows = [json.loads(line) for line in data.decode().split("\n") if line]
    per = {}
    for r in rows:
        for k in r["changed"]:
            per[k] = per.get(k, 0) + 1
    print(f"{len(rows)} documents -> {os.path.relpath(path, ROOT)}; documents changed per modifier: {json.dumps(per, indent=1)}")


if __name__ == "__main__":
    if os.environ.get("CURATOR_PARITY_IN_VENV"):
        run_in_venv()
    else:
        main()
