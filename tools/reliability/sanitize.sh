#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (docs/reliability.md): sets
# up BUILD (default build-asan) on first use, builds it, and runs `meson test` there with the
# sanitizer options below and the LeakSanitizer suppressions of tools/reliability/lsan.supp.
#   tools/reliability/sanitize.sh [meson test arguments...]     e.g. --suite hostile
# Environment: OP_ASAN_BUILDDIR (build-asan), OP_JOBS (2), OP_TIMEOUT_MULTIPLIER (4).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${OP_ASAN_BUILDDIR:-build-asan}
if [ ! -f "$build/build.ninja" ]; then
  # b_lundef=false: the shared libgstop and the plugin leave the sanitizer runtimes' symbols to
  # the executable (needed with clang, harmless with gcc).
  meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false
fi
ninja -C "$build"

# Any report fails the test that made it: ASan and UBSan stop the process, LSan at exit.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$PWD/tools/reliability/lsan.supp:print_suppressions=0
# Python, gst-inspect-1.0 and the other programs the tests start are not instrumented but load
# the instrumented plugin: sanitize-wrapper.sh preloads the runtimes for them. (CC: the compiler
# the build was set up with; gcc links its runtimes as shared libraries, clang into executables
# only, so with clang there is nothing to preload.)
cc=${CC:-cc}
export OP_SANITIZER_PRELOAD="$($cc -print-file-name=libasan.so):$($cc -print-file-name=libubsan.so)"
if $cc --version | grep -q clang; then
  export OP_SANITIZER_PRELOAD=
fi

start=$(date +%s)
status=0
meson test -C "$build" --print-errorlogs --num-processes "${OP_JOBS:-2}" \
  --timeout-multiplier "${OP_TIMEOUT_MULTIPLIER:-4}" \
  --wrapper "$PWD/tools/reliability/sanitize-wrapper.sh" "$@" || status=$?
echo "sanitize: $(($(date +%s) - start)) s"
exit $status
