#!/usr/bin/env bash
# `kvshift flows` against SimGrid as whole processes, as a user runs them: both
# commands read the same flows file and print one finish time per transfer;
# /usr/bin/time gives each process's wall time, CPU time (user + sys) and peak
# resident memory (max RSS), median of --repeat runs. Commands:
#   kvshift-flows FILE   kvshift's flows command without the backends (apps/kvshift_flows)
#   kvshift flows FILE   the full CLI (cuBLAS is opened on first use, so a CUDA build's start-up
#                        maps none of it)
#   simgrid_flows FILE   SimGrid's plain max-min on the same routes (bench/simgrid_flows.cpp)
# Workload classes (bench/network_flows_file.cpp): leaf-spine (local contention in drain
# waves), fat-tree (every flow across the core, Poisson arrivals, Pareto sizes), incast
# (bursts of 64 senders to one sink), wan (long-lived GB flows between 4 sites over WAN
# links of 10..17.5 ms), each at every --sizes count. It also checks that the two simulators'
# finish times agree (worst relative difference) and reports kvshift's growth in time from
# the smallest to the largest size. Usage:
#   bench/flows_vs_simgrid.sh [--build DIR] [--sizes "20000 200000"] [--repeat 3]
#       [--sg-repeat N (SimGrid runs per point; default --repeat)] [--classes "leaf-spine ..."]
#       [--work DIR (the flows files and outputs; default a fresh temporary folder)]
set -euo pipefail
build=build
sizes="20000 200000"
classes="leaf-spine fat-tree incast wan"
repeat=3
sg_repeat=""
work=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --classes) classes=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --sg-repeat) sg_repeat=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "flows_vs_simgrid: unknown option $1" >&2; exit 2 ;;
  esac
done
sg_repeat=${sg_repeat:-$repeat}
for exe in "$build/apps/kvshift-flows" "$build/apps/kvshift" "$build/bench/simgrid_flows" \
           "$build/bench/network_flows_file"; do
  [[ -x "$exe" ]] || { echo "flows_vs_simgrid: $exe not built" >&2; exit 1; }
done
[[ -x /usr/bin/time ]] || { echo "flows_vs_simgrid: needs /usr/bin/time (GNU time)" >&2; exit 1; }
if [[ -z "$work" ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
raw="$work/runs.tsv"  # class size tool run wall_s cpu_s maxrss_kb
: > "$raw"

# run TOOL_NAME OUT -- command...: one timed run, appended to $raw.
run() {
  local tool=$1 out=$2 cls=$3 n=$4 k=$5
  shift 5
  /usr/bin/time -o "$work/time.txt" -f "%e %U %S %M" "$@" > "$out"
  read -r wall user sys rss < "$work/time.txt"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cls" "$n" "$tool" "$k" "$wall" \
    "$(echo "$user + $sys" | bc -l)" "$rss" >> "$raw"
  echo "  $tool run $k: wall $wall s, cpu $(echo "$user + $sys" | bc -l) s, max RSS $rss KB" >&2
}

date -u +"started %Y-%m-%d %H:%M:%S UTC" >&2
for n in $sizes; do
  for cls in $classes; do
    file="$work/$cls-$n.json"
    "$build/bench/network_flows_file" "$cls" "$n" "$file"
    echo "== $cls, $n transfers ($(du -h "$file" | cut -f1) file)" >&2
    for k in $(seq "$repeat"); do
      run kvshift-flows "$work/kv-$cls-$n.txt" "$cls" "$n" "$k" "$build/apps/kvshift-flows" "$file"
    done
    run "kvshift flows" "$work/kvfull-$cls-$n.txt" "$cls" "$n" 1 "$build/apps/kvshift" flows "$file"
    cmp -s "$work/kv-$cls-$n.txt" "$work/kvfull-$cls-$n.txt" ||
      { echo "flows_vs_simgrid: kvshift flows and kvshift-flows differ on $file" >&2; exit 1; }
    for k in $(seq "$sg_repeat"); do
      run simgrid "$work/sg-$cls-$n.txt" "$cls" "$n" "$k" "$build/bench/simgrid_flows" "$file"
    done
    python3 - "$work/kv-$cls-$n.txt" "$work/sg-$cls-$n.txt" "$cls" "$n" >> "$work/diff.tsv" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) and all(x["id"] == y["id"] for x, y in zip(a, b))
w = max(abs(x["finish_s"] - y["finish_s"]) / max(abs(y["finish_s"]), 1e-9) for x, y in zip(a, b))
print(f"{sys.argv[3]}\t{sys.argv[4]}\t{w:.2e}")
PY
    rm -f "$file"
  done
done
date -u +"ended %Y-%m-%d %H:%M:%S UTC" >&2
python3 - "$raw" "$work/diff.tsv" "$classes" "$sizes" "$repeat" "$sg_repeat" <<'PY'
import statistics, sys
runs, diffs = {}, {}
for line in open(sys.argv[1]):
    cls, n, tool, k, wall, cpu, rss = line.rstrip("\n").split("\t")
    runs.setdefault((cls, int(n), tool), []).append((float(wall), float(cpu), int(rss) / 1024))
for line in open(sys.argv[2]):
    cls, n, w = line.split()
    diffs[(cls, int(n))] = w
med = lambda xs, i: statistics.median(x[i] for x in xs)
classes, sizes = sys.argv[3].split(), sorted(int(s) for s in sys.argv[4].split())
print("| class | transfers | kvshift-flows wall / CPU s | SimGrid wall / CPU s | speed-up (wall / CPU) "
      "| kvshift-flows MB | SimGrid MB | memory ratio | `kvshift flows` wall s / MB | worst rel. diff |")
print("|---|---|---|---|---|---|---|---|---|---|")
for n in sizes:
    for c in classes:
        kv, sg, full = runs[(c, n, "kvshift-flows")], runs[(c, n, "simgrid")], runs[(c, n, "kvshift flows")]
        kw, kc, km = med(kv, 0), med(kv, 1), med(kv, 2)
        sw, sc, sm = med(sg, 0), med(sg, 1), med(sg, 2)
        print(f"| {c} | {n:,} | {kw:.2f} / {kc:.2f} | {sw:.2f} / {sc:.2f} | "
              f"{sw / kw:.1f}× / {sc / max(kc, 0.005):.1f}× | {km:.1f} | {sm:.1f} | {km / sm:.2f} | "
              f"{med(full, 0):.2f} / {med(full, 2):.0f} | {diffs[(c, n)]} |")
if len(sizes) > 1:
    lo, hi = sizes[0], sizes[-1]
    print(f"\nkvshift-flows growth from {lo:,} to {hi:,} transfers (median CPU; {hi / lo:.0f}× the transfers):")
    for c in classes:
        a, b = med(runs[(c, lo, "kvshift-flows")], 1), med(runs[(c, hi, "kvshift-flows")], 1)
        s = med(runs[(c, hi, "simgrid")], 1) / med(runs[(c, lo, "simgrid")], 1)
        print(f"  {c}: {b / max(a, 0.005):.1f}× (SimGrid {s:.1f}×)")
print(f"\nmedians of {sys.argv[5]} kvshift-flows and {sys.argv[6]} SimGrid runs per point "
      f"(`kvshift flows`: one run); wall and CPU from /usr/bin/time, memory = max RSS")
PY
