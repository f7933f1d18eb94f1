#!/usr/bin/env python3
"""Mean next-token NLL of a Hugging Face-style Llama folder on windows of a token-id file.

Takes `--windows` windows of `--length` tokens from a little-endian int32 token stream, back to back
from `--offset` (default 0) or `--stride` tokens apart, scores each with the numpy reference forward (llama_numpy.py)
and prints per-window and mean NLL (nats/token) and perplexity. `--gguf-qk-order` puts the Q/K rows back
into llama.cpp's adjacent-pair order first: the result shows what skipping the un-permutation costs.
`--json FILE` also writes the figures. Exit 2 on bad input (missing files, corpus too short).

Usage: reference_forward.py --model models/smollm2-135m --tokens data/corpus/kjv.tokens --windows 4 --length 512
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_numpy import LlamaModel  # noqa: E402


def load_windows(path: Path, windows: int, length: int, offset: int, stride: int) -> list[np.ndarray]:
    """Reads `windows` windows of `length` tokens starting at `offset`, `offset + stride`, ..."""
    if windows < 1 or length < 2 or offset < 0 or stride < length:
        raise ValueError("--windows must be >= 1, --length >= 2, --offset >= 0, --stride >= --length")
    size = path.stat().st_size
    if size % 4:
        raise ValueError(f"--tokens: {path} is {size} bytes, not a whole number of int32 ids")
    ids = np.memmap(path, dtype="<i4", mode="r")
    need = offset + (windows - 1) * stride + length
    if need > len(ids):
        raise ValueError(f"--tokens: {path} has {len(ids)} tokens; {windows} windows of {length} "
                         f"from offset {offset} need {need}")
    return [np.array(ids[offset + w * stride: offset + w * stride + length]) for w in range(windows)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--tokens", required=True, type=Path)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--offset", type=int, default=0, help="first token of the first window")
    ap.add_argument("--stride", type=int, help="tokens between window starts (default: --length, back to back)")
    ap.add_argument("--gguf-qk-order", action="store_true", help="score with llama.cpp's Q/K row order (wrong)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    try:
        for name in ("config.json", "model.safetensors"):
            if not (args.model / name).is_file():
                raise ValueError(f"--model: {args.model / name} does not exist")
        if not args.tokens.is_file():
            raise ValueError(f"--tokens: {args.tokens} does not exist")
        stride = args.stride or args.length
        wins = load_windows(args.tokens, args.windows, args.length, args.offset, stride)
        t0 = time.time()
        model = LlamaModel(args.model, gguf_qk_order=args.gguf_qk_order)
        if max(int(w.max()) for w in wins) >= model.cfg.vocab:
            raise ValueError(f"--tokens: ids exceed the model's vocab_size {model.cfg.vocab} (wrong tokenizer?)")
    except ValueError as e:
        print(f"reference_forward: error: {e}", file=sys.stderr)
        return 2
    nlls = []
    for n, w in enumerate(wins):
        nll = float(model.token_nll(w).mean())
        nlls.append(nll)
        start = args.offset + n * stride
        print(f"window {n}: tokens {start}..{start + args.length - 1}  nll {nll:.4f}")
    mean = float(np.mean(nlls))
    label = "llama.cpp Q/K order (un-permutation skipped)" if args.gguf_qk_order else "HF half-split Q/K order"
    print(f"mean nll {mean:.4f} nats/token  ppl {math.exp(mean):.2f}  ({label}; {args.windows} x {args.length}"
          f" tokens, {time.time() - t0:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps({"mean_nll": mean, "ppl": math.exp(mean), "window_nll": nlls,
                                         "windows": args.windows, "length": args.length,
                                         "offset": args.offset, "stride": stride, "gguf_qk_order": args.gguf_qk_order}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
