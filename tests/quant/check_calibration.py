#!/usr/bin/env python3
"""opc quantize's calibration methods against answers computed here, independently.

A one-layer model (MatMul of the input x (N, 16) by a constant w (16, 4)) is quantized from
calibration folders whose activation distribution is known, and the scale and zero point written
for x are compared with the range each method must find:

- minmax: the exact min and max of the data;
- percentile: numpy's percentiles of the data (the tool reads them from a 2048-bin histogram, so
  each end may sit one bin width, (max - min) / 2048, away);
- entropy: the KL-divergence search (TensorRT's method: magnitude histogram of 2048 bins, the
  candidate threshold's outliers folded into its last bin, quantized to 128 levels for a signed
  tensor or 255 for a non-negative one, expanded over the non-empty bins) written again below
  in numpy, on a Laplace distribution with far outliers, where the threshold must cut them off.

Also: w is int8 with one scale per output column, max |w| / 127, values round(w / scale).
And bad input (an empty folder, a frame of another shape or dtype, an unknown --keep or
--method) is refused with exit 1 and a message naming the file or option.

Exit 0 pass, 1 fail. Usage: check_calibration.py OPC
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BINS = 2048


def model(path, w):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x],
                          [y], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)


def quantize(opc, model_path, data, method, extra=()):
    with tempfile.TemporaryDirectory() as d:
        cal = os.path.join(d, "cal")
        os.mkdir(cal)
        for k, frame in enumerate(np.array_split(data, 4)):
            np.save(os.path.join(cal, f"x-{k:06d}.npy"), frame.reshape(-1, 16).astype(np.float32))
        out = os.path.join(d, "q.onnx")
        r = subprocess.run([opc, "quantize", model_path, "--calibration", cal, "--method", method,
                            *extra, "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"opc quantize --method {method} exited {r.returncode}: "
                               f"{r.stdout}{r.stderr}")
        m = onnx.load(out)
        onnx.checker.check_model(m)
        inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        return m, inits


def x_params(inits):
    return float(inits["x_scale"]), int(inits["x_zero_point"])


def expected_uint8(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
    zp = int(np.clip(np.rint(-np.float32(lo) / scale), 0, 255))
    return float(scale), zp


def entropy_threshold_bin(hist, levels):
    """The KL search, written independently of the tool's C++."""
    bins = len(hist)
    best, best_i = np.inf, bins
    for i in range(levels, bins + 1):
        p = hist[:i].astype(np.float64).copy()
        p[i - 1] += hist[i:].sum()
        level = (np.arange(i, dtype=np.int64) * levels) // i
        nonzero = hist[:i] != 0
        sums = np.bincount(level, weights=hist[:i], minlength=levels)
        counts = np.bincount(level, weights=nonzero.astype(np.float64), minlength=levels)
        q = np.where(nonzero, sums[level] / np.maximum(counts[level], 1), 0.0)
        if p.sum() == 0 or q.sum() == 0:
            continue
        p /= p.sum()
        q /= q.sum()
        m = p > 0
        if np.any(q[m] == 0):
            continue
        kl = float(np.sum(p[m] * np.log(p[m] / q[m])))
        if kl < best:
            best, best_i = kl, i
    return best_i


def entropy_range(data):
    data = data.astype(np.float32)
    absmax = float(max(-data.min(), data.max()))
    width = absmax / BINS
    idx = np.clip(np.floor(np.abs(data).astype(np.float64) / width), 0, BINS - 1).astype(np.int64)
    hist = np.bincount(idx, minlength=BINS).astype(np.float64)
    levels = 128 if data.min() < 0 else 255
    t = absmax / BINS * entropy_threshold_bin(hist, levels)
    return max(float(data.min()), -t), min(float(data.max()), t)


