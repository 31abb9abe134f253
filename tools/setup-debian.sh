#!/usr/bin/env bash
# Installs, as root on Debian 12, every system package the project needs to build, test and run.
# Idempotent: packages already present are left alone, and apt is only called when one is missing.
set -euo pipefail

packages=(
  # build
  build-essential meson ninja-build pkg-config git clang-format
  # GStreamer 1.22 with the plugins the pipeline, tests and examples use
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-libav
  # OpenCL: loader, headers, PoCL (runs every kernel on the CPU), clinfo
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  # messages, model import, compression, publishing
  capnproto libcapnp-dev libonnx-dev libprotobuf-dev protobuf-compiler libzstd-dev libbz2-dev
  libzmq3-dev
  # ONNX's own conformance tests, HEVC, the warp benchmark's peer
  libonnx-testdata x265 libopencv-dev
  # Python for model generation, references and benchmarks (a venv made by tools/venv.sh)
  python3 python3-venv python3-numpy
  # unit tests
  libgtest-dev
  # the zstd tool: synthdrive's rlog.zst, the golden and replay tests' logs
  zstd
  # leak checks
  valgrind
  # fleet replay: the zstd tool (opfleet reads logs through it), a Slurm cluster (the fleet
  # test starts a one-node one of its own; tools/opfleet submits to a real one)
  zstd slurm-wlm munge
  # fuzzing and sanitizer builds (fuzz/run.sh, -Db_sanitize=address,undefined): clang and its
  # libFuzzer / ASan / UBSan runtimes
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} system packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run this script as root (or install them with apt-get) and try again" >&2
  exit 1
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
