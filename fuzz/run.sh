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
  # caps, long runs: GStreamer makes every structure and field name it parses a GQuark, which
  # lives as long as the process, so one process fuzzing caps for an hour grows past the RSS
  # limit (2 GB after 15 CPU-minutes, 5.9 M inputs; one input alone peaks at 55 MB). libFuzzer's
  # fork mode fuzzes in short-lived child processes instead, and stops at the first crash,
  # timeout or out-of-memory of any of them.
  mode=()
  [ $cpu_mode = 1 ] && [ "$t" = caps ] && mode=(-fork=1 -ignore_crashes=0 -ignore_timeouts=0 -ignore_ooms=0)
  GST_DEBUG=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ASAN_OPTIONS=fast_unwind_on_malloc=$unwind:malloc_context_size=255 \
    LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp \
    "$builddir/fuzz/fuzz-$t" "${mode[@]}" -max_total_time="$limit" -rss_limit_mb=2048 \
    -timeout=10 -max_len=65536 -print_final_stats=1 -artifact_prefix="$builddir/fuzz/crash-$t-" \
    "$work" "$corpus/seeds/$t" >"$log" 2>&1 &
  pid=$!
  cpu=0
  interrupted=0
  if [ $cpu_mode = 1 ]; then
    tick=$(getconf CLK_TCK)
    # utime + stime of the fuzzer and of its finished children (fork mode's jobs): fields 14 to
    # 17 of /proc/PID/stat (the command name in field 2 has no spaces here).
    while kill -0 $pid 2>/dev/null; do
      sleep 10
      cpu=$(awk -v t="$tick" '{print int(($14 + $15 + $16 + $17) / t)}' /proc/$pid/stat \
        2>/dev/null || echo "$cpu")
      if [ "$cpu" -ge "$secs" ]; then
        # SIGTERM, which libFuzzer handles as an interrupt in both modes (a background job of
        # a script starts with SIGINT ignored, and fork mode's parent leaves it so); fork mode's
        # running job (a shell and its fuzzer) is ended too.
        kids=$(pgrep -P $pid || true)
        grandkids=$(for k in $kids; do pgrep -P "$k" || true; done)
        kill -TERM $pid $kids $grandkids 2>/dev/null || true
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
  # (fork mode's final stats are its parent's, which runs nothing: its last status line
  # "#RUNS: cov: ..." counts the jobs' executions)
  runs=$(grep -oE '^#[0-9]+: cov' "$log" | tail -1 | grep -oE '[0-9]+' ||
    grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  took="${secs} s"
  [ $cpu_mode = 1 ] && took="${cpu} CPU-s"
  echo "fuzz-$t: $result, $took, $runs executions, ${cov:-no coverage line} (log: $log)"
  # On a finding, what CI shows must be enough to reproduce it: the report, the first frames of
  # its stack, and the input (libFuzzer prints small inputs as Base64).
  # (|| true: head closing the pipe early must not end the script before the other targets)
  [ "$result" = ok ] || grep -E "ERROR|SUMMARY|terminate called|what\(\)|runtime error|^ +#[0-9] |\
Base64:|Test unit written" "$log" | head -40 || true
done
exit $status
