#!/bin/sh
# ProxyKV end to end on the committed tiny model: `kvshift proxykv dataset` →
# tools/train_mapper.py (a few steps) → `kvshift quality` with the trained
# mapper beside KVZip and random, on held-out text; and quality refuses a span
# overlapping the one the mapper was trained on. Exits 77 (ctest SKIP) when
# Debian's /usr/bin/python3 cannot import torch.
# Usage: proxykv_pipeline_test.sh SOURCE_DIR KVSHIFT_EXE
set -u
PY=/usr/bin/python3
SRC=${1:?usage: proxykv_pipeline_test.sh SOURCE_DIR KVSHIFT_EXE}
KV=${2:?usage: proxykv_pipeline_test.sh SOURCE_DIR KVSHIFT_EXE}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch (Debian's python3-torch is not installed)"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
step() { echo "== $*"; }
die() { echo "FAIL: $*"; exit 1; }

mkdir -p "$TMP/tiny"
cp "$SRC/tests/fixtures/tiny_llama/config.json" "$SRC/tests/fixtures/tiny_llama/model.safetensors" \
  "$TMP/tiny/"
echo '{"text": "repeat", "ids": [5, 6, 7]}' > "$TMP/tiny/kvzip_prompt.json"
# The fixture's context is 128 tokens; these windows measure 128 + 16 (its weights have no
# position table, so a longer context changes nothing else).
sed -i 's/"max_position_embeddings": 128/"max_position_embeddings": 256/' "$TMP/tiny/config.json"
"$PY" -c "
import random, struct, sys
r = random.Random(7)
open(sys.argv[1], 'wb').write(b''.join(struct.pack('<i', r.randrange(96)) for _ in range(6000)))
" "$TMP/text.tokens" || die "corpus"

step dataset
"$KV" proxykv dataset --target "$TMP/tiny" --proxy-layers 1 --corpus "$TMP/text.tokens" \
  --tokens 64 --windows 8 --span 0:0.5 --out "$TMP/ds" || die "proxykv dataset"

step train
"$PY" "$SRC/tools/train_mapper.py" --dataset "$TMP/ds" --out "$TMP/mapper" --width 16 --heads 2 \
  --ffn 32 --window 8 --batch 2 --epochs 2 --max-steps 4 --threads 1 >"$TMP/train.out" 2>&1 ||
  { tail -5 "$TMP/train.out"; die "train_mapper"; }

step quality
Q="quality --model $TMP/tiny --corpus $TMP/text.tokens --history 128 --eval 16 --windows 8 --threads 2"
"$KV" $Q --span 0.5:1 --retention 0.5,0.7 --policy "prune:proxykv:$TMP/mapper/mapper.safetensors" \
  --policy prune:kvzip --policy prune:random --out "$TMP/q" || die "quality"
"$PY" - "$TMP/q/quality.json" <<'PYEOF' || die "quality.json"
import json, sys
q = json.load(open(sys.argv[1]))
rows = [r for r in q["rows"] if r["method"] == "proxykv"]
assert [r["retention"] for r in rows] == [0.5, 0.7], rows
# 127 cached keys, 36 always kept: at ρ 0.5 the methods choose 28 more, so random differs from KVZip.
rnd = [r for r in q["rows"] if r["method"] == "random" and r["retention"] == 0.5][0]
assert rnd["recall_at_k_vs_kvzip"] < 1.0, rnd
for r in rows:
    assert 0.0 <= r["recall_at_k_vs_kvzip"] <= 1.0, r
    assert len(r["per_request"]) == 8, r
assert q["proxy"].endswith("[:1]"), q.get("proxy")
assert "proxy_prefill" in q["timings_s"] and "mapper_forward" in q["timings_s"], q["timings_s"]
PYEOF

step "global budget"
# The per-head mapper used with a global budget: measured, and the output says what it was
# trained for; a mapper trained for the global budget is used without that note.
"$KV" $Q --span 0.5:1 --retention 0.5 --budget global \
  --policy "prune:proxykv:$TMP/mapper/mapper.safetensors" >"$TMP/g.out" 2>&1 || die "global"
grep -q "trained to rank tokens for a per-head budget and is used with --budget global" \
  "$TMP/g.out" || die "no note on the mapper's budget: $(cat "$TMP/g.out")"
"$PY" "$SRC/tools/train_mapper.py" --dataset "$TMP/ds" --out "$TMP/mapper-g" --width 16 --heads 2 \
  --ffn 32 --window 8 --batch 2 --epochs 1 --max-steps 2 --threads 1 --budget global \
  >"$TMP/train-g.out" 2>&1 || { tail -5 "$TMP/train-g.out"; die "train_mapper --budget global"; }
"$KV" $Q --span 0.5:1 --retention 0.5 --budget global \
  --policy "prune:proxykv:$TMP/mapper-g/mapper.safetensors" >"$TMP/g2.out" 2>&1 || die "global 2"
if grep -q "trained to rank tokens" "$TMP/g2.out"; then die "a note on a matching mapper"; fi
# Two mappers in one run: the headline names each one's share of KVZip's quality.
"$KV" $Q --span 0.5:1 --retention 0.5 --budget global --policy prune:kvzip --policy prune:random \
  --policy "prune:proxykv:$TMP/mapper-g/mapper.safetensors" \
  --policy "prune:proxykv:$TMP/mapper/mapper.safetensors" --out "$TMP/qg" >/dev/null 2>&1 ||
  die "two mappers"
for label in proxykv proxykv-2; do
  grep -q "ProxyKV ($label) recovers" "$TMP/qg/quality.md" ||
    die "headline without $label: $(sed -n 3p "$TMP/qg/quality.md")"
done

step "held-out span"
out=$("$KV" $Q --span 0.4:1 --policy "prune:proxykv:$TMP/mapper/mapper.safetensors" 2>&1)
rc=$?
[ "$rc" = 2 ] || die "an overlapping span exited $rc, not 2"
printf '%s' "$out" | grep -q -- "--span: 0.4:1 overlaps the span 0:0.5" || die "message: $out"

echo "proxykv pipeline test passed"
