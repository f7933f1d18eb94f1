#!/usr/bin/env python3
"""Converts a llama.cpp GGUF (llama architecture) into a Hugging Face-style model folder.

Writes config.json (LlamaForCausalLM, every value read from the GGUF metadata), model.safetensors
(all tensors dequantised to float32 under Hugging Face names; Q/K rows restored from llama.cpp's
adjacent-pair RoPE order to the half-split order) and tokenizer.json (byte-level BPE rebuilt from the
GGUF vocabulary). Float32 because Q4_1 values d*q+m are not representable in bf16 in general: the
dequantised model is then exactly the GGUF's model. Output is staged in a temporary folder and renamed
into place, so a failed run leaves no half-written model. Leaves out other architectures and MoE.

Usage: convert_gguf.py --gguf FILE --out models/smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_quants import GGML_TYPES, dequantize, unpermute_from_gguf  # noqa: E402
from gguf_tokenizer import build_tokenizer  # noqa: E402

# GGUF per-layer tensor name -> Hugging Face name (N is the layer index).
LAYER_NAMES = {
    "attn_norm": "model.layers.{}.input_layernorm.weight",
    "ffn_norm": "model.layers.{}.post_attention_layernorm.weight",
    "attn_q": "model.layers.{}.self_attn.q_proj.weight",
    "attn_k": "model.layers.{}.self_attn.k_proj.weight",
    "attn_v": "model.layers.{}.self_attn.v_proj.weight",
    "attn_output": "model.layers.{}.self_attn.o_proj.weight",
    "ffn_gate": "model.layers.{}.mlp.gate_proj.weight",
    "ffn_up": "model.layers.{}.mlp.up_proj.weight",
    "ffn_down": "model.layers.{}.mlp.down_proj.weight",
}
GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def field(reader: GGUFReader, key: str, default=None):
    """Returns a GGUF metadata value (scalars, strings, arrays), or default when absent."""
    f = reader.fields.get(key)
    if f is None:
        if default is None:
            raise KeyError(f"GGUF metadata key {key!r} is missing")
        return default
    return f.contents()


def hf_name(gguf_name: str) -> str:
    """Maps a GGUF tensor name to its Hugging Face name."""
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in LAYER_NAMES:
        return LAYER_NAMES[parts[2]].format(int(parts[1]))
    raise ValueError(f"GGUF tensor {gguf_name!r} has no Hugging Face name in this converter")


def make_config(reader: GGUFReader) -> dict:
    """config.json for LlamaForCausalLM from the GGUF's llama.* metadata."""
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"general.architecture is {arch!r}; only 'llama' is supported")
    hidden = int(field(reader, "llama.embedding_length"))
    heads = int(field(reader, "llama.attention.head_count"))
    head_dim = int(field(reader, "llama.rope.dimension_count", hidden // heads))
    names = {t.name for t in reader.tensors}
    tokens = field(reader, "tokenizer.ggml.tokens")
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(field(reader, "llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(reader, "llama.attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": float(np.float32(field(reader, "llama.attention.layer_norm_rms_epsilon"))),
        "rope_theta": float(field(reader, "llama.rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "max_position_embeddings": int(field(reader, "llama.context_length")),
        "vocab_size": int(field(reader, "llama.vocab_size", len(tokens))),
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": int(field(reader, "tokenizer.ggml.padding_token_id", -1)),
        "torch_dtype": "float32",
    }


def round_eps(eps: float) -> float:
    """The GGUF stores eps as float32 (1e-5 -> 9.99999974e-06); write the shortest decimal that maps back."""
    return float(f"{np.float32(eps):.6g}")


def convert_tensors(reader: GGUFReader, cfg: dict) -> dict[str, np.ndarray]:
    """Dequantises every tensor to float32 under its HF name; Q/K rows back to half-split order."""
    out = {}
    for t in reader.tensors:
        shape = [int(x) for x in t.shape]  # GGML order: ne0 (contiguous, input dim) first
        w = dequantize(t.data, int(t.tensor_type), shape[0])
        w = w.reshape(shape[::-1]) if len(shape) > 1 else w.reshape(shape[0])
        kind = t.name.split(".")[2] if t.name.startswith("blk.") else ""
        if kind == "attn_q":
            w = unpermute_from_gguf(w, cfg["num_attention_heads"])
        elif kind == "attn_k":
            w = unpermute_from_gguf(w, cfg["num_key_value_heads"])
        if not np.all(np.isfinite(w)):
            raise ValueError(f"tensor {t.name} has non-finite values after dequantisation")
        out[hf_name(t.name)] = np.ascontiguousarray(w, dtype=np.float32)
    return out


def check_shapes(cfg: dict, tensors: dict[str, np.ndarray]) -> None:
    """Cross-checks tensor shapes against the config (catches metadata/tensor disagreements)."""
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    want = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        want.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                     p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
                     p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
                     p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
                     p + "mlp.down_proj.weight": (h, f)})
    if not cfg["tie_word_embeddings"]:
        want["lm_head.weight"] = (v, h)
    missing = sorted(set(want) - set(tensors))
    extra = sorted(set(tensors) - set(want))
    if missing or extra:
        raise ValueError(f"tensor set mismatch: missing {missing[:5]}, unexpected {extra[:5]}")
    for name, shape in want.items():
        if tensors[name].shape != shape:
            raise ValueError(f"{name}: shape {tensors[name].shape}, config implies {shape}")


def convert(gguf_path: Path, out_dir: Path) -> dict:
    """Runs the whole conversion into out_dir (atomically replaced). Returns a summary."""
    t0 = time.time()
    try:
        reader = GGUFReader(str(gguf_path))
    except (ValueError, OSError, IndexError, KeyError) as e:
        raise ValueError(f"--gguf: {gguf_path} is not a readable GGUF file ({e})") from None
    cfg = make_config(reader)
    cfg["rms_norm_eps"] = round_eps(cfg["rms_norm_eps"])
    tensors = convert_tensors(reader, cfg)
    check_shapes(cfg, tensors)
    tok = build_tokenizer(list(field(reader, "tokenizer.ggml.tokens")),
                          list(field(reader, "tokenizer.ggml.merges")),
                          [int(x) for x in field(reader, "tokenizer.ggml.token_type")],
                          str(field(reader, "tokenizer.ggml.pre", "gpt2")))
    if tok.get_vocab_size() != cfg["vocab_size"]:
        raise ValueError(f"tokenizer has {tok.get_vocab_size()} tokens, config vocab_size {cfg['vocab_size']}")
    types = sorted({GGML_TYPES[int(t.tensor_type)][0] for t in reader.tensors})
    stage = out_dir.with_name(out_dir.name + ".tmp." + str(os.getpid()))
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        (stage / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        meta = {"format": "pt", "source": gguf_path.name, "source_types": ",".join(types),
                "qk_rows": "hf-half-split"}
        save_file(tensors, str(stage / "model.safetensors"), metadata=meta)
        os.chmod(stage / "model.safetensors", 0o644)  # safetensors creates it owner-only
        tok.save(str(stage / "tokenizer.json"))
        old = out_dir.with_name(out_dir.name + ".old." + str(os.getpid()))
        if out_dir.exists():
            out_dir.rename(old)  # readers see the old or the new folder, never a half one
        stage.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    params = sum(int(np.prod(w.shape)) for w in tensors.values())
    return {"tensors": len(tensors), "parameters": params, "source_types": types,
            "seconds": round(time.time() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", required=True, type=Path, help="llama.cpp GGUF file")
    ap.add_argument("--out", required=True, type=Path, help="output model folder")
    args = ap.parse_args()
    if not args.gguf.is_file():
        print(f"convert_gguf: error: --gguf: no such file: {args.gguf}", file=sys.stderr)
        return 2
    try:
        summary = convert(args.gguf, args.out)
    except (ValueError, KeyError) as e:
        print(f"convert_gguf: error: {e}", file=sys.stderr)
        return 2
    print(f"convert_gguf: wrote {args.out} ({summary['tensors']} tensors, {summary['parameters']:,} parameters, "
          f"from {'/'.join(summary['source_types'])}, {summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
