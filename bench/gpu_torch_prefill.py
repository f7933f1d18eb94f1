#!/usr/bin/env python3
"""PyTorch reference timing for bench/gpu_check.sh.

Times a prefill (forward over T tokens, KV cache built, last-token logits) of
each model in the kvshift benchmark's JSON, with random bf16 weights and SDPA
attention, at the same token counts, with CUDA events (warm-up, repeats,
median / p10 / p90), and one layer's causal GQA attention alone through
scaled_dot_product_attention (op "attention", the reference of kvshift's
attention kernel). Shapes come from the kvshift JSON so both sides run the
same model. Writes one JSON document.

usage: gpu_torch_prefill.py --shapes kvshift_gpu.json --out torch_prefill.json [--repeats N]
"""
import argparse
import json
import math
import sys


def percentile(sorted_values, q):
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def build_model(torch, transformers, spec, max_tokens):
    common = dict(
        hidden_size=spec["hidden"],
        intermediate_size=spec["intermediate"],
        num_hidden_layers=spec["layers"],
        num_attention_heads=spec["q_heads"],
        num_key_value_heads=spec["kv_heads"],
        vocab_size=spec["vocab"],
        rms_norm_eps=spec["rms_eps"],
        rope_theta=spec["rope_theta"],
        tie_word_embeddings=spec["tied_embeddings"],
        max_position_embeddings=max(max_tokens, 4096),
    )
    if spec["attention_bias"]:  # Qwen2: biases on q/k/v only
        config = transformers.Qwen2Config(**common)
        cls = transformers.Qwen2ForCausalLM
    else:
        config = transformers.LlamaConfig(head_dim=spec["head_dim"], **common)
        cls = transformers.LlamaForCausalLM
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = cls(config)
    model = model.to(dtype=torch.bfloat16)
    return model.eval()


def time_prefill(torch, model, vocab, tokens, warmup, repeats):
    ids = torch.randint(0, vocab, (1, tokens), device="cuda")

    def run():
        try:
            return model(input_ids=ids, use_cache=True, logits_to_keep=1)
        except TypeError:  # older transformers
            return model(input_ids=ids, use_cache=True)

    return time_fn(torch, run, warmup, repeats)


def time_attention(torch, spec, tokens, warmup, repeats):
    """One layer's causal attention alone through SDPA (bf16, GQA), the kernel-level reference
    of kvshift's attention_fa2 row."""
    import torch.nn.functional as F
    hq, hkv, hd = spec["q_heads"], spec["kv_heads"], spec["head_dim"]
    q = torch.randn(1, hq, tokens, hd, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, hkv, tokens, hd, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, hkv, tokens, hd, device="cuda", dtype=torch.bfloat16)
    try:
        F.scaled_dot_product_attention(q[:, :, :16], k[:, :, :16], v[:, :, :16], is_causal=True,
                                       enable_gqa=True)
        run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    except TypeError:  # no enable_gqa: expand K and V once, outside the timing
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
        run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return time_fn(torch, run, warmup, repeats)


def time_fn(torch, run, warmup, repeats):
    with torch.inference_mode():
        for _ in range(warmup):
            run()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e-3)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    return {"median_s": median, "p10_s": percentile(times, 0.1), "p90_s": percentile(times, 0.9), "repeats": n}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", required=True, help="JSON written by gpu_recovery_bench")
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    try:
        import torch
        import transformers
    except ImportError as error:
        print(f"gpu_torch_prefill: PyTorch/transformers missing: {error}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("gpu_torch_prefill: torch sees no CUDA device", file=sys.stderr)
        return 1
    with open(args.shapes) as f:
        shapes = json.load(f)
    rows = []
    for spec in shapes["models"]:
        token_counts = sorted({r["tokens"] for r in spec["rows"] if r["op"] == "prefill"})
        if not token_counts:
            continue
        model = build_model(torch, transformers, spec, max(token_counts))
        for tokens in token_counts:
            big = tokens > 8192
            try:
                timing = time_prefill(torch, model, spec["vocab"], tokens, 1 if big else 2,
                                      3 if big else args.repeats)
            except torch.cuda.OutOfMemoryError as error:
                timing = {"error": f"out of memory: {error}"}
            row = {"model": spec["name"], "op": "prefill", "tokens": tokens, **timing}
            print(f"torch {spec['name']} T={tokens}: {row.get('median_s', float('nan')) * 1e3:.3f} ms",
                  file=sys.stderr)
            rows.append(row)
            try:
                timing = time_attention(torch, spec, tokens, 1 if big else 2, 3 if big else args.repeats)
            except torch.cuda.OutOfMemoryError as error:
                timing = {"error": f"out of memory: {error}"}
            rows.append({"model": spec["name"], "op": "attention", "tokens": tokens, **timing})
            print(f"torch SDPA attention (one layer) {spec['name']} T={tokens}: "
                  f"{rows[-1].get('median_s', float('nan')) * 1e3:.3f} ms", file=sys.stderr)
        del model
        torch.cuda.empty_cache()
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "attention": "sdpa",
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
