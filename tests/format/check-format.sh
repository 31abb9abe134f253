#!/usr/bin/env bash
# Fails when clang-format would change any tracked C, C++ or OpenCL source (config: .clang-format).
set -euo pipefail
cd "${OP_SOURCE_ROOT:-$(dirname "$0")/../..}"
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "SKIP: not a git checkout, cannot list the tracked sources"
  exit 77
fi
mapfile -t files < <(git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cl')
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
echo "checked ${#files[@]} files"
if [ ${#bad[@]} -gt 0 ]; then
  echo "clang-format would change ${#bad[@]} files (run clang-format -i on them):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
