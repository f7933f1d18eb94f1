#!/usr/bin/env bash
# kvshift's network model vs SimGrid on the same flow sets, side by side in one
# run of bench/sim_network_vs_simgrid.cpp (which also checks that completion
# times agree and meters the heap of each):
#   leaf-spine: 100,000 transfers among 1,000 GPU nodes (drain waves, about 50
#               concurrent flows per busy link);
#   fat-tree:   20,000 transfers on a k=8 fat-tree (128 hosts), every one across
#               the core, Poisson arrivals, Pareto(1.5) sizes from 10 MB, about
#               120 concurrent flows per busy core link, one giant component.
# CPU time is the measure (kvshift: median of 3 runs; SimGrid: one run each).
# SimGrid runs the two cases one after the other in its one engine; with both
# platforms loaded its fat-tree heap is higher (1,621 against 1,199 B/transfer
# on its own), so `--workload fat-tree` gives the figure for that case alone.
# Usage: bench/network_vs_simgrid.sh [build-dir] [extra options, e.g. --transfers 20000]
set -euo pipefail
build=${1:-build}
shift || true
exe="$build/bench/sim_network_vs_simgrid"
if [[ ! -x "$exe" ]]; then
  echo "network_vs_simgrid: $exe not built (needs SimGrid: libsimgrid-dev)" >&2
  exit 1
fi
"$exe" --workload both --transfers 100000 --ft-transfers 20000 --repeat 3 "$@"
