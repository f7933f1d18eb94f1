#!/usr/bin/env bash
# The main job on its built-in default: `kvshift run` on the embedded
# quickstart scenario (scenarios/quickstart.json); it prints where its files went.
set -euo pipefail
build=${1:-build}
"$build/apps/kvshift" run
