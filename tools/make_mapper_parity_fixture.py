#!/usr/bin/python3
"""Regenerates tests/fixtures/mapper_parity: a tiny random HybridAxialMapper
(mapper.safetensors + mapper.json), an input X (input.safetensors, tensor "features"
[in_channels, T]) and PyTorch's output Ŷ (expected.safetensors, tensor "scores"
[targets, T]). The C++ test loads the mapper through load_mapper() and must
reproduce Ŷ. Ŷ is computed in float64 from the float32 weights and input, so it is
a reference for any float32 implementation, not PyTorch's own rounding.

Deterministic: a fixed seed, sorted tensor names. Usage:
  /usr/bin/python3 tools/make_mapper_parity_fixture.py [OUT_DIR]
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mapper_model as mm  # noqa: E402

ARCH = dict(in_channels=6, targets=5, width=16, layers=2, heads=2, ffn=32, kernel=3, window=8)
T = 40
SEED = 20240


def random_mapper():
    """Every parameter drawn afresh (norm weights around 1, biases non-zero), so a
    mix-up of any two tensors or a missing bias changes the output."""
    torch.manual_seed(SEED)
    model = mm.HybridAxialMapper(**ARCH)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p.shape[-1] if p.dim() > 1 else p.numel()
            if ".norm" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif p.dim() == 3:  # stem [W, C, k]
                p.copy_(torch.randn_like(p) / np.sqrt(p.shape[1] * p.shape[2]))
            else:
                p.copy_(torch.randn_like(p) / np.sqrt(max(1, fan_in)) * 1.5)
    return model


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "tests", "fixtures", "mapper_parity")
    os.makedirs(out, exist_ok=True)
    model = random_mapper()
    x = (torch.randn(ARCH["in_channels"], T) * 1.5).float()
    with torch.no_grad():
        expected = model.double()(x.double()[None])[0]
        direct = model.forward_direct(x.double()[None])[0]
    assert (expected - direct).abs().max() <= 1e-9 * expected.abs().max()
    mm.write_safetensors(os.path.join(out, "mapper.safetensors"), model.float().tensors())
    mm.write_safetensors(os.path.join(out, "input.safetensors"), {"features": x.numpy()})
    mm.write_safetensors(os.path.join(out, "expected.safetensors"),
                         {"scores": expected.float().numpy()})
    meta = {"format": mm.MAPPER_FORMAT, "version": 1, "architecture": ARCH,
            "fixture": {"generator": "tools/make_mapper_parity_fixture.py", "seed": SEED,
                        "T": T, "reference": "PyTorch float64 forward of the float32 weights"}}
    with open(os.path.join(out, "mapper.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print("wrote %s (max |Ŷ| %.4f)" % (out, float(expected.abs().max())))


if __name__ == "__main__":
    main()
