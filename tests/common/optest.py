"""What the project's Python checks share: named checks that collect their failures, the
environment that runs the project's tools with the system's decoders, running a tool with its
output shown, reading a log back, and opwarp's tensors taken from an appsink.

A check script imports it with its own folder's sibling on the path:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                    "common"))
    import optest
"""

import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile

# The checks of this process that failed, in order (check() appends), and what a run could not
# show on this machine (reported as a skip where nothing failed).
failures = []
unexercised = []


def check(cond, what):
    """Prints `what` as passed or failed; a failure is remembered in `failures`."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def exit_status(summary=True):
    """The script's exit status: 1 if a check failed, 77 (skipped) if nothing failed but
    something could not be shown here, else 0."""
    if summary:
        print(f"{len(failures)} failure(s)")
    if failures:
        return 1
    if unexercised:
        print("not shown on this machine: " + "; ".join(unexercised))
        return 77
    return 0


def have_opencl_device():
    """True when the OpenCL loader finds a platform (PoCL on the test machines)."""
    try:
        cl = ctypes.CDLL("libOpenCL.so.1")
    except OSError:
        return False
    n = ctypes.c_uint(0)
    return cl.clGetPlatformIDs(0, None, ctypes.byref(n)) == 0 and n.value > 0


def tool_env(suite="examples"):
    """The environment for the project's tools (opreplay, …) in a test: the system's plugins
    (the decoders) next to the project's, and a registry of the suite's own in the build folder
    so that a system registry without our plugin is never reused."""
    env = dict(os.environ)
    reg_dir = os.path.join(os.environ.get("OP_BUILD_ROOT", tempfile.gettempdir()), "tests", suite)
    os.makedirs(reg_dir, exist_ok=True)
    env["GST_REGISTRY_1_0"] = os.path.join(reg_dir, "registry-system.bin")
    return env


def run_tool(cmd, env, what=None, timeout=None):
    """Runs a tool, prints its output (the last 3000 characters of its errors) and checks its
    exit status; returns the finished process. A timeout raises subprocess.TimeoutExpired."""
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)
    print(proc.stdout)
    sys.stderr.write(proc.stderr[-3000:])
    check(proc.returncode == 0,
          f"{what or os.path.basename(cmd[0])} exit status {proc.returncode}")
    return proc


def numbers(text, pattern, kind=float):
    """The groups of `pattern`'s first match in `text` (multi-line) as numbers, or None."""
    m = re.search(pattern, text, re.M)
    return [kind(g) for g in m.groups()] if m else None


def load_log_schema(schema):
    """The Cap'n Proto log schema (schemas/log.capnp) loaded with pycapnp."""
    import capnp
    capnp.remove_import_hook()
    return capnp.load(schema, imports=["/usr/include", "/usr/local/include"])


def read_events(log, path):
    """Every Event of a zstd-compressed log (rlog.zst), in order."""
    raw = subprocess.run(["zstd", "-d", "-c", path], stdout=subprocess.PIPE, check=True).stdout
    return list(log.Event.read_multiple_bytes(raw))


def read_models(log, path):
    """The modelV2 messages of a log, in order."""
    return [e.modelV2 for e in read_events(log, path) if e.which() == "modelV2"]


def missing_elements(names):
    """Initialises GStreamer and returns the first of `names` that is not registered, or None."""
    import gi
    gi.require_version("Gst", "1.0")
    from gi.repository import Gst
    Gst.init(None)
    for name in names:
        if Gst.ElementFactory.find(name) is None:
            return name
    return None


def hevc_source(path):
    """A pipeline's source of NV12 frames from an HEVC stream."""
    return (f"filesrc location={path} ! h265parse ! avdec_h265 ! videoconvert ! "
            f"video/x-raw,format=NV12")


def nv12_source(path, width, height, fps=20):
    """A pipeline's source of NV12 frames from a file of tightly packed frames."""
    return (f"filesrc location={path} ! rawvideoparse format=nv12 width={width} height={height} "
            f"framerate={fps}/1")


def opwarp_outputs(source, role, rpy, frames=None):
    """opwarp's output tensors, as bytes, for the frames of `source` (a pipeline description
    ending in NV12 frames): all of them, or the first `frames`."""
    import gi
    gi.require_version("Gst", "1.0")
    from gi.repository import Gst
    desc = (f"{source} ! opwarp model-input={role} "
            f"rpy={','.join(repr(float(v)) for v in rpy)} ! appsink name=out sync=false")
    pipe = Gst.parse_launch(desc)
    pipe.set_state(Gst.State.PLAYING)
    sink = pipe.get_by_name("out")
    got = []
    while frames is None or len(got) < frames:
        sample = sink.emit("try-pull-sample", 120 * Gst.SECOND)
        if sample is None:
            break
        buf = sample.get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        got.append(bytes(info.data))
        buf.unmap(info)
    pipe.set_state(Gst.State.NULL)
    return got


def replay_accuracy(evaluate, opreplay, drive, vision, policy, extra=()):
    """Replays DRIVE through opreplay with the two models (tools/train/evaluate.py builds the
    accuracy table from the replay's log and the drive's ground truth) and returns our figures,
    or None after printing why the replay or the table failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "table.json")
        cmd = [sys.executable, evaluate, "--drive", drive, "--replay", os.path.join(tmp, "replay"),
               "--opreplay", opreplay, "--vision", vision, "--policy", policy, "--json", out]
        r = subprocess.run(cmd + list(extra), capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print(f"FAIL: evaluate.py exited {r.returncode}: {r.stderr.strip()}")
            return None
        with open(out) as f:
            return json.load(f)["ours"]


def compare_accuracy(got, want):
    """Compares an accuracy table with a recorded one, printing each figure; returns the
    failures. An error figure may move by 2 % of the recorded value plus 0.005, a share (_acc,
    within_std) by 1 percentage point; the matched frames must be the same, and a figure recorded
    but missing now (or the reverse) fails. Counts (_n) are not compared."""
    failures = []
    if got.get("frames") != want.get("frames"):
        failures.append(f"frames: {got.get('frames')} matched, recorded {want.get('frames')}")
    for key in sorted(set(want) | set(got)):
        if key == "frames" or key.endswith("_n"):
            continue
        if key not in got or key not in want:
            failures.append(f"{key}: {'missing now' if key not in got else 'not recorded'}")
            continue
        share = key.endswith("_acc") or key.endswith("within_std")
        tol = 0.01 if share else 0.02 * abs(want[key]) + 0.005
        ok = abs(got[key] - want[key]) <= tol
        print(f"{'ok  ' if ok else 'FAIL'} {key}: {got[key]:.4f} (recorded {want[key]:.4f}, "
              f"tolerance {tol:.4f})")
        if not ok:
            failures.append(f"{key}: {got[key]:.4f}, recorded {want[key]:.4f} (tolerance {tol:.4f})")
    return failures
