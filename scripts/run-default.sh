#!/usr/bin/env bash
# The main job on its built-in default: the cost model on the paper's three
# configurations (Table I topologies, 512 tokens, 100 Mbps / 10 ms path).
set -euo pipefail
build=${1:-build}
out=kvshift-out/cost-paper-$(date +%Y%m%d-%H%M%S).json
"$build/apps/kvshift" cost --paper --bandwidth 100Mbps --latency 10ms --gpu rtx3060-laptop --out "$out"
