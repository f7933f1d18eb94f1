#!/usr/bin/env bash
# Fleet-scale serving benchmark: the 1,024-GPU hour scaled 1x, 2x, 5x and 10x
# (bench/fleet_scenario.py: 32*S leaves of 32 H100 nodes on 8 spines, S million
# requests over one simulated hour, 3*S node failures, S drains, RISK-KV
# protection; 10x is bench/scenarios/fleet-10240-hour.json: 10,240 GPUs,
# 10 M requests). Reports, per scale, wall and CPU time, simulated seconds per
# wall second, events per second and peak memory, then how they grow against 1x.
# Targets: the 10x hour in <= 90 s wall within 4 GiB (on a 2-core machine).
# With a baseline build, the 1,024-GPU hour (bench/serving_hour.sh's scenario) runs
# on both binaries alternately, so "no slower than before" is measured side by side.
# Usage: bench/fleet_hour.sh [build-dir] [scales, e.g. "1 2 5 10"] [baseline-build-dir]
set -euo pipefail
build=${1:-build}
scales=${2:-"1 2 5 10"}
baseline=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run LABEL BINARY SCENARIO: one run; prints wall, cpu, peak KiB, events
run() {
  rm -rf "$out/run"
  /usr/bin/time -f "%e %U %M" -o "$out/time" "$2" run "$3" --quiet --out "$out/run" \
    > "$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  read -r wall user rss_kb < "$out/time"
  events=$(python3 -c "import json;print(json.load(open('$out/run/summary.json'))['strategies']['risk_kv']['events'])")
  echo "$wall $user $rss_kb $events"
}

printf '%-6s %8s %9s %9s %8s %12s %12s %10s\n' scale GPUs requests wall_s cpu_s sim-s/wall-s events/s peak_MiB
declare -A wall_of peak_of
for s in $scales; do
  scenario="$out/scale-$s.json"
  python3 "$here/fleet_scenario.py" "$s" > "$scenario"
  read -r wall user rss events < <(run this "$build/apps/kvshift" "$scenario")
  wall_of[$s]=$wall
  peak_of[$s]=$rss
  awk -v s="$s" -v w="$wall" -v u="$user" -v m="$rss" -v e="$events" 'BEGIN {
    printf "%-6s %8d %9d %9.1f %8.1f %12.1f %12.3g %10.0f\n", s "x", 1024 * s, 1e6 * s, w, u,
           3600 / w, e / w, m / 1024 }'
done
first=$(echo "$scales" | awk '{print $1}')
echo
echo "growth against ${first}x (linear = the scale ratio):"
for s in $scales; do
  awk -v s="$s" -v f="$first" -v w="${wall_of[$s]}" -v w0="${wall_of[$first]}" \
      -v m="${peak_of[$s]}" -v m0="${peak_of[$first]}" 'BEGIN {
    printf "  %3sx: wall x%.2f, peak memory x%.2f (scale x%.1f)\n", s, w / w0, m / m0, s / f }'
done
if [[ -n "${wall_of[10]:-}" ]]; then
  awk -v w="${wall_of[10]}" -v m="${peak_of[10]}" 'BEGIN {
    printf "10,240-GPU hour: %.1f s wall (target <= 90 s: %s), peak %.0f MiB (target <= 4096: %s)\n",
           w, w <= 90 ? "met" : "NOT met", m / 1024, m <= 4 * 1048576 ? "met" : "NOT met" }'
fi

if [[ -n "$baseline" ]]; then
  echo
  echo "1,024-GPU hour (bench/scenarios/leafspine-1024-hour.json), alternating, 3 runs each:"
  walls_this=() walls_base=()
  for i in 1 2 3; do
    read -r wb _ mb _ < <(run baseline "$baseline/apps/kvshift" "$here/scenarios/leafspine-1024-hour.json")
    read -r wt _ mt _ < <(run this "$build/apps/kvshift" "$here/scenarios/leafspine-1024-hour.json")
    printf '  run %d: baseline %6.2f s %5.0f MiB   this %6.2f s %5.0f MiB\n' "$i" "$wb" \
      "$(echo "$mb / 1024" | bc -l)" "$wt" "$(echo "$mt / 1024" | bc -l)"
    walls_base+=("$wb")
    walls_this+=("$wt")
  done
  median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
  awk -v a="$(median "${walls_base[@]}")" -v b="$(median "${walls_this[@]}")" 'BEGIN {
    printf "  median: baseline %.2f s, this %.2f s, this / baseline %.3f\n", a, b, b / a }'
fi
