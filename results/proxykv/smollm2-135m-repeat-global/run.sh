#!/bin/sh
# Rebuilds this folder from a clean clone after `make build model`: a mapper trained for one
# budget over all KV heads (--budget global) on the proxy's repeat-pass features
# (log_repeat_max_attention), for 30 epochs, then every policy with --budget global on held-out
# KJV and on the Jargon File (out of domain), this mapper (proxykv) beside the committed
# global log-mean mapper of ../smollm2-135m/mapper-global (proxykv-2) on the same 32 windows.
# Seeds fixed as in ../smollm2-135m/run.sh.
# Usage: results/proxykv/smollm2-135m-repeat-global/run.sh [BUILD_DIR] [WORK_DIR]
set -eu
BUILD=${1:-build}
WORK=${2:-proxykv-work}
HERE=$(dirname "$0")
KV="$BUILD/apps/kvshift"
MODEL=models/smollm2-135m
MAPPERS="--policy prune:proxykv:$WORK/mapper-rep-global/mapper.safetensors
  --policy prune:proxykv:$HERE/../smollm2-135m/mapper-global/mapper.safetensors"
OTHERS="--policy prune:kvzip --policy prune:snapkv --policy prune:h2o --policy prune:recent
  --policy prune:random"
[ -f "$WORK/dataset-rep/manifest.json" ] ||
  "$KV" proxykv dataset --target "$MODEL" --proxy-layers 8 --corpus data/corpus/kjv.tokens \
    --span 0:0.8 --windows 160 --tokens 1024 --seed 1 --features log_repeat_max_attention \
    --out "$WORK/dataset-rep" --force
/usr/bin/python3 tools/train_mapper.py --dataset "$WORK/dataset-rep" \
  --out "$WORK/mapper-rep-global" --seed 1 --threads 2 --budget global --epochs 30
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 --policy exact \
  $MAPPERS $OTHERS --budget global --history 1024 --eval 128 --windows 32 \
  --retention 0.3,0.5,0.7 --out "$WORK/quality-kjv-rep-global"
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/jargon.tokens --policy exact \
  $MAPPERS $OTHERS --budget global --history 1024 --eval 128 --windows 32 \
  --retention 0.3,0.5,0.7 --out "$WORK/quality-jargon-rep-global"
cp "$WORK/dataset-rep/manifest.json" "$HERE/dataset-manifest.json"
cp "$WORK/mapper-rep-global/mapper.json" "$WORK/mapper-rep-global/mapper.safetensors" \
  "$WORK/mapper-rep-global/train.log" "$HERE/"
for d in kjv jargon; do
  for f in json md svg; do cp "$WORK/quality-$d-rep-global/quality.$f" "$HERE/quality-$d.$f"; done
done
