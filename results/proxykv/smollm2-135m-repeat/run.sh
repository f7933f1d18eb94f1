#!/bin/sh
# Rebuilds this folder from a clean clone after `make build model`: the mapper trained on the
# proxy's repeat-pass features (log_repeat_max_attention), then every policy on held-out KJV
# with this mapper (proxykv) and the log_mean_attention one of ../smollm2-135m (proxykv-2)
# side by side on the same 32 windows, and the same on the Jargon File (out of domain). Seeds fixed as in ../smollm2-135m/run.sh.
# Usage: results/proxykv/smollm2-135m-repeat/run.sh [BUILD_DIR] [WORK_DIR]
set -eu
BUILD=${1:-build}
WORK=${2:-proxykv-work}
HERE=$(dirname "$0")
KV="$BUILD/apps/kvshift"
MODEL=models/smollm2-135m
"$KV" proxykv dataset --target "$MODEL" --proxy-layers 8 --corpus data/corpus/kjv.tokens \
  --span 0:0.8 --windows 160 --tokens 1024 --seed 1 --features log_repeat_max_attention \
  --out "$WORK/dataset-rep" --force
/usr/bin/python3 tools/train_mapper.py --dataset "$WORK/dataset-rep" --out "$WORK/mapper-rep" \
  --seed 1 --threads 2
"$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 --policy exact \
  --policy "prune:proxykv:$WORK/mapper-rep/mapper.safetensors" \
  --policy "prune:proxykv:$HERE/../smollm2-135m/mapper.safetensors" --policy prune:kvzip \
  --policy prune:snapkv --policy prune:h2o --policy prune:recent --policy prune:random \
  --history 1024 --eval 128 --windows 32 --out "$WORK/quality-kjv-rep"
# Out of domain: the Jargon File, which neither mapper saw.
"$KV" quality --model "$MODEL" --corpus data/corpus/jargon.tokens --policy exact \
  --policy "prune:proxykv:$WORK/mapper-rep/mapper.safetensors" \
  --policy "prune:proxykv:$HERE/../smollm2-135m/mapper.safetensors" --policy prune:kvzip \
  --policy prune:snapkv --policy prune:h2o --policy prune:recent --policy prune:random \
  --history 1024 --eval 128 --windows 32 --out "$WORK/quality-jargon-rep"
cp "$WORK/dataset-rep/manifest.json" "$HERE/dataset-manifest.json"
cp "$WORK/mapper-rep/mapper.json" "$WORK/mapper-rep/mapper.safetensors" "$WORK/mapper-rep/train.log" "$HERE/"
for f in json md svg; do
  cp "$WORK/quality-kjv-rep/quality.$f" "$HERE/quality-kjv.$f"
  cp "$WORK/quality-jargon-rep/quality.$f" "$HERE/quality-jargon.$f"
done
