#!/bin/sh
# Rebuilds this folder from a clean clone after `make build model`: a mapper trained on
# continuation labels (`proxykv dataset --labels continuation_max --continuation 128`: the largest
# attention each window key gets from the next 128 corpus tokens' queries) with
# ../smollm2-135m-repeat-global-r05's recipe otherwise (repeat-pass proxy features, global budget,
# ranking term on each window's top half, 20 epochs), then every policy with --budget global at
# ρ 0.3 and 0.5 on 64 held-out KJV windows and 64 windows of the Jargon File (out of domain),
# this mapper (proxykv) beside ../smollm2-135m-repeat-global-r05's KVZip-label mapper (proxykv-2)
# on the same windows. The two quality runs go side by side, one core each. The dataset and the
# mapper are rebuilt when WORK_DIR lacks them. Seeds fixed as in ../smollm2-135m/run.sh.
# Usage: results/proxykv/smollm2-135m-continuation/run.sh [BUILD_DIR] [WORK_DIR]
set -eu
BUILD=${1:-build}
WORK=${2:-proxykv-work}
HERE=$(dirname "$0")
KV="$BUILD/apps/kvshift"
MODEL=models/smollm2-135m
[ -f "$WORK/dataset-cont/manifest.json" ] ||
  "$KV" proxykv dataset --target "$MODEL" --proxy-layers 8 --corpus data/corpus/kjv.tokens \
    --span 0:0.8 --windows 160 --tokens 1024 --seed 1 --features log_repeat_max_attention \
    --labels continuation_max --continuation 128 --out "$WORK/dataset-cont" --force
[ -f "$WORK/mapper-cont/mapper.safetensors" ] ||
  /usr/bin/python3 tools/train_mapper.py --dataset "$WORK/dataset-cont" \
    --out "$WORK/mapper-cont" --seed 1 --threads 2 --budget global --epochs 20 --rank-ratio 0.5
cp "$WORK/dataset-cont/manifest.json" "$HERE/dataset-manifest.json"
# The quality runs read the mapper from this folder, so that their files name it there.
cp "$WORK/mapper-cont/mapper.json" "$WORK/mapper-cont/mapper.safetensors" \
  "$WORK/mapper-cont/train.log" "$HERE/"
POLICIES="--policy exact --policy prune:proxykv:$HERE/mapper.safetensors
  --policy prune:proxykv:$HERE/../smollm2-135m-repeat-global-r05/mapper.safetensors
  --policy prune:kvzip --policy prune:snapkv --policy prune:h2o --policy prune:recent
  --policy prune:random"
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 $POLICIES \
  --budget global --history 1024 --eval 128 --windows 64 --retention 0.3,0.5 --threads 1 \
  --out "$WORK/quality-kjv-cont" --force > "$WORK/quality-kjv-cont.log" 2>&1 &
KJV_RUN=$!
# shellcheck disable=SC2086
"$KV" quality --model "$MODEL" --corpus data/corpus/jargon.tokens $POLICIES \
  --budget global --history 1024 --eval 128 --windows 64 --retention 0.3,0.5 --threads 1 \
  --out "$WORK/quality-jargon-cont" --force > "$WORK/quality-jargon-cont.log" 2>&1 &
JARGON_RUN=$!
failed=0
wait "$KJV_RUN" || failed=1
wait "$JARGON_RUN" || failed=1
[ "$failed" = 0 ] || { tail -n 5 "$WORK"/quality-*-cont.log >&2; exit 1; }
# This mapper at 512 and 2,048 history tokens (trained on 1,024): ProxyKV's ΔNLL by context,
# which ../../../scenarios/smollm2-proxykv.json charges per move.
by_context() {
  "$KV" quality --model "$MODEL" --corpus data/corpus/kjv.tokens --span 0.8:1 \
    --policy exact --policy "prune:proxykv:$HERE/mapper.safetensors" \
    --policy prune:kvzip --policy prune:random --budget global \
    --history "$1" --eval 128 --windows 32 --retention 0.3,0.5 --threads 1 \
    --out "$WORK/quality-kjv-cont-h$1" --force > "$WORK/quality-kjv-cont-h$1.log" 2>&1
}
by_context 512 &
H512_RUN=$!
by_context 2048 &
H2048_RUN=$!
wait "$H512_RUN" || failed=1
wait "$H2048_RUN" || failed=1
[ "$failed" = 0 ] || { tail -n 5 "$WORK"/quality-kjv-cont-h*.log >&2; exit 1; }
for pair in kjv:kjv-cont jargon:jargon-cont kjv-h512:kjv-cont-h512 kjv-h2048:kjv-cont-h2048; do
  for f in json md svg; do
    cp "$WORK/quality-${pair#*:}/quality.$f" "$HERE/quality-${pair%%:*}.$f"
  done
done
