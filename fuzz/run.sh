#!/usr/bin/env bash
# Builds the libFuzzer targets in a second build folder (clang, ASan + UBSan) and runs each for a
# fixed time on its seed corpus (fuzz/make_corpus.sh). Exits non-zero when a target finds a
# crash, a leak, a sanitizer report, a timeout or an out-of-memory; the input is left as
# BUILDDIR/fuzz/crash-TARGET-* (add it to fuzz/regressions/TARGET/ with its fix).
#   fuzz/run.sh [SECONDS] [TARGET...]     SECONDS per target (default 30); TARGET: onnx opm
#                                         pickle npy log caps (default all)
#   fuzz/run.sh --cpu SECONDS [TARGET...] SECONDS of the fuzzer's own CPU time per target (the
#                                         long runs: on a shared machine a wall-clock hour is
#                                         less than a CPU-hour), then an interrupt ends the run
# OP_FUZZ_BUILDDIR (default build-fuzz), OP_BUILDDIR (the main build, for seeds; default build).
set -euo pipefail
cd "$(dirname "$0")/.."
cpu_mode=0
if [ "${1:-}" = --cpu ]; then
  cpu_mode=1
  shift
fi
secs=${1:-30}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(onnx opm pickle npy log caps)
builddir=${OP_FUZZ_BUILDDIR:-build-fuzz}
if [ ! -f "$builddir/build.ninja" ]; then
  # b_lundef=false: clang links the sanitizer runtimes into executables only, so a shared library
  # (libgstop) has ASan symbols it resolves at load time.
  CC=clang CXX=clang++ meson setup "$builddir" -Dfuzz=enabled -Db_sanitize=address,undefined \
    -Db_lundef=false -Dtests=disabled -Dopencv_bench=disabled >/dev/null
fi
ninja -C "$builddir" $(printf 'fuzz/fuzz-%s ' "${targets[@]}") >/dev/null
corpus=$builddir/fuzz/corpus
fuzz/make_corpus.sh "$corpus/seeds" "${OP_BUILDDIR:-build}"
status=0
for t in "${targets[@]}"; do
  work=$corpus/work-$t
  mkdir -p "$work"
  log=$builddir/fuzz/$t.log
  # One job, no forking: the CI machine has 2 cores. 2 GB RSS and 10 s per input bound a
  # hostile input's cost; above either is a finding.
  # Suppressions (fuzz/lsan.supp) match on whole stacks: caps needs the slow unwinder and deep
  # stacks (GStreamer parses nested lists recursively).
  unwind=1
  [ "$t" = caps ] && unwind=0
  limit=$secs
  # In CPU mode the wall-clock limit is only a backstop; the watcher below ends the run.
  [ $cpu_mode = 1 ] && limit=$((secs * 20))
  GST_DEBUG=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ASAN_OPTIONS=fast_unwind_on_malloc=$unwind:malloc_context_size=255 \
    LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp \
    "$builddir/fuzz/fuzz-$t" -max_total_time="$limit" -rss_limit_mb=2048 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$builddir/fuzz/crash-$t-" \
    "$work" "$corpus/seeds/$t" >"$log" 2>&1 &
  pid=$!
  cpu=0
  interrupted=0
  if [ $cpu_mode = 1 ]; then
    tick=$(getconf CLK_TCK)
    # utime + stime of the fuzzer (fields 14 and 15 of /proc/PID/stat; the command name in
    # field 2 has no spaces here).
    while kill -0 $pid 2>/dev/null; do
      sleep 10
      cpu=$(awk -v t="$tick" '{print int(($14 + $15) / t)}' /proc/$pid/stat 2>/dev/null || echo "$cpu")
      if [ "$cpu" -ge "$secs" ]; then
        kill -INT $pid
        interrupted=1
        break
      fi
    done
  fi
  # An interrupted libFuzzer exits non-zero even when it found nothing (this clang's libFuzzer
  # has no -interrupted_exit_code): the run is clean when the log holds no finding.
  if wait $pid || { [ $interrupted = 1 ] && ! grep -qE '^==[0-9]+== ?ERROR|^SUMMARY' "$log"; }; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  took="${secs} s"
  [ $cpu_mode = 1 ] && took="${cpu} CPU-s"
  echo "fuzz-$t: $result, $took, $runs executions, ${cov:-no coverage line} (log: $log)"
  # On a finding, what CI shows must be enough to reproduce it: the report, the first frames of
  # its stack, and the input (libFuzzer prints small inputs as Base64).
  [ "$result" = ok ] || grep -E "ERROR|SUMMARY|terminate called|what\(\)|runtime error|^ +#[0-9] |\
Base64:|Test unit written" "$log" | head -40
done
exit $status
