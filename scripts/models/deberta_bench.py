#!/usr/bin/env python3
"""PyTorch's side of the DeBERTa benchmarks (scripts/models/gpu-deberta.sh), on a GPU machine.

    deberta_bench.py MODEL_DIR IDS_JSON [--rounds R] [--vs-f32]
    deberta_bench.py MODEL_DIR --corpus FILE.jsonl [--docs N] [--max-chars 2000] [--batch 256]

Forward (IDS_JSON from `deberta-check --dump-ids`): the same token ids in the same batches as
ours, each batch padded to its longest, tensors built on the device before the clock. The
model is NeMo's `Deberta` module (DebertaV2Model with deberta-v3's configuration at the
checkpoint's sizes, `fc` on every token, the first token's softmax), run two ways: as NeMo runs
it (f32 weights under `torch.autocast`, fp16) and as a plain fp16 model (`.half()`). The
clock covers the forward passes, the head, and copying each batch's probabilities to the host
(as ours copies each pass's logits back); R rounds, alternated. Then PyTorch's fp16 logits
against ours (in IDS_JSON); with --vs-f32, ours and autocast each against the f32 model on
every document.

Corpus: NeMo's DomainClassifier path end to end, as its TokenizerStage and ModelStage do it:
texts cut to max_chars, tokenized by the fast tokenizer in one call, sorted by length, batches
of 256 padded to their longest, autocast forward, softmax, argmax label; the clock covers
everything after reading the file (`total_s`); `with_setup_s` also covers building the model,
loading its weights onto the GPU, the tokenizer and a warm-up batch (curator's run, process start
to exit, covers its set-up).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from deberta_reference import v3_backbone  # noqa: E402


def nemo_model(model: Path):
    """NeMo's `Deberta` module: the v3 backbone (deberta_reference.py builds it) and `fc`."""
    net, heads = v3_backbone(model, "model.")
    fc = torch.nn.Linear(net.config.hidden_size, heads["fc.weight"].shape[0])
    fc.weight.data.copy_(heads["fc.weight"])
    fc.bias.data.copy_(heads["fc.bias"])
    return net.eval(), fc.eval()


def forward_batches(net, fc, inputs, autocast):
    out = []
    for ids, mask in inputs:
        with torch.autocast("cuda", dtype=torch.float16, enabled=autocast):
            features = net(ids, mask).last_hidden_state
            logits = fc(features)[:, 0, :]
            probs = torch.softmax(logits.float(), dim=1)
        out.append((logits.float().cpu(), probs.cpu()))
    return out


def padded(batch_ids, dev):
    width = max(len(x) for x in batch_ids)
    ids = torch.zeros((len(batch_ids), width), dtype=torch.long)
    mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
    for r, seq in enumerate(batch_ids):
        ids[r, : len(seq)] = torch.tensor(seq)
        mask[r, : len(seq)] = 1
    return ids.to(dev), mask.to(dev)


