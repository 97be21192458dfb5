#!/usr/bin/env python3
"""The reference tokenized files our `megatron` and `datatrove_tokens` sinks are compared with
byte for byte (tests/e2e/tokens.rs), written by the tools themselves:

    tokens_reference.py megatron  --tokenizer FILE --eos TOKEN [--no-eod] --out PREFIX JSONL...
    tokens_reference.py merge     --out PREFIX PREFIX...
    tokens_reference.py read      --tokenizer FILE --eos TOKEN [--no-eod] PREFIX JSONL...
    tokens_reference.py datatrove --tokenizer FILE [--eos TOKEN] [--seed N [--max-tokens-per-file T]
                                  [--shuffle-chunk-size C [--no-shuffle-documents]]] [--save-loss] --out DIR JSONL...

- megatron: Megatron-LM's `tools/preprocess_data.py --append-eod` on one worker, i.e. its
  `Encoder.encode` (one sentence per document, no splitting) and megatron-core's own
  `IndexedDatasetBuilder` (`add_document`, `finalize`). The tokenizer is Megatron's
  `HuggingFaceTokenizer`, whose `text_to_ids` is `PreTrainedTokenizerFast(text).input_ids`:
  the `tokenizers` library's `encode(text, add_special_tokens=True)` without truncation, and
  `eod` the id of the eos token.
- merge: `tools/merge_datasets.py` (`IndexedDatasetBuilder.add_index` per prefix, in order).
- read: megatron-core's `IndexedDataset` reads PREFIX back; every document must be the
  tokenizer's ids of the JSONL's text (+ eod). Prints the counts.
- datatrove: datatrove's `DocumentTokenizer(shuffle_documents=False)` run on the documents
  (rank 0), or with `--seed N` `DocumentTokenizer(seed=N)` (its documents shuffled), its
  files moved to DIR/out.ds, .ds.index, .ds.metadata; with `--max-tokens-per-file T` as
  well, its split files (sub-ranks 0, 1, …) moved to DIR/out.ds, DIR/out_00001.ds, …;
  `--shuffle-chunk-size C` then shuffles chunks of C tokens (`--no-shuffle-documents`: only
  those), its `chunk_shuffled` files moved the same way. `--save-loss`: with
  `save_loss_metadata=True`, each document's JSON fields but text and id as its metadata
  (`no_loss_ranges` among them), the `.ds.loss` files moved too.

megatron-core's `indexed_dataset.py` imports torch but the paths run here use only numpy;
torch (3 GB with its CUDA wheels) is stubbed with the two names the module refers to, and
megatron-core's package `__init__` (which needs the real torch) is not run. Versions are
pinned by scripts/test.sh.
"""
import argparse
import gzip
import importlib
import json
import os
import shutil
import sys
import tempfile
import types


def load_indexed_dataset():
    """megatron-core's megatron/core/datasets/indexed_dataset.py, as shipped, without torch."""
    if "torch" not in sys.modules:
        torch = types.ModuleType("torch")
        torch.Tensor = object
        torch.utils = types.ModuleType("torch.utils")
        torch.utils.data = types.ModuleType("torch.utils.data")
        torch.utils.data.Dataset = object
        sys.modules.update({"torch": torch, "torch.utils": torch.utils, "torch.utils.data": torch.utils.data})
    spec = importlib.util.find_spec("megatron.core")
    if spec is None:
        sys.exit("megatron-core is not installed (pip install --no-deps megatron-core==0.16.1)")
    root = spec.submodule_search_locations[0]
    # Packages as bare namespaces over the installed files: their __init__s import torch.
    for name, path in [("megatron", os.path.dirname(root)), ("megatron.core", root), ("megatron.core.datasets", os.path.join(root, "datasets"))]:
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        sys.modules[name] = mod
    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = lambda logger, level, msg, *a, **k: None
    sys.modules["megatron.core.utils"] = utils
    return importlib.import_module("megatron.core.datasets.indexed_dataset")


def records(paths):
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def documents(paths):
    for r in records(paths):
        yield r["text"]


def tokenizer_of(path):
    from tokenizers import Tokenizer

    t = Tokenizer.from_file(path)
    t.no_truncation()
    t.no_padding()
    return t


