#!/usr/bin/env python3
"""A peer runtime serving timed runs of one ONNX model, for tools/bench/run.py.

  peer.py --engine ort|tinygrad MODEL [--threads N] [--fp32-twin]

Same line protocol as op-bench-model --serve: one JSON line after loading ({"load_ms": ...}),
then for each count read from stdin one JSON list of that many run times in milliseconds.
Inputs are random, created once; a run ends when its outputs are computed (for tinygrad, when
the device has synchronised), matching how our runtime is timed.

tinygrad picks its device from the DEV environment variable (DEV=CPU or DEV=CL), so run.py
starts one process per tinygrad device. --fp32-twin runs the model's float32 twin (models/
onnx_util.to_fp32_twin): tinygrad 0.14 cannot compile the float16 models for an OpenCL device
without cl_khr_fp16 (PoCL), and the twin is the arithmetic our runtime does at fp32 storage.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import onnx


def model_inputs(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        out.append((i.name, dims, dtype))
    return out


def random_inputs(path):
    rng = np.random.default_rng(1234)
    feeds = {}
    for name, dims, dtype in model_inputs(path):
        if dtype == np.uint8:
            feeds[name] = rng.integers(0, 256, size=dims, dtype=np.uint8)
        else:
            feeds[name] = rng.standard_normal(dims).astype(dtype)
    return feeds


def ort_runner(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = random_inputs(path)
    return lambda: sess.run(None, feeds)


def tinygrad_runner(path, threads):
    from tinygrad import Device, Tensor, TinyJit
    from tinygrad.nn.onnx import OnnxRunner
    runner = OnnxRunner(path)
    feeds = {k: Tensor(v).realize() for k, v in random_inputs(path).items()}
    names = list(feeds)

    @TinyJit
    def step(*args):
        outs = runner(dict(zip(names, args)))
        return [o.realize() for o in outs.values()]

    dev = Device[Device.DEFAULT]

    def run():
        step(*[feeds[n] for n in names])
        dev.synchronize()
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=["ort", "tinygrad"], required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--fp32-twin", action="store_true",
                    help="run the model's float32 twin (see the module's docstring)")
    ap.add_argument("model")
    a = ap.parse_args()
    t0 = time.perf_counter()
    path = a.model
    if a.fp32_twin:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "models"))
        import onnx_util
        # Removed when the process ends (a full-size twin is tens of megabytes).
        tmp = tempfile.TemporaryDirectory(prefix="peer-twin-")
        path = os.path.join(tmp.name, os.path.basename(a.model))
        onnx.save(onnx_util.to_fp32_twin(onnx.load(a.model)), path)
    run = (ort_runner if a.engine == "ort" else tinygrad_runner)(path, a.threads)
    for _ in range(a.warmup):  # tinygrad's JIT captures on the first runs
        run()
    print(json.dumps({"load_ms": (time.perf_counter() - t0) * 1e3}), flush=True)
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            s = time.perf_counter()
            run()
            times.append((time.perf_counter() - s) * 1e3)
        print(json.dumps(times), flush=True)


if __name__ == "__main__":
    main()
