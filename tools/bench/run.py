#!/usr/bin/env python3
"""The benchmark: us and the peers on the same work, in the same run, on this machine.

  tools/bench/run.sh            (sets everything up, then runs this)
  run.py --build build [--quick] [--no-tinygrad] [--threads N] [--out docs/benchmarks.md]
  run.py --build build --only int8 [--quick]   (the int8 rows alone, printed)

Prints one table per section and writes them, with the machine's description, to
docs/benchmarks.md. No figure is typed by hand: every number below comes from this run.
Peers run interleaved with ours (round by round) so that machine noise hits both sides.

onnxruntime runs twice per model: on the model as given (float16 weights: on the CPU it cannot
compute most ops in float16 and inserts casts around them) and on the model's float32 twin (the
arithmetic our runtime does at fp32 storage). Our ratio is stated against the faster of the two,
so that a handicapped peer never makes us look fast.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python3")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def median_p90(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]


def ratio(ours, peer):
    """Our time as a ratio of the peer's, saying which side is faster."""
    if ours is None or peer is None:
        return "n/a"
    r = ours / peer
    return f"{r:.2f}× ({'we are faster' if r < 1 else 'peer is faster'})"


class Worker:
    """A process speaking the line protocol of op-bench-model --serve / peer.py."""

    def __init__(self, name, cmd, env=None):
        self.name = name
        self.times = []
        self.error = None
        self.info = {}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})

    def ready(self, timeout):
        line = self.proc.stdout.readline()
        if not line:
            self.error = (self.proc.stderr.read() or "exited").strip().splitlines()[-1:]
            self.error = self.error[0] if self.error else "exited"
            return False
        self.info = json.loads(line)
        return True

    def run(self, n):
        if self.error:
            return
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.error = "worker exited"
            return
        self.times += json.loads(line)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()


def machine(build):
    cpu = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    dev = "none"
    try:
        # "Platform #0: NAME" then " `-- Device #0: NAME" lines → "NAME: NAME; ..."
        out = sh(["clinfo", "--list"])
        devs, platform_name = [], ""
        for line in out.splitlines():
            name = line.split(":", 1)[1].strip() if ":" in line else ""
            if line.startswith("Platform"):
                platform_name = name
            elif name:
                devs.append(f"{platform_name}: {name}")
        dev = "; ".join(devs) or "none"
    except Exception:
        pass
    drv, fp16, dev_vec = "", False, None
    try:
        info = sh(["clinfo"])
        m = re.search(r"Driver Version\s+(.+)", info)
        drv = m.group(1).strip() if m else ""
        fp16 = "cl_khr_fp16" in info
        # "Preferred / native vector sizes" is followed by one "type  P / N" line per type.
        m = re.search(r"Preferred / native vector sizes.*?\n(?:.*\n)*?\s+float\s+(\d+) / (\d+)",
                      info)
        dev_vec = (int(m.group(1)), int(m.group(2))) if m else None
    except Exception:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "opencl": dev, "driver": drv, "fp16": fp16, "isa": cpu_vector_isa(),
            "device_vector": dev_vec}


def cpu_vector_isa():
    """The widest fp32 vector unit the CPU reports in /proc/cpuinfo's flags."""
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if "avx512f" in flags:
        return "AVX-512 (16 fp32 lanes)"
    if "avx2" in flags and "fma" in flags:
        return "AVX2 + FMA (8 fp32 lanes)"
    if "avx" in flags:
        return "AVX (8 fp32 lanes, no FMA)"
    return "SSE or narrower (4 fp32 lanes)"


def peak(build):
    out = sh([os.path.join(build, "tools/bench/op-peak-flops"), "--seconds", "0.5"])
    rows = dict(re.findall(r"threads (\d+): ([\d.]+) GFLOP/s", out))
    isa = re.search(r"isa ([^,\s]+), (\d+) accumulators", out)
    return f"{isa.group(1)}, {isa.group(2)}", {int(k): float(v) for k, v in rows.items()}


def rotated(workers, r):
    """Round r's order: the engines in turn, starting one further each round, so that no engine
    always runs right after the same one (a thread pool spinning on after its runs, or a cache
    another engine just filled, would otherwise always cost the same engine)."""
    k = r % len(workers)
    return workers[k:] + workers[:k]


