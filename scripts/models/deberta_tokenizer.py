#!/usr/bin/env python3
"""Build the DeBERTa-v3-style tokenizer the parity tests use (run by hand; its output is
committed): a SentencePiece Unigram model trained here on the bundled example documents
with DeBERTa-v3's special pieces and ids ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3), converted to a
`tokenizer.json` by transformers' own DebertaV2 converter, as the fast tokenizer of a real
DeBERTa-v3 checkpoint is. DeBERTa-v3's own spm.model is not on PyPI, so the vocabulary is
ours; the pipeline (normalizer, Metaspace pre-tokenizer, Unigram model, [CLS] $A [SEP]
template) is DeBERTa-v3's.

    pip install sentencepiece transformers tokenizers protobuf
    python3 scripts/models/deberta_tokenizer.py

Needs transformers 4.x (5.x's DebertaV2Tokenizer no longer reads a vocab_file). Writes
tests/parity/tokenizers/deberta-v3-unigram.json; prints how often the fast (tokenizer.json)
and slow (sentencepiece) tokenizers agree on the texts.
"""
import gzip
import json
import tempfile
from pathlib import Path

import sentencepiece as spm
from transformers import DebertaV2Tokenizer, DebertaV2TokenizerFast

OUT = Path("tests/parity/tokenizers")


def texts():
    out = []
    for path in sorted(Path("examples").glob("*/data/*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                try:
                    text = json.loads(line).get("text")
                except json.JSONDecodeError:
                    continue
                if isinstance(text, str) and text.strip():
                    out.append(text)
    return out


def main():
    docs = texts()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(d.replace("\n", " ") for d in docs), encoding="utf-8")
        prefix = Path(tmp) / "spm"
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(prefix), model_type="unigram", vocab_size=4000,
            pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]",
            unk_piece="[UNK]", user_defined_symbols=["[MASK]"], character_coverage=0.9995, byte_fallback=False,
            input_sentence_size=200000, shuffle_input_sentence=True, seed_sentencepiece_size=200000, num_threads=2)
        model = prefix.with_suffix(".model")
        OUT.mkdir(parents=True, exist_ok=True)
        slow = DebertaV2Tokenizer(vocab_file=str(model))
        fast = DebertaV2TokenizerFast(vocab_file=str(model), from_slow=True)
        fast.backend_tokenizer.save(str(OUT / "deberta-v3-unigram.json"))
        differ = [d for d in docs if slow(d, truncation=True, max_length=512)["input_ids"] != fast(d, truncation=True, max_length=512)["input_ids"]]
    print(f"fast vs slow (sentencepiece): {len(docs) - len(differ)}/{len(docs)} documents tokenize to the same ids")
    for d in differ[:5]:
        print("  differs:", repr(d[:120]))


if __name__ == "__main__":
    main()
