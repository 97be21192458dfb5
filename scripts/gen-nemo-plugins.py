#!/usr/bin/env python3
"""Generate the stage plugins for NeMo Curator's heuristic filters: one crate per filter under
plugins/catalogue/nemo_*/, each a thin `#[stage]` over `curator-heuristics` with NeMo's parameter
names and defaults; `score_filter` adds ScoreFilter's `score_field` / `invert` / `filter`.

The generated crates are committed; rerun after changing this list:
    python3 scripts/gen-nemo-plugins.py && cargo fmt
"""
import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..")

# (class, description, [(param, description)]): the names, types and defaults come from the
# library's own `heuristic!` definitions (libs/heuristics/src/nemo/), read below, so they
# are written once.
FILTERS = [
    ("NonAlphaNumericFilter", "Drops documents where more than 25 % of characters are outside [a-zA-Z0-9\\n?!,.] (Gopher).",
     [("max_non_alpha_numeric_to_text_ratio", "Largest share of other characters kept.")]),
    ("SymbolsToWordsFilter", "Drops documents where more than 10 % of words are an ellipsis or mostly '#' (Gopher).",
     [("max_symbol_to_word_ratio", "Largest share of symbol words kept.")]),
    ("NumbersFilter", "Drops documents where more than 15 % of characters are digits.",
     [("max_number_to_text_ratio", "Largest share of digits kept.")]),
    ("UrlsFilter", "Drops documents where more than 20 % of characters are in URLs.",
     [("max_url_to_text_ratio", "Largest share of URL characters kept.")]),
    ("BulletsFilter", "Drops documents where more than 90 % of lines start with a bullet (Gopher).",
     [("max_bullet_lines_ratio", "Largest share of bullet lines kept.")]),
    ("WhiteSpaceFilter", "Drops documents where more than 25 % of characters are whitespace (\\t \\n \\r \\b space).",
     [("max_white_space_ratio", "Largest share of whitespace kept.")]),
    ("ParenthesesFilter", "Drops documents where more than 10 % of characters are brackets.",
     [("max_parentheses_ratio", "Largest share of brackets kept.")]),
    ("LongWordFilter", "Drops documents with a word longer than 1000 characters (C4).",
     [("max_word_length", "Longest word kept.")]),
    ("BoilerPlateStringFilter", "Drops documents where more than 40 % of paragraphs contain boilerplate (C4), or any 'lorem ipsum'.",
     [("max_boilerplate_string_ratio", "Largest share of boilerplate paragraphs kept."),
      ("remove_if_at_top_or_bottom", "Accepted for compatibility; NeMo Curator 1.4 does not use it either.")]),
    ("MeanWordLengthFilter", "Drops documents whose mean word length is outside [3, 10].",
     [("min_mean_word_length", "Shortest mean word length kept."),
      ("max_mean_word_length", "Longest mean word length kept.")]),
    ("PunctuationFilter", "Drops documents where more than 85 % of lines do not end in . ? ! \" ' (C4).",
     [("max_num_sentences_without_endmark_ratio", "Largest share of lines without an end mark kept.")]),
    ("EllipsisFilter", "Drops documents where more than 30 % of lines end in an ellipsis (C4).",
     [("max_num_lines_ending_with_ellipsis_ratio", "Largest share of ellipsis lines kept.")]),
    ("CommonEnglishWordsFilter", "Keeps documents with at least 2 common English words (the, be, to, of, and, that, have, with).",
     [("min_num_common_words", "Fewest common words kept."),
      ("stop_at_false", "Stop counting at the cutoff (the score is then at most the cutoff).")]),
    ("WordsWithoutAlphabetsFilter", "Drops documents where fewer than 80 % of words contain a letter (Gopher).",
     [("min_words_with_alphabets", "Smallest share of words with a letter kept.")]),
    ("PornographicUrlsFilter", "Drops documents with a URL containing 'porn'.", []),
    ("RepeatedLinesFilter", "Drops documents where fewer than 70 % of non-blank lines are distinct (Gopher).",
     [("max_repeated_line_fraction", "Smallest share of distinct lines kept.")]),
    ("RepeatedParagraphsFilter", "Drops documents where fewer than 70 % of paragraphs are distinct (Gopher).",
     [("max_repeated_paragraphs_ratio", "Smallest share of distinct paragraphs kept.")]),
    ("RepeatedLinesByCharFilter", "Drops documents where distinct lines hold less than 80 % of line characters (Gopher).",
     [("max_repeated_lines_char_ratio", "Smallest share kept.")]),
    ("RepeatedParagraphsByCharFilter", "Drops documents where distinct paragraphs hold less than 80 % of paragraph characters (Gopher).",
     [("max_repeated_paragraphs_char_ratio", "Smallest share kept.")]),
    ("RepeatingTopNGramsFilter", "Drops documents where the most frequent word n-gram covers more than 20 % of characters (Gopher).",
     [("n", "Words per n-gram."),
      ("max_repeating_ngram_ratio", "Largest share kept.")]),
    ("RepeatingDuplicateNGramsFilter", "Drops documents where repeated word n-grams cover more than 20 % of characters (Gopher).",
     [("n", "Words per n-gram."),
      ("max_repeating_duplicate_ngram_ratio", "Largest share kept.")]),
]