def megatron_ids(tok, text, eod):
    # preprocess_data.py's Encoder.encode, one sentence per document.
    doc_ids, lens = [], []
    ids = tok.encode(text).ids
    if len(ids) > 0:
        doc_ids.extend(ids)
        lens.append(len(ids))
    if len(doc_ids) > 0 and eod is not None:
        doc_ids.append(eod)
        lens[-1] += 1
    return doc_ids, lens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["megatron", "merge", "read", "datatrove"])
    ap.add_argument("--tokenizer")
    ap.add_argument("--eos")
    ap.add_argument("--no-eod", action="store_true")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--max-tokens-per-file", type=int)
    ap.add_argument("--shuffle-chunk-size", type=int)
    ap.add_argument("--no-shuffle-documents", action="store_true")
    ap.add_argument("--save-loss", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args()

    if a.mode in ("megatron", "merge", "read"):
        ix = load_indexed_dataset()
    if a.mode in ("megatron", "read"):
        tok = tokenizer_of(a.tokenizer)
        eod = None if a.no_eod else tok.token_to_id(a.eos)
        # preprocess_data.py: dtype=DType.optimal_dtype(tokenizer.vocab_size), vocab_size = len(tokenizer).
        dtype = ix.DType.optimal_dtype(tok.get_vocab_size(with_added_tokens=True))

    if a.mode == "megatron":
        builder = ix.IndexedDatasetBuilder(a.out + ".bin", dtype=dtype)
        for text in documents(a.inputs):
            ids, lens = megatron_ids(tok, text, eod)
            builder.add_document(ids, lens)
        builder.finalize(a.out + ".idx")
    elif a.mode == "merge":
        first = ix.IndexedDataset(a.inputs[0])
        builder = ix.IndexedDatasetBuilder(a.out + ".bin", dtype=first.index.dtype)
        del first
        for prefix in a.inputs:
            builder.add_index(prefix)
        builder.finalize(a.out + ".idx")
    elif a.mode == "read":
        ds = ix.IndexedDataset(a.inputs[0])
        texts = list(documents(a.inputs[1:]))
        want = [megatron_ids(tok, t, eod)[0] for t in texts]
        want_nonempty = [w for w in want if w]
        assert len(ds) == len(want_nonempty), (len(ds), len(want_nonempty))
        assert len(ds.document_indices) == len(texts) + 1, (len(ds.document_indices), len(texts))
        for i, w in enumerate(want_nonempty):
            got = ds[i].tolist()
            assert got == w, f"sequence {i}: {got[:20]} != {w[:20]}"
        print(json.dumps({"sequences": len(ds), "documents": len(texts), "tokens": int(sum(len(w) for w in want))}))
    else:
        from datatrove.data import Document
        from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer

        work = tempfile.mkdtemp()
        shuffle = a.seed is not None
        step = DocumentTokenizer(
            work,
            tokenizer_name_or_path=a.tokenizer,
            eos_token=a.eos,
            shuffle_documents=shuffle and not a.no_shuffle_documents,
            seed=a.seed,
            max_tokens_per_file=a.max_tokens_per_file,
            shuffle_chunk_size=a.shuffle_chunk_size,
            save_loss_metadata=a.save_loss,
        )
        docs = (
            Document(text=r["text"], id=str(i), metadata={k: v for k, v in r.items() if k not in ("text", "id")})
            for i, r in enumerate(records(a.inputs))
        )
        step.run(docs, rank=0)
        os.makedirs(a.out, exist_ok=True)
        if not shuffle:
            names = [("00000_unshuffled.ds", "out.ds")]
        else:
            last = "_chunk_shuffled.ds" if a.shuffle_chunk_size else "_doc_shuffled.ds"
            subs = sorted(n for n in os.listdir(work) if n.endswith(last))
            names = [(n, "out.ds" if k == 0 else f"out_{k:05d}.ds") for k, n in enumerate(subs)]
        exts = ("", ".index", ".metadata", ".loss") if a.save_loss else ("", ".index", ".metadata")
        for theirs, ours in names:
            for ext in exts:
                shutil.move(os.path.join(work, theirs + ext), os.path.join(a.out, ours + ext))
        left = os.listdir(work)
        assert not left, f"files not compared: {left}"
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
