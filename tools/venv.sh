#!/usr/bin/env bash
# Creates the project's Python environment in .venv (idempotent).
#   tools/venv.sh            numpy, onnx, onnxruntime, pycapnp: what the tests' references need
#   tools/venv.sh --models   also PyTorch (Debian's python3-torch, CPU) and matplotlib, to
#                            regenerate and train models (tools/train)
# The venv is built on Debian's /usr/bin/python3 with system site packages, so Debian's torch is
# visible inside it without pulling PyPI's multi-gigabyte CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."

want_models=0
[ "${1:-}" = "--models" ] && want_models=1

# --models: torch for the generator and the trainer, matplotlib for the trainer's loss plot.
if [ $want_models = 1 ]; then
  for pkg in python3-torch python3-matplotlib; do
    dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q 'ok installed' && continue
    [ "$(id -u)" -eq 0 ] || { echo "venv: $pkg is missing; install it as root" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkg
  done
fi

stamp=.venv/.requirements
if [ ! -x .venv/bin/python3 ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
if ! cmp -s tools/requirements.txt "$stamp" 2>/dev/null; then
  .venv/bin/python3 -m pip install -q --disable-pip-version-check -r tools/requirements.txt
  cp tools/requirements.txt "$stamp"
fi
if [ $want_models = 1 ]; then
  .venv/bin/python3 -c 'import torch; print("venv: torch", torch.__version__)'
fi
echo "venv: $(.venv/bin/python3 -c 'import numpy, onnx, onnxruntime; print("numpy", numpy.__version__, "onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__)')"
