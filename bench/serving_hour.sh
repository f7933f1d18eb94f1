#!/usr/bin/env bash
# Serving-model benchmark: 1,024 GPU nodes on a leaf-spine, 1 million requests
# over one simulated hour, node failures, RISK-KV protection
# (bench/scenarios/leafspine-1024-hour.json). Reports wall time, CPU time,
# simulated seconds per wall second, events/s and peak memory.
# Targets: the hour in <= 36 s (>= 100 simulated s per wall s) within 4 GiB.
# Usage: bench/serving_hour.sh [build-dir] [repeats] [baseline-build-dir]
# Each round also runs the same hour with prefix caching and its host-DRAM
# tier on (leafspine-1024-hour-prefix.json: half the requests share one of 64
# prefixes); target: <= 2x the plain hour's wall time, ratio printed. And with
# preemption on (leafspine-1024-hour-preempt.json: prompts booked at admission,
# growth booked each decode pass; HBM is ample, so it prices the bookkeeping),
# its ratio to the plain hour printed.
# With a baseline build (e.g. an older commit built in another folder, same
# CMake options), the binaries run alternately, so all medians come from
# one run on the same machine state, and the ratio is printed.
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
baseline=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
scenario="$here/scenarios/leafspine-1024-hour.json"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
labels=(this prefix preempt)
[ -n "$baseline" ] && labels=(baseline this prefix preempt)
declare -A walls rss
for i in $(seq "$repeats"); do
  for label in "${labels[@]}"; do
    bin="$build/apps/kvshift"
    [ "$label" = baseline ] && bin="$baseline/apps/kvshift"
    file=$scenario
    [ "$label" = prefix ] && file="$here/scenarios/leafspine-1024-hour-prefix.json"
    [ "$label" = preempt ] && file="$here/scenarios/leafspine-1024-hour-preempt.json"
    /usr/bin/time -f "%e %U %M" -o "$out/time" "$bin" run "$file" --quiet \
      --out "$out/run" --force > "$out/log" 2>&1 || { rm -rf "$out/run"; \
      /usr/bin/time -f "%e %U %M" -o "$out/time" "$bin" run "$file" --quiet \
      --out "$out/run" > "$out/log" 2>&1; }  # a baseline may predate --force
    if [ "$label" = prefix ]; then
      python3 -c "import json;c=json.load(open('$out/run/summary.json'))['strategies']['risk_kv']['prefix_cache'];h=c['host_tier'];print('prefix   cache: %.1f %% of prompt tokens reused, %d of %d lookups hit, %.0f GPU-s of prefill saved, %d blocks evicted; host tier: %d prefills loaded from it, peak %.1f GiB' % (100*c['token_hit_rate'], c['hits'], c['lookups'], c['saved_prefill_gpu_s'], c['evicted_blocks'], h['hits'], h['peak_bytes'] / 2**30))"
    fi
    if [ "$label" = preempt ]; then
      python3 -c "import json;p=json.load(open('$out/run/summary.json'))['strategies']['risk_kv']['preemption'];print('preempt  %d preemptions, %d recomputed' % (p['preemptions'], p['recomputes']))"
    fi
    read -r wall user rss_kb < "$out/time"
    events=$(python3 -c "import json;print(json.load(open('$out/run/summary.json'))['strategies']['risk_kv']['events'])")
    completed=$(python3 -c "import json;print(json.load(open('$out/run/summary.json'))['strategies']['risk_kv']['requests']['completed'])")
    rm -rf "$out/run"
    awk -v l="$label" -v i="$i" -v w="$wall" -v u="$user" -v e="$events" -v m="$rss_kb" -v c="$completed" 'BEGIN {
      printf "%-8s run %d: wall %6.2f s  cpu %6.2f s  %6.1f sim-s/wall-s  %.3g events/s  peak %5.0f MiB  (%d requests completed, %d events)\n",
             l, i, w, u, 3600 / w, e / w, m / 1024, c, e }'
    walls[$label]+="$wall "
    rss[$label]+="$rss_kb "
  done
done
median() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for label in "${labels[@]}"; do
  w=$(median "${walls[$label]}"); m=$(median "${rss[$label]}")
  awk -v l="$label" -v w="$w" -v m="$m" 'BEGIN { printf "%-8s median wall: %.2f s for 3600 simulated s (%.1f sim-s per wall-s), median peak %.0f MiB; target <= 36 s\n", l, w, 3600 / w, m / 1024 }'
done
awk -v a="$(median "${walls[this]}")" -v b="$(median "${walls[prefix]}")" \
    -v ma="$(median "${rss[this]}")" -v mb="$(median "${rss[prefix]}")" \
    'BEGIN { printf "prefix caching and host tier on / off: wall %.3f (target <= 2), peak memory %.3f\n", b / a, mb / ma }'
awk -v a="$(median "${walls[this]}")" -v b="$(median "${walls[preempt]}")" \
    'BEGIN { printf "preemption on / off: wall %.3f\n", b / a }'
if [ -n "$baseline" ]; then
  awk -v a="$(median "${walls[baseline]}")" -v b="$(median "${walls[this]}")" \
      -v ma="$(median "${rss[baseline]}")" -v mb="$(median "${rss[this]}")" \
      'BEGIN { printf "this / baseline: wall %.3f, peak memory %.3f\n", b / a, mb / ma }'
fi
