#!/usr/bin/env python3
"""Random-weight DeBERTa-v3 classifiers in the three layouts the classifier stage reads, from a
seeded standard-library RNG (so CI builds the same bytes with no PyTorch):

- deberta-tiny-hf: transformers' DebertaV2ForSequenceClassification (config.json with
  model_type deberta-v2; `deberta.*` tensors, ContextPooler + classifier). Its settings are the
  other branches of DeBERTa-v2: no log buckets (max_relative_positions 64), separate
  pos_key_proj / pos_query_proj, no norm_rel_ebd, absolute positions and token types added.
- deberta-tiny-nemo: NeMo's model-hub layout (quality / domain / content-type classifiers):
  config.json with base_model microsoft/deberta-v3-base, fc_dropout, max_len, id2label;
  `model.*` tensors with DeBERTa-v3's settings; `fc` on the first token.
- deberta-tiny-complexity: NeMo's prompt task and complexity layout: `backbone.*`, one
  `head_i.fc` per target, target_sizes and the score maps.

Each directory gets tests/parity/tokenizers/deberta-v3-unigram.json as its tokenizer.json.
`--size base` makes deberta-v3-base-sized ones (768 wide, 12 layers, 128,100 tokens) and
`--size mdeberta` mDeBERTa-v3-base-sized ones (251,000 tokens), for the GPU machine (NumPy,
F16 tensors; ids past the tokenizer's 4,000 are never used, which costs nothing to check).

    python3 scripts/models/deberta_models.py [--out target/models] [--size tiny|base|mdeberta]
"""
import argparse
import json
import random
import shutil
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fetch import write_safetensors  # noqa: E402

TOKENIZER = Path("tests/parity/tokenizers/deberta-v3-unigram.json")
SEED = 20261129

# NeMo's prompt task and complexity targets, in its order (random maps of the same shape).
TARGETS = {"task_type": 11, "creativity_scope": 3, "reasoning": 2, "contextual_knowledge": 2, "number_of_few_shots": 6,
           "domain_knowledge": 4, "no_label_reason": 1, "constraint_ct": 2}
TASK_TYPES = ["Open QA", "Closed QA", "Summarization", "Text Generation", "Code Generation", "Chatbot", "Classification",
              "Rewrite", "Brainstorming", "Extraction", "Other"]

SIZES = {
    # hidden, layers, intermediate, vocab (None: the tokenizer's)
    "tiny": (128, 2, 256, None),
    "base": (768, 12, 3072, 128100),
    "mdeberta": (768, 12, 3072, 251000),
}


class Rng:
    """Uniform values with a given standard deviation. Tiny models use the standard library
    (identical on every Python, no NumPy in CI); base-sized ones NumPy, stored as F16."""

    def __init__(self, seed, big=False):
        self.r = random.Random(seed)
        self.np = None
        if big:
            import numpy
            self.np = (numpy, numpy.random.default_rng(seed))

    def _uniform(self, n, a):
        if self.np:
            np, rng = self.np
            return rng.uniform(-a, a, n).astype("<f2").tobytes()
        r = self.r.random
        return struct.pack(f"<{n}f", *[(2.0 * r() - 1.0) * a for _ in range(n)])

    def tensor(self, shape, std):
        n = 1
        for d in shape:
            n *= d
        return ("F16" if self.np else "F32", list(shape), self._uniform(n, std * 3 ** 0.5))

    def ones_ish(self, n):
        if self.np:
            np, rng = self.np
            return ("F16", [n], (1.0 + rng.uniform(-0.2, 0.2, n)).astype("<f2").tobytes())
        r = self.r.random
        return ("F32", [n], struct.pack(f"<{n}f", *[1.0 + 0.2 * (2.0 * r() - 1.0) for _ in range(n)]))


def vocab_size():
    return len(json.loads(TOKENIZER.read_text())["model"]["vocab"])


