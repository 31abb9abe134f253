#!/usr/bin/env python3
"""The sample drive through filesrc → avdec_h265 → opwarp → opvision → oppolicy → appsink, both
cameras and the road camera alone, against a reference written here from the contract: a numpy
warp (§2: warp matrix, nearest with round-half-to-even in float32, replicate border, the 6-plane
layout, 5-frame history), onnxruntime for the small networks (§3) and openpilot's numpy queues
(§4). Every evaluated frame's vision and policy outputs must satisfy
|got − ref| ≤ 1e-3·|ref| + 1e-3·max|ref|. The decoded NV12 frames the warp reads come from the
same pipeline (a tee), so the reference and the elements see the same pixels.

Exit 0 pass, 1 fail, 77 skip (no OpenCL device, or a system GStreamer plugin missing).
Usage: test_opvision_drive.py [FRAMES [SYSTEM_PLUGIN_DIR]]   (environment: tests' test_env)
"""
import json
import os
import sys

import numpy as np

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import have_opencl_device  # noqa: E402

ROOT = os.environ.get("OP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
# The system's plugin folder (the tests' registry holds only ours): argv[2], as meson passes it.
PLUGINS = sys.argv[2] if len(sys.argv) > 2 else "/usr/lib/x86_64-linux-gnu/gstreamer-1.0"
DRIVE = os.path.join(ROOT, "samples", "drive")
VISION = os.path.join(ROOT, "models", "driving_vision_small.onnx")
POLICY = os.path.join(ROOT, "models", "driving_policy_small.onnx")
W, H = 1928, 1208
FOCAL = {"road": 2648.0, "wide": 567.0}
MODEL_FRAME = {"img": (910.0, 256.0, 47.6), "big_img": (455.0, 256.0, 151.8)}


# ---- the warp, from the contract ---------------------------------------------------------

def rot(rpy):
    r, p, y = rpy
    rx = np.array([[1, 0, 0], [0, np.cos(r), -np.sin(r)], [0, np.sin(r), np.cos(r)]])
    ry = np.array([[np.cos(p), 0, np.sin(p)], [0, 1, 0], [-np.sin(p), 0, np.cos(p)]])
    rz = np.array([[np.cos(y), -np.sin(y), 0], [np.sin(y), np.cos(y), 0], [0, 0, 1]])
    return rz @ ry @ rx


def warp_matrix(camera, model_input, rpy):
    f = FOCAL[camera]
    k_cam = np.array([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1]])
    fm, cx, cy = MODEL_FRAME[model_input]
    k_model = np.array([[fm, 0, cx], [0, fm, cy], [0, 0, 1]])
    v = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], float)
    return k_cam @ v @ rot(rpy) @ v.T @ np.linalg.inv(k_model)


def sample(plane, m, out_w, out_h):
    m = m.astype(np.float32)
    x, y = np.meshgrid(np.arange(out_w, dtype=np.float32), np.arange(out_h, dtype=np.float32))
    w = (m[2, 0] * x + m[2, 1] * y) + m[2, 2]
    sx = ((m[0, 0] * x + m[0, 1] * y) + m[0, 2]) / w
    sy = ((m[1, 0] * x + m[1, 1] * y) + m[1, 2]) / w
    ix = np.clip(np.rint(sx), 0, plane.shape[1] - 1).astype(np.int64)
    iy = np.clip(np.rint(sy), 0, plane.shape[0] - 1).astype(np.int64)
    return plane[iy, ix]


