#!/usr/bin/env python3
"""Self-check of the model/corpus helpers (no pytest needed); exits non-zero on the first failure.

--quick (what `make model` runs every time): config.json against the published config (SmolLM2-135M,
or Gemma 3 270M for `make model-gemma3`, whose windows start with its BOS as the C++ forward's do),
the safetensors tensor count/dtypes/parameter count from the header alone, and the mean NLL of 2
windows of 256 corpus tokens (must be a sane < 4 nats/token; with --cache the figure is reused while
the model, corpus and this code are unchanged, which keeps a warm `make model` under a few seconds;
that file also holds the tokens and per-token NLLs, a reference for the C++ forward pass).
Full (default, adds): the numpy dequantisers against hand-built blocks and against the gguf package's
own quant code (real tensors of the GGUF, random Q4_0/Q4_1/Q5_0/Q8_0/Q4_K/Q6_K blocks); the Q/K
permutation on a hand case and its round trip; the converted Q/K equal to the un-permuted GGUF rows;
the HF path (half-split RoPE) equal to the llama.cpp path (GGUF row order + adjacent-pair RoPE) on real
text; the wrong pairing clearly worse (these three llama only: Gemma's GGUF keeps Hugging Face's row
order); tokenizer round trip on corpus text and the chat control tokens kept whole.

Usage: selfcheck.py --model models/smollm2-135m --corpus data/corpus/kjv.tokens [--gguf FILE] [--quick]
       selfcheck.py --model models/gemma3-270m --corpus data/corpus/gemma3-270m/kjv.tokens [--gguf FILE]
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_quants import dequantize, permute_for_gguf, unpermute_from_gguf  # noqa: E402
from llama_numpy import LlamaModel  # noqa: E402

# Published configs of the models `make model` and `make model-gemma3` prepare, by model_type:
# the values checked, the parameter and tensor counts of the converted model.safetensors.
PUBLISHED = {
    "llama": ("SmolLM2-135M", {
        "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9, "num_key_value_heads": 3,
        "head_dim": 64, "intermediate_size": 1536, "vocab_size": 49152, "rope_theta": 100000.0,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "architectures": ["LlamaForCausalLM"]},
        134_515_008, 272),
    "gemma3_text": ("Gemma 3 270M", {
        "num_hidden_layers": 18, "hidden_size": 640, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 256, "intermediate_size": 2048, "vocab_size": 262144, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "sliding_window": 512, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "bos_token_id": 2,
        "architectures": ["Gemma3ForCausalLM"]},
        268_098_176, 236),
}


def check(cond: bool, what: str) -> None:
    """Prints ok/FAIL for one claim; raises on failure."""
    print(f"  {'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        raise SystemExit(1)


def safetensors_header(path: Path) -> dict:
    """The JSON header of a safetensors file (tensor name -> dtype/shape/offsets), without the data."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def quick(model: Path, corpus: Path, cache: Path | None = None) -> None:
    """Config, tensor inventory from the header, NLL on 2 x 256 tokens (reused from cache if inputs unchanged)."""
    cfg = json.loads((model / "config.json").read_text())
    model_type = cfg.get("model_type", "llama")
    check(model_type in PUBLISHED, f"config.json's model_type {model_type!r} is one this check knows")
    name, published, parameters, tensors = PUBLISHED[model_type]
    bad = {k: cfg.get(k) for k, v in published.items() if cfg.get(k) != v}
    check(not bad, f"config.json matches the published {name} config (differs: {bad or 'none'})")
    head = {k: v for k, v in safetensors_header(model / "model.safetensors").items() if k != "__metadata__"}
    params = sum(int(np.prod(v["shape"])) for v in head.values())
    check(len(head) == tensors and params == parameters,
          f"model.safetensors has {len(head)} tensors / {params:,} parameters (want {tensors} / {parameters:,})")
    check(all(v["dtype"] == "F32" for v in head.values()), "every tensor is F32")
    key = inputs_key([model / "config.json", model / "model.safetensors", corpus,
                      Path(__file__), Path(__file__).with_name("llama_numpy.py")])
    if cache is not None and cache.is_file() and json.loads(cache.read_text()).get("key") == key:
        nll = json.loads(cache.read_text())["mean_nll"]
        check(nll < 4.0, f"mean NLL on 2 x 256 corpus tokens = {nll:.4f} nats/token (< 4; cached, inputs unchanged)")
        return
    ids = np.fromfile(corpus, dtype="<i4", count=512)
    if "bos_token_id" in published:  # Gemma reads every sequence after its BOS, as the C++ forward does
        ids[::256] = published["bos_token_id"]
    t0 = time.time()
    m = LlamaModel(model)
    per_token = [m.token_nll(ids[w * 256:(w + 1) * 256]) for w in range(2)]
    nll = float(np.mean([t.mean() for t in per_token]))
    check(nll < 4.0, f"mean NLL on 2 x 256 corpus tokens = {nll:.4f} nats/token (< 4; {time.time() - t0:.1f} s)")
    if cache is not None:
        ref = {"what": "numpy reference forward: NLL (nats) of tokens[w][1:] given the prefix, per window",
               "corpus": str(corpus), "windows": 2, "length": 256, "offset": 0,
               "tokens": [ids[w * 256:(w + 1) * 256].tolist() for w in range(2)],
               "token_nll": [[round(float(x), 6) for x in t] for t in per_token],
               "window_nll": [float(t.mean()) for t in per_token], "mean_nll": nll, "key": key}
        tmp = cache.with_name(cache.name + ".tmp")
        tmp.write_text(json.dumps(ref) + "\n")
        tmp.replace(cache)