# Query/key weights this many times a trained model's scale, so that random attention is far
# from uniform (the committed references use 2.5; `--qk-gain 1` makes better-conditioned models,
# whose fp16 error is closer to a trained model's).
QK_GAIN = 2.5


def backbone(rng, prefix, h, layers, inter, vocab, *, rel_rows, norm_rel, separate_pos, absolute, types):
    t = {}
    t[f"{prefix}embeddings.word_embeddings.weight"] = rng.tensor([vocab, h], 1.0)
    if absolute:
        t[f"{prefix}embeddings.position_embeddings.weight"] = rng.tensor([512, h], 0.5)
    if types:
        t[f"{prefix}embeddings.token_type_embeddings.weight"] = rng.tensor([types, h], 0.5)
    t[f"{prefix}embeddings.LayerNorm.weight"] = rng.ones_ish(h)
    t[f"{prefix}embeddings.LayerNorm.bias"] = rng.tensor([h], 0.05)
    t[f"{prefix}encoder.rel_embeddings.weight"] = rng.tensor([rel_rows, h], 1.0)
    if norm_rel:
        t[f"{prefix}encoder.LayerNorm.weight"] = rng.ones_ish(h)
        t[f"{prefix}encoder.LayerNorm.bias"] = rng.tensor([h], 0.05)
    std = 1.0 / h ** 0.5
    for l in range(layers):
        p = f"{prefix}encoder.layer.{l}."
        names = ["query_proj", "key_proj", "value_proj"] + (["pos_key_proj", "pos_query_proj"] if separate_pos else [])
        for n in names:
            # Larger query/key weights than a trained init, so attention is far from uniform.
            t[f"{p}attention.self.{n}.weight"] = rng.tensor([h, h], QK_GAIN * std if n != "value_proj" else std)
            t[f"{p}attention.self.{n}.bias"] = rng.tensor([h], 0.1)
        t[f"{p}attention.output.dense.weight"] = rng.tensor([h, h], std)
        t[f"{p}attention.output.dense.bias"] = rng.tensor([h], 0.05)
        t[f"{p}attention.output.LayerNorm.weight"] = rng.ones_ish(h)
        t[f"{p}attention.output.LayerNorm.bias"] = rng.tensor([h], 0.05)
        t[f"{p}intermediate.dense.weight"] = rng.tensor([inter, h], std)
        t[f"{p}intermediate.dense.bias"] = rng.tensor([inter], 0.05)
        t[f"{p}output.dense.weight"] = rng.tensor([h, inter], 1.0 / inter ** 0.5)
        t[f"{p}output.dense.bias"] = rng.tensor([h], 0.05)
        t[f"{p}output.LayerNorm.weight"] = rng.ones_ish(h)
        t[f"{p}output.LayerNorm.bias"] = rng.tensor([h], 0.05)
    return t


def write(dest: Path, config, tensors):
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    shutil.copy(TOKENIZER, dest / "tokenizer.json")
    write_safetensors(dest / "model.safetensors", tensors)


