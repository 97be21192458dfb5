#!/usr/bin/env python3
"""Piece counts from SentencePiece for TokenizerFertilityFilter's parity test.

Trains two small SentencePiece models on tests/parity/fixture.jsonl with the `sentencepiece`
package (unigram and BPE, identity normalization, byte fallback off), saves them under
tests/parity/tokenizers/, and writes each fixture document's `len(encode_as_pieces(text))`
(what NeMo Curator's TokenizerFertilityFilter divides the character count by) to
tests/parity/sentencepiece_reference.jsonl.

    python3 scripts/parity/make_sentencepiece_reference.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from pyenv import ROOT, run_to_file, venv_python  # noqa: E402

PIN = "sentencepiece==0.2.1"

CODE = r"""
import io, json, os, sys
import sentencepiece as spm
root = sys.argv[1]
docs = [json.loads(l) for l in open(os.path.join(root, "tests/parity/fixture.jsonl"), encoding="utf-8")]
out_dir = os.path.join(root, "tests/parity/tokenizers")
os.makedirs(out_dir, exist_ok=True)
sentences = [line for d in docs for line in d["text"].split("\n") if line.strip()]
models = {}
for kind in ("unigram", "bpe"):
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=buf, model_type=kind, vocab_size=1500,
                                   normalization_rule_name="identity", character_coverage=0.9995, minloglevel=2,
                                   hard_vocab_limit=False)
    path = os.path.join(out_dir, f"sp_{kind}.model")
    open(path, "wb").write(buf.getvalue())
    models[kind] = spm.SentencePieceProcessor(model_proto=buf.getvalue())
for d in docs:
    print(json.dumps({"id": d["id"], **{k: len(m.encode_as_pieces(d["text"])) for k, m in models.items()}}))
"""


def main():
    py = venv_python("sentencepiece-venv", [PIN])
    out = run_to_file(py, CODE, "tests/parity/sentencepiece_reference.jsonl", ROOT)
    print(f"{PIN}: {len(out.splitlines())} documents -> tests/parity/sentencepiece_reference.jsonl; models in tests/parity/tokenizers/")


if __name__ == "__main__":
    main()
