#!/usr/bin/env python3
"""PyTorch baselines for the encoder stages, on a GPU machine (no network needed).

    python3 scripts/models/torch_bench.py MODEL_DIR IDS_FILE [--corpus FILE.jsonl --docs N]

1. forward pass only, fp16, length-sorted batches of --batch (1024) sequences padded to the
   batch's longest, on the token ids in IDS_FILE (written by `encoder-check --dump-ids`, so
   both sides run the same tokens): transformers' BertModel with SDPA attention when
   transformers is installed, else a plain PyTorch BERT with scaled_dot_product_attention.
   Mean pooling included. Timed after a warm-up, with torch.cuda.synchronize().
2. sentence-transformers' encode() end to end on the corpus texts, when it is installed.
Prints one JSON object.
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
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--corpus")
    ap.add_argument("--docs", type=int, default=100000)
    args = ap.parse_args()
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
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
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    batches = [order[i:i + args.batch] for i in range(0, len(order), args.batch)]

    def forward_all(limit=None):
        for bi in batches[:limit]:
            l = len(seqs[bi[0]])
            ids = torch.zeros((len(bi), l), dtype=torch.int64)
            mask = torch.zeros((len(bi), l), dtype=torch.int64)
            for r, i in enumerate(bi):
                ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
                mask[r, :len(seqs[i])] = 1
            ids, mask = ids.cuda(non_blocking=True), mask.cuda(non_blocking=True)
            out = run(ids, mask)
            m = mask.unsqueeze(-1).to(out.dtype)
            _ = ((out * m).sum(1) / m.sum(1)).float().cpu()

    with torch.inference_mode():
        forward_all(3)
        torch.cuda.synchronize()
        t = time.perf_counter()
        forward_all()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
    tokens = sum(len(s) for s in seqs)
    report.update(docs=len(seqs), forward_docs_per_s=len(seqs) / dt, forward_tokens_per_s=tokens / dt, batch=args.batch)
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
            st.encode(texts[:2048], batch_size=256)
            t = time.perf_counter()
            st.encode(texts, batch_size=256)
            report["st_encode_docs_per_s"] = len(texts) / (time.perf_counter() - t)
        except Exception as e:
            report["st_encode"] = f"unavailable: {type(e).__name__}: {e}"[:200]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