def prepare(nv12, m):
    y = nv12[: H * W].reshape(H, W)
    uv = nv12[H * W: H * W * 3 // 2].reshape(H // 2, W // 2, 2)
    s = np.diag([0.5, 0.5, 1.0])
    m_uv = s @ m @ np.linalg.inv(s)
    yw = sample(y, m, 512, 256)
    u = sample(uv[:, :, 0], m_uv, 256, 128)
    v = sample(uv[:, :, 1], m_uv, 256, 128)
    return np.stack([yw[0::2, 0::2], yw[1::2, 0::2], yw[0::2, 1::2], yw[1::2, 1::2], u, v])


# ---- the pipeline ------------------------------------------------------------------------

def load_system_plugins():
    for name in ("coreelements", "app", "libav", "videoparsersbad", "videoconvertscale"):
        try:
            Gst.Plugin.load_file(os.path.join(PLUGINS, f"libgst{name}.so"))
        except gi.repository.GLib.Error as e:
            print(f"SKIP: system plugin {name} unavailable: {e}")
            sys.exit(77)


def decode(cam, role, rpy, link):
    return (f"filesrc location={DRIVE}/{cam}.hevc ! h265parse ! avdec_h265 ! videoconvert ! "
            f"video/x-raw,format=NV12 ! tee name=t{role} ! queue max-size-buffers=0 "
            f"max-size-bytes=0 max-size-time=0 ! appsink name=raw_{role} sync=false "
            f"t{role}. ! queue ! opwarp model-input={role} rpy={rpy} ! {link} ")


def run_pipeline(frames, two_cameras, rpy):
    rpy_s = ",".join(repr(v) for v in rpy)
    desc = decode("fcamera", "img", rpy_s, "v.img")
    if two_cameras:
        desc += decode("ecamera", "big_img", rpy_s, "v.big_img")
    desc += (f"opvision name=v precision=fp32 model={VISION} ! "
             f"oppolicy name=p precision=fp32 model={POLICY} ! appsink name=out sync=false")
    pipe = Gst.parse_launch(desc)
    pipe.set_state(Gst.State.PLAYING)
    out = pipe.get_by_name("out")
    raws = {r: pipe.get_by_name(f"raw_{r}") for r in (("img", "big_img") if two_cameras else ("img",))}
    results, nv12 = [], {r: [] for r in raws}
    while len(results) < frames:
        sample = out.emit("try-pull-sample", 300 * Gst.SECOND)
        if sample is None:
            bus = pipe.get_bus()
            msg = bus.pop_filtered(Gst.MessageType.ERROR)
            raise RuntimeError(f"no output after {len(results)} frames: "
                               f"{msg.parse_error() if msg else 'EOS'}")
        buf = sample.get_buffer()
        tensors = []
        for i in range(buf.n_memory()):
            ok, info = buf.peek_memory(i).map(Gst.MapFlags.READ)
            tensors.append(np.frombuffer(bytes(info.data), np.float32).copy())
            buf.peek_memory(i).unmap(info)
        results.append((buf.pts, tensors))
    for r, sink in raws.items():
        while len(nv12[r]) < frames + 8:
            sample = sink.emit("try-pull-sample", 60 * Gst.SECOND)
            if sample is None:
                break
            buf = sample.get_buffer()
            ok, info = buf.map(Gst.MapFlags.READ)
            nv12[r].append((buf.pts, np.frombuffer(bytes(info.data), np.uint8).copy()))
            buf.unmap(info)
    skipped = pipe.get_by_name("v").get_property("skipped")
    pipe.set_state(Gst.State.NULL)
    return results, nv12, skipped


# ---- the reference -----------------------------------------------------------------------

def check(frames, two_cameras, rpy, sessions):
    import onnx
    sys.path.insert(0, os.path.join(ROOT, "models"))
    from onnx_util import decode_slices
    meta = {p.key: p.value for p in onnx.load(VISION, load_external_data=False).metadata_props}
    hidden = decode_slices(meta["output_slices"])["hidden_state"]

    results, nv12, skipped = run_pipeline(frames, two_cameras, rpy)
    if skipped:
        print(f"FAIL: opvision skipped {skipped} frames of a drive without drops")
        return 1
    roles = ("img", "big_img")
    m = {"img": warp_matrix("road", "img", rpy), "big_img": warp_matrix("wide", "big_img", rpy)}
    history = {r: [np.zeros((6, 128, 256), np.uint8)] * 4 for r in roles}
    features = np.zeros((100, 512), np.float32)
    desires = np.zeros((100, 8), np.float32)
    worst = 0.0
    by_pts = {r: dict(nv12[r if two_cameras else "img"]) for r in roles}
    for k, (pts, got) in enumerate(results):
        inputs = {}
        for r in roles if two_cameras else ("img",):
            prepared = prepare(by_pts[r][pts], m[r])
            history[r].append(prepared)
            inputs[r] = np.concatenate([history[r][-5], history[r][-1]])[None]
        if not two_cameras:
            inputs["big_img"] = inputs["img"]  # without big_img the road tensor feeds both
        vision = sessions[0].run(None, {"img": inputs["img"], "big_img": inputs["big_img"]})[0]
        features[:-1] = features[1:]
        features[-1] = vision[0, hidden.start:hidden.stop]
        desires[:-1] = desires[1:]  # desire none: no pulses
        tc = np.array([[1, 0]], np.float32)
        policy = sessions[1].run(None, {"features_buffer": features[-97::4][None],
                                        "desire_pulse": desires.reshape(25, 4, 8).max(1)[None],
                                        "traffic_convention": tc})[0]
        for name, ref, g in (("vision", vision, got[0]), ("policy", policy, got[1])):
            g = g.reshape(ref.shape)
            scale = float(np.abs(ref).max())
            bound = 1e-3 * np.abs(ref) + 1e-3 * scale
            err = float((np.abs(g - ref) / (np.abs(ref) + scale)).max())
            worst = max(worst, err)
            if not np.all(np.abs(g - ref) <= bound):
                i = int(np.argmax(np.abs(g - ref) - bound))
                print(f"FAIL: {'two' if two_cameras else 'one'} camera(s), frame {k} {name} "
                      f"index {i}: got {g.flat[i]}, want {ref.flat[i]}")
                return 1
    print(f"ok: {'two cameras' if two_cameras else 'one camera'}, {len(results)} frames, "
          f"worst relative error {worst:.2e}")
    return 0


def main():
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    if not have_opencl_device():
        print("SKIP: no OpenCL device")
        return 77
    Gst.init(None)
    load_system_plugins()
    if Gst.ElementFactory.find("opvision") is None:
        print("FAIL: opvision is not registered (GST_PLUGIN_PATH_1_0?)")
        return 1
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import onnxruntime as ort
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sessions = [ort.InferenceSession(p, opts, providers=["CPUExecutionProvider"])
                for p in (VISION, POLICY)]
    rpy = json.load(open(os.path.join(DRIVE, "groundtruth.json")))["drive"]["calibration_rpy"]
    status = 0
    for two in (True, False):
        status |= check(frames, two, rpy, sessions)
    return status


if __name__ == "__main__":
    sys.exit(main())
