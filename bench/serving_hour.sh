#!/usr/bin/env bash
# Serving-model benchmark: 1,024 GPU nodes on a leaf-spine, 1 million requests
# over one simulated hour, node failures, RISK-KV protection
# (bench/scenarios/leafspine-1024-hour.json). Reports wall time, CPU time,
# simulated seconds per wall second, events/s and peak memory.
# Targets: the hour in <= 36 s (>= 100 simulated s per wall s) within 4 GiB.
# Usage: bench/serving_hour.sh [build-dir] [repeats]
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
scenario="$here/scenarios/leafspine-1024-hour.json"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
walls=()
for i in $(seq "$repeats"); do
  /usr/bin/time -f "%e %U %M" -o "$out/time" "$build/apps/kvshift" run "$scenario" --quiet \
    --out "$out/run" --force > "$out/log" 2>&1
  read -r wall user rss_kb < "$out/time"
  events=$(python3 -c "import json;print(json.load(open('$out/run/summary.json'))['strategies']['risk_kv']['events'])")
  completed=$(python3 -c "import json;print(json.load(open('$out/run/summary.json'))['strategies']['risk_kv']['requests']['completed'])")
  awk -v i="$i" -v w="$wall" -v u="$user" -v e="$events" -v m="$rss_kb" -v c="$completed" 'BEGIN {
    printf "run %d: wall %6.2f s  cpu %6.2f s  %6.1f sim-s/wall-s  %.3g events/s  peak %5.0f MiB  (%d requests completed, %d events)\n",
           i, w, u, 3600 / w, e / w, m / 1024, c, e }'
  walls+=("$wall")
done
median=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
awk -v w="$median" 'BEGIN { printf "median wall: %.2f s for 3600 simulated s (%.1f sim-s per wall-s); target <= 36 s\n", w, 3600 / w }'