HEURISTIC = re.compile(r"heuristic!\(\s*(?:///[^\n]*\n\s*)*(\w+)\s*\{([^}]*)\}\s*\);")


def library_params():
    """{class: [(param, rust type, default)]} from the heuristics library's definitions."""
    out = {}
    folder = os.path.join(ROOT, "libs", "heuristics", "src", "nemo")
    for fname in sorted(os.listdir(folder)):
        with open(os.path.join(folder, fname)) as f:
            text = f.read()
        for cls, body in HEURISTIC.findall(text):
            fields = []
            for field in filter(None, (x.strip() for x in body.split(","))):
                m = re.fullmatch(r"(\w+)\s*:\s*(\w+)\s*=\s*(.+)", field)
                if not m:
                    raise SystemExit(f"{fname}: cannot read field {field!r} of {cls}")
                name, ty, default = m.groups()
                if ty == "f64" and float(default).is_integer():
                    default = str(int(float(default)))  # #[param(default = 1000)], as NeMo writes it
                fields.append((name, ty, default))
            out[cls] = fields
    return out


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


CARGO = """[package]
name = "{crate}"
description = "NeMo Curator's {cls} as a curator stage"
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
curator-sdk.workspace = true
curator-heuristics.workspace = true

[lints]
workspace = true
"""

LIB = """//! NeMo Curator's `{cls}` as a stage. Generated by `scripts/gen-nemo-plugins.py`; the
//! scoring lives in `curator-heuristics` (parity-tested against NeMo Curator).

use curator_sdk::prelude::*;

/// {desc}
#[stage(name = "{name}", score_filter, cpus = 1.0, memory_mb = 128)]
pub struct {cls}Stage {{
{fields}}}

curator_heuristics::nemo_score_stage!({cls}Stage => {cls} {{ {inits} }});
"""


def main():
    members = []
    library = library_params()
    for cls, desc, described in FILTERS:
        if cls not in library:
            raise SystemExit(f"{cls} is not defined in libs/heuristics/src/nemo/")
        docs = dict(described)
        params = []
        for p, ty, default in library[cls]:
            if p not in docs:
                raise SystemExit(f"{cls}.{p} has no description in FILTERS")
            params.append((p, ty, default, docs.pop(p)))
        if docs:
            raise SystemExit(f"{cls}: FILTERS describes params the library does not have: {', '.join(docs)}")
        name = snake(cls)
        crate = "nemo_" + name.removesuffix("_filter")
        d = os.path.join(ROOT, "plugins", "catalogue", crate)
        os.makedirs(os.path.join(d, "src"), exist_ok=True)
        fields = "".join(
            f"    /// {pdesc}\n    #[param(default = {default})]\n    pub {p}: {ty},\n" for p, ty, default, pdesc in params
        )
        inits = ", ".join(p for p, _, _, _ in params)
        with open(os.path.join(d, "Cargo.toml"), "w") as f:
            f.write(CARGO.format(crate=crate, cls=cls))
        with open(os.path.join(d, "src", "lib.rs"), "w") as f:
            f.write(LIB.format(cls=cls, desc=desc, name=name, fields=fields, inits=inits))
        members.append(f"plugins/catalogue/{crate}")
    print("\n".join(members))


if __name__ == "__main__":
    main()
