#!/usr/bin/env python3
"""PyTorch baselines for the encoder stages, on a GPU machine (no network needed).

    python3 scripts/models/torch_bench.py MODEL_DIR IDS_FILE [--budget T] [--max-docs N]
                                          [--rounds R] [--corpus FILE.jsonl --docs N]

The forward pass, fairly: the token ids in IDS_FILE are the ones ours ran (written by
`encoder-check --dump-ids`), cut into the same batches ours runs (sorted longest first,
grouped under a budget of padded tokens, each batch padded to its longest rounded up to a
multiple of 8: `libs/encoder/src/batching.rs`, same --budget and --max-docs). Every batch's
ids and mask are built and moved to the device *before* the clock starts; the timed region is
the forward pass plus masked mean pooling, fp16 (transformers' BertModel with SDPA attention
when transformers is installed, else a plain PyTorch BERT on scaled_dot_product_attention),
under torch.inference_mode, after a full untimed warm-up round. Two ways:
- `per_batch`: the pooled vectors of each batch copied to the host (`.cpu()`) before the next
  batch starts, as a stage that hands vectors back per batch would;
- `one_sync`: every batch queued, one torch.cuda.synchronize() at the end (the pooled vectors
  stay on the device).
Each is timed --rounds times, alternating; the best and the range are reported.

With --corpus, sentence-transformers' `encode` end to end on the corpus texts (fp16,
batch_size 1024), when it is installed. Prints one JSON object.
"""
import argparse
import json
import struct
import time
from pathlib import Path

import torch
import torch.nn.functional as F


def read_ids(path):
    data = Path(path).read_bytes()
    n = struct.unpack_from("<I", data, 0)[0]
    at, seqs = 4, []
    for _ in range(n):
        k = struct.unpack_from("<I", data, at)[0]
        at += 4
        seqs.append(list(struct.unpack_from(f"<{k}I", data, at)))
        at += 4 * k
    return seqs


def padded_len(n):
    return (n + 7) // 8 * 8