ROUND_MS = 100.0
MAX_PER_ROUND = 200


def networks(build, models, rounds, per_round, threads, tinygrad_devs, opencl_fp16, log):
    results = []
    for model in models:
        path = os.path.join(ROOT, model)
        if not os.path.exists(path):
            results.append({"model": model, "missing": True})
            continue
        log(f"networks: {model}: loading us and the peers")
        workers = [Worker("ours", [os.path.join(build, "tools/bench/op-bench-model"), path,
                                   "--serve", "--warmup", "3"])]
        peer = [VENV_PY, os.path.join(ROOT, "tools/bench/peer.py")]
        # The model as given (float16: onnxruntime's CPU provider casts around most ops) and
        # its float32 twin; the report compares us with the faster of the two.
        workers.append(Worker("onnxruntime", peer + ["--engine", "ort", "--threads",
                                                     str(threads), path]))
        workers.append(Worker("onnxruntime (fp32 twin)",
                              peer + ["--engine", "ort", "--threads", str(threads),
                                      "--fp32-twin", path]))
        for dev in tinygrad_devs:
            # tinygrad cannot compile float16 models for an OpenCL device without half
            # support (PoCL): its CL backend runs the float32 twin, the arithmetic we do at
            # fp32 storage.
            twin = dev == "CL" and not opencl_fp16
            workers.append(Worker(f"tinygrad {dev}" + (" (fp32 twin)" if twin else ""),
                                  [VENV_PY, os.path.join(ROOT, "tools/bench/peer.py"),
                                   "--engine", "tinygrad", path] + (["--fp32-twin"] if twin else []),
                                  env={"DEV": dev}))
        for w in workers:
            w.ready(timeout=None)
        # Runs per round: at least per_round, more for fast models, so that a round of the
        # slowest engine lasts about ROUND_MS (a sub-millisecond model's median over 20 runs on
        # a shared machine moved by a third between benchmark runs). One probe run per engine
        # sets the count, the same for all.
        probe = []
        for w in workers:
            w.run(1)
            if w.times:
                probe.append(w.times.pop())
        n = per_round
        if probe:
            n = max(per_round, min(MAX_PER_ROUND, int(ROUND_MS / max(max(probe), 1e-3))))
        for r in range(rounds):
            for w in rotated(workers, r):
                w.run(n)
        for w in workers:
            w.close()
        ours = workers[0]
        row = {"model": model, "flops": ours.info.get("flops"), "peers": {}, "per_round": n}
        for w in workers:
            if w.error or not w.times:
                row["peers"][w.name] = {"error": w.error or "no runs"}
            else:
                med, p90 = median_p90(w.times)
                row["peers"][w.name] = {"median": med, "p90": p90, "runs": len(w.times),
                                        "load_ms": w.info.get("load_ms")}
        row["arena_bytes"] = ours.info.get("arena_bytes")
        row["intermediate_bytes"] = ours.info.get("intermediate_bytes")
        results.append(row)
    return results


