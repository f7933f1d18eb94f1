#!/usr/bin/env bash
# `kvshift replay` against `kvshift run` (issue 44): scenarios/replay-smollm2-cpu.json
# served for real by two node processes (SmolLM2-135M's real weights, the calibrated G4
# predictors, the trained ProxyKV mapper, King James Bible prompts), once per strategy,
# then simulated with a cost table `kvshift profile` measures first on this machine
# (one core, the shapes the scenario uses), so the simulator's durations are this
# machine's. Writes the cost table, the replay's folder and the console to OUT.
# The machine's load is part of every timing: run it on an idle machine.
# Usage: bench/replay_fidelity.sh [build-dir] [out-dir]
set -euo pipefail
build=${1:-build}
out=${2:-results/replay}
kvshift="$build/apps/kvshift"
[[ -x "$kvshift" ]] || { echo "replay_fidelity: $kvshift not built" >&2; exit 1; }
model=models/smollm2-135m
predictors=results/calibration/smollm2-135m/predictors.safetensors
mapper=results/proxykv/smollm2-135m/mapper.safetensors
corpus=data/corpus/kjv.tokens
for f in "$model/config.json" "$predictors" "$mapper" "$corpus"; do
  [[ -e "$f" ]] || { echo "replay_fidelity: $f is missing (make model; see README)" >&2; exit 1; }
done
mkdir -p "$out"
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
# The scenario reads its durations from this table: measured here, now.
"$kvshift" profile --backend cpu --model "$model" \
  --proxy scenarios/models/smollm2-135m-first8/config.json --mapper "$mapper" \
  --predictors "$predictors" --tokens 64,128,256,512,1024 --sharing 1,4 \
  --decode-batch 1,2,4,8 --decode-context 128,256,512,1024 --retention 0.5 \
  --warmup 1 --repeats 5 --out "$out/smollm2-135m-cpu.json"
"$kvshift" replay scenarios/replay-smollm2-cpu.json --model-dir "$model" \
  --predictors "$predictors" --mapper "$mapper" --corpus "$corpus" --continue 16 \
  --force --out "$out/run" 2>&1 | tee "$out/console.txt"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
