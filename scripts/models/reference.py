#!/usr/bin/env python3
"""Reference outputs of the encoder models from PyTorch/transformers (CPU, float32), for the
parity tests of curator-encoder (`libs/encoder/tests/parity.rs`).

    python3 scripts/models/fetch.py
    pip install torch transformers
    python3 scripts/models/reference.py > tests/parity/encoder_reference.json

Writes, for each text of the fixture: the token ids (max 256), the all-MiniLM-L6-v2
sentence embedding (mean pooling over the attention mask, then L2 normalisation, as
sentence-transformers' modules.json says) and the minilm-classifier logits (max 512 tokens).
"""
import json
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertForSequenceClassification, BertModel

MODELS = Path("target/models")


def fixture():
    words = ("curation data model token shard filter quality language train corpus web page text "
             "document duplicate embedding cluster semantic gpu batch memory").split()
    long_text = " ".join(words[(i * 7) % len(words)] for i in range(700))
    return [
        "The quick brown fox jumps over the lazy dog.",
        "A fast auburn fox leaps above a sleepy hound.",
        "Stock markets fell sharply on Tuesday as investors worried about interest rates.",
        "def add(a, b):\n    return a + b  # adds two numbers",
        "Le modèle apprend des représentations de phrases en plusieurs langues.",
        "机器学习模型需要大量高质量的训练数据。",
        "Emoji and symbols: 🚀 ✨ — “quotes” & ampersands < > 100% ©",
        "",
        "   ",
        "one",
        "Click here to subscribe! Buy now! Limited offer!!! Click here to subscribe!",
        "Photosynthesis converts light energy into chemical energy stored in glucose, releasing oxygen.",
        long_text,
        "The mitochondria is the powerhouse of the cell. " * 40,
    ]


def main():
    torch.manual_seed(0)
    texts = fixture()
    tok = AutoTokenizer.from_pretrained(MODELS / "all-MiniLM-L6-v2")
    model = BertModel.from_pretrained(MODELS / "all-MiniLM-L6-v2").eval()
    clf = BertForSequenceClassification.from_pretrained(MODELS / "minilm-classifier").eval()
    cases = []
    with torch.no_grad():
        for text in texts:
            enc = tok(text, truncation=True, max_length=256, return_tensors="pt")
            out = model(**enc).last_hidden_state[0]
            mask = enc["attention_mask"][0].unsqueeze(-1).float()
            emb = (out * mask).sum(0) / mask.sum().clamp(min=1e-9)
            emb = torch.nn.functional.normalize(emb, dim=0)
            enc512 = tok(text, truncation=True, max_length=512, return_tensors="pt")
            logits = clf(**enc512).logits[0]
            cases.append({
                "text": text,
                "ids": enc["input_ids"][0].tolist(),
                "embedding": [round(float(x), 7) for x in emb],
                "logits": [round(float(x), 6) for x in logits],
            })
    json.dump({"model": "all-MiniLM-L6-v2", "classifier": "minilm-classifier", "labels": clf.config.id2label,
               "torch": torch.__version__, "cases": cases}, sys.stdout, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
