#!/usr/bin/env bash
# Seed corpora for the fuzz targets, from the repository's own files: the small driving models,
# the test models and .npy files tests/nn/make_models.py writes, the models' output_slices
# pickles, logs written by the message golden test's writer (plain, zstd, bzip2), a compiled
# model, the tensor caps strings of the docs, and the regression inputs in fuzz/regressions/.
#   fuzz/make_corpus.sh OUTDIR [MAIN_BUILDDIR]
# Seeds that need the main build (write-fixed-log, opc) or the venv are skipped without them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
main=${2:-build}
py=.venv/bin/python3
mkdir -p "$out"/{onnx,opm,pickle,npy,log,caps}
cp models/*_small.onnx "$out/onnx/"
if [ -x "$py" ]; then
  tmp=$(mktemp -d)
  "$py" tests/nn/make_models.py "$tmp" >/dev/null
  cp "$tmp"/*.onnx "$out/onnx/" 2>/dev/null || true
  cp "$tmp"/*.npy "$out/npy/" 2>/dev/null || true
  rm -rf "$tmp"
  "$py" - "$out/pickle" models/*_small.onnx <<'PY'
import base64, os, sys
import onnx
for path in sys.argv[2:]:
    m = onnx.load(path, load_external_data=False)
    for kv in m.metadata_props:
        if kv.key == "output_slices":
            name = os.path.basename(path).replace(".onnx", ".pkl")
            open(os.path.join(sys.argv[1], name), "wb").write(base64.b64decode(kv.value))
PY
fi
if [ -x "$main/tests/messages/write-fixed-log" ]; then
  "$main/tests/messages/write-fixed-log" "$out/log/fixed.rlog" >/dev/null 2>&1 || true
  "$main/tests/messages/write-fixed-log" "$out/log/fixed.rlog.zst" >/dev/null 2>&1 || true
  "$main/tests/messages/write-fixed-log" "$out/log/killed.rlog.zst" --kill >/dev/null 2>&1 || true
  if command -v bzip2 >/dev/null && [ -f "$out/log/fixed.rlog" ]; then
    bzip2 -kc "$out/log/fixed.rlog" > "$out/log/fixed.rlog.bz2"
  fi
fi
if [ -x "$main/tools/opc/opc" ] && [ -x "$py" ]; then
  "$main/tools/opc/opc" compile "$out/onnx/typed.onnx" -o "$out/opm/typed.opm" >/dev/null 2>&1 ||
    rm -f "$out/opm/typed.opm"
  "$main/tools/opc/opc" compile "$out/onnx/two_inputs.onnx" --shape a=2,3 --shape b=2,3 \
    -o "$out/opm/two_inputs.opm" >/dev/null 2>&1 || rm -f "$out/opm/two_inputs.opm"
fi
i=0
grep -rhoE 'application/x-op-tensors,[^`"'"'"']*' docs | sort -u | while read -r caps; do
  i=$((i + 1))
  printf '%s' "$caps" > "$out/caps/doc-$i"
done
for t in onnx opm pickle npy log caps; do
  [ -d "fuzz/regressions/$t" ] && cp fuzz/regressions/"$t"/* "$out/$t/" 2>/dev/null || true
  echo "corpus $t: $(ls "$out/$t" | wc -l) files"
done
