#!/usr/bin/env python3
"""Writes the tiny Llama-family fixtures that check kvshift's CPU forward pass.

Two models with seeded random weights, each as a Hugging Face folder
(config.json + safetensors written by hand: 8-byte little-endian header length,
JSON header, raw little-endian tensor bytes) plus reference.json with the token
ids, the logits and the per-token NLL of the one numpy reference forward
(tools/llama_numpy.py) run in float64 on the files just written:

  tiny_llama  llama, untied lm_head, no biases; fp32 embeddings/norms, fp16 linear weights
  tiny_qwen2  qwen2, tied embeddings, q/k/v biases, all bf16, sharded in two files
              with model.safetensors.index.json
  tiny_gemma3 gemma3_text, tied embeddings, head_dim 16 != hidden/heads, QK norms and norms
              after each sublayer, GELU gating, two sliding-window layers (window 4 < the
              9 tokens) with their own RoPE base and one global layer; fp32

Usage: python3 tools/tiny_llama/make_fixture.py [OUT_DIR]   (default tests/fixtures)
Run with tools/.venv/bin/python (numpy). The outputs are committed; tests never run Python.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from llama_numpy import LlamaModel  # noqa: E402


def bf16_round(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def encode(arr, dtype):
    """The bytes a safetensors file stores for `arr` as `dtype`."""
    arr = np.asarray(arr, dtype=np.float32)
    if dtype == "F32":
        return arr.astype("<f4").tobytes()
    if dtype == "F16":
        return arr.astype("<f2").tobytes()
    if dtype == "BF16":
        return bf16_round(arr).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, offset, blobs = {}, 0, []
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def make(out_dir, name, cfg, dtype_of, shards, seed):
    rng = np.random.default_rng(seed)
    hid, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    n_h, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim", hid // n_h)
    gemma = cfg["model_type"] == "gemma3_text"
    shapes = {"model.embed_tokens.weight": (vocab, hid), "model.norm.weight": (hid,)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes.update({
            p + "input_layernorm.weight": (hid,),
            p + "post_attention_layernorm.weight": (hid,),
            p + "self_attn.q_proj.weight": (n_h * d, hid),
            p + "self_attn.k_proj.weight": (n_kv * d, hid),
            p + "self_attn.v_proj.weight": (n_kv * d, hid),
            p + "self_attn.o_proj.weight": (hid, n_h * d),
            p + "mlp.gate_proj.weight": (inter, hid),
            p + "mlp.up_proj.weight": (inter, hid),
            p + "mlp.down_proj.weight": (hid, inter),
        })
        if gemma:
            shapes.update({p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,),
                           p + "pre_feedforward_layernorm.weight": (hid,),
                           p + "post_feedforward_layernorm.weight": (hid,)})
        if cfg.get("attention_bias") or cfg["model_type"] == "qwen2":
            shapes.update({p + "self_attn.q_proj.bias": (n_h * d,),
                           p + "self_attn.k_proj.bias": (n_kv * d,),
                           p + "self_attn.v_proj.bias": (n_kv * d,)})
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (vocab, hid)
    stored = []
    for tname, shape in shapes.items():
        if tname.endswith("norm.weight"):  # Gemma's are w of x·(1 + w)
            arr = (0.0 if gemma else 1.0) + 0.1 * rng.standard_normal(shape)
        elif tname.endswith(".bias"):
            arr = 0.1 * rng.standard_normal(shape)
        else:
            arr = rng.standard_normal(shape) / np.sqrt(shape[-1])
        dt = dtype_of(tname)
        stored.append((tname, dt, shape, encode(arr, dt)))
    path = os.path.join(out_dir, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(path, "model.safetensors"), stored)
    else:
        half = len(stored) // 2
        parts = [stored[:half], stored[half:]]
        weight_map = {}
        for i, part in enumerate(parts):
            fname = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
            write_safetensors(os.path.join(path, fname), part)
            weight_map.update({t[0]: fname for t in part})
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(len(t[3]) for t in stored)},
                       "weight_map": weight_map}, f, indent=1)
    tokens = [int(t) for t in rng.integers(0, vocab, size=9)]
    if gemma:  # a Gemma sequence opens with BOS (kvshift's forward reads it there)
        tokens[0] = cfg["bos_token_id"]
    model = LlamaModel(path, dtype=np.float64)
    logits, nll = model.logits(tokens), model.token_nll(tokens)
    ref = {"tokens": tokens,
           "logits": [[float(f"{v:.7g}") for v in row] for row in logits],
           "nll": [float(f"{v:.9g}") for v in nll]}
    with open(os.path.join(path, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    base = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 96,
            "max_position_embeddings": 128, "hidden_act": "silu"}
    llama = dict(base, architectures=["LlamaForCausalLM"], model_type="llama",
                 rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                 torch_dtype="float16")
    qwen = dict(base, architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                torch_dtype="bfloat16")
    make(out, "tiny_llama", llama,
         lambda n: "F32" if ("norm" in n or "embed" in n or "lm_head" in n) else "F16",
         shards=1, seed=1234)
    make(out, "tiny_qwen2", qwen, lambda n: "BF16", shards=2, seed=5678)
    gemma = dict(base, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
                 num_hidden_layers=3, head_dim=16, query_pre_attn_scalar=16,
                 hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, rope_theta=1000000.0,
                 rope_local_base_freq=10000.0, rope_scaling=None, sliding_window=4,
                 layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                 attn_logit_softcapping=None, final_logit_softcapping=None,
                 tie_word_embeddings=True, bos_token_id=2, torch_dtype="float32")
    del gemma["hidden_act"]
    make(out, "tiny_gemma3", gemma, lambda n: "F32", shards=1, seed=9012)


if __name__ == "__main__":
    main()
