#!/usr/bin/env python3
"""Hostile input through the tools: invalid models that onnxruntime refuses are refused by
`opc run --reference` too (naming the node), tool arguments that are not numbers are errors,
outputs whose names sanitise alike get distinct files, an unknown --input is an error on the
device path as on the reference path. Each case writes its own hostile file.

Usage: test_hostile_tools.py OPC OPREPLAY
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

opc, opreplay = sys.argv[1], sys.argv[2]
failures = []
tmp = tempfile.mkdtemp(prefix="op-hostile-tools-")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def save(name, nodes, inits, inputs, outputs, opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    return path


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def ints(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


def npy(name, shape):
    path = os.path.join(tmp, name + ".npy")
    np.save(path, np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape))
    return path


# Invalid models: (name, node, initialisers, input shape, what our refusal says).
x4 = [1, 1, 4, 4]
cases = [
    ("gather_oob", helper.make_node("Gather", ["x", "idx"], ["y"], name="gather_oob"),
     [ints("idx", [1, 4])], [4, 3], "out of range"),
    ("surplus", helper.make_node("Relu", ["x", "x"], ["y"], name="surplus"), [], [1, 4],
     "at most 1"),
    ("pool_pads", helper.make_node("MaxPool", ["x"], ["y"], name="pool_pads", kernel_shape=[2, 2],
                                   pads=[2, 0, 0, 0]), [], x4, "smaller than the kernel"),
    ("clip_vec", helper.make_node("Clip", ["x", "lo"], ["y"], name="clip_vec"),
     [numpy_helper.from_array(np.array([0, 1], np.float32), "lo")], [1, 4], "scalar"),
    ("resize_zero", helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="resize_zero"),
     [ints("sizes", [1, 1, 0, 8])], x4, "sizes must be positive"),
]
for name, node, inits, shape, says in cases:
    path = save(name, [node], inits, [vi("x", shape)], [vi("y", None)])
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        sess.run(None, {"x": np.zeros(shape, np.float32)})
        ort_refuses = False
    except Exception:  # onnxruntime raises its own exception types
        ort_refuses = True
    rc, out = run(opc, "run", path, "--input", "x=" + npy("x_" + name, shape), "--output-dir",
                  os.path.join(tmp, "out_" + name), "--reference")
    check(ort_refuses, f"{name}: onnxruntime refuses it")
    check(rc != 0 and name in out and says in out and "Sanitizer" not in out,
          f"{name}: opc run --reference refuses it naming the node ({out.strip()[:160]})")

# Two outputs whose names sanitise to the same file name both survive.
path = save("twins", [helper.make_node("Relu", ["x"], ["a/b"]),
                      helper.make_node("Neg", ["x"], ["a:b"])], [], [vi("x", [1, 4])],
            [vi("a/b", [1, 4]), vi("a:b", [1, 4])])
outdir = os.path.join(tmp, "out_twins")
rc, out = run(opc, "run", path, "--input", "x=" + npy("x_twins", [1, 4]), "--output-dir", outdir,
              "--reference")
files = sorted(os.listdir(outdir)) if os.path.isdir(outdir) else []
check(rc == 0 and len(files) == 2, f"twins: two files for two outputs ({files}, {out.strip()})")
if len(files) == 2:
    got = sorted(np.load(os.path.join(outdir, f)).sum() for f in files)
    x = np.load(os.path.join(tmp, "x_twins.npy"))
    check(np.allclose(got, sorted([np.maximum(x, 0).sum(), -x.sum()])),
          "twins: the files hold Relu's and Neg's values")

# An unknown --input name: refused on the reference path and on the device path alike.
good = save("good", [helper.make_node("Relu", ["x"], ["y"])], [], [vi("x", [1, 4])],
            [vi("y", [1, 4])])
xin = npy("x_good", [1, 4])
rc, out = run(opc, "run", good, "--input", "x=" + xin, "--input", "bogus=" + xin,
              "--output-dir", os.path.join(tmp, "out_bogus"), "--reference")
check(rc != 0 and "no input 'bogus'" in out, f"unknown --input, reference: refused ({out.strip()})")
# The device path with a compiled model (where no shape binding names the inputs).
opm = os.path.join(tmp, "good.opm")
rc, out = run(opc, "compile", good, "-o", opm)
if rc != 0 and "OpenCL" in out:
    print("skip the device path, no OpenCL device: " + out.strip()[:160])
else:
    check(rc == 0, f"compile good.onnx ({out.strip()[-160:]})")
    rc, out = run(opc, "run", opm, "--input", "x=" + xin, "--input", "bogus=" + xin,
                  "--output-dir", os.path.join(tmp, "out_bogus_dev"))
    check(rc != 0 and "no input 'bogus'" in out, f"unknown --input, device: refused ({out.strip()})")

# Numbers that are not numbers.
rc, out = run(opc, "profile", good, "--runs", "abc")
check(rc != 0 and "--runs 'abc'" in out, f"opc profile --runs abc is an error ({out.strip()})")
rc, out = run(opreplay, "--max-frames", "abc", "route")
check(rc == 2 and "--max-frames 'abc'" in out,
      f"opreplay --max-frames abc is an error ({rc}: {out.strip()[:160]})")
for rate in ("abc", "0", "-4", ""):
    rc, out = run(opreplay, "--realtime=" + rate, "route")
    check(rc == 2 and f'not "{rate}"' in out,
          f"opreplay --realtime={rate} is an error ({rc}: {out.strip()[:160]})")

shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
