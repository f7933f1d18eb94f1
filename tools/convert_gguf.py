#!/usr/bin/env python3
"""Converts a llama.cpp GGUF (llama or gemma3 architecture) into a Hugging Face-style model folder.

Writes config.json (LlamaForCausalLM or Gemma3ForCausalLM, every value read from the GGUF metadata,
except what llama.cpp fixes for every Gemma 3 and so does not store: every 6th layer global, the others
sliding-window with RoPE base 10,000), model.safetensors (all tensors dequantised to float32 under
Hugging Face names; llama: Q/K rows restored from llama.cpp's adjacent-pair RoPE order to the
half-split order; gemma3: the 1 that llama.cpp adds to every RMSNorm weight taken off again, Hugging
Face's Gemma norm being x·(1 + w)) and tokenizer.json (byte-level BPE, or SentencePiece BPE, rebuilt
from the GGUF vocabulary). Float32 because Q4_1 values d*q+m are not representable in bf16 in
general: the dequantised model is then exactly the GGUF's model. Output is staged in a temporary folder
and renamed into place, so a failed run leaves no half-written model. Leaves out other architectures
and MoE.

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
from gguf_tokenizer import build_spm_tokenizer, build_tokenizer  # noqa: E402

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
# Gemma 3's: its four norms per layer (llama.cpp's ffn_norm is the norm before the MLP) and QK norms.
GEMMA3_LAYER_NAMES = {
    **{k: v for k, v in LAYER_NAMES.items() if k != "ffn_norm"},
    "attn_q_norm": "model.layers.{}.self_attn.q_norm.weight",
    "attn_k_norm": "model.layers.{}.self_attn.k_norm.weight",
    "post_attention_norm": "model.layers.{}.post_attention_layernorm.weight",
    "ffn_norm": "model.layers.{}.pre_feedforward_layernorm.weight",
    "post_ffw_norm": "model.layers.{}.post_feedforward_layernorm.weight",
}
# llama.cpp's fixed Gemma 3 values (src/llama-model.cpp), which the GGUF does not carry.
GEMMA3_GLOBAL_EVERY = 6
GEMMA3_LOCAL_ROPE_BASE = 10000.0
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


def hf_name(gguf_name: str, arch: str = "llama") -> str:
    """Maps a GGUF tensor name to its Hugging Face name."""
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    names = GEMMA3_LAYER_NAMES if arch == "gemma3" else LAYER_NAMES
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in names:
        return names[parts[2]].format(int(parts[1]))
    raise ValueError(f"GGUF tensor {gguf_name!r} has no Hugging Face name in this converter")


def special_tokens(reader: GGUFReader) -> dict:
    """The config's token ids and dtype, the same for every architecture."""
    return {
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": int(field(reader, "tokenizer.ggml.padding_token_id", -1)),
        "torch_dtype": "float32",
    }


def make_gemma3_config(reader: GGUFReader) -> dict:
    """config.json for Gemma3ForCausalLM (text only) from the GGUF's gemma3.* metadata."""
    layers = int(field(reader, "gemma3.block_count"))
    head_dim = int(field(reader, "gemma3.attention.key_length"))
    if int(field(reader, "gemma3.attention.value_length", head_dim)) != head_dim:
        raise ValueError("gemma3.attention.value_length differs from key_length")
    names = {t.name for t in reader.tensors}
    tokens = field(reader, "tokenizer.ggml.tokens")
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": int(field(reader, "gemma3.embedding_length")),
        "intermediate_size": int(field(reader, "gemma3.feed_forward_length")),
        "num_hidden_layers": layers,
        "num_attention_heads": int(field(reader, "gemma3.attention.head_count")),
        "num_key_value_heads": int(field(reader, "gemma3.attention.head_count_kv")),
        "head_dim": head_dim,
        "query_pre_attn_scalar": head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": float(np.float32(field(reader, "gemma3.attention.layer_norm_rms_epsilon"))),
        "rope_theta": float(field(reader, "gemma3.rope.freq_base")),
        "rope_local_base_freq": GEMMA3_LOCAL_ROPE_BASE,
        "rope_scaling": None,
        "sliding_window": int(field(reader, "gemma3.attention.sliding_window")),
        "layer_types": ["full_attention" if (i + 1) % GEMMA3_GLOBAL_EVERY == 0 else "sliding_attention"
                        for i in range(layers)],
        "max_position_embeddings": int(field(reader, "gemma3.context_length")),
        "vocab_size": len(tokens),
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": False,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        **special_tokens(reader),
    }


