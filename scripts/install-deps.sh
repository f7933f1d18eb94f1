#!/usr/bin/env bash
# Installs kvshift's build and test dependencies from Debian packages.
# Idempotent: only packages that are missing are installed, and nothing is
# done (no apt-get update either) when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-graph-dev libboost-mpi-dev
  libeigen3-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsimgrid-dev libopenmpi-dev openmpi-bin
  clang clang-format clang-tidy libclang-rt-14-dev
  python3 python3-venv python3-jsonschema python3-torch
  libjs-chart.js chromium
  bible-kjv jargon-text
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
