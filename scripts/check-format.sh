#!/usr/bin/env bash
# Fails when a tracked C++ or CUDA source differs from what clang-format (with the
# repository's .clang-format) would write. Exit 77 (ctest: skipped) without
# clang-format or outside a git checkout. Usage: scripts/check-format.sh [repo-root]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
command -v clang-format > /dev/null || { echo "clang-format is not installed"; exit 77; }
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || { echo "not a git checkout"; exit 77; }
bad=()
while IFS= read -r -d '' f; do
  clang-format --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done < <(git ls-files -z '*.cpp' '*.hpp' '*.cu' '*.cuh')
if ((${#bad[@]})); then
  printf 'not formatted (run clang-format -i on them):\n'
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "every C++ and CUDA source is formatted"