def make_config(reader: GGUFReader) -> dict:
    """config.json for LlamaForCausalLM from the GGUF's llama.* metadata (or Gemma 3's)."""
    arch = field(reader, "general.architecture")
    if arch == "gemma3":
        return make_gemma3_config(reader)
    if arch != "llama":
        raise ValueError(f"general.architecture is {arch!r}; only 'llama' and 'gemma3' are supported")
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
        **special_tokens(reader),
    }


def round_eps(eps: float) -> float:
    """The GGUF stores eps as float32 (1e-5 -> 9.99999974e-06); write the shortest decimal that maps back."""
    return float(f"{np.float32(eps):.6g}")


def convert_tensors(reader: GGUFReader, cfg: dict) -> dict[str, np.ndarray]:
    """Dequantises every tensor to float32 under its HF name; Q/K rows back to half-split order (llama),
    norms back to Hugging Face's x·(1 + w) convention (gemma3)."""
    gemma = cfg["model_type"] == "gemma3_text"
    out = {}
    for t in reader.tensors:
        shape = [int(x) for x in t.shape]  # GGML order: ne0 (contiguous, input dim) first
        w = dequantize(t.data, int(t.tensor_type), shape[0])
        w = w.reshape(shape[::-1]) if len(shape) > 1 else w.reshape(shape[0])
        kind = t.name.split(".")[2] if t.name.startswith("blk.") else ""
        if gemma:
            if t.name.endswith("norm.weight"):
                w = w - np.float32(1.0)
        elif kind == "attn_q":
            w = unpermute_from_gguf(w, cfg["num_attention_heads"])
        elif kind == "attn_k":
            w = unpermute_from_gguf(w, cfg["num_key_value_heads"])
        if not np.all(np.isfinite(w)):
            raise ValueError(f"tensor {t.name} has non-finite values after dequantisation")
        out[hf_name(t.name, "gemma3" if gemma else "llama")] = np.ascontiguousarray(w, dtype=np.float32)
    return out


def check_shapes(cfg: dict, tensors: dict[str, np.ndarray]) -> None:
    """Cross-checks tensor shapes against the config (catches metadata/tensor disagreements)."""
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    want = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if cfg["model_type"] == "gemma3_text":
            d = cfg["head_dim"]
            want.update({p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,),
                         p + "pre_feedforward_layernorm.weight": (h,), p + "post_feedforward_layernorm.weight": (h,)})
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
    tokens = list(field(reader, "tokenizer.ggml.tokens"))
    token_types = [int(x) for x in field(reader, "tokenizer.ggml.token_type")]
    kind = str(field(reader, "tokenizer.ggml.model"))
    if kind == "llama":
        tok = build_spm_tokenizer(tokens, [float(x) for x in field(reader, "tokenizer.ggml.scores")], token_types,
                                  int(field(reader, "tokenizer.ggml.unknown_token_id")),
                                  bool(field(reader, "tokenizer.ggml.add_space_prefix", True)))
    elif kind == "gpt2":
        tok = build_tokenizer(tokens, list(field(reader, "tokenizer.ggml.merges")), token_types,
                              str(field(reader, "tokenizer.ggml.pre", "gpt2")))
    else:
        raise ValueError(f"tokenizer.ggml.model {kind!r} is not 'gpt2' or 'llama' (SentencePiece BPE)")
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
    ap.add_argument("--gguf", required=True, type=Path, help="llama.cpp GGUF file (llama or gemma3)")
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