def main():
    opc = sys.argv[1]
    rng = np.random.default_rng(15)
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok: " if ok else "FAIL: ") + what)
        failures += 0 if ok else 1

    with tempfile.TemporaryDirectory() as d:
        mpath = os.path.join(d, "mm.onnx")
        w = rng.normal(0, 1, (16, 4)).astype(np.float32)
        w[:, 2] *= 10  # a wide column: per-channel scales must differ
        model(mpath, w)

        # min-max, and the weights.
        data = rng.uniform(-1.0, 3.0, 16 * 4000).astype(np.float32)
        m, inits = quantize(opc, mpath, data, "minmax")
        got = x_params(inits)
        want = expected_uint8(float(data.min()), float(data.max()))
        check(abs(got[0] - want[0]) <= 1e-7 * want[0] and got[1] == want[1],
              f"minmax: x scale {got[0]:.8g} zp {got[1]}, want {want[0]:.8g} zp {want[1]}")
        wq, ws = inits["w_quantized"], inits["w_scale"]
        want_ws = np.abs(w).max(axis=0) / np.float32(127)
        want_wq = np.clip(np.rint(w / want_ws), -127, 127).astype(np.int8)
        check(wq.dtype == np.int8 and ws.shape == (4,) and np.allclose(ws, want_ws, rtol=1e-6)
              and np.array_equal(wq, want_wq),
              f"weights: int8 {wq.dtype}, per-column scales {ws} = max|w|/127")
        dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and "w_quantized" in n.input]
        axis = [a.i for a in dq[0].attribute if a.name == "axis"] if dq else []
        check(axis == [1], f"weights: DequantizeLinear axis {axis} (MatMul's output columns)")

        # percentile, with outliers on both sides.
        data = rng.normal(0.5, 1.0, 16 * 4000).astype(np.float32)
        data[:8] = 40.0
        data[8:16] = -25.0
        p = 99.9
        m, inits = quantize(opc, mpath, data, "percentile", ["--percentile", str(p)])
        scale, zp = x_params(inits)
        lo_got, hi_got = -zp * scale, (255 - zp) * scale
        lo_want, hi_want = np.percentile(data.astype(np.float64), [100 - p, p])
        binw = (float(data.max()) - float(data.min())) / BINS
        # One bin width for the histogram, one step (scale) for the zero point's rounding.
        tol = binw + scale
        check(abs(lo_got - lo_want) <= tol and abs(hi_got - hi_want) <= tol,
              f"percentile {p}: range [{lo_got:.4f}, {hi_got:.4f}], numpy [{lo_want:.4f}, "
              f"{hi_want:.4f}] (tolerance {tol:.4f})")

        # entropy: signed Laplace with far outliers, and a one-sided (ReLU-like) one.
        for name, data in (
                ("signed", np.concatenate([rng.laplace(0, 1, 16 * 4000 - 16),
                                           np.full(16, 60.0)]).astype(np.float32)),
                ("non-negative", np.concatenate([np.abs(rng.laplace(0, 1, 16 * 4000 - 16)),
                                                 np.full(16, 60.0)]).astype(np.float32))):
            rng.shuffle(data)
            m, inits = quantize(opc, mpath, data, "entropy")
            got = x_params(inits)
            lo, hi = entropy_range(data)
            want = expected_uint8(lo, hi)
            check(abs(got[0] - want[0]) <= 1e-5 * want[0] and abs(got[1] - want[1]) <= 1,
                  f"entropy ({name}): x scale {got[0]:.6g} zp {got[1]}, the KL search here gives "
                  f"{want[0]:.6g} zp {want[1]} (range [{lo:.3f}, {hi:.3f}])")
            check(hi < 0.5 * float(data.max()),
                  f"entropy ({name}): threshold {hi:.3f} cuts off the outliers at {data.max():.0f}")

        # Bad input: one line naming the file or option, exit 1, no crash.
        def refused(what, files, extra, want):
            with tempfile.TemporaryDirectory() as cal:
                for name, arr in files.items():
                    np.save(os.path.join(cal, name), arr)
                r = subprocess.run([opc, "quantize", mpath, "--calibration", cal, *extra, "-o",
                                    os.path.join(d, "x.onnx")], capture_output=True, text=True)
                check(r.returncode == 1 and want in r.stderr,
                      f"{what}: exit {r.returncode}, {r.stderr.strip()}")

        good = np.zeros((4, 16), np.float32)
        refused("empty calibration folder", {}, [], "x-NNNNNN.npy")
        refused("a later frame of another shape",
                {"x-000000.npy": good, "x-000001.npy": np.zeros((4, 17), np.float32)}, [],
                "x-000001.npy: shape (4,17), but the model's input 'x' is (4,16)")
        refused("a frame of another dtype", {"x-000000.npy": good.astype(np.int64)}, [],
                "x-000000.npy: int64, but the model's input 'x' is float32")
        refused("an unknown --keep", {"x-000000.npy": good}, ["--keep", "nosuch"], "'nosuch'")
        refused("an unknown --method", {"x-000000.npy": good}, ["--method", "kl"],
                "minmax, percentile or entropy")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
