#!/usr/bin/env python3
"""Calibration data from the pipeline and int8 QDQ models of the small networks.

1. opreplay replays the first FRAMES frames of the sample drive with the small vision and policy
   models and --dump-inputs: every run's inputs of both networks land in one folder as
   <input>-<frame>.npy. Each dumped img / big_img must equal, byte for byte, what opwarp makes of
   the same stream (run here on its own, as tools/train's dataset test does), the temporal inputs
   must have the policy's shapes, and traffic_convention must be right-hand one-hot.
2. opc quantize turns each small model into a QDQ model calibrated on that folder (the policy
   with --report and --keep-float 1, the vision model once per method; entropy with
   --keep-float 4: its clipped ranges make the head's Gemms and the attention products far more
   sensitive than the rest, which the report shows). Each must pass the ONNX checker, run in onnxruntime, hold its
   quantized weights as int8 (with their scales at most 0.27 of their float32 bytes, measured
   0.26: a quarter plus 5 bytes of scale and zero point per output channel; the whole
   model's initializers at most 0.35 of the float32 twin's when no layer is kept: biases, norms
   and the scales stay float), and give outputs within the bound below of the float model's
   (onnxruntime, on every dumped frame). With --quantize-outputs onnxruntime must turn every
   Conv, Gemm and MatMul of the vision model into its integer form.

Bounds: relative RMS error of the whole output vector over the dumped frames, measured on this
drive with PoCL (see docs/runtime.md for the figures) and set at about twice the worst measured
method, so a broken scale or a wrong axis (errors of order 1) fails.

Exit 0 pass, 1 fail, 77 skip (no OpenCL device or a system plugin missing).
Usage: check_quantize_models.py OPC OPREPLAY DRIVE MODELS_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from ort_exact import uint8_weights_twin  # noqa: E402
from optest import have_opencl_device, hevc_source, missing_elements, \
    opwarp_outputs  # noqa: E402

FRAMES = 4
# Relative RMS error of `outputs` against the float model. Measured on the first 4 frames (and
# on 20): vision minmax / percentile 0.015, vision entropy with its 4 most sensitive layers in
# float 0.05 (0.25 with none kept), vision minmax with --quantize-outputs 0.017, policy minmax
# with 1 kept 0.010.
BOUND_VISION = 0.03
BOUND_VISION_ENTROPY = 0.10
BOUND_POLICY = 0.025


def frames_of(cal, names):
    ks = None
    for n in names:
        got = {int(m.group(1)) for f in os.listdir(cal) if (m := re.fullmatch(re.escape(n) + r"-(\d{6})\.npy", f))}
        ks = got if ks is None else ks & got
    return sorted(ks)


def run(sess, cal, k):
    feeds = {}
    for i in sess.get_inputs():
        a = np.load(os.path.join(cal, f"{i.name}-{k:06d}.npy"))
        feeds[i.name] = a.astype(np.float32) if a.dtype == np.float16 else a
    return sess.run(None, feeds)[0].astype(np.float64)


def rel_rms(ref, got):
    ref, got = np.concatenate([r.ravel() for r in ref]), np.concatenate([g.ravel() for g in got])
    return float(np.sqrt(np.sum((got - ref) ** 2) / np.sum(ref ** 2)))


def twin_weight_bytes(model):
    n = 0
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        n += a.size * (4 if a.dtype == np.float16 else a.dtype.itemsize)
    return n


def main():
    opc, opreplay, drive, models = sys.argv[1:5]
    if not have_opencl_device():
        print("SKIP: no OpenCL device")
        return 77
    name = missing_elements(("h265parse", "avdec_h265", "videoconvert", "appsink", "filesrc"))
    if name:
        print(f"SKIP: system element {name} unavailable")
        return 77
    truth = json.load(open(os.path.join(drive, "groundtruth.json")))
    rpy = truth["drive"]["calibration_rpy"]
    cams = truth["drive"]["cameras"]
    vision = os.path.join(models, "driving_vision_small.onnx")
    policy = os.path.join(models, "driving_policy_small.onnx")
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok: " if ok else "FAIL: ") + what, flush=True)
        failures += 0 if ok else 1

    with tempfile.TemporaryDirectory() as tmp:
        # A route without a log, so the calibration is --rpy, the one opwarp gets below.
        route = os.path.join(tmp, "route")
        os.mkdir(route)
        for cam in ("road", "wide"):
            f = cams[cam]["file"]
            os.symlink(os.path.abspath(os.path.join(drive, f)), os.path.join(route, os.path.basename(f)))
        cal = os.path.join(tmp, "cal")
        r = subprocess.run([opreplay, route, "--vision", vision, "--policy", policy, "--rpy",
                            ",".join(repr(float(v)) for v in rpy), "--max-frames", str(FRAMES),
                            "--no-video", "--out", os.path.join(tmp, "out"), "--dump-inputs", cal],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: opreplay exited {r.returncode}: {r.stdout}{r.stderr}")
            return 1
        names = ["img", "big_img", "features_buffer", "desire_pulse", "traffic_convention"]
        ks = frames_of(cal, names)
        check(len(ks) >= FRAMES - 2 and ks == list(range(len(ks))),
              f"dump: frames {ks} with all of {names}")
        if not ks:
            return 1
        for role, cam in (("img", "road"), ("big_img", "wide")):
            ref = opwarp_outputs(hevc_source(os.path.join(drive, cams[cam]["file"])), role, rpy, FRAMES)
            dumped = [np.load(os.path.join(cal, f"{role}-{k:06d}.npy")) for k in ks]
            check(all(d.dtype == np.uint8 and d.shape == (1, 12, 128, 256) for d in dumped),
                  f"dump: {role} uint8 (1, 12, 128, 256)")
            # The networks run from the road frame after the first (opvision counts frames as
            # openpilot's modeld does); find where the dump starts in opwarp's stream.
            offset = next((o for o in range(len(ref)) if ref[o] == dumped[0].tobytes()), None)
            same = offset is not None and all(
                offset + k < len(ref) and dumped[k].tobytes() == ref[offset + k] for k in range(len(ks)))
            check(same, f"dump: {role} of frames {ks} equals opwarp's tensors {offset}.. byte for byte")
        shapes = {"features_buffer": (1, 25, 512), "desire_pulse": (1, 25, 8), "traffic_convention": (1, 2)}
        for n, s in shapes.items():
            a = np.load(os.path.join(cal, f"{n}-{ks[-1]:06d}.npy"))
            check(a.shape == s and a.dtype in (np.float32, np.float16), f"dump: {n} {a.dtype} {a.shape}")
        tc = np.load(os.path.join(cal, f"traffic_convention-{ks[0]:06d}.npy"))
        check(np.array_equal(tc.astype(np.float32), [[1, 0]]), f"dump: traffic_convention {tc.tolist()} (right-hand)")

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        cases = [("policy", policy, "minmax", ["--report", "--keep-float", "1"], BOUND_POLICY)]
        cases += [("vision", vision, m, [], BOUND_VISION) for m in ("minmax", "percentile")]
        cases += [("vision", vision, "entropy", ["--keep-float", "4"], BOUND_VISION_ENTROPY)]
        cases += [("vision", vision, "minmax", ["--quantize-outputs"], BOUND_VISION)]
        for what, path, method, extra, bound in cases:
            out = os.path.join(tmp, f"{what}-{method}-{len(cases)}-{len(extra)}.onnx")
            r = subprocess.run([opc, "quantize", path, "--calibration", cal, "--method", method,
                                *extra, "-o", out], capture_output=True, text=True)
            print(r.stdout, end="")
            if r.returncode != 0:
                check(False, f"{what} {method}: opc quantize exited {r.returncode}: {r.stderr}")
                continue
            if "--keep-float" in extra:
                n = int(extra[extra.index("--keep-float") + 1])
                kept = re.findall(r"^kept in float: (\S+) \((\w+), sensitivity rank (\d+),", r.stdout, re.M)
                check(sorted(int(k[2]) for k in kept) == list(range(1, n + 1)),
                      f"{what} {method}: --keep-float {n} keeps the {n} most sensitive layers: "
                      f"{[k[0] for k in kept]}")
                if "--report" in extra:
                    ranked = re.search(r"^\s+1\s+(\S+)\s.*\(kept in float\)$", r.stdout, re.M)
                    check(ranked is not None and ranked.group(1) == kept[0][0],
                          f"{what} {method}: the report's rank 1 is the kept layer")
            m = onnx.load(out)
            onnx.checker.check_model(m, full_check=True)
            ops = [n.op_type for n in m.graph.node]
            float_model = onnx.load(path)
            inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
            qbytes = sum(a.nbytes for a in inits.values())
            ratio = qbytes / twin_weight_bytes(float_model)
            # Each weight DequantizeLinear: int8 values, float scales, int8 zero points.
            # (With --quantize-outputs, the biases' DequantizeLinear read int32.)
            cdq = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits]
            wdq = [n for n in cdq if inits[n.input[0]].dtype == np.int8]
            wbytes = sum(inits[i].nbytes for n in wdq for i in n.input)
            welems = sum(inits[n.input[0]].size for n in wdq)
            int32 = "--quantize-outputs" in extra
            int8 = all(inits[n.input[0]].dtype == np.int8 or (int32 and inits[n.input[0]].dtype == np.int32)
                       for n in cdq)
            kept = "--keep-float" in extra
            check(ops.count("QuantizeLinear") > 0 and wdq and int8 and wbytes <= 0.27 * 4 * welems
                  and (kept or ratio <= 0.35),
                  f"{what} {method}: checker ok, {ops.count('QuantizeLinear')} QuantizeLinear, "
                  f"{len(wdq)} int8 weights: {wbytes} bytes for {4 * welems} float32 bytes "
                  f"({wbytes / (4 * welems):.3f}); initializers {qbytes} bytes = {ratio:.3f} of "
                  f"the float32 twin's{' (layers kept in float)' if kept else ''}")
            if "--quantize-outputs" in extra:
                # Quantized outputs and int32 biases: onnxruntime folds every layer into integer
                # compute (QLinearConv, QGemm, QLinearMatMul).
                oso = ort.SessionOptions()
                oso.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
                ort.InferenceSession(out, oso, providers=["CPUExecutionProvider"])
                opt = [n.op_type for n in onnx.load(oso.optimized_model_filepath).graph.node]
                fops = [n.op_type for n in float_model.graph.node]
                folded = {k: opt.count(k) for k in ("QLinearConv", "QGemm", "QLinearMatMul")}
                check(folded == {"QLinearConv": fops.count("Conv"), "QGemm": fops.count("Gemm"),
                                 "QLinearMatMul": fops.count("MatMul")}
                      and not {"Conv", "Gemm", "MatMul"} & set(opt),
                      f"{what} {method} --quantize-outputs: onnxruntime's optimized graph {folded}")
            fs = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            # The uint8-weight twin: onnxruntime's int8-weight products saturate on x86
            # without VNNI (ort_exact.py), which is not the quantization's error.
            twin, _ = uint8_weights_twin(onnx.load(out))
            qs = ort.InferenceSession(twin.SerializeToString(), so,
                                      providers=["CPUExecutionProvider"])
            ref = [run(fs, cal, k) for k in ks]
            got = [run(qs, cal, k) for k in ks]
            err = rel_rms(ref, got)
            check(np.all(np.isfinite(np.concatenate(got))) and err <= bound,
                  f"{what} {method}: onnxruntime QDQ vs float: relative RMS error {err:.4f} "
                  f"(bound {bound}), max abs {max(float(np.abs(a - b).max()) for a, b in zip(ref, got)):.4f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
