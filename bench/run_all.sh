#!/usr/bin/env bash
# Runs every built Google Benchmark program and prints its median rows.
# Usage: bench/run_all.sh [build-dir]
set -euo pipefail
build=${1:-build}
shopt -s nullglob
for exe in "$build"/bench/*_bench; do
  [[ -x "$exe" ]] || continue
  echo "== $(basename "$exe")"
  "$exe" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>/dev/null |
    grep -E "median|^Benchmark|^-" || true
done