def inputs_key(paths: list[Path]) -> list:
    """Size and modification time of every input: the cached NLL is reused only while all are unchanged."""
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in paths]


def check_quants(gguf_path: Path | None) -> None:
    """Dequantisers: hand-built blocks, then agreement with the gguf package on real and random data."""
    from gguf import GGMLQuantizationType as T
    from gguf import quants
    d, mn = np.float16(0.5), np.float16(-1.0)
    codes = np.arange(32) % 16
    packed = (codes[:16] | (codes[16:] << 4)).astype(np.uint8)
    blk = np.concatenate([np.frombuffer(d.tobytes() + mn.tobytes(), np.uint8), packed])[None, :]
    check(np.array_equal(dequantize(blk, 3, 32)[0], 0.5 * codes - 1.0), "Q4_1 hand block: x = d*q + m, nibble order")
    q8 = np.arange(-16, 16, dtype=np.int8)
    blk = np.concatenate([np.frombuffer(np.float16(0.25).tobytes(), np.uint8), q8.view(np.uint8)])[None, :]
    check(np.array_equal(dequantize(blk, 8, 32)[0], 0.25 * q8), "Q8_0 hand block: x = d*q")
    rng = np.random.default_rng(7)
    # fp16 fields per block
    scale_at = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q8_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,)}
    for tid, name, bb, per in ((2, "Q4_0", 18, 32), (3, "Q4_1", 20, 32), (6, "Q5_0", 22, 32), (8, "Q8_0", 34, 32),
                               (12, "Q4_K", 144, 256), (14, "Q6_K", 210, 256)):
        raw = rng.integers(0, 256, size=(5, 3 * bb), dtype=np.uint8)
        for off in range(0, 3 * bb, bb):  # finite fp16 fields (random bytes can be inf/nan)
            for at in scale_at[name]:
                raw[:, off + at:off + at + 2] = np.frombuffer(np.float16(rng.uniform(-1, 1)).tobytes(), np.uint8)
        ours, ref = dequantize(raw, tid, 3 * per), quants.dequantize(raw, T(tid)).reshape(5, -1)
        check(np.array_equal(ours, ref), f"{name} random blocks equal the gguf package's dequantiser")
    if gguf_path is None:
        return
    from gguf import GGUFReader
    r = GGUFReader(str(gguf_path))
    for t in r.tensors:
        if t.name in ("token_embd.weight", "blk.3.attn_q.weight", "blk.3.ffn_down.weight"):
            rows = t.data[:512]
            same = np.array_equal(dequantize(rows, int(t.tensor_type), int(t.shape[0])),
                                  quants.dequantize(rows, t.tensor_type).reshape(rows.shape[0], -1))
            check(same, f"{t.name} ({t.tensor_type.name}) equals the gguf package's dequantiser")


