#!/usr/bin/env bash
# kvshift's network model vs SimGrid on the same flow set: 100,000 transfers
# among 1,000 GPU nodes of a leaf-spine (about 50 concurrent flows per busy
# link), both simulators in one run of bench/sim_network_vs_simgrid.cpp, which
# also checks that their completion times agree. CPU time is the measure.
# Usage: bench/network_vs_simgrid.sh [build-dir] [extra options, e.g. --transfers 20000]
set -euo pipefail
build=${1:-build}
shift || true
exe="$build/bench/sim_network_vs_simgrid"
if [[ ! -x "$exe" ]]; then
  echo "network_vs_simgrid: $exe not built (needs SimGrid: libsimgrid-dev)" >&2
  exit 1
fi
"$exe" --transfers 100000 --repeat 3 "$@"
