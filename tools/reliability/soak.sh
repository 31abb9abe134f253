#!/usr/bin/env bash
# Soak: the whole pipeline (decode -> opwarp x2 -> opvision -> oppolicy -> opmsgsink) over the
# sample drive, looped by a flushing seek at each EOS, for SECONDS (default 600), RSS printed
# every 10 s. Flat memory: the last samples are not above the first ones after warm-up.
#   tools/reliability/soak.sh [SECONDS]      (OP_BUILDDIR: default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${OP_BUILDDIR:-build}
secs=${1:-600}
ninja -C "$build" tools/reliability/op-stress >/dev/null
export GST_PLUGIN_PATH=$PWD/$build/plugins
out=$(mktemp -d)
"$build/tools/reliability/op-stress" soak "$secs" "
  filesrc location=samples/drive/fcamera.hevc ! h265parse ! avdec_h265 ! videoconvert !
    video/x-raw,format=NV12 ! opwarp rpy=0.012,0.021,-0.016 ! v.img
  filesrc location=samples/drive/ecamera.hevc ! h265parse ! avdec_h265 ! videoconvert !
    video/x-raw,format=NV12 ! opwarp model-input=big_img rpy=0.012,0.021,-0.016 ! v.big_img
  opvision name=v model=models/driving_vision_small.onnx !
    oppolicy model=models/driving_policy_small.onnx ! opmsgsink location=$out/soak.rlog"
rm -rf "$out"