def make(out: Path, size: str):
    h, layers, inter, vocab = SIZES[size]
    vocab = vocab or vocab_size()
    suffix = "" if size == "tiny" else f"-{size}"
    # Heads scaled so that logits stay a few units wide at any width (the tiny ones as made first).
    head_std = 1.0 if size == "tiny" else 3.0 / h ** 0.5
    made = []

    dest = out / f"deberta-tiny-hf{suffix}".replace("tiny-hf-", "hf-")
    if not (dest / "model.safetensors").exists():
        rng = Rng(SEED, size != "tiny")
        hh, heads = (64, 4) if size == "tiny" else (h, h // 64)
        labels = ["negative", "neutral", "positive"]
        config = {"architectures": ["DebertaV2ForSequenceClassification"], "model_type": "deberta-v2", "vocab_size": vocab,
                  "hidden_size": hh, "num_hidden_layers": layers, "num_attention_heads": heads,
                  "intermediate_size": 2 * hh if size == "tiny" else inter, "hidden_act": "gelu", "layer_norm_eps": 1e-7,
                  "max_position_embeddings": 512, "relative_attention": True, "position_buckets": -1,
                  "max_relative_positions": 64, "pos_att_type": "c2p|p2c", "share_att_key": False, "norm_rel_ebd": "none",
                  "position_biased_input": True, "type_vocab_size": 2, "pooler_hidden_size": hh, "pooler_hidden_act": "gelu",
                  "pooler_dropout": 0, "id2label": {str(i): l for i, l in enumerate(labels)},
                  "label2id": {l: i for i, l in enumerate(labels)}, "pad_token_id": 0}
        t = backbone(rng, "deberta.", hh, layers, config["intermediate_size"], vocab, rel_rows=128, norm_rel=False,
                     separate_pos=True, absolute=True, types=2)
        t["pooler.dense.weight"] = rng.tensor([hh, hh], 1.0 / hh ** 0.5)
        t["pooler.dense.bias"] = rng.tensor([hh], 0.05)
        t["classifier.weight"] = rng.tensor([len(labels), hh], head_std)
        t["classifier.bias"] = rng.tensor([len(labels)], 0.1)
        write(dest, config, t)
    made.append(dest)

    dest = out / f"deberta-tiny-nemo{suffix}".replace("tiny-nemo-", "nemo-")
    if not (dest / "model.safetensors").exists():
        rng = Rng(SEED + 1, size != "tiny")
        labels = ["Adult", "Arts_and_Entertainment", "Business_and_Industrial", "Computers_and_Electronics", "Health"]
        config = {"base_model": "microsoft/deberta-v3-base", "fc_dropout": 0.2, "max_len": 1024,
                  "id2label": {str(i): l for i, l in enumerate(labels)}, "label2id": {l: i for i, l in enumerate(labels)}}
        t = backbone(rng, "model.", h, layers, inter, vocab, rel_rows=512, norm_rel=True, separate_pos=False,
                     absolute=False, types=0)
        t["fc.weight"] = rng.tensor([len(labels), h], head_std)
        t["fc.bias"] = rng.tensor([len(labels)], 0.1)
        write(dest, config, t)
    made.append(dest)

    dest = out / f"deberta-tiny-complexity{suffix}".replace("tiny-complexity-", "complexity-")
    if not (dest / "model.safetensors").exists():
        rng = Rng(SEED + 2, size != "tiny")
        weights_map = {name: [round(i / max(n - 1, 1), 3) for i in range(n)] for name, n in TARGETS.items() if name != "task_type"}
        divisor_map = {name: 1.0 for name in weights_map}
        divisor_map["number_of_few_shots"] = 5.0
        weights_map["number_of_few_shots"] = [float(i) for i in range(6)]
        config = {"base_model": "microsoft/deberta-v3-base", "max_len": 512, "target_sizes": TARGETS,
                  "task_type_map": {str(i): n for i, n in enumerate(TASK_TYPES)}, "weights_map": weights_map,
                  "divisor_map": divisor_map}
        t = backbone(rng, "backbone.", h, layers, inter, vocab, rel_rows=512, norm_rel=True, separate_pos=False,
                     absolute=False, types=0)
        for i, n in enumerate(TARGETS.values()):
            t[f"head_{i}.fc.weight"] = rng.tensor([n, h], 1.5 * head_std)
            t[f"head_{i}.fc.bias"] = rng.tensor([n], 0.1)
        write(dest, config, t)
    made.append(dest)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="target/models")
    ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
    ap.add_argument("--qk-gain", type=float, default=QK_GAIN)
    args = ap.parse_args()
    globals()["QK_GAIN"] = args.qk_gain
    for d in make(Path(args.out), args.size):
        print(d)


if __name__ == "__main__":
    main()
