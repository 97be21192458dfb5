#!/usr/bin/env python3
"""Reference outputs of the random-weight DeBERTa-v3 classifiers (scripts/models/deberta_models.py)
from PyTorch/transformers on the CPU in float32, for curator-encoder's DeBERTa parity tests
(`libs/encoder/tests/deberta.rs`). Run by hand; the output is committed:

    pip install torch "transformers<5" tokenizers
    python3 scripts/models/deberta_models.py
    python3 scripts/models/deberta_reference.py > tests/parity/deberta_reference.json

The models run as their owners run them, every text of the fixture in one padded batch with
its attention mask:
- deberta-tiny-hf: DebertaV2ForSequenceClassification.from_pretrained (logits).
- deberta-tiny-nemo: NeMo's `Deberta` module: DebertaV2Model with deberta-v3-base's
  configuration at the checkpoint's sizes, `fc` on every token, the first token's logits.
- deberta-tiny-complexity: NeMo's `CustomDeberta`: masked mean pooling, one head per target,
  the logits of every head side by side, and NeMo's `process_logits` results.
Also transformers' own log-bucket positions (make_log_bucket_position) for deberta-v3's
256 buckets over 512 positions, relative distances -1100..1100.
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, DebertaV2Model, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).parent))
from fetch import read_safetensors  # noqa: E402
from reference import fixture  # noqa: E402

MODELS = Path("target/models")


def texts():
    return fixture() + [
        "Qu'est-ce que la curation de données ? Une étape qui filtre, déduplique et classe des documents.",
        "Write a Python function that returns the n-th Fibonacci number, with memoization and type hints.",
        "Summarize the following article in three bullet points: the central bank raised rates again.",
    ]


def tokenizer(model: Path):
    return PreTrainedTokenizerFast(tokenizer_file=str(model / "tokenizer.json"), pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", unk_token="[UNK]", mask_token="[MASK]")


def state(model: Path, prefix: str):
    """The checkpoint's tensors in f32: the backbone's under `prefix` (stripped), the rest
    under `__head__.`."""
    out = {}
    for name, (dtype, shape, raw) in read_safetensors(model / "model.safetensors").items():
        t = torch.from_numpy(np.frombuffer(raw, dtype={"F32": "<f4", "F16": "<f2"}[dtype]).copy()).reshape(shape).float()
        if name.startswith(prefix):
            out[name[len(prefix):]] = t
        else:
            out["__head__." + name] = t
    return out


def v3_backbone(model: Path, prefix: str):
    """NeMo's backbone: DebertaV2Model with deberta-v3's configuration at the checkpoint's sizes
    (what `AutoModel.from_pretrained(base_model)` gives NeMo), and the head tensors."""
    tensors = state(model, prefix)
    vocab, h = tensors["embeddings.word_embeddings.weight"].shape
    layers = sum(1 for k in tensors if k.endswith("attention.self.query_proj.weight"))
    config = DebertaV2Config(vocab_size=vocab, hidden_size=h, num_hidden_layers=layers, num_attention_heads=h // 64,
                             intermediate_size=tensors["encoder.layer.0.intermediate.dense.weight"].shape[0],
                             max_position_embeddings=512, relative_attention=True,
                             position_buckets=tensors["encoder.rel_embeddings.weight"].shape[0] // 2, norm_rel_ebd="layer_norm",
                             share_att_key=True, pos_att_type="p2c|c2p", layer_norm_eps=1e-7, max_relative_positions=-1,
                             position_biased_input=False, type_vocab_size=0, hidden_act="gelu")
    net = DebertaV2Model(config).eval()
    heads = {k[len("__head__."):]: v for k, v in tensors.items() if k.startswith("__head__.")}
    missing, unexpected = net.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("__head__.")}, strict=False)
    assert not unexpected and all("position_ids" in m for m in missing), (missing, unexpected)
    return net, heads


def encode(tok, batch_texts, max_len):
    return tok(batch_texts, truncation=True, max_length=max_len, padding=True, return_tensors="pt")


def nemo_process(config, logits):
    """NeMo's CustomDeberta.compute_results / process_logits, on one batch of head logits."""
    names = list(config["target_sizes"])
    out = {}
    for name, preds in zip(names, logits):
        if name == "task_type":
            top2 = torch.topk(preds, k=2, dim=1).indices
            probs = torch.softmax(preds, dim=1).gather(1, top2)
            top2_strings = [[config["task_type_map"][str(i)] for i in row] for row in top2.tolist()]
            rounded = [[round(v, 3) for v in row] for row in probs.tolist()]
            for k, row in enumerate(rounded):
                if row[1] < 0.1:
                    top2_strings[k][1] = "NA"
            out["task_type_1"] = [r[0] for r in top2_strings]
            out["task_type_2"] = [r[1] for r in top2_strings]
            out["task_type_prob"] = [r[0] for r in rounded]
        else:
            p = torch.softmax(preds, dim=1).numpy()
            score = np.sum(p * np.array(config["weights_map"][name]), axis=1) / config["divisor_map"][name]
            score = [round(float(v), 4) for v in score]
            if name == "number_of_few_shots":
                score = [x if x >= 0.05 else 0 for x in score]
            out[name] = score
    out["prompt_complexity_score"] = [
        round(0.35 * c + 0.25 * r + 0.15 * k + 0.15 * d + 0.05 * x + 0.05 * f, 5)
        for c, r, k, d, x, f in zip(out["creativity_scope"], out["reasoning"], out["constraint_ct"], out["domain_knowledge"],
                                    out["contextual_knowledge"], out["number_of_few_shots"])
    ]
    return out


