#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root) to a summary line:
# installs what is missing, creates the Python venv, builds, runs every test.
#   tools/test.sh [meson test arguments...]     e.g. tools/test.sh --suite nn
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup-debian.sh
tools/venv.sh

builddir=${OP_BUILDDIR:-build}
werror=false
[ "${CI:-}" = "true" ] && werror=true
if [ -f "$builddir/build.ninja" ]; then
  meson configure "$builddir" -Dwerror=$werror >/dev/null
else
  meson setup "$builddir" -Dwerror=$werror
fi
ninja -C "$builddir"

status=0
meson test -C "$builddir" --print-errorlogs --num-processes 2 "$@" || status=$?

# On CI (or with OP_FUZZ=1): the fuzz targets, built with clang + ASan + UBSan in build-fuzz,
# 30 s each on their seed corpora (docs/reliability.md). A finding fails the run.
if [ "${CI:-}" = "true" ] || [ "${OP_FUZZ:-0}" = "1" ]; then
  OP_BUILDDIR=$builddir fuzz/run.sh "${OP_FUZZ_SECONDS:-30}" || status=1
fi

# One closing line that counts: passed, failed, skipped (skips are reported, never as passes).
python3 - "$builddir/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    counts[r["result"]] = counts.get(r["result"], 0) + 1
passed = counts.get("OK", 0)
skipped = counts.get("SKIP", 0)
failed = sum(v for k, v in counts.items() if k not in ("OK", "SKIP"))
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
