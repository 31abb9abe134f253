#!/usr/bin/env python3
"""precision int8 through opc, on the OpenCL device (exit 77 when there is none).

usage: int8_deploy.py OPC

- A quantized model (models/qdq/small_conv_qdq.onnx) compiles at int8, and `auto` picks int8
  for it; a compiled model records its precision (fp32, fp16 or int8) and `opc info` prints it.
- Running a compiled model asked for another precision than the one it records is an error
  naming both; asked for its own, or auto, it runs.
- A float model asked for int8 is an error naming the model and saying to run `opc quantize`
  first, in `opc compile` and `opc run`, and writes nothing; auto compiles it at fp32.

That the int8 outputs agree with onnxruntime's is nn-device-qdq-int8 (qdq_vs_onnxruntime.py).
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("OP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
QDQ = os.path.join(ROOT, "models", "qdq", "small_conv_qdq.onnx")
FLOAT = os.path.join(ROOT, "models", "driving_policy_small.onnx")
INPUT = os.path.join(ROOT, "models", "qdq", "input.npy")

if len(sys.argv) != 2:
    print(__doc__)
    sys.exit(2)
OPC = sys.argv[1]
work = tempfile.mkdtemp(prefix="int8_deploy_")
failures = []


def opc(*args):
    r = subprocess.run([OPC, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def check(cond, what, out=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if out:
            print("  " + out.strip().replace("\n", "\n  "))


def compile_to(model, name, *extra):
    path = os.path.join(work, name)
    rc, out = opc("compile", model, "-o", path, *extra)
    if rc != 0 and "no OpenCL" in out:
        print("SKIP: no OpenCL device")
        sys.exit(77)
    return path, rc, out


def recorded(opm):
    rc, out = opc("info", opm)
    if rc != 0:
        return "(opc info failed: " + out.strip() + ")"
    for line in out.splitlines():
        if line.startswith("compiled: ") and ", precision " in line:
            return line.split(", precision ")[1].split(",")[0]
    return "(no precision line)"


def run(model, *extra):
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    return opc("run", model, "--input", "x=" + INPUT, "--output-dir", out_dir, *extra)


# Compiled models record their precision; auto picks int8 for the quantized model.
opms = {}
for prec in ("int8", "fp32", "fp16", None):
    name = (prec or "auto") + ".opm"
    path, rc, out = compile_to(QDQ, name, *(["--precision", prec] if prec else []))
    check(rc == 0, f"compile the QDQ model at {prec or 'auto'}", out)
    if rc == 0:
        want = prec or "int8"
        got = recorded(path)
        check(got == want, f"{name} records precision {want} (opc info says {got})")
        opms[prec or "auto"] = path

# A compiled model runs at its own precision or auto; another one is an error naming both.
if "int8" in opms and "fp32" in opms:
    for opm, asked in ((opms["int8"], "int8"), (opms["int8"], None), (opms["fp32"], "fp32")):
        rc, out = run(opm, *(["--precision", asked] if asked else []))
        check(rc == 0, f"run {os.path.basename(opm)} asked for {asked or 'auto'}", out)
    for opm, has, asked in ((opms["fp32"], "fp32", "int8"), (opms["int8"], "int8", "fp16")):
        rc, out = run(opm, "--precision", asked)
        named = f"{opm} is compiled for precision {has}, not the {asked} asked" in out
        check(rc != 0 and named, f"run {has}.opm asked for {asked}: an error naming both", out)

# A float model asked for int8: an error naming it and the fix, and nothing written.
fix = f"opc quantize {FLOAT} --calibration DIR"
path, rc, out = compile_to(FLOAT, "float_int8.opm", "--precision", "int8")
check(rc != 0 and f"{FLOAT} is a float model with no quantization" in out and fix in out,
      "compile a float model at int8: an error naming the model and 'opc quantize'", out)
check(not os.path.exists(path), "compile a float model at int8 writes no .opm")
rc, out = run(FLOAT, "--precision", "int8")
check(rc != 0 and f"{FLOAT} is a float model with no quantization" in out and fix in out,
      "run a float model at int8: an error naming the model and 'opc quantize'", out)
# auto on the float model stays float.
path, rc, out = compile_to(FLOAT, "float_auto.opm")
check(rc == 0, "compile a float model at auto", out)
if rc == 0:
    got = recorded(path)
    check(got == "fp32", f"a float model at auto records fp32 (opc info says {got})")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