def layer_weight_bytes(path, ops=("Conv", "Gemm", "MatMul")):
    """Bytes of a model's layer weights (the constant second input of its Conv / Gemm / MatMul,
    or the integer tensor of the DequantizeLinear feeding it), as stored and as float32."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    weights = set()
    for n in m.graph.node:
        if n.op_type not in ops or len(n.input) < 2:
            continue
        i = n.input[1]
        p = producer.get(i)
        if p is not None and p.op_type == "DequantizeLinear":
            i = p.input[0]
        if i in inits:
            weights.add(i)
    return (sum(inits[w].nbytes for w in weights), sum(4 * inits[w].size for w in weights))


def int8(build, rounds, per_round, threads, log):
    """The full-size vision model quantized by opc quantize (calibrated on the sample drive's
    first frames) against its float original: ours at int8 and fp32, onnxruntime on the same
    QDQ model, interleaved round by round; and the layers' weight bytes."""
    vision = os.path.join(ROOT, "models/full/driving_vision_full.onnx")
    policy = os.path.join(ROOT, "models/full/driving_policy_full.onnx")
    if not (os.path.exists(vision) and os.path.exists(policy)):
        return None
    with tempfile.TemporaryDirectory() as d:
        cal, qdq = os.path.join(d, "cal"), os.path.join(d, "vision.int8.onnx")
        log("int8: calibration inputs (opreplay --dump-inputs, 4 frames) and opc quantize")
        sh([os.path.join(build, "tools/opreplay/opreplay"), os.path.join(ROOT, "samples/drive"),
            "--vision", vision, "--policy", policy, "--rpy", sample_rpy(), "--max-frames", "4",
            "--no-video", "--out", os.path.join(d, "replay"), "--dump-inputs", cal],
           env={**os.environ, "GST_PLUGIN_PATH": os.path.join(build, "plugins")})
        sh([os.path.join(build, "tools/opc/opc"), "quantize", vision, "--calibration", cal,
            "--method", "minmax", "--quantize-outputs", "-o", qdq])
        exe = os.path.join(build, "tools/bench/op-bench-model")
        peer = [VENV_PY, os.path.join(ROOT, "tools/bench/peer.py"), "--engine", "ort",
                "--threads", str(threads)]
        workers = [Worker("ours int8 (QDQ model)", [exe, qdq, "--serve", "--warmup", "3",
                                                    "--precision", "int8"]),
                   Worker("ours fp32 (float model)", [exe, vision, "--serve", "--warmup", "3",
                                                      "--precision", "fp32"]),
                   Worker("onnxruntime (QDQ model)", peer + [qdq]),
                   Worker("onnxruntime (float32 twin)", peer + ["--fp32-twin", vision])]
        for w in workers:
            w.ready(timeout=None)
        log(f"int8: {rounds} rounds")
        for r in range(rounds):
            for w in rotated(workers, r):
                w.run(per_round)
        for w in workers:
            w.close()
        rows = {}
        for w in workers:
            if w.error or not w.times:
                rows[w.name] = {"error": w.error or "no runs"}
            else:
                med, p90 = median_p90(w.times)
                rows[w.name] = {"median": med, "p90": p90, "runs": len(w.times)}
        sizes = {"float": layer_weight_bytes(vision), "int8": layer_weight_bytes(qdq)}
    return {"rows": rows, "sizes": sizes, "load": os.getloadavg()}


def int8_section(res, threads, rounds, per_round):
    if res is None:
        return "not measured: models/full/ is missing (generate with models/generate.py)"
    rows = res["rows"]

    def med(name):
        return rows.get(name, {}).get("median")

    lines = [f"driving_vision_full.onnx quantized by `opc quantize --method minmax "
             f"--quantize-outputs` on the sample drive's first 4 frames (`opreplay "
             f"--dump-inputs`): per-channel int8 weights, uint8 activations, every layer "
             f"DQ → Conv/Gemm/MatMul → Q. Random inputs, batch 1; {rounds} rounds × "
             f"{per_round} runs per engine, interleaved (each round starting one engine further); onnxruntime with {threads} threads. "
             f"Load average during the run: {', '.join(f'{x:.1f}' for x in res['load'])}.", "",
             "| engine | median ms | p90 ms |", "|---|---|---|"]
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error'][:80]} | |")
        else:
            lines.append(f"| {name} | {r['median']:.2f} | {r['p90']:.2f} |")
    ours8, ours32 = med("ours int8 (QDQ model)"), med("ours fp32 (float model)")
    ort8 = med("onnxruntime (QDQ model)")
    lines += ["", "| comparison | measured | target |", "|---|---|---|"]
    sp = f"{ours32 / ours8:.2f}×" if ours8 and ours32 else "n/a"
    lines.append(f"| our int8 speed ÷ our fp32 speed | {sp} | ≥ 1.5× |")
    so = f"{ort8 / ours8:.2f}×" if ours8 and ort8 else "n/a"
    lines.append(f"| our int8 speed ÷ onnxruntime's on the QDQ model | {so} | ≥ 1.0× |")
    (fw, f32), (qw, _) = res["sizes"]["float"], res["sizes"]["int8"]
    lines += ["", "| layer weights (Conv / Gemm / MatMul) | bytes | float32 twin ÷ this |",
              "|---|---|---|",
              f"| float model as given | {fw:,} | {f32 / fw:.2f}× |",
              f"| float32 twin | {f32:,} | 1.00× |",
              f"| QDQ int8 model | {qw:,} | {f32 / qw:.2f}× (target 4×) |"]
    return "\n".join(lines)


