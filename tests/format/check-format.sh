#!/usr/bin/env bash
# Fails when clang-format would change any tracked C, C++ or OpenCL source (config: .clang-format).
set -euo pipefail
cd "${OP_SOURCE_ROOT:-$(dirname "$0")/../..}"
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "SKIP: not a git checkout, cannot list the tracked sources"
  exit 77
fi
if ! command -v clang-format >/dev/null 2>&1; then
  echo "SKIP: no clang-format on PATH"
  exit 77
fi
mapfile -t files < <(git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cl')
bad=()
# One clang-format per batch of files (a process per file took most of the time); only when a
# batch fails is each of its files checked alone, to name them.
for ((i = 0; i < ${#files[@]}; i += 64)); do
  batch=()
  for f in "${files[@]:i:64}"; do
    [ -f "$f" ] && batch+=("$f")
  done
  [ ${#batch[@]} -gt 0 ] || continue
  clang-format --dry-run -Werror "${batch[@]}" >/dev/null 2>&1 && continue
  for f in "${batch[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
done
echo "checked ${#files[@]} files with $(clang-format --version)"
if [ ${#bad[@]} -gt 0 ]; then
  echo "clang-format would change ${#bad[@]} files (run clang-format -i on them):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
