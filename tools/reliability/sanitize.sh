#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (docs/reliability.md),
# from a fresh Debian 12 machine to a summary: installs what is missing, creates the venv, sets up
# BUILD (default build-asan) on first use, builds it, runs `meson test` there with the sanitizer
# options below and the LeakSanitizer suppressions of tools/reliability/lsan.supp, and prints the
# passed / failed / skipped tests with the reason of each test that did not pass.
#   tools/reliability/sanitize.sh [meson test arguments...]     e.g. --suite hostile
# Environment: OP_ASAN_BUILDDIR (build-asan), OP_JOBS (2), OP_TIMEOUT_MULTIPLIER (4).
set -euo pipefail
cd "$(dirname "$0")/../.."

tools/setup-debian.sh
tools/venv.sh

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

# The tests' plugin registry, made here before any test runs. GStreamer scans for plugins in a
# child process (gst-plugin-scanner) that is not instrumented: started by an instrumented test
# program it cannot load the instrumented plugin, which then stays blacklisted in the registry
# until the plugin file changes; scanning in the test's own process instead (GST_REGISTRY_FORK=no)
# loads every system plugin there, and LeakSanitizer fails the test on their leaks (OpenNI2's).
# Made by gst-inspect-1.0 with the runtimes preloaded, which its scanner inherits, the registry
# is complete and current, and no test scans again.
build_abs=$(cd "$build" && pwd)
rm -f "$build_abs/tests/registry.bin"
if ! LD_PRELOAD=$OP_SANITIZER_PRELOAD ASAN_OPTIONS=detect_leaks=0 \
  GST_REGISTRY_1_0="$build_abs/tests/registry.bin" GST_PLUGIN_PATH_1_0="$build_abs/plugins" \
  gst-inspect-1.0 opwarp >/dev/null; then
  echo "sanitize: the instrumented plugin does not load in gst-inspect-1.0 (see above)" >&2
  exit 1
fi
start=$(date +%s)
status=0
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "${OP_JOBS:-2}" \
  --timeout-multiplier "${OP_TIMEOUT_MULTIPLIER:-4}" \
  --wrapper "$PWD/tools/reliability/sanitize-wrapper.sh" "$@" || status=$?
wall=$(($(date +%s) - start))

# The summary: counts, then every test that did not pass with its reason (a skip's last line,
# a failure's first sanitizer report), and the gtest cases skipped inside passing tests.
python3 - "$build/meson-logs/testlog-sanitize-wrapper.sh.json" "$wall" <<'PY'
import json, re, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
# A sanitizer's SUMMARY line names the kind and the place; else its first report line.
reports = [re.compile(r"SUMMARY: \w+Sanitizer.*"), re.compile(r"\S+ runtime error: .*"),
           re.compile(r"ERROR: \w+Sanitizer.*")]
def reason(r):
    text = (r.get("stdout") or "") + (r.get("stderr") or "")
    out = [l for l in text.splitlines() if l.strip()]
    if r["result"] == "TIMEOUT":
        return f"timed out after {r['duration']:.0f} s"
    if r["result"] == "SKIP":
        # The test's own last line: stderr may end in a library's warning.
        said = [l for l in (r.get("stdout") or "").splitlines() if l.strip()] or out
        return said[-1].strip() if said else "(no reason printed)"
    for report in reports:
        hits = [m.group(0) for m in map(report.search, out) if m]
        if hits:
            return hits[0]
    return out[-1].strip() if out else f"exit {r.get('returncode')}"
counts = {}
for r in rows:
    counts[r["result"]] = counts.get(r["result"], 0) + 1
passed, skipped = counts.get("OK", 0), counts.get("SKIP", 0)
failed = sum(v for k, v in counts.items() if k not in ("OK", "SKIP"))
for r in sorted(rows, key=lambda r: r["name"]):
    name = r["name"].split(" / ")[-1]
    if r["result"] != "OK":
        print(f"  {r['result']:8s} {name} ({r['duration']:.0f} s): {reason(r)}")
    cases = set(re.findall(r"^\[  SKIPPED \] (\w+\.\S+)", r.get("stdout") or "", re.M))
    if r["result"] == "OK" and cases:
        print(f"  OK       {name}, with gtest cases skipped: {', '.join(sorted(cases))}")
print(f"sanitize: {passed} passed, {failed} failed, {skipped} skipped; {sys.argv[2]} s wall")
PY
exit $status
