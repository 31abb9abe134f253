#!/usr/bin/env bash
# The main job: from a fresh Debian 12 machine (as root) to the pipeline's results on the bundled
# sample drive. Installs what is missing, creates the Python venv, builds into build/, then
# replays samples/drive through opwarp → opvision → oppolicy → opmsgsink (both cameras, the small
# models: the trained ones of models/trained where they exist, else the random reference ones;
# the sample's own calibration) with opoverlay drawing the predictions and the sample's ground
# truth. Leaves in out/: rlog.zst (the driving messages), overlay.mkv (the road video with the
# drawing), contact-sheet.png, accuracy.md (the models' accuracy table on the sample, against its
# ground truth) and summary.txt (the printed summary, the table included).
#   tools/main.sh [opreplay options...]      e.g. tools/main.sh --max-frames 40
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup-debian.sh
tools/venv.sh

builddir=${OP_BUILDDIR:-build}
if [ -f "$builddir/build.ninja" ]; then
  meson configure "$builddir" >/dev/null
else
  meson setup "$builddir"
fi
ninja -C "$builddir"

# The elements come from this build's plugin.
export GST_PLUGIN_PATH="$PWD/$builddir/plugins${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"

drive=samples/drive
# The sample's calibration (roll, pitch, yaw in radians), from its ground-truth header.
rpy=$(python3 -c 'import json, sys; print(",".join(str(v) for v in json.load(open(sys.argv[1]))["drive"]["calibration_rpy"]))' "$drive/groundtruth.json")

# The trained small models (tools/train, models/trained/README.md) where they are committed, the
# random reference models otherwise.
models=models
if [ -f models/trained/driving_vision_small.onnx ] && [ -f models/trained/driving_policy_small.onnx ]; then
  models=models/trained
fi

mkdir -p out
"$builddir/tools/opreplay/opreplay" "$drive" \
  --vision $models/driving_vision_small.onnx --policy $models/driving_policy_small.onnx \
  --rpy "$rpy" --ground-truth "$drive/groundtruth.json" --out out "$@" | tee out/summary.txt

# How well the models see this drive: the replay's messages against the sample's ground truth
# (tools/train/evaluate.py; the sample is held out of training), each target met or MISSED.
printf '\nmodels           %s\n' "$models" | tee -a out/summary.txt
.venv/bin/python3 tools/train/evaluate.py --drive "$drive" --rlog out/rlog.zst |
  tee out/accuracy.md | tee -a out/summary.txt
