#!/usr/bin/env python3
"""`opc run` on the device against onnxruntime, for random inputs.

usage: ort_agreement.py OPC MODEL.onnx [MODEL.onnx ...] [--precision fp32|fp16] [--rtol R]
                        [--fp32-twin] [--fastvit]

For each model: random inputs of the model's types (uint8 images over their whole range, floats
in [-1, 1]), onnxruntime's outputs as the expectation, `opc run` on the OpenCL device as the
result. An output agrees when max|device - ort| <= rtol * max(1, max|ort|) (a relative error
measured against the output's scale, so outputs near zero are not held to an impossible bar).
The reference models compute in float16 throughout (as openpilot's do), so two runs of them can
only agree to fp16 rounding (each op rounds to half; one ulp is ~5e-4 relative). --fp32-twin
checks the 1e-4 bar honestly: it rewrites the model to float32 (float16 initializers widened,
Cast-to-float16 made Cast-to-float32) and compares that twin, run by onnxruntime and by the
device with fp32 storage.
--fastvit adds the FastViT-style block of make_fastvit_block.py (float32) to the models.
Exits 1 on any disagreement, 77 when onnxruntime or numpy are missing.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # reported as skipped, never as passed
    print(f"SKIP: {e}")
    sys.exit(77)

NP_TYPES = {
    'tensor(float)': np.float32, 'tensor(float16)': np.float16, 'tensor(uint8)': np.uint8,
    'tensor(int64)': np.int64, 'tensor(int32)': np.int32, 'tensor(bool)': np.bool_,
}


def random_input(rng, info):
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in info.shape]
    t = NP_TYPES[info.type]
    if t == np.uint8:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    if t in (np.int64, np.int32):
        return rng.integers(0, 4, size=shape).astype(t)
    if t == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return rng.uniform(-1, 1, size=shape).astype(t)


def fp32_twin(path, out_dir):
    import onnx
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                                    'models'))
    import onnx_util
    m = onnx_util.to_fp32_twin(onnx.load(path))
    out = os.path.join(out_dir, os.path.basename(path).replace('.onnx', '_fp32.onnx'))
    onnx.save(m, out)
    return out


def check(opc, model, precision, rtol, seed):
    rng = np.random.default_rng(seed)
    sess = ort.InferenceSession(model, providers=['CPUExecutionProvider'])
    feeds = {i.name: random_input(rng, i) for i in sess.get_inputs()}
    expected = sess.run(None, feeds)
    names = [o.name for o in sess.get_outputs()]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        args = [opc, 'run', model, '--output-dir', tmp, '--precision', precision]
        for name, value in feeds.items():
            path = os.path.join(tmp, f'in_{len(args)}.npy')
            np.save(path, value)
            args += ['--input', f'{name}={path}']
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            print(f'FAIL {os.path.basename(model)} {precision}: opc run: {r.stderr.strip()}')
            return False
        for name, want in zip(names, expected):
            got = np.load(os.path.join(tmp, f'{name}.npy'))
            if got.shape != want.shape or got.dtype != want.dtype:
                print(f'FAIL {name}: {got.dtype}{got.shape} vs onnxruntime {want.dtype}{want.shape}')
                ok = False
                continue
            w = want.astype(np.float64)
            err = float(np.max(np.abs(got.astype(np.float64) - w))) if w.size else 0.0
            scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
            rel = err / scale
            verdict = 'ok' if rel <= rtol else 'FAIL'
            ok = ok and rel <= rtol
            print(f'{verdict} {os.path.basename(model)} {precision} {name}: max abs err {err:.3g}, '
                  f'relative {rel:.3g} (bar {rtol:g})')
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('opc')
    ap.add_argument('models', nargs='*')
    ap.add_argument('--precision', default='fp32')
    ap.add_argument('--rtol', type=float, default=None)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--fp32-twin', action='store_true')
    ap.add_argument('--fastvit', action='store_true')
    a = ap.parse_intermixed_args()
    rtol = a.rtol if a.rtol is not None else (1e-4 if a.precision == 'fp32' else 2e-2)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        models = list(a.models)
        if a.fastvit:
            path = os.path.join(tmp, 'fastvit_block.onnx')
            subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__),
                                                         'make_fastvit_block.py'), path],
                           check=True)
            models.append(path)
        if not models:
            ap.error('no models')
        for m in models:
            if a.fp32_twin:
                m = fp32_twin(m, tmp)
            ok = check(a.opc, m, a.precision, rtol, a.seed) and ok
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
