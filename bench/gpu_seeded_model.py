#!/usr/bin/env python3
"""Writes a Hugging Face-style Llama folder with SEEDED RANDOM weights for bench/gpu_check.sh:
config.json (copied) and model.safetensors in bf16, every tensor kvshift's loader reads
(model.embed_tokens, per layer the attention and MLP projections and both norms,
model.norm; lm_head when the embeddings are not tied). Linear weights are seeded values of
random sign and magnitude in [2^-7, 2^-6), norms 1, biases 0. The GPU machine cannot receive the real weights (too large to carry);
the kernels' timings depend on the shapes only. Standard library only.

usage: gpu_seeded_model.py CONFIG_JSON OUT_DIR [--seed N]
"""
import argparse
import json
import os
import random
import struct
import sys


def random_bf16(rng, shape):
    """Seeded bf16 values of random sign and magnitude in [2^-7, 2^-6) (exponent fixed, sign and
    mantissa from rng's bytes): no NaN or Inf, standard library speed (bytes.translate)."""
    n = 1
    for s in shape:
        n *= s
    data = bytearray(rng.randbytes(2 * n))
    data[0::2] = bytes(data[0::2]).translate(LOW_BYTE)  # exponent's low bit 0, 7 mantissa bits
    data[1::2] = bytes(data[1::2]).translate(HIGH_BYTE)  # sign, exponent 0x78 >> 1
    return bytes(data)


LOW_BYTE = bytes(b & 0x7F for b in range(256))
HIGH_BYTE = bytes((b & 0x80) | 0x3C for b in range(256))


def const_bf16(shape, value):
    n = 1
    for s in shape:
        n *= s
    bits = struct.unpack("<I", struct.pack("<f", value))[0] >> 16
    return struct.pack("<H", bits) * n


def tensors_of(cfg):
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    qh, kvh = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", h // qh)
    out = [("model.embed_tokens.weight", [v, h], "normal")]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", [h], "one"),
                (p + "self_attn.q_proj.weight", [qh * hd, h], "normal"),
                (p + "self_attn.k_proj.weight", [kvh * hd, h], "normal"),
                (p + "self_attn.v_proj.weight", [kvh * hd, h], "normal"),
                (p + "self_attn.o_proj.weight", [h, qh * hd], "normal"),
                (p + "post_attention_layernorm.weight", [h], "one"),
                (p + "mlp.gate_proj.weight", [f, h], "normal"),
                (p + "mlp.up_proj.weight", [f, h], "normal"),
                (p + "mlp.down_proj.weight", [h, f], "normal")]
        if cfg.get("attention_bias"):
            out += [(p + "self_attn.q_proj.bias", [qh * hd], "zero"),
                    (p + "self_attn.k_proj.bias", [kvh * hd], "zero"),
                    (p + "self_attn.v_proj.bias", [kvh * hd], "zero")]
    out.append(("model.norm.weight", [h], "one"))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [v, h], "normal"))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    header, offset, specs = {}, 0, tensors_of(cfg)
    for name, shape, _ in specs:
        n = 2
        for s in shape:
            n *= s
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt", "note": f"seeded random weights, seed {args.seed}"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    tmp = os.path.join(args.out, "model.safetensors.tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape, kind in specs:
            if kind == "normal":
                f.write(random_bf16(rng, shape))
            else:
                f.write(const_bf16(shape, 1.0 if kind == "one" else 0.0))
    os.replace(tmp, os.path.join(args.out, "model.safetensors"))
    cfg = dict(cfg, torch_dtype="bfloat16")
    cfg["_comment"] = f"SEEDED RANDOM weights (bench/gpu_seeded_model.py, seed {args.seed}), not a trained model"
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"gpu_seeded_model: wrote {args.out} ({offset / 1e6:.0f} MB of bf16, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
