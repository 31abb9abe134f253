#!/usr/bin/env python3
"""Times the networks on one OpenCL device with our runtime, each code-generation profile and
precision, beside the peers this machine has: onnxruntime (CPU with every core, and CUDA where
its build has that provider; on each model and its float32 twin) and tinygrad (CUDA and OpenCL
devices, where installed). For a machine reached through tools/portable (a GPU server); the
benchmark of record on our own machines is tools/bench/run.sh.

  bench_device.py --build BUILD [--device gpu] [--runs N] [--deadline S] [--json FILE]
                  [--models small|full|all] [--ours LABEL,...]

Our figures are op-bench-model's: enqueue of a run's launches to its last kernel's end, inputs
already on the device, with its load time from empty caches and again from the caches it filled; the peers' are a run's wall time with inputs in host memory (onnxruntime
CPU: the same thing; CUDA peers include their copies, so on a GPU they are an upper bound).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))

MODELS = {
    "small": [("small vision", "models/driving_vision_small.onnx"),
              ("small policy", "models/driving_policy_small.onnx")],
    "full": [("full vision", "models/full/driving_vision_full.onnx"),
             ("full policy", "models/full/driving_policy_full.onnx")],
}
# (label, profile to compile for or None for the device's own options, precision)
OURS = [("ours fp32", None, "fp32"), ("ours fp16", None, "fp16"),
        ("ours amd-profile fp32", "amd", "fp32"), ("ours amd-profile fp16", "amd", "fp16"),
        ("ours adreno-profile fp16", "adreno", "fp16")]


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def ours(build, model, profile, precision, device, runs, tmp, limit):
    t0 = time.monotonic()
    path = model
    if profile:
        path = os.path.join(tmp, f"{os.path.basename(model)}.{profile}.{precision}.opm")
        p = subprocess.run([os.path.join(build, "tools/opc/opc"), "compile", model, "-o", path,
                            "--device", profile, "--precision", precision],
                           capture_output=True, text=True, timeout=limit)
        if p.returncode != 0:
            return {"error": (p.stderr or p.stdout).strip().splitlines()[-3:]}
    cmd = [os.path.join(build, "tools/bench/op-bench-model"), path, "--device", device,
           "--runs", str(runs), "--warmup", "5", "--cache-dir", os.path.join(tmp, "opm"),
           "--precision", precision]
    p = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=max(5, limit - (time.monotonic() - t0)))
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-3:]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["median_ms"] = statistics.median(r["runs_ms"])
    # A second start from the same caches: our binary cache, and the driver's own (NVIDIA's
    # binaries are PTX, compiled again at load unless its JIT cache holds the result).
    w = subprocess.run(cmd[:cmd.index("--runs")] + ["--runs", "1", "--warmup", "0"] +
                       cmd[cmd.index("--cache-dir"):], capture_output=True, text=True,
                       timeout=max(5, limit - (time.monotonic() - t0)))
    if w.returncode == 0:
        r["warm_load_ms"] = json.loads(w.stdout.strip().splitlines()[-1])["load_ms"]
    r["wall_s"] = time.monotonic() - t0
    return r


def ort_times(path, provider, runs):
    import onnxruntime as ort
    from peer import random_inputs
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() if provider == "CPUExecutionProvider" else 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=[provider])
    if provider not in sess.get_providers():
        raise RuntimeError(f"{provider} not used")
    feeds = random_inputs(path)
    for _ in range(5):
        sess.run(None, feeds)
    ts = []
    for _ in range(runs):
        s = time.perf_counter()
        sess.run(None, feeds)
        ts.append((time.perf_counter() - s) * 1e3)
    return statistics.median(ts)


def tinygrad_times(path, dev, runs, limit):
    peer = os.path.join(ROOT, "tools", "bench", "peer.py")
    env = dict(os.environ, DEV=dev)
    p = subprocess.run([sys.executable, peer, "--engine", "tinygrad", path], input=f"{runs}\n",
                       capture_output=True, text=True, env=env, timeout=limit)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("[")]
    if p.returncode != 0 or not lines:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1:] or "failed")
    return statistics.median(json.loads(lines[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--deadline", type=float, default=600)
    ap.add_argument("--models", choices=["small", "full", "all"], default="all")
    ap.add_argument("--json", default=None)
    ap.add_argument("--ours", default="",
                    help="time only these of our configurations (labels as printed, comma-separated)")
    a = ap.parse_args()
    dl = Deadline(a.deadline)
    os.chdir(ROOT)
    models = MODELS["small"] + MODELS["full"] if a.models == "all" else MODELS[a.models]
    models = [(n, m) for n, m in models if os.path.exists(m)]
    try:
        import onnxruntime as ort
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider")
                     if p in ort.get_available_providers()]
    except ImportError:
        providers = []
    try:
        import tinygrad  # noqa: F401
        tg_devs = ["CUDA", "CL"]
    except ImportError:
        tg_devs = []
    print(f"bench: onnxruntime providers {providers or 'none'}, tinygrad devices "
          f"{tg_devs or 'none'}", flush=True)

    import onnx
    import onnx_util
    tmp = tempfile.mkdtemp(prefix="bench-device-")
    ours_cfg = OURS
    if a.ours:
        wanted = [w.strip() for w in a.ours.split(",") if w.strip()]
        ours_cfg = [c for c in OURS if c[0] in wanted]
        unknown = set(wanted) - {c[0] for c in OURS}
        if unknown:
            sys.exit(f"bench: unknown configuration(s) {sorted(unknown)}; "
                     f"known: {[c[0] for c in OURS]}")
    results = {}
    for name, model in models:
        row = results.setdefault(name, {})
        for label, profile, prec in ours_cfg:
            if dl.left() < 20:
                row[label] = {"error": ["deadline"]}
                continue
            try:
                row[label] = ours(a.build, model, profile, prec, a.device, a.runs, tmp,
                                  min(180, dl.left()))
            except subprocess.TimeoutExpired:
                row[label] = {"error": ["timed out"]}
            r = row[label]
            print(f"{name:13s} {label:26s} " + (f"{r['median_ms']:9.3f} ms  (load {r['load_ms']:.0f} ms, "
                  f"again {r.get('warm_load_ms', float('nan')):.0f} ms, "
                  f"{r.get('device', '')})" if "median_ms" in r else f"error: {r['error']}"),
                  flush=True)
        twin = os.path.join(tmp, os.path.basename(model).replace(".onnx", ".fp32.onnx"))
        onnx.save(onnx_util.to_fp32_twin(onnx.load(model)), twin)
        for prov in providers:
            short = "ort cuda" if prov.startswith("CUDA") else f"ort cpu {os.cpu_count()}t"
            for tag, path in (("", model), (" fp32 twin", twin)):
                label = short + tag
                if dl.left() < 20:
                    row[label] = {"error": ["deadline"]}
                    continue
                try:
                    row[label] = {"median_ms": ort_times(path, prov, a.runs)}
                except Exception as e:  # noqa: BLE001 - reported, the run goes on
                    row[label] = {"error": [str(e)[:200]]}
                print(f"{name:13s} {label:26s} {row[label]}", flush=True)
        for dev in tg_devs:
            for tag, path in (("", model), (" fp32 twin", twin)):
                label = f"tinygrad {dev}{tag}"
                if dl.left() < 30:
                    row[label] = {"error": ["deadline"]}
                    continue
                try:
                    row[label] = {"median_ms": tinygrad_times(path, dev, a.runs,
                                                              min(180, dl.left()))}
                except Exception as e:  # noqa: BLE001
                    row[label] = {"error": [str(e)[:200]]}
                print(f"{name:13s} {label:26s} {row[label]}", flush=True)
        os.remove(twin)

    print("\n| network | ours best | which | peer best | which | peer / ours |")
    print("|---|---|---|---|---|---|")
    for name, row in results.items():
        def best(prefix_ours):
            xs = [(r["median_ms"], k) for k, r in row.items()
                  if "median_ms" in r and k.startswith("ours") == prefix_ours]
            return min(xs) if xs else (None, "-")
        o, ok = best(True)
        p, pk = best(False)
        ratio = f"{p / o:.2f}" if o and p else "-"
        fo = f"{o:.3f} ms" if o else "-"
        fp = f"{p:.3f} ms" if p else "-"
        print(f"| {name} | {fo} | {ok} | {fp} | {pk} | {ratio} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
