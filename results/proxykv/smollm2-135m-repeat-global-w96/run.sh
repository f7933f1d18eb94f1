#!/bin/sh
# Rebuilds this folder from a clean clone after `make build model`: the mapper of
# ../smollm2-135m-repeat-global-r05 (global budget, repeat-pass proxy features, ranking term on
# each window's top half) made wider and deeper (width 96, 3 layers, FFN 192) and trained for 30
# epochs, then every policy with --budget global at ρ 0.3 and 0.5 on 64 held-out KJV windows and
# 64 windows of the Jargon File (out of domain), this mapper (proxykv) beside
# ../smollm2-135m-repeat-global-r05's (proxykv-2) on the same windows. The dataset is
# ../smollm2-135m-repeat-global's (rebuilt when WORK_DIR lacks it). Seeds fixed as in
# ../smollm2-135m/run.sh.
# Usage: results/proxykv/smollm2-135m-repeat-global-w96/run.sh [BUILD_DIR] [WORK_DIR]
set -eu
BUILD=${1:-build}
WORK=${2:-proxykv-work}
HERE=$(dirname "$0")
KV="$BUILD/apps/kvshift"
MODEL=models/smollm2-135m
[ -f "$WORK/dataset-rep/manifest.json" ] ||
  "$KV" proxykv dataset --target "$MODEL" --proxy-layers 8 --corpus data/corpus/kjv.tokens \
    --span 0:0.8 --windows 160 --tokens 1024 --seed 1 --features log_repeat_max_attention \
    --out "$WORK/dataset-rep" --force
/usr/bin/python3 tools/train_mapper.py --dataset "$WORK/dataset-rep" \
  --out "$WORK/mapper-w96" --seed 1 --threads 2 --budget global --epochs 30 \
  --rank-ratio 0.5 --width 96 --layers 3 --ffn 192
POLICIES="--policy exact --policy prune:proxykv:$WORK/mapper-w96/mapper.safetensors
  --policy prune:proxykv:$HERE/../smollm2-135m-repeat-global-r05/mapper.safetensors
  --policy prune:kvzip --policy prune:snapkv --policy prune:h2o --policy prune:random"
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 $POLICIES \
  --budget global --history 1024 --eval 128 --windows 64 --retention 0.3,0.5 \
  --out "$WORK/quality-kjv-w96" --force
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/jargon.tokens $POLICIES \
  --budget global --history 1024 --eval 128 --windows 64 --retention 0.3,0.5 \
  --out "$WORK/quality-jargon-w96" --force
cp "$WORK/mapper-w96/mapper.json" "$WORK/mapper-w96/mapper.safetensors" \
  "$WORK/mapper-w96/train.log" "$HERE/"
for d in kjv jargon; do
  for f in json md svg; do cp "$WORK/quality-$d-w96/quality.$f" "$HERE/quality-$d.$f"; done
done
