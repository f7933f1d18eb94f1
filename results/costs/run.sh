#!/bin/sh
# Rebuilds this folder from a clean clone after `make build model`: the CPU cost
# table of SmolLM2-135M measured on its real weights, the calibrated G4
# predictors (results/calibration) and the trained ProxyKV mapper
# (results/proxykv) with the proxy it was trained with (the first 8 layers),
# then two runs of the live scenario and of the scenario that uses the table.
# Usage: results/costs/run.sh [BUILD_DIR] [OUT_DIR]
set -eu
BUILD=${1:-build}
OUT=${2:-costs-work}
HERE=$(dirname "$0")
KV="$BUILD/apps/kvshift"

"$KV" profile --backend cpu --model models/smollm2-135m \
  --proxy scenarios/models/smollm2-135m-first8/config.json \
  --mapper results/proxykv/smollm2-135m/mapper.safetensors \
  --predictors results/calibration/smollm2-135m/predictors.safetensors \
  --tokens 128,512,2048,8192 --sharing 1,4,16 --decode-batch 1,4,16 \
  --decode-context 256,1024,4096 --retention 0.5 --warmup 1 --repeats 5 \
  --out "$HERE/smollm2-135m-cpu.json"
"$KV" run scenarios/smollm2-measured-cpu.json --no-trace --force --out "$OUT/table-run"
for i in 1 2; do
  "$KV" run "$HERE/live-smollm2.json" --no-trace --force --out "$OUT/live-run-$i"
done
