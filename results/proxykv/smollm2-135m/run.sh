#!/bin/sh
# Rebuilds this folder's ProxyKV result from a clean clone after `make build model`:
# the mapper's dataset (first 80 % of the King James corpus), the mapper, and the
# quality of every KV policy on held-out KJV (last 20 %) and, out of domain, on
# the Jargon File. Seeds are fixed: the dataset and the mapper come out the same
# bit for bit on the same machine type (CPU, fp32, deterministic PyTorch).
# Usage: results/proxykv/smollm2-135m/run.sh [BUILD_DIR] [WORK_DIR]
set -eu
BUILD=${1:-build}
WORK=${2:-proxykv-work}
HERE=$(dirname "$0")
KV="$BUILD/apps/kvshift"
MODEL=models/smollm2-135m
POLICIES="--policy exact --policy prune:proxykv:$WORK/mapper/mapper.safetensors --policy prune:kvzip
  --policy prune:snapkv --policy prune:h2o --policy prune:recent --policy prune:random"

"$KV" proxykv dataset --target "$MODEL" --proxy-layers 8 --corpus data/corpus/kjv.tokens \
  --span 0:0.8 --windows 160 --tokens 1024 --seed 1 --out "$WORK/dataset" --force
/usr/bin/python3 tools/train_mapper.py --dataset "$WORK/dataset" --out "$WORK/mapper" --seed 1 \
  --threads 2
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 $POLICIES \
  --history 1024 --eval 128 --windows 32 --out "$WORK/quality-kjv"
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/jargon.tokens $POLICIES \
  --history 1024 --eval 128 --windows 32 --out "$WORK/quality-jargon"
# The same held-out KJV with shorter and longer histories (the mapper trained on 1,024).
for h in 512 2048; do
  # shellcheck disable=SC2086
  "$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 $POLICIES \
    --history "$h" --eval 128 --windows 32 --out "$WORK/quality-kjv-h$h"
done
# One budget over all KV heads (KVZip's non-uniform budget), with a mapper trained to rank
# for it beside the per-head one (labelled proxykv-2 in the tables).
/usr/bin/python3 tools/train_mapper.py --dataset "$WORK/dataset" --out "$WORK/mapper-global" \
  --seed 1 --threads 2 --budget global
# And one trained on twice the windows (proxykv-3 in the held-out KJV table).
"$KV" proxykv dataset --target "$MODEL" --proxy-layers 8 --corpus data/corpus/kjv.tokens \
  --span 0:0.8 --windows 320 --tokens 1024 --seed 1 --out "$WORK/dataset-320" --force
/usr/bin/python3 tools/train_mapper.py --dataset "$WORK/dataset-320" \
  --out "$WORK/mapper-global-320" --seed 1 --threads 2 --budget global
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 $POLICIES \
  --policy "prune:proxykv:$WORK/mapper-global/mapper.safetensors" \
  --policy "prune:proxykv:$WORK/mapper-global-320/mapper.safetensors" --budget global \
  --history 1024 --eval 128 --windows 32 --out "$WORK/quality-kjv-global"
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/jargon.tokens $POLICIES \
  --policy "prune:proxykv:$WORK/mapper-global/mapper.safetensors" --budget global \
  --history 1024 --eval 128 --windows 32 --out "$WORK/quality-jargon-global"
# The per-head and the global mapper (labels proxykv, proxykv-2 as in quality-kjv-global) at 512
# and 2,048 history tokens: ProxyKV's ΔNLL by context, which scenarios charge per move.
for h in 512 2048; do
  "$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 \
    --policy "prune:proxykv:$WORK/mapper/mapper.safetensors" \
    --policy "prune:proxykv:$WORK/mapper-global/mapper.safetensors" --budget global \
    --history "$h" --eval 128 --windows 32 --retention 0.3,0.5,0.7 --out "$WORK/quality-kjv-global-h$h"
done
cp "$WORK/dataset/manifest.json" "$HERE/dataset-manifest.json"
cp "$WORK/mapper/mapper.json" "$WORK/mapper/mapper.safetensors" "$WORK/mapper/train.log" "$HERE/"
cp "$WORK/dataset-320/manifest.json" "$HERE/dataset-320-manifest.json"
for m in mapper-global mapper-global-320; do
  mkdir -p "$HERE/$m"
  cp "$WORK/$m/mapper.json" "$WORK/$m/mapper.safetensors" "$WORK/$m/train.log" "$HERE/$m/"
done
for d in kjv jargon kjv-h512 kjv-h2048 kjv-global jargon-global kjv-global-h512 kjv-global-h2048; do
  for f in quality.json quality.md quality.svg; do cp "$WORK/quality-$d/$f" "$HERE/${f%%.*}-$d.${f#*.}"; done
done