def bench_ids(args):
    dump = json.loads(Path(args.ids).read_text())
    ids, batches, ours, n = dump["ids"], dump["batches"], dump["logits"], dump["outputs"]
    tokens = sum(len(x) for x in ids)
    dev = torch.device("cuda")
    net, fc = nemo_model(Path(args.model))
    net, fc = net.to(dev), fc.to(dev)
    inputs = [padded([ids[i] for i in b], dev) for b in batches]
    half = (nemo_model(Path(args.model)))
    half = (half[0].to(dev).half(), half[1].to(dev).half())
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "docs": len(ids), "tokens": tokens, "batches": len(batches)}
    times = {"autocast": [], "half": []}
    with torch.no_grad():
        forward_batches(net, fc, inputs[:2], True)
        forward_batches(*half, inputs[:2], False)
        torch.cuda.synchronize()
        for _ in range(args.rounds):
            for mode in ("autocast", "half"):
                m = (net, fc, True) if mode == "autocast" else (*half, False)
                t = time.perf_counter()
                result = forward_batches(m[0], m[1], inputs, m[2])
                torch.cuda.synchronize()
                times[mode].append(time.perf_counter() - t)
                if mode == "half":
                    got = torch.cat([r[0] for r in result]).numpy()
                else:
                    got_autocast = torch.cat([r[0] for r in result]).numpy()
    for mode, ts in times.items():
        report[mode] = {"rounds_s": [round(x, 4) for x in ts], "docs_per_s": len(ids) / min(ts), "tokens_per_s": tokens / min(ts)}
    # PyTorch fp16 logits in our batches' order back to document order, against ours.
    order = [i for b in batches for i in b]
    theirs = np.zeros((len(ids), n), dtype=np.float32)
    theirs[order] = got
    ours = np.array(ours, dtype=np.float32).reshape(len(ids), n)
    report["ours_vs_torch_fp16"] = {"max_logit_delta": float(np.abs(ours - theirs).max()),
                                    "same_argmax_share": float((ours.argmax(1) == theirs.argmax(1)).mean())}
    if args.vs_f32:
        # The f32 model (no autocast) on every document: how far ours and NeMo's own fp16 path
        # (autocast) each are from it, on the same ids.
        with torch.no_grad():
            f32 = torch.cat([r[0] for r in forward_batches(net, fc, inputs, False)]).numpy()
        ref = np.zeros((len(ids), n), dtype=np.float32)
        ref[order] = f32
        auto = np.zeros((len(ids), n), dtype=np.float32)
        auto[order] = got_autocast
        for name, x in (("ours_vs_torch_f32", ours), ("autocast_vs_torch_f32", auto)):
            d = np.abs(x - ref).max(1)
            report[name] = {"max_logit_delta": float(d.max()), "p99_logit_delta": float(np.quantile(d, 0.99)),
                            "p999_logit_delta": float(np.quantile(d, 0.999)),
                            "within_5e-3_share": float((d <= 5e-3).mean()),
                            "same_argmax_share": float((x.argmax(1) == ref.argmax(1)).mean())}
    print(json.dumps(report, indent=2))


def bench_corpus(args):
    from transformers import PreTrainedTokenizerFast

    model = Path(args.model)
    texts = []
    for line in open(args.corpus, encoding="utf-8"):
        texts.append(json.loads(line)["text"])
        if len(texts) >= args.docs:
            break
    dev = torch.device("cuda")
    t_setup = time.perf_counter()
    net, fc = nemo_model(model)
    net, fc = net.to(dev), fc.to(dev)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(model / "tokenizer.json"), pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", unk_token="[UNK]")
    labels = json.loads((model / "config.json").read_text())["id2label"]
    with torch.no_grad():
        forward_batches(net, fc, [padded([[1, 5, 2]] * 4, dev)], True)
        torch.cuda.synchronize()
        t = time.perf_counter()
        enc = tok([x[: args.max_chars] for x in texts], truncation=True, max_length=args.max_len, padding=False)["input_ids"]
        t_tok = time.perf_counter() - t
        order = sorted(range(len(enc)), key=lambda i: len(enc[i]))
        preds = [None] * len(enc)
        for s in range(0, len(order), args.batch):
            idx = order[s : s + args.batch]
            ids, mask = padded([enc[i] for i in idx], dev)
            with torch.autocast("cuda", dtype=torch.float16):
                probs = torch.softmax(fc(net(ids, mask).last_hidden_state)[:, 0, :].float(), dim=1)
            for i, p in zip(idx, probs.argmax(1).tolist()):
                preds[i] = labels[str(p)]
        torch.cuda.synchronize()
        end = time.perf_counter()
        total, with_setup = end - t, end - t_setup
    print(json.dumps({"nemo_path": {"docs": len(texts), "tokenize_s": round(t_tok, 3), "total_s": round(total, 3),
                                    "docs_per_s": len(texts) / total, "setup_s": round(with_setup - total, 3),
                                    "with_setup_s": round(with_setup, 3), "docs_per_s_with_setup": len(texts) / with_setup,
                                    "batch": args.batch, "max_chars": args.max_chars}}, indent=2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("ids", nargs="?")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus")
    ap.add_argument("--docs", type=int, default=100000)
    ap.add_argument("--max-chars", type=int, default=2000)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--vs-f32", action="store_true", help="ids mode: also compare ours and autocast with the f32 model")
    args = ap.parse_args()
    bench_corpus(args) if args.corpus else bench_ids(args)


if __name__ == "__main__":
    main()