def startup(build, model, log):
    """Load-to-ready time: nothing cached (ONNX import, code generation and every OpenCL
    program built), everything cached (compiled model and program binaries on disk), and a
    compiled .opm with the program binaries cached."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        exe = os.path.join(build, "tools/bench/op-bench-model")
        for label in ("ONNX, nothing cached", "ONNX, cached"):
            log(f"start-up: {model}: {label}")
            j = json.loads(sh([exe, os.path.join(ROOT, model), "--runs", "1", "--warmup", "0"],
                              env=env))
            out[label] = j["load_ms"]
        opm = os.path.join(cache, "model.opm")
        opc = os.path.join(build, "tools/opc/opc")
        try:
            sh([opc, "compile", os.path.join(ROOT, model), "-o", opm], env=env)
            j = json.loads(sh([exe, opm, "--runs", "1", "--warmup", "0"], env=env))
            out["compiled .opm, programs cached"] = j["load_ms"]
        except Exception as e:
            out["compiled .opm, programs cached"] = None
            log(f"start-up: .opm not measured: {e}")
    return out


def messages(build, log):
    """opmsgsink's serialization rate: parse, fill, frame and write three messages per frame."""
    exe = os.path.join(build, "tests/messages/bench-msgsink")
    rows = []
    frames = 2000
    with tempfile.TemporaryDirectory() as d:
        for label, path in (("log to /dev/null", None), ("plain log", os.path.join(d, "rlog")),
                            ("zstd log (level 10)", os.path.join(d, "rlog.zst"))):
            log(f"messages: {label}")
            out = sh([exe, path or "/dev/null", str(frames)])
            ms = float(re.search(r"([\d.]+) ms per frame", out).group(1))
            size = os.path.getsize(path) if path else None
            rows.append((label, ms, 3 * 1000.0 / ms, size / (3 * frames) if size else None))
    return rows


def sample_rpy():
    gt = os.path.join(ROOT, "samples/drive/groundtruth.json")
    with open(gt) as f:
        return ",".join(str(v) for v in json.load(f)["drive"]["calibration_rpy"])


def timed(cmd, env=None):
    """Wall seconds, peak resident memory (KiB) and output of one child process."""
    with tempfile.TemporaryFile(mode="w+") as out:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {text.strip()[-400:]}")
    return wall, usage.ru_maxrss, text


