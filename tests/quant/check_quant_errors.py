#!/usr/bin/env python3
"""What a newcomer meets on the quantization path says what is wrong:

- opreplay --precision int8 with a float model stops with exit 1 and prints the element's reason
  (the model named, "needs a quantized model", the opc quantize command to run), not only "the
  pipeline did not start";
- opc quantize of a model that is already quantized (a QDQ model it wrote itself) is refused with
  exit 1, naming the model and a quantization node, instead of stacking a second
  QuantizeLinear/DequantizeLinear pair on every layer;
- opc quantize -o into a folder that does not exist is refused before the calibration runs;
- opc quantize --help prints the command's options and exits 0.

Usage: check_quant_errors.py OPC OPREPLAY DRIVE MODELS_DIR   (exit 0 pass, 1 fail)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    opc, opreplay, drive, models = sys.argv[1:]
    failures = []

    def check(ok, what):
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            failures.append(what)

    vision = os.path.join(models, "driving_vision_small.onnx")
    policy = os.path.join(models, "driving_policy_small.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.setdefault("GST_REGISTRY_1_0", os.path.join(tmp, "registry.bin"))
        r = subprocess.run([opreplay, "--out", os.path.join(tmp, "out"), "--max-frames", "2",
                            "--no-video", "--precision", "int8", "--vision", vision, "--policy",
                            policy, drive], capture_output=True, text=True, env=env, timeout=120)
        named = [m for m in (vision, policy) if m in r.stderr]
        check(r.returncode != 0 and "needs a quantized model" in r.stderr and named and
              "opc quantize" in r.stderr,
              f"opreplay --precision int8 with float models: exit {r.returncode}, the reason "
              f"printed: {'needs a quantized model' in r.stderr}, model named: {bool(named)}")

        # A one-layer float model, quantized once (fine) and then again (refused).
        w = np.linspace(-1, 1, 64, dtype=np.float32).reshape(16, 4)
        g = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
            [numpy_helper.from_array(w, "w")])
        fmodel = os.path.join(tmp, "f.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), fmodel)
        cal = os.path.join(tmp, "cal")
        os.makedirs(cal)
        np.save(os.path.join(cal, "x-000000.npy"),
                np.linspace(-2, 3, 64, dtype=np.float32).reshape(4, 16))
        qmodel = os.path.join(tmp, "q.onnx")
        r = subprocess.run([opc, "quantize", fmodel, "--calibration", cal, "-o", qmodel],
                           capture_output=True, text=True)
        check(r.returncode == 0 and os.path.isfile(qmodel),
              f"opc quantize of the float model: exit {r.returncode} {r.stderr.strip()}")
        again = os.path.join(tmp, "qq.onnx")
        r = subprocess.run([opc, "quantize", qmodel, "--calibration", cal, "-o", again],
                           capture_output=True, text=True)
        check(r.returncode == 1 and qmodel in r.stderr and "already quantized" in r.stderr and
              ("is QuantizeLinear" in r.stderr or "is DequantizeLinear" in r.stderr) and not os.path.exists(again),
              f"opc quantize of its own QDQ output refused: exit {r.returncode}, "
              f"{r.stderr.strip()}")

        r = subprocess.run([opc, "quantize", fmodel, "--calibration", cal, "-o",
                            os.path.join(tmp, "nosuch", "q.onnx")], capture_output=True, text=True)
        check(r.returncode == 1 and os.path.join(tmp, "nosuch") in r.stderr and
              "does not exist" in r.stderr and "calibration frames" not in r.stdout,
              f"opc quantize -o into a missing folder refused before calibrating: exit "
              f"{r.returncode}, {r.stderr.strip()}")

    r = subprocess.run([opc, "quantize", "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and all(o in r.stdout for o in (
        "--calibration", "--method", "--percentile", "--frames", "--report", "--keep-float",
        "--keep", "--quantize-outputs")),
        f"opc quantize --help: exit {r.returncode}, every option listed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