def by_token_budget(lengths, budget, max_docs):
    """libs/encoder/src/batching.rs::by_token_budget, line for line."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches, current, width = [], [], 0
    for i in order:
        if not current:
            width = padded_len(max(lengths[i], 1))
        elif (len(current) + 1) * width > budget or len(current) >= max(max_docs, 1):
            batches.append(current)
            current = []
            width = padded_len(max(lengths[i], 1))
        current.append(i)
    if current:
        batches.append(current)
    return batches


def load_safetensors(path):
    data = Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(body[a:b]), dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


class PlainBert(torch.nn.Module):
    """BERT's forward in plain PyTorch (for machines without transformers)."""

    def __init__(self, cfg, w):
        super().__init__()
        self.cfg, self.w = cfg, {k: v.cuda().half() for k, v in w.items() if v.dtype != torch.int64}

    def forward(self, ids, mask):
        w, c = self.w, self.cfg
        h, heads = c["hidden_size"], c["num_attention_heads"]
        b, l = ids.shape
        p = lambda k: w[k]
        x = p("embeddings.word_embeddings.weight")[ids] + p("embeddings.position_embeddings.weight")[:l] + p("embeddings.token_type_embeddings.weight")[0]
        x = F.layer_norm(x, (h,), p("embeddings.LayerNorm.weight"), p("embeddings.LayerNorm.bias"), c.get("layer_norm_eps", 1e-12))
        attn_mask = mask[:, None, None, :].bool()
        for i in range(c["num_hidden_layers"]):
            pre = f"encoder.layer.{i}."
            lin = lambda name, t: F.linear(t, p(pre + name + ".weight"), p(pre + name + ".bias"))
            q, k, v = (lin(f"attention.self.{n}", x).view(b, l, heads, -1).transpose(1, 2) for n in ("query", "key", "value"))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).transpose(1, 2).reshape(b, l, h)
            x = F.layer_norm(lin("attention.output.dense", a) + x, (h,), p(pre + "attention.output.LayerNorm.weight"), p(pre + "attention.output.LayerNorm.bias"), 1e-12)
            y = lin("output.dense", F.gelu(lin("intermediate.dense", x)))
            x = F.layer_norm(y + x, (h,), p(pre + "output.LayerNorm.weight"), p(pre + "output.LayerNorm.bias"), 1e-12)
        return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("ids")
    ap.add_argument("--budget", type=int, default=65536, help="padded tokens per batch (ours: max_batch_tokens)")
    ap.add_argument("--max-docs", type=int, default=1024, help="documents per batch at most (ours: model_inference_batch_size)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="also print PyTorch's kernel times (torch.profiler) over one round")
    ap.add_argument("--classifier", help="also time this sequence classifier's forward (logits to the host) on the same batches")
    ap.add_argument("--corpus")
    ap.add_argument("--docs", type=int, default=100000)
    args = ap.parse_args()
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "budget": args.budget, "max_docs": args.max_docs}
    seqs = read_ids(args.ids)
    try:
        from transformers import BertModel
        model = BertModel.from_pretrained(args.model, torch_dtype=torch.float16, attn_implementation="sdpa").cuda().eval()
        run = lambda ids, mask: model(input_ids=ids, attention_mask=mask).last_hidden_state
        report["impl"] = "transformers BertModel (sdpa)"
    except Exception as e:  # no transformers here
        cfg = json.loads((Path(args.model) / "config.json").read_text())
        model = PlainBert(cfg, load_safetensors(Path(args.model) / "model.safetensors"))
        run = model.forward
        report["impl"] = f"plain PyTorch BERT (sdpa); transformers unavailable: {type(e).__name__}"
    lengths = [len(s) for s in seqs]
    batches = by_token_budget(lengths, args.budget, args.max_docs)
    # Every batch on the device before any clock starts.
    prepared = []
    for bi in batches:
        l = padded_len(max(lengths[i] for i in bi))
        ids = torch.zeros((len(bi), l), dtype=torch.int64)
        mask = torch.zeros((len(bi), l), dtype=torch.int64)
        for r, i in enumerate(bi):
            ids[r, :lengths[i]] = torch.tensor(seqs[i])
            mask[r, :lengths[i]] = 1
        prepared.append((ids.cuda(), mask.cuda()))
    torch.cuda.synchronize()

    def pooled(ids, mask):
        out = run(ids, mask)
        m = mask.unsqueeze(-1).to(out.dtype)
        return ((out * m).sum(1) / m.sum(1)).float()

    def per_batch():
        for ids, mask in prepared:
            _ = pooled(ids, mask).cpu()

    def one_sync():
        keep = [pooled(ids, mask) for ids, mask in prepared]
        torch.cuda.synchronize()
        return keep

    times = {"per_batch": [], "one_sync": []}
    with torch.inference_mode():
        one_sync()  # warm-up: every shape once
        for _ in range(args.rounds):
            for name, fn in (("per_batch", per_batch), ("one_sync", one_sync)):
                torch.cuda.synchronize()
                t = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                times[name].append(time.perf_counter() - t)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with torch.inference_mode(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            one_sync()
        report["profile"] = prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=70)
    if args.classifier:
        # The classifier's forward alone on the same batches: transformers'
        # BertForSequenceClassification (pooler + head), fp16 SDPA, logits to the host per
        # batch (as ours: one wait per pass, the head's output copied back).
        from transformers import AutoModelForSequenceClassification
        clf = AutoModelForSequenceClassification.from_pretrained(args.classifier, torch_dtype=torch.float16, attn_implementation="sdpa").cuda().eval()
        clf_times = []
        with torch.inference_mode():
            for ids, mask in prepared:
                clf(input_ids=ids, attention_mask=mask)
            for _ in range(args.rounds):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for ids, mask in prepared:
                    _ = clf(input_ids=ids, attention_mask=mask).logits.float().cpu()
                torch.cuda.synchronize()
                clf_times.append(time.perf_counter() - t)
        report["classifier_seconds"] = [round(t, 4) for t in clf_times]
        report["classifier_docs_per_s"] = len(seqs) / min(clf_times)
    tokens = sum(lengths)
    padded = sum(len(b) * padded_len(max(lengths[i] for i in b)) for b in batches)
    report.update(docs=len(seqs), tokens=tokens, padded_tokens=padded, batches=len(batches))
    for name, ts in times.items():
        report[f"{name}_seconds"] = [round(t, 4) for t in ts]
        report[f"{name}_tokens_per_s"] = tokens / min(ts)
        report[f"{name}_docs_per_s"] = len(seqs) / min(ts)
    if args.corpus:
        try:
            from sentence_transformers import SentenceTransformer
            texts = []
            for line in open(args.corpus):
                texts.append(json.loads(line)["text"])
                if len(texts) >= args.docs:
                    break
            st = SentenceTransformer(args.model, device="cuda")
            st.half()
            st.encode(texts[:2048], batch_size=1024)
            t = time.perf_counter()
            st.encode(texts, batch_size=1024)
            report["st_encode_docs_per_s"] = len(texts) / (time.perf_counter() - t)
        except Exception as e:
            report["st_encode"] = f"unavailable: {type(e).__name__}: {e}"[:200]
    table = report.pop("profile", None)
    print(json.dumps(report, indent=2))
    if table:
        print(table)


if __name__ == "__main__":
    main()
