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

# Gather indices known only at run time: out of range, the device kernel clamps them (it cannot
# stop); the reference interpreter clamps them the same way, so both paths give the same values:
# a negative index counts from the end, then it is clamped into [0, dim - 1].
gx = np.arange(12, dtype=np.float32).reshape(4, 3)
gidx = np.array([7, -1, -9, 2, 4], np.int64)
geidx = np.array([[0, 5, -1], [-7, 1, 3], [2, 2, 9], [-4, 0, 1]], np.int64)
rt = save("gather_runtime",
          [helper.make_node("Gather", ["x", "idx"], ["g"], name="gather_rt", axis=0),
           helper.make_node("GatherElements", ["x", "eidx"], ["ge"], name="gather_el_rt", axis=0)],
          [], [vi("x", [4, 3]), vi("idx", [5], TensorProto.INT64),
               vi("eidx", [4, 3], TensorProto.INT64)],
          [vi("g", [5, 3]), vi("ge", [4, 3])])


def clamp_index(j, dim):
    return np.clip(np.where(j < 0, j + dim, j), 0, dim - 1)


want_g = gx[clamp_index(gidx, 4)]
want_ge = np.take_along_axis(gx, clamp_index(geidx, 4), axis=0)
rt_inputs = []
for name, value in (("x", gx), ("idx", gidx), ("eidx", geidx)):
    np.save(os.path.join(tmp, f"rt_{name}.npy"), value)
    rt_inputs += ["--input", f"{name}={os.path.join(tmp, f'rt_{name}.npy')}"]
for path_name, extra in (("reference", ["--reference"]), ("device", [])):
    outdir = os.path.join(tmp, "out_gather_" + path_name)
    rc, out = run(opc, "run", rt, *rt_inputs, "--output-dir", outdir, *extra)
    if path_name == "device" and rc != 0 and "OpenCL" in out:
        print("skip the device path, no OpenCL device: " + out.strip()[:160])
        continue
    check(rc == 0, f"runtime Gather indices, {path_name}: runs ({out.strip()[-200:]})")
    if rc == 0:
        got_g = np.load(os.path.join(outdir, "g.npy"))
        got_ge = np.load(os.path.join(outdir, "ge.npy"))
        check(np.array_equal(got_g, want_g),
              f"runtime Gather indices, {path_name}: clamped ({got_g.ravel().tolist()})")
        check(np.array_equal(got_ge, want_ge),
              f"runtime GatherElements indices, {path_name}: clamped ({got_ge.ravel().tolist()})")
# A constant out-of-range GatherElements index is refused at load like a Gather one.
ge_const = save("gather_el_oob", [helper.make_node("GatherElements", ["x", "eidx"], ["y"],
                                                   name="gather_el_oob")],
                [ints("eidx", [[0, 4, 1]])], [vi("x", [4, 3])], [vi("y", None)])
rc, out = run(opc, "run", ge_const, "--input", "x=" + npy("x_ge", [4, 3]), "--output-dir",
              os.path.join(tmp, "out_ge_oob"), "--reference")
check(rc != 0 and "gather_el_oob" in out and "index 4 is out of range" in out,
      f"constant GatherElements index 4 of 4: refused naming the node ({out.strip()[:160]})")

# Numbers that are not numbers.
rc, out = run(opc, "profile", good, "--runs", "abc")
check(rc != 0 and "--runs 'abc'" in out, f"opc profile --runs abc is an error ({out.strip()})")
for peak in ("abc", "0", "-3", "nan"):
    rc, out = run(opc, "profile", good, "--peak", peak)
    check(rc != 0 and f"--peak '{peak}'" in out,
          f"opc profile --peak {peak} is an error ({out.strip()[:160]})")
rc, out = run(opreplay, "--max-frames", "abc", "route")
check(rc == 2 and "--max-frames 'abc'" in out,
      f"opreplay --max-frames abc is an error ({rc}: {out.strip()[:160]})")
for rate in ("abc", "0", "-4", ""):
    rc, out = run(opreplay, "--realtime=" + rate, "route")
    check(rc == 2 and f'not "{rate}"' in out,
          f"opreplay --realtime={rate} is an error ({rc}: {out.strip()[:160]})")

# A replay whose model is missing: the pipeline does not start; the error that stopped it is
# printed (it once stayed on the bus, unread) and no summary names files never written.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import tool_env  # noqa: E402

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
missing = os.path.join(tmp, "missing.onnx")
p = subprocess.run([opreplay, os.path.join(root, "samples", "drive"), "--vision", missing,
                    "--policy", os.path.join(root, "models", "driving_policy_small.onnx"),
                    "--out", os.path.join(tmp, "replay"), "--no-video", "--max-frames", "2"],
                   capture_output=True, text=True, timeout=120, env=tool_env("hostile"))
out = p.stdout + p.stderr
check(p.returncode == 1 and "Could not load the vision model" in out and missing in out
      and "opreplay summary" not in out,
      f"opreplay with a missing model says why it did not start, with no summary "
      f"({p.returncode}: {out.strip()[-300:]})")

shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
