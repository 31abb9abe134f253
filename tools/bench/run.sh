#!/usr/bin/env bash
# The benchmark command (not part of the test suite): sets up what the peers need, builds,
# generates the full reference models if missing, runs tools/bench/run.py and writes
# docs/benchmarks.md (which records how long the run took); --quick for the small models only
# (then neither PyTorch nor the full models are needed), --no-tinygrad to leave tinygrad out.
# Other options (--out FILE, --threads N) go to run.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=0 tinygrad=1
for a in "$@"; do
  [ "$a" = "--quick" ] && quick=1
  [ "$a" = "--no-tinygrad" ] && tinygrad=0
done
tools/setup-debian.sh
# tinygrad's CPU backend compiles with clang; torch (Debian's) generates the full models.
if [ $tinygrad = 1 ] && ! command -v clang >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang
fi
if [ $quick = 1 ]; then
  tools/venv.sh
else
  tools/venv.sh --models
fi
if [ $tinygrad = 1 ]; then
  .venv/bin/python3 -m pip install -q --disable-pip-version-check -r tools/bench/requirements.txt
fi
[ -f build/build.ninja ] || meson setup build
ninja -C build
if [ $quick = 0 ] && ! (cd models && sha256sum --quiet -c full.sha256 2>/dev/null); then
  .venv/bin/python3 models/generate.py --size full --check
fi
exec .venv/bin/python3 tools/bench/run.py --build build "$@"
