#!/usr/bin/env python3
"""Writes scenarios/traces/pd-mooncake-style.jsonl: a Mooncake-format trace (timestamp in
ms, input_length, output_length, hash_ids) with long, heavy-tailed contexts, for
scenarios/pd-disaggregated.json. Deterministic: the same seed gives the same file."""
import json
import math
import random
import sys

SEED = 17
REQUESTS = 720
RATE_PER_S = 6.0        # mean arrivals per second (bursty: gamma, cv 2)
INPUT_MEAN, INPUT_CV, INPUT_MAX = 8192, 0.8, 32000
OUTPUT_MEAN, OUTPUT_CV, OUTPUT_MAX = 256, 1.0, 2048
BLOCK = 512             # Mooncake's hash block: one id per 512 prompt tokens


def lognormal(rng, mean, cv, lo, hi):
    sigma = math.sqrt(math.log(1 + cv * cv))
    mu = math.log(mean) - sigma * sigma / 2
    return max(lo, min(hi, int(round(rng.lognormvariate(mu, sigma)))))


def main(path):
    rng = random.Random(SEED)
    shape = 1 / 4.0  # cv 2
    t_ms, next_hash = 0.0, 0
    with open(path, "w") as f:
        for _ in range(REQUESTS):
            t_ms += rng.gammavariate(shape, 1000.0 / RATE_PER_S / shape)
            prompt = lognormal(rng, INPUT_MEAN, INPUT_CV, 256, INPUT_MAX)
            output = lognormal(rng, OUTPUT_MEAN, OUTPUT_CV, 2, OUTPUT_MAX)
            blocks = (prompt + BLOCK - 1) // BLOCK
            f.write(json.dumps({"timestamp": int(t_ms), "input_length": prompt,
                                "output_length": output,
                                "hash_ids": list(range(next_hash, next_hash + blocks))}) + "\n")
            next_hash += blocks


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "scenarios/traces/pd-mooncake-style.jsonl")