def pipeline(build, vision, policy, frames, log):
    """The sample drive, both cameras: once as a gst-launch-1.0 line, once through opreplay."""
    # The networks log their statistics at stop (INFO): the stage times of a gst-launch run.
    env = {"GST_PLUGIN_PATH": os.path.join(build, "plugins"),
           "GST_DEBUG": "opvision:4,oppolicy:4", "GST_DEBUG_NO_COLOR": "1"}
    rpy = sample_rpy()
    drive = os.path.join(ROOT, "samples/drive")
    rows = {}

    def stage_times(text):
        found = {}
        for name in ("opvision", "oppolicy"):
            m = re.search(name + r" .*?(\d+) frames: device time ([\d.]+) ms per frame; "
                          r"submission to completion ([\d.]+) ms", text)
            if m:
                found[name] = (float(m.group(2)), float(m.group(3)))
        if len(found) < 2:
            return "—"
        (vd, vs), (pd, ps) = found["opvision"], found["oppolicy"]
        return (f"device time: vision {vd:.2f}, policy {pd:.2f}; submission to completion: "
                f"vision {vs:.2f}, policy {ps:.2f} (element logs)")
    with tempfile.TemporaryDirectory() as d:
        def launch(n_frames):
            # filesrc has no frame count: cut the streams with identity's eos-after.
            cut = f"identity eos-after={n_frames} ! " if n_frames else ""
            line = (f"filesrc location={drive}/fcamera.hevc ! h265parse ! avdec_h265 ! {cut}"
                    f"queue ! videoconvert ! video/x-raw,format=NV12 ! opwarp rpy={rpy} ! net.img "
                    f"filesrc location={drive}/ecamera.hevc ! h265parse ! avdec_h265 ! {cut}"
                    f"queue ! videoconvert ! video/x-raw,format=NV12 ! opwarp model-input=big_img rpy={rpy} ! "
                    f"net.big_img "
                    f"opvision name=net model={vision} ! oppolicy model={policy} ! "
                    f"opmsgsink location={d}/rlog.zst sync=false")
            return timed(["gst-launch-1.0", "-q"] + line.split(), env)

        log("pipeline: gst-launch-1.0 (warming the model cache)")
        launch(5)
        log(f"pipeline: gst-launch-1.0, {frames} frames and 20 frames")
        t_all, rss, text = launch(0 if frames >= 200 else frames)
        t_20, _, _ = launch(20)
        n = 200 if frames >= 200 else frames
        rows["gst-launch-1.0"] = {"wall_s": t_all, "fps": n / t_all,
                                  "fps_steady": (n - 20) / max(1e-9, t_all - t_20), "rss": rss,
                                  "stages": stage_times(text)}
        log("pipeline: opreplay")
        wall, rss2, out = timed([os.path.join(build, "tools/opreplay/opreplay"), drive,
                                 "--vision", vision, "--policy", policy, "--rpy", rpy,
                                 "--no-video", "--out", d] +
                                (["--max-frames", str(frames)] if frames < 200 else []), env)
        m = re.search(r"speed\s+([\d.]+) frames/s", out)
        stages = re.search(r"ms per frame\s+(.+)", out)
        rows["opreplay"] = {"wall_s": wall, "fps": float(m.group(1)) if m else None,
                            "stages": stages.group(1).strip() if stages else "", "rss": rss2}
    return rows


def first_message(build, vision, policy, log):
    """Time to the first message of a one-frame replay: ONNX with empty caches, ONNX from the
    caches, compiled .opm models. Each row gives opreplay's own figure (its start to the first
    message written, its summary's "first message") and the process's wall time (start-up,
    replay and shutdown); the warm rows are the median of three runs.

    "Caches" are the model's: our compiled-model and program-binary caches and PoCL's kernel
    cache, all under an empty XDG_CACHE_HOME. GStreamer's registry (its list of plugins, built
    once per machine and plugin set, whatever the model) is built before the timed runs, in a
    file of its own (GST_REGISTRY), as a user who opens a never-seen model has it; one more row
    times the cold start with the registry rebuilt too."""
    rpy = sample_rpy()
    drive = os.path.join(ROOT, "samples/drive")
    exe = os.path.join(build, "tools/opreplay/opreplay")
    opc = os.path.join(build, "tools/opc/opc")
    out = {}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as d, \
            tempfile.TemporaryDirectory() as reg, tempfile.TemporaryDirectory() as cold:
        env = {"GST_PLUGIN_PATH": os.path.join(build, "plugins"), "XDG_CACHE_HOME": cache,
               "GST_REGISTRY": os.path.join(reg, "registry.bin")}
        sh(["gst-inspect-1.0", "opwarp"], env={**os.environ, **env})  # builds the registry

        def replay(v, p, runs=1, env=env):
            firsts, walls = [], []
            for _ in range(runs):
                wall, _, text = timed([exe, drive, "--vision", v, "--policy", p, "--rpy", rpy,
                                       "--no-video", "--max-frames", "1", "--out", d], env)
                m = re.search(r"^\s*first message\s+([\d.]+) s", text, re.M)
                firsts.append(float(m.group(1)) * 1e3 if m else None)
                walls.append(wall * 1e3)
            firsts = [f for f in firsts if f is not None]
            return (statistics.median(firsts) if firsts else None, statistics.median(walls))

        log("start-up: ONNX, empty caches")
        out["ONNX, caches empty (import, codegen, OpenCL builds)"] = replay(vision, policy)
        log("start-up: ONNX, empty caches and GStreamer's registry")
        out["ONNX, caches and GStreamer's registry empty"] = replay(
            vision, policy,
            env={**env, "XDG_CACHE_HOME": cold, "GST_REGISTRY": os.path.join(cold, "registry.bin")})
        log("start-up: ONNX, from the caches")
        out["ONNX, from the caches"] = replay(vision, policy, 3)
        vo, po = os.path.join(d, "v.opm"), os.path.join(d, "p.opm")
        sh([opc, "compile", vision, "-o", vo], env={**os.environ, **env})
        sh([opc, "compile", policy, "-o", po], env={**os.environ, **env})
        log("start-up: compiled .opm")
        out["compiled .opm (OpenCL binaries cached)"] = replay(vo, po, 3)
    return out


