#!/usr/bin/env python3
"""Hostile models set as `model` on a PLAYING opvision: a pickle whose 64-bit length wraps, a
pickle of 300,000 nested tuples, an ONNX model whose ConstantOfShape asks for 16 GiB. Each is
refused with a warning naming the file and the limit or reason; the previous model keeps
running (the same frame gives the same output as before), frames keep flowing, no error, no
crash. Then a good model set the same way still takes over.

Exit 0 pass, 1 fail, 77 skip (no OpenCL device, onnx or a system GStreamer plugin missing).
Usage: test_hostile_opvision.py [SYSTEM_PLUGIN_DIR]   (environment: the tests' test_env)
"""
import base64
import os
import sys
import tempfile
import time

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

ROOT = os.environ.get("OP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
PLUGINS = sys.argv[1] if len(sys.argv) > 1 else "/usr/lib/x86_64-linux-gnu/gstreamer-1.0"
VISION = os.path.join(ROOT, "models", "driving_vision_small.onnx")
OTHER = os.path.join(ROOT, "models", "driving_supercombo_small.onnx")
CAMERA = 'application/x-op-tensors,names=(string)img,types=(string)uint8,dims=(string)"1,12,128,256"'
FRAME = Gst.SECOND // 20

failures = []
tmp = tempfile.mkdtemp(prefix="op-hostile-opvision-")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


# ---- the hostile files -------------------------------------------------------------------

def relu_with_slices(name, pickle):
    """A valid Relu model whose output_slices metadata is the given pickle."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    m.metadata_props.add(key="output_slices", value=base64.b64encode(pickle).decode())
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    return path


# PROTO 4, EMPTY_DICT, BINUNICODE8 with length 2^64 - 9: a read position that wraps moves back.
length_pickle = b"\x80\x04}\x8d" + (2**64 - 9).to_bytes(8, "little") + b"abcd"
# PROTO 2, EMPTY_DICT, the key "a", None wrapped in 300,000 TUPLE1s, SETITEM, STOP.
deep_pickle = b"\x80\x02}X\x01\x00\x00\x00aN" + b"\x85" * 300000 + b"s."

bomb = helper.make_graph(
    [helper.make_node("ConstantOfShape", ["shape"], ["big"], name="bomb")], "bomb", [],
    [helper.make_tensor_value_info("big", TensorProto.FLOAT, None)],
    initializer=[numpy_helper.from_array(np.array([65536, 65536], np.int64), "shape")])
bomb_model = helper.make_model(bomb, opset_imports=[helper.make_opsetid("", 13)])
bomb_model.ir_version = 8
bomb_path = os.path.join(tmp, "bomb.onnx")
onnx.save(bomb_model, bomb_path)

hostile = [
    # (file, what the warning must say besides the file name)
    (relu_with_slices("length", length_pickle), ["output_slices", "truncated"]),
    (relu_with_slices("deep", deep_pickle), ["output_slices", "deeper than the limit of 32"]),
    (bomb_path, ["bomb", "268435456"]),
]
check(os.path.getsize(hostile[0][0]) < 200, f"the length model is small "
      f"({os.path.getsize(hostile[0][0])} bytes)")

# ---- the pipeline ------------------------------------------------------------------------

Gst.init(None)
for name in ("coreelements", "app"):
    try:
        Gst.Plugin.load_file(os.path.join(PLUGINS, f"libgst{name}.so"))
    except GLib.Error as e:
        print(f"SKIP: system plugin {name} unavailable: {e}")
        sys.exit(77)
if Gst.ElementFactory.find("opvision") is None:
    print("FAIL: opvision is not registered (GST_PLUGIN_PATH_1_0?)")
    sys.exit(1)

pipe = Gst.parse_launch(f"appsrc name=road format=time ! opvision name=v precision=fp32 "
                        f"model={VISION} ! appsink name=out sync=false max-buffers=100")
road, vision, out = (pipe.get_by_name(n) for n in ("road", "v", "out"))
road.set_property("caps", Gst.Caps.from_string(CAMERA))
bus = pipe.get_bus()
if pipe.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
    msg = bus.pop_filtered(Gst.MessageType.ERROR)
    text = msg.parse_error()[0].message if msg else "?"
    if "OpenCL" in text or "device" in text:
        print(f"SKIP: no OpenCL device: {text}")
        sys.exit(77)
    print(f"FAIL: the pipeline did not start: {text}")
    sys.exit(1)

rng = np.random.default_rng(17)
fixed = rng.integers(0, 256, 12 * 128 * 256, dtype=np.uint8).tobytes()
frame_no = 0


def push_and_pull(data=None):
    """One camera frame in, its output out (a tuple of the output tensors' bytes), or None."""
    global frame_no
    buf = Gst.Buffer.new_wrapped(data if data is not None else
                                 rng.integers(0, 256, 12 * 128 * 256, dtype=np.uint8).tobytes())
    buf.pts = frame_no * FRAME
    buf.duration = FRAME
    frame_no += 1
    if road.emit("push-buffer", buf) != Gst.FlowReturn.OK:
        return None
    sample = out.emit("try-pull-sample", 120 * Gst.SECOND)
    if sample is None:
        return None
    b = sample.get_buffer()
    tensors = []
    for i in range(b.n_memory()):
        ok, info = b.peek_memory(i).map(Gst.MapFlags.READ)
        tensors.append(bytes(info.data))
        b.peek_memory(i).unmap(info)
    return tuple(tensors)


def messages(kind):
    texts = []
    while True:
        msg = bus.pop_filtered(kind)
        if msg is None:
            return texts
        err, debug = msg.parse_error() if kind == Gst.MessageType.ERROR else msg.parse_warning()
        texts.append(f"{err.message} | {debug or ''}")


before = push_and_pull(fixed)
check(before is not None, "the vision model runs")
if before is None:
    print(messages(Gst.MessageType.ERROR))
    sys.exit(1)

for path, says in hostile:
    name = os.path.basename(path)
    vision.set_property("model", path)
    # The refusal is reported at a frame boundary once the background load has failed.
    warning, flowing, deadline = "", 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        got = push_and_pull()
        if got is None or [len(t) for t in got] != [len(t) for t in before]:
            break
        flowing += 1
        warning = "\n".join(w for w in messages(Gst.MessageType.WARNING) if path in w)
        if warning:
            break
        time.sleep(0.05)
    check(bool(warning) and all(s in warning for s in says) and "previous model keeps running" in
          warning, f"{name}: a warning names the file and {says} ({warning.strip()[:300]})")
    check(flowing > 0, f"{name}: frames keep flowing ({flowing} while it loaded)")
    check(push_and_pull(fixed) == before, f"{name}: the previous model keeps running (same output "
          "for the same frame)")
    errors = messages(Gst.MessageType.ERROR)
    check(not errors, f"{name}: no error ({errors[:1]})")
    check(pipe.get_state(0)[1] == Gst.State.PLAYING, f"{name}: still PLAYING")

# A good model set the same way still takes over (its output has another size).
vision.set_property("model", OTHER)
swapped, warnings, deadline = False, [], time.monotonic() + 240
while not swapped and time.monotonic() < deadline:
    got = push_and_pull()
    if got is None:
        break
    swapped = [len(t) for t in got] != [len(t) for t in before]
    warnings += messages(Gst.MessageType.WARNING)
    if not swapped:
        time.sleep(0.2)
check(swapped, f"a good model set afterwards takes over ({warnings[:1]})")

road.emit("end-of-stream")
msg = bus.timed_pop_filtered(60 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
check(msg is not None and msg.type == Gst.MessageType.EOS, "the stream ends with EOS")
pipe.set_state(Gst.State.NULL)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("all passed")
