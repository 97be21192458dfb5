#!/usr/bin/env python3
"""Token counts from Hugging Face `tokenizers` for TokenCountFilter's parity test.

Trains two small tokenizers on tests/parity/fixture.jsonl with the `tokenizers` library (a
BERT-style WordPiece one: BertNormalizer, BertPreTokenizer, [CLS]/[SEP] template; and a
GPT-2-style byte-level BPE one), saves them as tokenizer.json files under
tests/parity/tokenizers/, and writes each fixture document's `len(tokenizer.encode(text).ids)`
(special tokens added, as NeMo Curator's `AutoTokenizer.encode` does) to
tests/parity/tokenizer_reference.jsonl.

    python3 scripts/parity/make_tokenizer_reference.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from pyenv import ROOT, run_to_file, venv_python  # noqa: E402

PIN = "tokenizers==0.22.1"

CODE = r"""
import json, os, sys
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers, decoders
root = sys.argv[1]
docs = [json.loads(l) for l in open(os.path.join(root, "tests/parity/fixture.jsonl"), encoding="utf-8")]
texts = [d["text"] for d in docs]
out_dir = os.path.join(root, "tests/parity/tokenizers")
os.makedirs(out_dir, exist_ok=True)

wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
wp.normalizer = normalizers.BertNormalizer(lowercase=True)
wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
wp.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=3000, show_progress=False, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
wp.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", wp.token_to_id("[CLS]")), ("[SEP]", wp.token_to_id("[SEP]"))])
wp.save(os.path.join(out_dir, "wordpiece.json"))

bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=3000, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"]))
bpe.save(os.path.join(out_dir, "bpe.json"))

for d in docs:
    print(json.dumps({"id": d["id"], "wordpiece": len(wp.encode(d["text"]).ids), "bpe": len(bpe.encode(d["text"]).ids)}))
"""


def main():
    py = venv_python("tokenizers-venv", [PIN])
    out = run_to_file(py, CODE, "tests/parity/tokenizer_reference.jsonl", ROOT)
    print(f"{PIN}: {len(out.splitlines())} documents -> tests/parity/tokenizer_reference.jsonl; tokenizers in tests/parity/tokenizers/")


if __name__ == "__main__":
    main()
