#!/usr/bin/env bash
# Sweep throughput, end to end through the kvshift executable:
#  1. 1,000 small simulated points (tests/sweep/data/tiny.json, 8 s simulated,
#     one strategy, 1,000 distinct seeds) at --jobs 1 and --jobs 2: points/s;
#  2. an analytic sweep of 10 million points (1,000 bandwidths x 2,000 context
#     lengths x 5 omitted-group counts): wall seconds (target <= 5 s).
# Each figure is the median of REPS runs (default 3).
# Usage: bench/sweep_points.sh [BUILD_DIR] (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
exe=$build/apps/kvshift
reps=${REPS:-3}
points=${POINTS:-1000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seeds=$(seq -s, 1 "$points")

for jobs in 1 2; do
  for i in $(seq "$reps"); do
    rm -rf "$out/s"
    "$exe" sweep "$root/tests/sweep/data/tiny.json" --set /duration=8s --set '/policies/strategies=["risk_kv"]' \
      --set "/seed=$seeds" --jobs "$jobs" --no-report --quiet --out "$out/s" >/dev/null
    python3 -c "import json;print(json.load(open('$out/s/wall.json'))['points_per_s'])"
  done | median | xargs printf "simulated sweep, %s points, --jobs %s: %.1f points/s (median of $reps)\n" "$points" "$jobs"
done

for i in $(seq "$reps"); do
  rm -rf "$out/a"
  "$exe" sweep --analytic --bandwidth 1Mbps..1Tbps:1000 --tokens 512..1048576:2000 --omit 0,2,4,6,8 \
    --jobs 2 --no-report --out "$out/a" | sed -n 's/.* in \([0-9.]*\) s wall.*/\1/p'
done | median | xargs printf "analytic sweep, 10,000,000 points, --jobs 2: %s s wall (median of $reps; target <= 5 s)\n"
