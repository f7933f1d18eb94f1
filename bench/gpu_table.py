#!/usr/bin/env python3
"""Merges the kvshift GPU benchmark and the PyTorch prefill timings into one
table (ms, speedup of local recovery over replay, % of the measured HBM copy
and bf16 GEMM ceilings) and one JSON document, and checks the targets:
reconstruction >= 60 % of HBM roofline for T >= 4096, prefill >= 50 % of dense
bf16 peak for Qwen2.5-1.5B at T = 4096, local-recovery speedup at 512 tokens at
least the paper's (1.51x, 2.56x, 3.31x). Standard library only.

usage: gpu_table.py KVSHIFT_JSON [TORCH_JSON] --out MERGED_JSON
"""
import argparse
import json
import os
import sys

PAPER_SPEEDUP_512 = {"qwen2.5-0.5b": 1.51, "qwen2.5-1.5b": 2.56, "tinyllama-1.1b": 3.31}
SPEC_H200 = {"bf16_dense_flops": 989.4e12, "hbm_bytes_per_s": 4.8e12}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kvshift")
    parser.add_argument("torch", nargs="?")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.kvshift) as f:
        ks = json.load(f)
    torch_rows = {}
    torch_meta = None
    if args.torch and os.path.exists(args.torch):
        with open(args.torch) as f:
            torch_meta = json.load(f)
        for r in torch_meta["rows"]:
            torch_rows[(r["model"], r["tokens"])] = r
    bw = ks["ceilings"]["copy_bytes_per_s"]
    peak = ks["ceilings"]["bf16_gemm_flops"]
    table, checks = [], []
    for m in ks["models"]:
        by = {(r["op"], r["tokens"]): r for r in m["rows"]}
        for (op, tokens), pre in sorted(by.items(), key=lambda kv: kv[0][1]):
            if op != "prefill":
                continue
            rec = by.get(("reconstruct", tokens))
            tr = torch_rows.get((m["name"], tokens), {})
            row = {
                "model": m["name"], "tokens": tokens, "topology": m["topology"],
                "replay_ms": pre["median_s"] * 1e3,
                "torch_replay_ms": tr["median_s"] * 1e3 if "median_s" in tr else None,
                "recovery_ms": rec["median_s"] * 1e3 if rec else None,
                "prefill_flop_pct": 100 * pre["flops"] / pre["median_s"] / peak,
                "prefill_flop_pct_spec": 100 * pre["flops"] / pre["median_s"] / SPEC_H200["bf16_dense_flops"],
            }
            if rec:
                row["speedup"] = pre["median_s"] / rec["median_s"]
                row["recon_hbm_pct"] = 100 * rec["min_bytes"] / rec["median_s"] / bw
                row["recon_hbm_pct_spec"] = 100 * rec["min_bytes"] / rec["median_s"] / SPEC_H200["hbm_bytes_per_s"]
                # Roofline time = max(bytes / bandwidth, FLOPs / peak): the folded predictor's GEMM
                # (2 * 4w * 2w FLOPs per row against 12w bytes) is compute-bound when w >= 256.
                memory_s, compute_s = rec["min_bytes"] / bw, rec["flops"] / peak
                row["recon_bound"] = "memory" if memory_s >= compute_s else "compute"
                row["recon_roofline_pct"] = 100 * max(memory_s, compute_s) / rec["median_s"]
                if tokens >= 4096:
                    checks.append((f"{m['name']} T={tokens} reconstruction >= 60% HBM", row["recon_hbm_pct"] >= 60,
                                   f"{row['recon_hbm_pct']:.1f}% of HBM, {row['recon_roofline_pct']:.1f}% of its "
                                   f"roofline ({row['recon_bound']}-bound)"))
                if tokens == 512 and m["name"] in PAPER_SPEEDUP_512:
                    goal = PAPER_SPEEDUP_512[m["name"]]
                    checks.append((f"{m['name']} T=512 speedup >= {goal}x", row["speedup"] >= goal,
                                   f"{row['speedup']:.2f}x"))
            if m["name"] == "qwen2.5-1.5b" and tokens == 4096:
                checks.append(("qwen2.5-1.5b T=4096 prefill >= 50% bf16 peak", row["prefill_flop_pct"] >= 50,
                               f"{row['prefill_flop_pct']:.1f}%"))
            table.append(row)

    def fmt(v, spec="{:.2f}"):
        return "n/a" if v is None else spec.format(v)

    print(f"device: {ks['device_description']}")
    print(f"ceilings measured: copy {bw / 1e12:.2f} TB/s (read+write), bf16 GEMM {peak / 1e12:.0f} TFLOP/s")
    if torch_meta:
        print(f"PyTorch {torch_meta['torch']}, transformers {torch_meta['transformers']}, SDPA")
    header = ["model", "T", "replay ms", "torch ms", "recovery ms", "speedup", "prefill %FLOP", "recon %HBM",
              "recon %roofline"]
    lines = [header]
    for r in table:
        lines.append([r["model"], str(r["tokens"]), fmt(r["replay_ms"], "{:.3f}"), fmt(r["torch_replay_ms"], "{:.3f}"),
                      fmt(r["recovery_ms"], "{:.3f}"), fmt(r.get("speedup"), "{:.2f}x"),
                      fmt(r["prefill_flop_pct"], "{:.1f}"), fmt(r.get("recon_hbm_pct"), "{:.1f}"),
                      fmt(r.get("recon_roofline_pct"), "{:.1f}") + (f" ({r['recon_bound']})" if "recon_bound" in r else "")])
    widths = [max(len(l[i]) for l in lines) for i in range(len(header))]
    for l in lines:
        print("  ".join(c.rjust(w) for c, w in zip(l, widths)))
    print("targets:")
    for name, ok, got in checks:
        print(f"  {'MET ' if ok else 'MISS'} {name} (got {got})")
    merged = {"kvshift": ks, "torch": torch_meta, "table": table,
              "targets": [{"target": n, "met": ok, "got": g} for n, ok, g in checks]}
    with open(args.out, "w") as f:
        json.dump(merged, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