def write_report(path, sections):
    with open(path, "w") as f:
        f.write("# Benchmarks\n\n")
        f.write("Produced by `tools/bench/run.sh` (see the README); every figure comes from one "
                "run of that command on the machine described below. Nothing here is typed by "
                "hand: rerun the command to refresh it.\n\n")
        for title, body in sections:
            f.write(f"## {title}\n\n{body}\n\n")


def fmt_ms(x):
    """A time in milliseconds: three decimals under 1 ms (the small policy's), else two."""
    return "—" if x is None else f"{x:.3f}" if x < 1 else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--quick", action="store_true", help="small models only, fewer runs")
    ap.add_argument("--no-tinygrad", action="store_true")
    ap.add_argument("--only", choices=["int8"], default=None,
                    help="run one section and print it (docs/benchmarks.md is left alone)")
    ap.add_argument("--threads", type=int, default=None,
                    help="onnxruntime's threads (default: the CPU count, which PoCL uses)")
    a = ap.parse_args()
    t_start = time.time()

    def log(msg):
        print(f"[{time.time() - t_start:6.0f}s] {msg}", file=sys.stderr, flush=True)

    sections = []
    m = machine(a.build)
    threads = a.threads or m["cores"]
    if a.only == "int8":
        rounds, per_round = (3, 3) if a.quick else (5, 4)
        i8 = int8(a.build, rounds, per_round, threads, log)
        print(f"## int8 (full-size vision)\n\n{int8_section(i8, threads, rounds, per_round)}")
        return
    log("peak FMA throughput")
    isa, pk = peak(a.build)
    peak_all = pk[max(pk)]
    dv = m["device_vector"]
    sections.append(("Machine", "\n".join([
        f"- CPU: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}",
        f"- Vector unit: {m['isa']} (/proc/cpuinfo); the OpenCL device's preferred / native "
        f"float vector width: " + (f"{dv[0]} / {dv[1]}" if dv else "not reported"),
        f"- Measured peak: {peak_all:.1f} GFLOP/s fp32 with {max(pk)} threads (FMA loop below)",
        f"- OpenCL: {m['opencl']} (driver {m['driver']})",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"])))
    sections.append(("Peak fp32 throughput (FMA loop)", "\n".join(
        [f"Measured in this run with {isa} independent accumulators per thread.", "",
         "| threads | GFLOP/s |", "|---|---|"] +
        [f"| {t} | {g:.1f} |" for t, g in sorted(pk.items())])))

    small = ["models/driving_vision_small.onnx", "models/driving_policy_small.onnx"]
    full = ["models/full/driving_vision_full.onnx", "models/full/driving_policy_full.onnx"]
    models = small if a.quick else small + full
    tg = [] if a.no_tinygrad else ["CPU", "CL"]
    rounds, per_round = (3, 3) if a.quick else (5, 4)
    res = networks(a.build, models, rounds, per_round, threads, tg, m["fp16"], log)
    lines = [f"Batch 1, fp32 storage for ours, random inputs. {rounds} rounds per engine, "
             f"engines interleaved round by round, each round starting one engine further; each round {per_round} runs or more, as many "
             f"as fill about {ROUND_MS:.0f} ms of the slowest engine (at most {MAX_PER_ROUND}; "
             f"runs per round in the table). onnxruntime on the CPU with "
             f"{threads} threads; tinygrad {', '.join('DEV=' + d for d in tg) or '(skipped)'} "
             f"with TinyJit" + ("" if m["fp16"] or "CL" not in tg else
                                "; tinygrad CL runs each model's float32 twin (float16 "
                                "initializers widened, casts to half made casts to float): it "
                                "cannot compile float16 models for this OpenCL device, which "
                                "has no cl_khr_fp16, and the twin is the arithmetic our runtime "
                                "does at fp32 storage") +
             ". onnxruntime runs the model as given (float16 weights: its CPU provider computes "
             "most ops in float32 and inserts casts around them) and the model's float32 twin. "
             "Ratio = our median / peer median; the summary below compares us with the faster "
             "onnxruntime figure.", "",
             "| model | engine | median ms | p90 ms | runs | GFLOP/s | % of peak | our time ÷ peer's |",
             "|---|---|---|---|---|---|---|---|"]
    for row in res:
        if row.get("missing"):
            lines.append(f"| {row['model']} | — | not present (generate with models/generate.py) "
                         f"| | | | | |")
            continue
        ours = row["peers"]["ours"].get("median")
        for name, p in row["peers"].items():
            if "error" in p:
                lines.append(f"| {os.path.basename(row['model'])} | {name} | failed: "
                             f"{p['error'][:80]} | | | | | |")
                continue
            gf = row["flops"] / (p["median"] * 1e6) if row["flops"] else None
            lines.append(f"| {os.path.basename(row['model'])} | {name} | {fmt_ms(p['median'])} | "
                         f"{fmt_ms(p['p90'])} | {p['runs']} | {gf:.1f} | {100 * gf / peak_all:.1f}% | "
                         f"{'—' if name == 'ours' else ratio(ours, p['median'])} |")
    lines += ["", "Against onnxruntime's faster figure (model as given or float32 twin):", "",
              "| model | ours ms | onnxruntime's faster ms | which | our time ÷ onnxruntime's |",
              "|---|---|---|---|---|"]
    for row in res:
        if row.get("missing"):
            continue
        ours = row["peers"]["ours"].get("median")
        orts = [(p["median"], name) for name, p in row["peers"].items()
                if name.startswith("onnxruntime") and "median" in p]
        if not orts or ours is None:
            lines.append(f"| {os.path.basename(row['model'])} | {fmt_ms(ours)} | — | "
                         f"not measured | n/a |")
            continue
        best, which = min(orts)
        lines.append(f"| {os.path.basename(row['model'])} | {fmt_ms(ours)} | {fmt_ms(best)} | {which} | "
                     f"{ratio(ours, best)} |")
    sections.append(("Networks", "\n".join(lines)))

    mem = ["| model | FLOPs per run | arena bytes | sum of intermediates | arena ÷ sum |",
           "|---|---|---|---|---|"]
    for row in res:
        if row.get("missing") or not row.get("arena_bytes"):
            continue
        mem.append(f"| {os.path.basename(row['model'])} | {row['flops']:,} | "
                   f"{row['arena_bytes']:,} | {row['intermediate_bytes']:,} | "
                   f"{row['arena_bytes'] / row['intermediate_bytes']:.2f} |")
    sections.append(("Memory plan", "\n".join(mem)))

    if not a.quick:
        i8 = int8(a.build, rounds, per_round, threads, log)
        sections.append(("int8 (full-size vision)", int8_section(i8, threads, rounds, per_round)))

    su = startup(a.build, small[0], log)
    sections.append(("Network load (load to ready, vision small)", "\n".join(
        ["| from | ms |", "|---|---|"] + [f"| {k} | {fmt_ms(v)} |" for k, v in su.items()])))

    full_ok = all(os.path.exists(os.path.join(ROOT, m)) for m in full) and not a.quick
    vision, policy = (full if full_ok else small)
    vision, policy = os.path.join(ROOT, vision), os.path.join(ROOT, policy)
    which = "full" if full_ok else "small"
    # The warp first: its time per frame is part of what the pipeline's frame rate is held to.
    log("warp")
    warp = os.path.join(a.build, "tools/bench_warp/op-bench-warp")
    warp_section, warp_ms = None, None
    if os.path.exists(warp):
        out = sh([warp] + (["--iterations", "20"] if a.quick else []))
        warp_section = ("Warp (opwarp kernels vs OpenCV warpPerspective)",
                        "```\n" + out.strip() + "\n```")
        wm = re.search(r"ours: warp \+ 5-frame history\s+median\s+([\d.]+) ms", out)
        warp_ms = float(wm.group(1)) if wm else None
    else:
        warp_section = ("Warp", "not measured: op-bench-warp was not built (OpenCV missing)")
    pl = pipeline(a.build, vision, policy, 200 if full_ok else 40, log)
    lines = [f"The sample drive (samples/drive, 1928×1208, both cameras), {which} models, "
             f"log written as rlog.zst. fps counts the whole process (start-up included); "
             f"steady fps leaves out the first 20 frames.", "",
             "| how | wall s | fps | steady fps | peak RSS MiB | ms per stage |",
             "|---|---|---|---|---|---|"]
    for k, r in pl.items():
        rss = f"{r['rss'] / 1024:.0f}" if r.get("rss") else "—"
        lines.append(f"| {k} | {r['wall_s']:.1f} | {fmt_ms(r['fps'])} | "
                     f"{fmt_ms(r.get('fps_steady'))} | {rss} | {r.get('stages', '—')} |")
    lines += ["", "opreplay's stage figures: warp is host time in opwarp; the frame meta and "
              "device time of vision and policy run from the start of a frame's first kernel to "
              "the end of its last; submission to completion also counts frames waiting in the "
              "device queue (see docs/elements-networks.md)."]
    # What the networks and the warp allow when timed alone in this run, one after another
    # as a frame runs them: the pipeline's frame rate is held to it.
    alone = {os.path.join(ROOT, row["model"]): row["peers"]["ours"].get("median")
             for row in res if not row.get("missing")}
    vm, pm = alone.get(vision), alone.get(policy)
    if vm and pm and warp_ms:
        per_frame = vm + pm + warp_ms
        allow = 1000.0 / per_frame
        lines += ["", f"Timed alone in this run (Networks, Warp): vision {vm:.2f} + policy "
                  f"{pm:.2f} + warp of both cameras {warp_ms:.2f} = {per_frame:.2f} ms per frame, "
                  f"at most {allow:.1f} fps. The pipeline against it (steady fps where measured, "
                  f"else fps; the cameras' HEVC decoding shares the cores, which the networks "
                  f"timed alone do not):", "", "| how | fps | ÷ what the networks allow |",
                  "|---|---|---|"]
        for k, r in pl.items():
            f = r.get("fps_steady") or r.get("fps")
            if f:
                lines.append(f"| {k} | {f:.2f} | {f / allow:.2f}× |")
    sections.append(("Pipeline", "\n".join(lines)))

    fm_lines = ["opreplay on the sample drive, one frame, both cameras, no video. \"first "
                "message\": opreplay's own figure, from its start to the first message "
                "written; \"process\": the command's wall time, shutdown included. Warm rows: "
                "the median of three runs.", "",
                "| models | from | first message ms | process ms |", "|---|---|---|---|"]
    for label, (v, p) in [("small", small)] + ([("full", full)] if full_ok else []):
        fm = first_message(a.build, os.path.join(ROOT, v), os.path.join(ROOT, p), log)
        fm_lines += [f"| {label} | {k} | {fmt_ms(f)} | {fmt_ms(w)} |" for k, (f, w) in fm.items()]
    sections.append(("Time to first message (one-frame replay)", "\n".join(fm_lines)))
    sections.append(warp_section)


    if os.path.exists(os.path.join(a.build, "tests/messages/bench-msgsink")):
        rows = messages(a.build, log)
        sections.append(("Messages (opmsgsink)", "\n".join(
            ["2,000 frames of a fixed raw output; three messages (modelV2, drivingModelData, "
             "cameraOdometry) per frame.", "",
             "| log | ms per frame | messages per second | bytes per message in the log |",
             "|---|---|---|---|"] +
            [f"| {l} | {ms:.3f} | {rate:,.0f} | {'—' if b is None else f'{b:,.0f}'} |"
             for l, ms, rate, b in rows])))

    sections.append(("This run", f"The command took {(time.time() - t_start) / 60:.1f} minutes "
                     f"on this machine (peers' model loading and compilation included)."))
    write_report(a.out, sections)
    print(open(a.out).read())
    log(f"done, written to {a.out}")


if __name__ == "__main__":
    main()
