#!/usr/bin/env python3
"""opc info and opc run --reference on the committed reference models (models/*_small.onnx),
checked against onnxruntime and the models' own metadata; a cold build of the small models'
kernels prints nothing on stderr.

Usage: test_opc.py OPC

The small models keep fp16 activations inside (like openpilot's), so both runtimes round to
half precision after each op, in their own order: the comparison allows a few half-precision
ulps relative to the output's scale (2^-11 ≈ 4.9e-4 per rounding, over a few dozen layers),
|got - want| <= 1e-2 * max(1, max|want|).
"""
import base64
import os
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    import onnxruntime as ort
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

ROOT = os.environ.get("OP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
opc = sys.argv[1]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([opc, *args], capture_output=True, text=True)


rng = np.random.default_rng(11)
work = tempfile.mkdtemp(prefix="nn_opc_")
for name in ("driving_vision_small", "driving_policy_small", "driving_supercombo_small"):
    path = os.path.join(ROOT, "models", name + ".onnx")
    if not os.path.exists(path):
        check(False, f"{path} exists")
        continue
    m = onnx.load(path)
    meta = {p.key: p.value for p in m.metadata_props}

    info = run("info", path)
    check(info.returncode == 0, f"opc info {name} succeeds ({info.stderr.strip()})")
    out = info.stdout
    check(re.search(r"FLOPs: [0-9.]+ [KMG]?FLOP per run", out) is not None, f"{name}: info prints FLOPs")
    check("parameters:" in out, f"{name}: info prints parameters")
    for i in m.graph.input:
        dims = ",".join(str(d.dim_value) for d in i.type.tensor_type.shape.dim)
        check(re.search(rf"^\s+{re.escape(i.name)}\s+\S+ \({dims}\)", out, re.M) is not None,
              f"{name}: info lists input {i.name} ({dims})")
    if "output_slices" in meta:
        slices = pickle.loads(base64.b64decode(meta["output_slices"]))  # our own committed model
        for s, sl in slices.items():
            check(re.search(rf"^\s+{re.escape(s)}\s+{sl.start}:{sl.stop} ", out, re.M) is not None,
                  f"{name}: info lists slice {s} {sl.start}:{sl.stop}")

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds, args = {}, []
    for i in sess.get_inputs():
        a = (rng.integers(0, 256, i.shape, dtype=np.uint8) if "uint8" in i.type
             else rng.standard_normal(i.shape).astype(np.float32))
        feeds[i.name] = a
        f = os.path.join(work, f"{name}_{i.name}.npy")
        np.save(f, a)
        args += ["--input", f"{i.name}={f}"]
    want = sess.run(None, feeds)
    odir = os.path.join(work, name)
    r = run("run", path, "--reference", "--output-dir", odir, *args)
    check(r.returncode == 0, f"opc run --reference {name} succeeds ({r.stderr.strip()})")
    if r.returncode == 0:
        for o, w in zip(sess.get_outputs(), want):
            got = np.load(os.path.join(odir, o.name + ".npy"))
            err = float(np.abs(got.astype(np.float64) - w).max())
            scale = max(1.0, float(np.abs(w).max()))
            check(got.shape == w.shape and got.dtype == w.dtype and err <= 1e-2 * scale,
                  f"{name}: output {o.name} {got.shape} max error {err:.3g} (scale {scale:.3g})")

# The FastViT-style block (fastvit_block.py): fp32 within 1e-4 relative to the output's scale,
# fp16 within 2e-2 (the bounds of the two storage precisions, docs/numerics.md).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastvit_block  # noqa: E402

for fp16, tol in ((False, 1e-4), (True, 2e-2)):
    path = os.path.join(work, f"fastvit_{'fp16' if fp16 else 'fp32'}.onnx")
    fastvit_block.build(path, fp16=fp16)
    x = rng.standard_normal((1, 16, 13, 13)).astype(np.float16 if fp16 else np.float32)
    xf = os.path.join(work, "fastvit_x.npy")
    np.save(xf, x)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    odir = os.path.join(work, "fastvit_out")
    r = run("run", path, "--reference", "--input", f"x={xf}", "--output-dir", odir)
    check(r.returncode == 0, f"opc run --reference fastvit fp16={fp16} ({r.stderr.strip()})")
    if r.returncode == 0:
        got = np.load(os.path.join(odir, "y.npy"))
        err = float(np.abs(got.astype(np.float64) - want).max())
        scale = float(np.abs(want).max())
        check(got.dtype == want.dtype and err <= tol * scale,
              f"fastvit fp16={fp16}: max error {err:.3g} <= {tol} x {scale:.3g}")

# Errors are one line and name the problem.
vision = os.path.join(ROOT, "models", "driving_vision_small.onnx")
bad = os.path.join(work, "bad.npy")
np.save(bad, np.zeros((1, 12, 128, 256), np.float32))
r = run("run", vision, "--reference", "--output-dir", work, "--input", f"img={bad}", "--input", f"big_img={bad}")
check(r.returncode != 0 and "img" in r.stderr and "float32" in r.stderr and "uint8" in r.stderr
      and r.stderr.count("\n") == 1, f"wrong input dtype is a one-line error ({r.stderr.strip()})")
r = run("run", vision, "--reference", "--output-dir", work, "--input", f"nope={bad}")
check(r.returncode != 0 and "nope" in r.stderr, f"unknown input is refused ({r.stderr.strip()})")
r = run("info", os.path.join(work, "missing.onnx"))
check(r.returncode != 0 and "missing.onnx" in r.stderr, f"missing model is named ({r.stderr.strip()})")

# Every command answers --help with its own options, on stdout, exit 0; an unknown option is
# still an error.
options = {"info": ["--shape"],
           "run": ["--input", "--output-dir", "--reference", "--device", "--precision", "--shape"],
           "compile": ["-o", "--device", "--precision", "--shape", "--no-fuse"],
           "profile": ["--runs", "--top", "--peak", "--source", "--device", "--precision",
                       "--shape"],
           "quantize": ["--calibration", "--method", "--percentile", "--frames", "--report",
                        "--keep-float", "--keep", "--quantize-outputs"]}
for cmd, opts in options.items():
    r = run(cmd, "--help")
    missing = [o for o in opts if o not in r.stdout]
    check(r.returncode == 0 and r.stdout.startswith(f"usage: opc {cmd} ") and not missing,
          f"opc {cmd} --help: exit {r.returncode}, its usage, missing {missing}")
r = run("profile", vision, "--no-such-option")
check(r.returncode != 0 and "--no-such-option" in r.stderr,
      f"an unknown option is an error ({r.stderr.strip()})")

# A cold build of the small models' kernels (empty caches: every source compiled, bundled and
# linked, then run) prints nothing on stderr: the OpenCL compiler's own "N warnings generated."
# lines reach the user's terminal, and a bundle's sources must not clash (a static whose name the
# bundler misreads leaves its macros redefined, which the compiler warns about).
for name in ("driving_vision_small", "driving_policy_small"):
    cold = tempfile.mkdtemp(prefix="nn_opc_cold_")
    r = subprocess.run([opc, "profile", os.path.join(ROOT, "models", name + ".onnx"), "--runs", "1",
                        "--top", "1"], capture_output=True, text=True,
                       env=dict(os.environ, XDG_CACHE_HOME=cold))
    if r.returncode != 0 and "no OpenCL" in r.stderr:
        print(f"skip {name}: no OpenCL device for a cold build")
        continue
    check(r.returncode == 0 and r.stderr.strip() == "",
          f"{name}: a cold build prints nothing on stderr (exit {r.returncode}: "
          f"{r.stderr.strip()[:300]!r})")

print(f"opc: {len(failures)} failures")
sys.exit(1 if failures else 0)
