#!/bin/sh
# Rebuilds this folder's quality-kjv-h*.json from a clean clone after `make build model`: the
# committed topology (G4) measured by `kvshift quality` on held-out King James text (the last
# 20 % of the corpus) at 256, 512, 1,024 and 2,048 history tokens, 64 requests of 256 eval
# tokens each, ε 0.002 as the calibration's. Scenarios charge each RISK-KV move at its own
# context from these files (risk_kv.quality). Seeded: the same numbers on the same machine type.
# Usage: results/calibration/smollm2-135m/quality_by_context.sh [BUILD_DIR] [WORK_DIR]
set -eu
BUILD=${1:-build}
WORK=${2:-risk-quality-work}
HERE=$(dirname "$0")
for h in 256 512 1024 2048; do
  "$BUILD/apps/kvshift" quality --model models/smollm2-135m --corpus data/corpus/kjv.tokens \
    --span 0.8:1 --policy exact --policy "risk-kv:$HERE/topology.json" --history "$h" \
    --eval 256 --windows 64 --eps 0.002 --out "$WORK/h$h" --force
  cp "$WORK/h$h/quality.json" "$HERE/quality-kjv-h$h.json"
  cp "$WORK/h$h/quality.md" "$HERE/quality-kjv-h$h.md"
done
