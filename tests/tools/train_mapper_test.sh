#!/bin/sh
# Smoke test of tools/train_mapper.py: trains a tiny mapper for a few steps on a
# synthetic dataset in the C++ producer's format, checks what it writes, and the
# exit codes of bad input (2) and a non-finite loss (3). Exits 77 (ctest SKIP)
# when Debian's /usr/bin/python3 cannot import torch.
# Usage: train_mapper_test.sh SOURCE_DIR
set -u
PY=/usr/bin/python3
SRC=${1:?usage: train_mapper_test.sh SOURCE_DIR}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch (Debian's python3-torch is not installed)"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

# Datasets: a good one and one spoilt copy per kind of bad input.
"$PY" - "$SRC/tools" "$TMP" <<'PYEOF' || exit 1
import json, sys
sys.path.insert(0, sys.argv[1])
import mapper_model as mm
tmp = sys.argv[2]
x, l, s = mm.synthetic_dataset(8, 6, 5, 48, seed=1)
mm.write_dataset(tmp + "/ds", x, l, s, shard_windows=5)
mm.write_dataset(tmp + "/few", x[:3], l[:3], s[:3])
bad = x.copy(); bad[:] = 3e38  # finite, but overflows inside the forward pass
mm.write_dataset(tmp + "/nan", bad, l, s)
for name, edit in (("fmt", {"format": "kvshift-something-else"}), ("ver", {"version": 2}),
                   ("shape", {"in_channels": 7})):
    mm.write_dataset(tmp + "/" + name, x, l, s)
    m = json.load(open(tmp + "/" + name + "/manifest.json")); m.update(edit)
    json.dump(m, open(tmp + "/" + name + "/manifest.json", "w"))
PYEOF

TRAIN="$PY $SRC/tools/train_mapper.py"
TINY="--width 16 --heads 2 --ffn 32 --window 8 --batch 4"

# expect RC PATTERN ARGS...: the exit code and a phrase of the message.
expect() {
  rc_want=$1; pattern=$2; shift 2
  out=$($TRAIN "$@" 2>&1); rc=$?
  if [ "$rc" != "$rc_want" ] || ! printf '%s' "$out" | grep -q -- "$pattern"; then
    echo "FAIL: train_mapper $* → exit $rc (want $rc_want, message with '$pattern'):"
    printf '%s\n' "$out" | tail -3
    fail=1
  fi
}

expect 0 "done:" --dataset "$TMP/ds" --out "$TMP/out" $TINY --epochs 2 --max-steps 3
for f in mapper.safetensors mapper.json train.log; do
  [ -s "$TMP/out/$f" ] || { echo "FAIL: $f not written"; fail=1; }
done
"$PY" - "$TMP/out/mapper.json" <<'PYEOF' || fail=1
import json, sys
m = json.load(open(sys.argv[1]))
assert m["format"] == "kvshift-proxykv-mapper" and m["version"] == 1, m
assert m["architecture"]["in_channels"] == 6 and m["architecture"]["targets"] == 5
assert m["validation"] and "recall@0.5" in m["validation"][0], m["validation"]
assert m["training"]["steps"] == 3 and m["dataset"]["windows"]["validation"] >= 1
PYEOF

# A global budget: trained and recorded; with one target row it is the per-head loss exactly,
# and with several it ranks all rows' tokens together (a row-wise shift changes it).
expect 0 "done:" --dataset "$TMP/ds" --out "$TMP/og" $TINY --epochs 1 --max-steps 2 --budget global
"$PY" - "$SRC/tools" "$TMP/og/mapper.json" <<'PYEOF' || fail=1
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import train_mapper as tm
assert json.load(open(sys.argv[2]))["training"]["flags"]["budget"] == "global"
g = torch.Generator().manual_seed(3)
w = dict(topk=1.0, mse=0.5, rank=0.5, mass=0.5, cos=0.5)
y, label = torch.randn(2, 1, 40, generator=g), torch.rand(2, 1, 40, generator=g)
one = tm.HybridLoss(40, [0.1, 0.5], w, 0.2)(y, label)[0]
glob = tm.HybridLoss(40, [0.1, 0.5], w, 0.2, "global")(y, label)[0]
assert torch.equal(one, glob), (one, glob)
y, label = torch.randn(2, 3, 40, generator=g), torch.rand(2, 3, 40, generator=g)
shift = torch.tensor([0.0, 5.0, -5.0]).view(1, 3, 1)
per_head, glob = tm.HybridLoss(40, [0.1, 0.5], w, 0.2), tm.HybridLoss(120, [0.1, 0.5], w, 0.2, "global")
assert abs(float(per_head(y + shift, label)[0] - per_head(y, label)[0])) < 1e-4
assert abs(float(glob(y + shift, label)[0] - glob(y, label)[0])) > 1e-2
assert tm.recall_at(label, label, 0.3, "global") == 1.0
PYEOF

expect 2 "dataset" --dataset "$TMP/none" --out "$TMP/o2"
expect 2 "format must be" --dataset "$TMP/fmt" --out "$TMP/o2"
expect 2 "version must be 1" --dataset "$TMP/ver" --out "$TMP/o2"
expect 2 "the manifest says" --dataset "$TMP/shape" --out "$TMP/o2"
expect 2 "at least 4" --dataset "$TMP/few" --out "$TMP/o2"
expect 2 "\-\-ratios" --dataset "$TMP/ds" --out "$TMP/o2" --ratios 0.1,1.5
expect 2 "\-\-width: must be > 0" --dataset "$TMP/ds" --out "$TMP/o2" --width 0
expect 2 "not divisible by --heads" --dataset "$TMP/ds" --out "$TMP/o2" --width 10 --heads 4
expect 2 "\-\-kernel: must be odd" --dataset "$TMP/ds" --out "$TMP/o2" --kernel 4
expect 2 "\-\-budget" --dataset "$TMP/ds" --out "$TMP/o2" --budget uniform
expect 3 "non-finite loss.*step 1" --dataset "$TMP/nan" --out "$TMP/o3" $TINY --epochs 1

# tools/mapper_fit.py: exact on a mapper that is the label, then on the mapper trained above.
"$PY" - "$SRC/tools" <<'PYEOF' || fail=1
import sys
sys.path.insert(0, sys.argv[1])
import torch
import mapper_fit as mf
torch.manual_seed(0)
label = torch.rand(3, 40)
assert mf.fit_measures(label, label, 0.5, 2, 4) == (1.0, 1.0, 0.0)
# The reverse order keeps none of KVZip's choice while the budget is below half of the tokens.
r, m, w = mf.fit_measures(-label, label, 0.3, 0, 0)
assert r == 0.0 and m < 1.0, (r, m)
# All of head 0 above every other head: the whole budget goes to head 0 in KVZip's choice and
# to head 2 in the mapper's, so every token of it is given to the wrong head.
label = torch.tensor([[9.0] * 10, [1.0] * 10, [0.0] * 10])
assert mf.fit_measures(label.flip(0), label, 0.2, 0, 0)[2] == 1.0
PYEOF
FIT="$PY $SRC/tools/mapper_fit.py"
out=$($FIT --dataset "$TMP/ds" --mapper "$TMP/out" --validation-of 0 --sinks 1 --recent 2 2>&1)
printf '%s' "$out" | grep -q "rho 0.50  recall" || { echo "FAIL: mapper_fit: $out"; fail=1; }
$FIT --dataset "$TMP/ds" --mapper "$TMP/none" >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: mapper_fit without a mapper must exit 2"; fail=1; }
$FIT --dataset "$TMP/ds" --mapper "$TMP/out" --sinks 40 --recent 40 >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: mapper_fit with nothing left to rank must exit 2"; fail=1; }

[ "$fail" = 0 ] && echo "train_mapper smoke test passed"
exit "$fail"
