#!/usr/bin/env python3
"""A tiny Llama-architecture GGUF model with random weights, for tests that need a real
OpenAI-compatible server on a CPU (llama.cpp's, through llama-cpp-python[server]).

It answers in bytes chosen by random weights: what matters to the tests is that a real
server tokenizes, schedules, generates, counts usage and fails as servers do. The vocabulary
is SentencePiece-style byte fallback (<0x00>..<0xFF>) plus the three control tokens, and a
chat template, so /v1/chat/completions works. Deterministic for a given --seed.

    python3 scripts/models/tiny_gguf.py OUT.gguf [--seed 0] [--layers 2] [--dim 64]
"""

import argparse

import numpy as np
import gguf

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=16384)
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{b:02X}>".encode() for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    vocab, dim, ff = len(tokens), a.dim, a.dim * 4

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("curator-tiny-random")
    w.add_context_length(a.ctx)
    w.add_embedding_length(dim)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.heads)
    w.add_rope_dimension_count(dim // a.heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_chat_template(CHAT_TEMPLATE)

    def t(name: str, *shape: int, scale: float = 0.2) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", vocab, dim, scale=1.0)
    for i in range(a.layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(dim, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(dim, np.float32))
        for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t(f"blk.{i}.{n}.weight", dim, dim)
        t(f"blk.{i}.ffn_gate.weight", ff, dim)
        t(f"blk.{i}.ffn_up.weight", ff, dim)
        t(f"blk.{i}.ffn_down.weight", dim, ff)
    w.add_tensor("output_norm.weight", np.ones(dim, np.float32))
    t("output.weight", vocab, dim, scale=1.0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
