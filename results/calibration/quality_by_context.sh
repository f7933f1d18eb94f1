#!/bin/sh
# Measures a calibrated RISK-KV topology's ΔNLL by context: `kvshift quality` with the
# topology.json in DIR (and the predictors.safetensors beside it) on held-out King James text
# (the last 20 % of the corpus) at 256, 512, 1,024 and 2,048 history tokens, 64 requests of 256
# eval tokens each, ε 0.002 as the calibration's; writes DIR/quality-kjv-h*.{json,md}. Scenarios
# charge each RISK-KV move at its own context from these files (risk_kv.quality). Seeded: the
# same numbers on the same machine type. Run from the repository root after `make build model`.
# Usage: [MODEL=DIR CORPUS=FILE] results/calibration/quality_by_context.sh DIR [BUILD_DIR] [WORK_DIR]
# (MODEL and CORPUS default to SmolLM2-135M and its King James tokens; Gemma 3 270M's:
# MODEL=models/gemma3-270m CORPUS=data/corpus/gemma3-270m/kjv.tokens, after `make model-gemma3`.)
set -eu
DIR=$1
BUILD=${2:-build}
WORK=${3:-risk-quality-work}
MODEL=${MODEL:-models/smollm2-135m}
CORPUS=${CORPUS:-data/corpus/kjv.tokens}
for h in 256 512 1024 2048; do
  "$BUILD/apps/kvshift" quality --model "$MODEL" --corpus "$CORPUS" \
    --span 0.8:1 --policy exact --policy "risk-kv:$DIR/topology.json" --history "$h" \
    --eval 256 --windows 64 --eps 0.002 --out "$WORK/h$h" --force
  cp "$WORK/h$h/quality.json" "$DIR/quality-kjv-h$h.json"
  cp "$WORK/h$h/quality.md" "$DIR/quality-kjv-h$h.md"
done
