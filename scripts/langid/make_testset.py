#!/usr/bin/env python3
"""Build the language-ID test set from real, human-translated text.

Source: Firefox ESR's language packs from Debian (`firefox-esr-l10n-*`, fetched with
`apt-get download`, no root needed): the user interface and help texts of one program,
translated by people into each language. Fluent messages are stripped of placeholders
(`{ $n }`, `{ -brand-name }`) and markup; messages left untranslated (the same text as in
the English pack, which Firefox ships for new features) are dropped; then consecutive
messages of one file are joined into documents of at least 200 characters. Writes tests/langid/testset.jsonl with
`{"id", "lang", "source", "text"}`; the identifier (plugins/language_id, whatlang's trigram
models) never sees this text before the test.

    python3 scripts/langid/make_testset.py [--per-lang 60]
"""
import argparse
import glob
import io
import json
import os
import random
import re
import subprocess
import tempfile
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# ISO 639-1 code -> Firefox locale
LOCALES = {
    "en": "en-gb", "de": "de", "fr": "fr", "es": "es-es", "it": "it", "pt": "pt-pt", "nl": "nl", "pl": "pl",
    "ru": "ru", "uk": "uk", "ja": "ja", "zh": "zh-cn", "ko": "ko", "ar": "ar", "hi": "hi-in",
}
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
SELECT = re.compile(r"\{[^{}]*->")  # the head of a select expression; its variants follow
TAG = re.compile(r"<[^>]*>")
ENTITY = re.compile(r"&[a-zA-Z#0-9]+;")


def messages(ftl):
    """(key, text) of each message and attribute of a Fluent file, placeholders and markup removed."""
    out, cur = [], []
    key = [None]
    msg = None

    def flush():
        if cur:
            t = " ".join(cur)
            t = SELECT.sub("", t)
            for _ in range(3):
                t = PLACEHOLDER.sub("", t)
            t = ENTITY.sub(" ", TAG.sub("", t))
            t = re.sub(r"\s+", " ", t).strip()
            if len(t) >= 12:
                out.append((key[0], t))
            cur.clear()

    for line in ftl.splitlines():
        if not line.strip() or line.startswith("#"):
            flush()
            continue
        s = line.strip()
        if not line[0].isspace():  # a new message: "id = value"
            flush()
            if s.startswith("-") or "=" not in s:
                continue
            msg = s.split("=", 1)[0].strip()
            key[0] = msg
            cur.append(s.split("=", 1)[1])
        elif s.startswith("."):  # an attribute: ".label = value"
            flush()
            if "=" in s:
                key[0] = f"{msg}{s.split('=', 1)[0].strip()}"
                cur.append(s.split("=", 1)[1])
        elif s.startswith(("[", "*[", "}")):
            # variants of a select expression: keep the default variant's text only
            if s.startswith("*["):
                cur.append(s.split("]", 1)[1])
        else:
            cur.append(s)
    flush()
    return out


# Languages with their own script: a document must have at least a quarter of its letters in
# it (drops English left untranslated under a slightly different en-GB wording).
SCRIPTS = {
    "ru": [(0x400, 0x4FF)], "uk": [(0x400, 0x4FF)], "ar": [(0x600, 0x6FF), (0x750, 0x77F)], "hi": [(0x900, 0x97F)],
    "ja": [(0x3040, 0x30FF), (0x4E00, 0x9FFF)], "zh": [(0x4E00, 0x9FFF)], "ko": [(0xAC00, 0xD7AF), (0x1100, 0x11FF)],
}


def in_own_script(lang, text):
    ranges = SCRIPTS.get(lang)
    if ranges is None:
        return True
    letters = [c for c in text if c.isalpha()]
    own = sum(1 for c in letters if any(a <= ord(c) <= b for a, b in ranges))
    return own >= 0.25 * len(letters)


def pack_messages(locale, work):
    """{(file, message key): text} of one language pack; files named without the locale."""
    subprocess.check_call(["apt-get", "download", f"firefox-esr-l10n-{locale}"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deb = glob.glob(os.path.join(work, f"firefox-esr-l10n-{locale}_*.deb"))[0]
    xdir = os.path.join(work, locale)
    subprocess.check_call(["dpkg-deb", "-x", deb, xdir])
    xpi = glob.glob(os.path.join(xdir, "usr/lib/firefox-esr/browser/extensions/*.xpi"))[0]
    files = {}
    with zipfile.ZipFile(xpi) as z:
        for name in sorted(z.namelist()):
            if name.endswith(".ftl"):
                generic = "/".join(p for p in name.split("/") if p.lower() != locale.lower() and p.lower() != locale.split("-")[0] + "-" + locale.split("-")[-1].upper().lower())
                files[generic] = messages(io.TextIOWrapper(z.open(name), encoding="utf-8").read())
    return os.path.basename(deb), files


def documents(lang, locale, work, english):
    deb, files = pack_messages(locale, work)
    docs = []
    for name, msgs in files.items():
        buf = []
        for key, m in msgs:
            if english is not None and m in english.get(name, set()):
                continue  # left untranslated
            buf.append(m)
            text = " ".join(buf)
            if len(text) >= 200:
                if in_own_script(lang, text):
                    docs.append({"source": f"{deb}:{name}", "text": text})
                buf = []
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-lang", type=int, default=60)
    args = ap.parse_args()
    rng = random.Random(7)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        _, en_files = pack_messages("en-gb", os.path.join(work))
        english = {name: {t for _, t in msgs} for name, msgs in en_files.items()}
        for lang, locale in LOCALES.items():
            docs = documents(lang, locale, work, None if lang == "en" else english)
            rng.shuffle(docs)
            picked = docs[: args.per_lang]
            print(f"{lang}: {len(docs)} documents of >= 200 characters, {len(picked)} kept")
            for i, d in enumerate(picked):
                rows.append({"id": f"{lang}-{i:03}", "lang": lang, **d})
    os.makedirs(os.path.join(ROOT, "tests/langid"), exist_ok=True)
    path = os.path.join(ROOT, "tests/langid/testset.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} documents -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