def main():
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    torch.manual_seed(0)
    t = texts()
    result = {"torch": torch.__version__, "transformers": transformers.__version__, "texts": t, "models": {}}
    with torch.no_grad():
        d = MODELS / "deberta-tiny-hf"
        tok = tokenizer(d)
        enc = encode(tok, t, 512)
        net = DebertaV2ForSequenceClassification.from_pretrained(d).eval()
        logits = net(**{k: enc[k] for k in ("input_ids", "attention_mask")}).logits
        ids = [row[: int(m.sum())] for row, m in zip(enc["input_ids"].tolist(), enc["attention_mask"])]
        result["models"]["deberta-tiny-hf"] = {"max_tokens": 512, "ids": ids, "logits": logits.tolist()}

        d = MODELS / "deberta-tiny-nemo"
        enc = encode(tok, t, 1024)
        net, heads = v3_backbone(d, "model.")
        states = net(enc["input_ids"], enc["attention_mask"]).last_hidden_state
        fc = torch.nn.functional.linear(states, heads["fc.weight"], heads["fc.bias"])[:, 0, :]
        ids = [row[: int(m.sum())] for row, m in zip(enc["input_ids"].tolist(), enc["attention_mask"])]
        result["models"]["deberta-tiny-nemo"] = {"max_tokens": 1024, "ids": ids, "logits": fc.tolist(),
                                                 "probs": torch.softmax(fc, dim=1).tolist()}

        d = MODELS / "deberta-tiny-complexity"
        config = json.loads((d / "config.json").read_text())
        enc = encode(tok, t, 512)
        net, heads = v3_backbone(d, "backbone.")
        states = net(enc["input_ids"], enc["attention_mask"]).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).expand(states.size()).float()
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        logits = [torch.nn.functional.linear(pooled, heads[f"head_{i}.fc.weight"], heads[f"head_{i}.fc.bias"])
                  for i in range(len(config["target_sizes"]))]
        result["models"]["deberta-tiny-complexity"] = {"max_tokens": 512, "logits": torch.cat(logits, dim=1).tolist(),
                                                       "nemo": nemo_process(config, logits)}

        rel = torch.arange(-1100, 1101)
        result["log_buckets"] = {"bucket_size": 256, "max_position": 512, "from": -1100,
                                 "buckets": make_log_bucket_position(rel, 256, 512).long().tolist()}
    json.dump(result, sys.stdout, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
