#!/usr/bin/env bash
# Bounded latency with a live source (not part of the test suite): the element-live test's live
# run (tests/elements/test_live.cpp) with a combined model of your choice, frames fed at a fixed
# period, and GStreamer's latency tracer on. Prints the test's own figures (frames evaluated and
# dropped, the most frames in flight at a submission, submission-to-completion p95 and the
# network's device time, both from the device's profiling timestamps; the warp's own device time
# against 2 x network and 2 x (warp + network)) and the tracer's
# source-to-sink figure (appsrc's push to opmsgsink's pad, after the queue).
#
#   tools/bench/live_latency.sh [MODEL] [FRAMES] [PERIOD_MS]
#
# MODEL defaults to models/full/driving_supercombo_full.onnx (models/generate.py --size full
# writes it), FRAMES to 100, PERIOD_MS to 50 (openpilot's 20 Hz cameras). BUILD=dir picks the
# build tree (default build/, already built).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
model=${1:-$root/models/full/driving_supercombo_full.onnx}
frames=${2:-100}
period_ms=${3:-50}
test_bin=$build/tests/elements/test-live
[ -x "$test_bin" ] || { echo "no $test_bin: build first (ninja -C $build)" >&2; exit 1; }
[ -f "$model" ] || { echo "no model $model (models/generate.py --size full)" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "model $model, $frames frames every $period_ms ms"
GST_PLUGIN_PATH_1_0=$build/plugins GST_REGISTRY_1_0=$build/tests/registry.bin \
  XDG_CACHE_HOME=$build/tests/cache OP_SOURCE_ROOT=$root \
  OP_LIVE_MODEL=$model OP_LIVE_FRAMES=$frames OP_LIVE_PERIOD_MS=$period_ms \
  GST_TRACERS=latency GST_DEBUG=GST_TRACER:7,oplivetest:1 GST_DEBUG_NO_COLOR=1 GST_DEBUG_FILE=$log \
  "$test_bin" --gtest_filter='LiveTest.LiveFrames*'
# One "latency" record per buffer reaching a sink: time=(guint64)NS from the source's push.
# Only the live run's, after the test's marker (the non-live warm-up run comes first).
python3 - "$log" <<'PY'
import re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
start = max((i for i, l in enumerate(lines) if "live run starts" in l), default=-1)
times = sorted(int(m.group(1)) / 1e6 for line in lines[start + 1:] if "latency, src-element" in line
               for m in [re.search(r"time=\(guint64\)(\d+)", line)] if m)
if not times:
    sys.exit("no latency tracer records")
p = lambda q: times[min(len(times) - 1, int(len(times) * q))]
print(f"latency tracer, appsrc to opmsgsink: {len(times)} buffers, median {p(0.5):.1f} ms, "
      f"p95 {p(0.95):.1f} ms, max {times[-1]:.1f} ms")
PY
