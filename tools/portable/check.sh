#!/usr/bin/env bash
# Runs our checks on a machine that has none of our Debian packages (a GPU server with its
# vendor's OpenCL driver, say), from the pack tools/portable/pack.sh made: lists the OpenCL
# devices, times the networks (tools/portable/bench_device.py), profiles the full-size vision
# model, runs a pipeline through gst-launch-1.0, then the test suite (tools/portable/
# run_tests.py) until the deadline. Writes at most 8 files to --out.
# Run in the repository root:
#   tools/portable/check.sh [--pack FILE] [--out DIR] [--deadline SECONDS] [--bench-s SECONDS]
#                           [--device D] [--no-tests] [--no-bench | --pipeline-only]
#                           [--only TEST,...] [--ours LABEL,...]
# The NVIDIA driver's OpenCL library is found (libnvidia-opencl.so.1) and named in a vendor
# file of our own when /etc/OpenCL/vendors has none for it. Logs and results go to --out.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
pack=.portable/gst-op.tar.xz out=${OUT:-/tmp/gst-op-check} deadline=420 bench_s=150
device=gpu tests=1 bench=1 only='' ours=''
while [ $# -gt 0 ]; do
  case "$1" in
    --pack) pack=$2; shift ;;
    --out) out=$2; shift ;;
    --deadline) deadline=$2; shift ;;
    --bench-s) bench_s=$2; shift ;;
    --device) device=$2; shift ;;
    --no-tests) tests=0 ;;
    --no-bench) bench=0 ;;
    --pipeline-only) bench=2 ;;
    --only) only=$2; shift ;;
    --ours) ours=$2; shift ;;
    *) echo "check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
start=$(date +%s)
left() { echo $((deadline - ($(date +%s) - start))); }
mkdir -p "$out"
kit=/tmp/gst-op-kit
rm -rf "$kit" && mkdir -p "$kit" && tar -C "$kit" -xJf "$pack" || { echo "check: cannot unpack $pack"; exit 1; }

# The build at the path it was made at (its tests name absolute paths).
orig_root=$(sed -n 1p "$kit/origin") orig_build=$(sed -n 2p "$kit/origin")
rel_build=${orig_build#"$orig_root"/}
if [ "$root" != "$orig_root" ]; then
  if [ -e "$orig_root" ]; then
    echo "check: $orig_root exists and is not this checkout: cannot put the build there"; exit 1
  fi
  mkdir -p "$(dirname "$orig_root")" && ln -s "$root" "$orig_root"
fi
if [ ! -f "$root/$rel_build/build.ninja" ]; then  # a real build here is used as it is
  mkdir -p "$root/$rel_build" && cp -a "$kit/build/." "$root/$rel_build/"
fi
build=$orig_build

# Libraries, GStreamer, OpenCL vendors.
libs=$kit/lib
ldconfig -p 2>/dev/null | grep -q 'libstdc++.so.6 ' || libs=$libs:$kit/lib/fallback
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$kit/bin:$PATH
export GST_PLUGIN_SYSTEM_PATH_1_0=$kit/gst-plugins GST_PLUGIN_SCANNER_1_0=$kit/bin/gst-plugin-scanner
export GST_PLUGIN_PATH_1_0=$build/plugins GST_REGISTRY_1_0=$kit/registry.bin
vendors=$kit/vendors
mkdir -p "$vendors"
cp /etc/OpenCL/vendors/*.icd "$vendors/" 2>/dev/null
if ! cat "$vendors"/*.icd 2>/dev/null | grep -q nvidia; then
  nv=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1/ {print $NF; exit}')
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
    /usr/lib; do
    [ -z "$nv" ] && [ -e "$d/libnvidia-opencl.so.1" ] && nv=$d/libnvidia-opencl.so.1
  done
  [ -n "$nv" ] && echo "$nv" >"$vendors/nvidia.icd"
fi
export OCL_ICD_VENDORS=$vendors
echo "== OpenCL vendor files: $(cd "$vendors" && for f in *.icd; do printf '%s -> %s; ' "$f" "$(cat "$f")"; done)"
command -v nvidia-smi >/dev/null && nvidia-smi -L

py=$(command -v python3)
echo "== machine: $(uname -srm), $(nproc) cores, $("$py" --version)"

if [ $bench = 1 ]; then
  echo "== networks ($bench_s s at most)"
  "$py" tools/portable/bench_device.py --build "$build" --device "$device" --deadline "$bench_s" \
    --ours "$ours" --json "$out/bench.json" 2>&1 | tee "$out/bench.txt"
fi
if [ $bench = 1 ] && [ -f models/full/driving_vision_full.onnx ]; then
  echo "== where the full-size vision model's device time goes"
  timeout 120 "$build/tools/opc/opc" profile models/full/driving_vision_full.onnx --device "$device" \
    --runs 20 --top 15 2>&1 | tee "$out/profile.txt"
fi
if [ $bench != 0 ]; then
  echo "== pipeline: two videotestsrc cameras -> opwarp -> opvision -> oppolicy -> opmsgsink"
  for size in small full; do
    if [ $size = small ]; then v=models/driving_vision_small.onnx p=models/driving_policy_small.onnx
    else v=models/full/driving_vision_full.onnx p=models/full/driving_policy_full.onnx; fi
    [ -f "$v" ] || continue
    prev=0 wall=0
    for n in 20 20 220; do  # the first builds the programs
      caps="video/x-raw,format=NV12,width=1928,height=1208,framerate=20/1"
      t0=$(date +%s%N)
      timeout 60 gst-launch-1.0 -q \
        videotestsrc num-buffers=$n pattern=ball ! $caps ! opwarp device=$device ! vv.img \
        videotestsrc num-buffers=$n pattern=ball ! $caps ! opwarp device=$device \
          model-input=big_img ! vv.big_img \
        opvision name=vv device=$device model=$v ! oppolicy device=$device model=$p ! \
        opmsgsink location="$out/pipeline-$size.rlog" sync=false >"$kit/launch.log" 2>&1
      rc=$?
      prev=$wall wall=$((($(date +%s%N) - t0) / 1000000))
      echo "pipeline $size, $n frame pairs: exit $rc, $wall ms"
      { echo "== $size, $n frame pairs: exit $rc"; cat "$kit/launch.log"; } >>"$out/pipeline.log"
      [ $rc = 0 ] || tail -3 "$kit/launch.log"
    done
    echo "pipeline $size: $((200000 / (wall - prev > 0 ? wall - prev : 1))) fps" \
      "(200 frame pairs: the 220-pair run's wall less the 20-pair run's)"
  done | tee "$out/pipeline.txt"
  rm -f "$out"/pipeline-*.rlog
fi

if [ $tests = 1 ]; then
  echo "== tests ($(left) s left)"
  # Build logs of successful builds too (a driver's warnings, otherwise only counted on stderr).
  export GST_OP_BUILD_LOG=1
  "$py" tools/portable/run_tests.py "$build" --kit "$kit" --deadline "$(left)" \
    --first element,op,messages,cl,nn-device,conformance-device,drive,temporal \
    --only "$only" --log "$out/tests.log" | tee "$out/tests.txt"
fi
echo "== done in $(($(date +%s) - start)) s"