def check_permutation(model: Path, gguf_path: Path | None) -> None:
    """Hand case, round trip, and converted Q/K rows == un-permuted GGUF rows."""
    w = np.arange(8, dtype=np.float32)[:, None]  # 2 heads of head_dim 4: half-split (0,2),(1,3) per head
    check(permute_for_gguf(w, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7], "permutation hand case (2 heads x 4)")
    x = np.random.default_rng(1).standard_normal((576, 5)).astype(np.float32)
    check(np.array_equal(unpermute_from_gguf(permute_for_gguf(x, 9), 9), x), "un-permute inverts permute")
    if gguf_path is None:
        return
    from gguf import GGUFReader
    from safetensors import safe_open
    r = GGUFReader(str(gguf_path))
    with safe_open(str(model / "model.safetensors"), "numpy") as st:
        for t in r.tensors:
            if t.name in ("blk.7.attn_q.weight", "blk.7.attn_k.weight"):
                heads = 9 if "attn_q" in t.name else 3
                g = unpermute_from_gguf(dequantize(t.data, int(t.tensor_type), int(t.shape[0])), heads)
                hf = st.get_tensor(f"model.layers.7.self_attn.{'q' if heads == 9 else 'k'}_proj.weight")
                check(np.array_equal(g, hf), f"converted {t.name} = un-permuted GGUF rows")


def check_rope_paths(model: Path, corpus: Path) -> None:
    """HF order + half-split RoPE == GGUF order + adjacent RoPE; the mismatched pairing is worse."""
    ids = np.fromfile(corpus, dtype="<i4", count=400_128)[400_000:]
    hf = LlamaModel(model)
    cpp = LlamaModel(model, gguf_qk_order=True, adjacent_rope=True)
    wrong = LlamaModel(model, gguf_qk_order=True)
    a, b = hf.logits(ids), cpp.logits(ids)
    rel = float(np.abs(a - b).max() / np.abs(a).max())
    check(rel < 1e-4, f"HF half-split path equals llama.cpp adjacent-pair path (max rel diff {rel:.1e})")
    good, bad = float(hf.token_nll(ids).mean()), float(wrong.token_nll(ids).mean())
    check(bad > good + 0.5, f"skipping the un-permutation hurts: NLL {good:.3f} -> {bad:.3f} on 128 tokens")


def check_tokenizer(model: Path, corpus: Path, controls: tuple[str, str, int, int]) -> None:
    """Decode(corpus ids) re-encodes to the same ids; the chat control tokens are single ids."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    ids = np.fromfile(corpus, dtype="<i4", count=200_000)[100_000:].tolist()
    text = tok.decode(ids)
    # Cut at a chapter break so both ends are token boundaries, then re-encode.
    start, end = text.index("\n\n") + 2, text.rindex("\n\n")
    piece = text[start:end]
    again = tok.encode(piece, add_special_tokens=False).ids
    check(tok.decode(again) == piece, f"tokenizer round trip on {len(piece):,} characters of corpus text")
    start, end, start_id, end_id = controls
    s = f"{start}user\nThe 3 wise men, café & naïve.{end}"
    enc = tok.encode(s, add_special_tokens=False)
    check(enc.ids[0] == start_id and enc.ids[-1] == end_id and tok.decode(enc.ids, skip_special_tokens=False) == s,
          f"control tokens {start}/{end} are ids {start_id}/{end_id} and text round-trips")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--gguf", type=Path, help="source GGUF (enables the conversion checks)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cache", type=Path, help="reuse the 2 x 256 NLL stored here while its inputs are unchanged")
    args = ap.parse_args()
    print("selfcheck: model", args.model)
    quick(args.model, args.corpus, args.cache)
    if not args.quick:
        check_quants(args.gguf)
        gemma = json.loads((args.model / "config.json").read_text()).get("model_type") == "gemma3_text"
        if gemma:  # llama.cpp stores Gemma's Q/K rows in Hugging Face order: no permutation to undo
            check_tokenizer(args.model, args.corpus, ("<start_of_turn>", "<end_of_turn>", 105, 106))
        else:
            check_permutation(args.model, args.gguf)
            check_rope_paths(args.model, args.corpus)
            check_tokenizer(args.model, args.corpus, ("<|im_start|>", "<|im_end|>", 1, 2))
    print("selfcheck: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
