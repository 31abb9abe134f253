#!/usr/bin/env bash
# Element stress: N (default 1000) NULL <-> PLAYING cycles of opwarp -> opvision -> oppolicy ->
# opmsgsink on generated frames, then M (default 200) model swaps on a PLAYING opvision, each
# with GStreamer's leaks tracer (objects still alive at exit are listed and counted).
#   tools/reliability/stress.sh [CYCLES] [SWAPS]      (OP_BUILDDIR: default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${OP_BUILDDIR:-build}
cycles=${1:-1000}
swaps=${2:-200}
ninja -C "$build" tools/reliability/op-stress >/dev/null
export GST_PLUGIN_PATH=$PWD/$build/plugins
out=$(mktemp -d)
v=models/driving_vision_small.onnx
p=models/driving_policy_small.onnx
pipe="videotestsrc is-live=false num-buffers=4 ! video/x-raw,format=NV12,width=1928,height=1208 !
  tee name=t t. ! queue ! opwarp ! v.img t. ! queue ! opwarp model-input=big_img ! v.big_img
  opvision name=v model=$v ! oppolicy model=$p ! opmsgsink location=$out/stress.rlog"
run() {
  local what=$1
  shift
  local log=$out/$what.log
  local t0=$SECONDS
  GST_TRACERS=leaks GST_DEBUG=GST_TRACER:7,leaks:7 GST_DEBUG_FILE=$log.trace \
    "$build/tools/reliability/op-stress" "$@" | tee "$log"
  local alive
  alive=$(grep -c 'object-alive, type-name=(string)[^%]' "$log.trace" || true)
  echo "$what: $((SECONDS - t0)) s, objects alive at exit (leaks tracer): $alive"
}
run cycles cycles "$cycles" "$pipe"
# The swap alternates two different compiled networks of the same interface.
cp "$v" "$out/vision_b.onnx"
run swaps swap "$swaps" "$v" "$out/vision_b.onnx" "${pipe/num-buffers=4/num-buffers=40}"
echo "logs: $out"
