#!/usr/bin/env python3
"""Reference for the opvision/oppolicy element tests: onnxruntime runs the networks and numpy keeps
openpilot's temporal queues, written from the contract (§4) the way openpilot's modeld does it
(shift the whole history, slice every 4th ending with the newest, max-pool desire pulses).

Usage: opnet_reference.py DIR MODE VISION_OR_COMBINED [POLICY]
  MODE: split (vision then policy; outputs out_K_0.bin vision, out_K_1.bin policy) or
        combined (one network; out_K_0.bin).
DIR/frames.txt: one line per evaluated frame, in order: "K DESIRE TRAFFIC", with the inputs
road_K.bin and wide_K.bin (uint8, 1x12x128x256) and the element's outputs out_K_*.bin (float32).
Every output of every frame must satisfy |got - ref| <= 1e-3 * |ref| + 1e-3 * max|ref| (relative
error 1e-3, with the tensor's scale guarding values near zero). Exit 1 with the worst frame
otherwise.
"""
import os
import sys

import numpy as np
import onnxruntime as ort

HISTORY, STEPS, SKIP, DESIRE_LEN = 100, 25, 4, 8


def session(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def hidden_slice(path):
    import onnx
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "models"))
    from onnx_util import decode_slices  # the models' own slice decoding, no torch needed
    meta = {p.key: p.value for p in onnx.load(path, load_external_data=False).metadata_props}
    s = decode_slices(meta["output_slices"])["hidden_state"]
    return s.start, s.stop


def main():
    folder, mode, first = sys.argv[1], sys.argv[2], sys.argv[3]
    net = session(first)
    policy = session(sys.argv[4]) if mode == "split" else None
    hs, he = hidden_slice(first)
    features = np.zeros((HISTORY, he - hs), np.float32)
    desires = np.zeros((HISTORY, DESIRE_LEN), np.float32)
    prev = np.zeros(DESIRE_LEN, np.float32)
    worst = (0.0, None)
    frames = [l.split() for l in open(os.path.join(folder, "frames.txt")) if l.strip()]
    for k, desire, traffic in frames:
        road = np.fromfile(os.path.join(folder, f"road_{k}.bin"), np.uint8).reshape(1, 12, 128, 256)
        wide = np.fromfile(os.path.join(folder, f"wide_{k}.bin"), np.uint8).reshape(1, 12, 128, 256)
        d = np.zeros(DESIRE_LEN, np.float32)
        d[int(desire)] = 1
        d[0] = 0
        pulse = np.where(d - prev > 0.99, d, 0)
        prev = d
        desires[:-1] = desires[1:]
        desires[-1] = pulse
        desire_in = desires.reshape(STEPS, SKIP, DESIRE_LEN).max(axis=1)[None]
        tc = np.zeros((1, 2), np.float32)
        tc[0, int(traffic)] = 1
        if mode == "split":
            vision = net.run(None, {"img": road, "big_img": wide})[0]
            features[:-1] = features[1:]
            features[-1] = vision[0, hs:he]
            feats = features[-1 - SKIP * (STEPS - 1)::SKIP][None]
            pol = policy.run(None, {"features_buffer": feats, "desire_pulse": desire_in,
                                    "traffic_convention": tc})[0]
            refs = [vision, pol]
        else:
            # The network appends this frame's hidden state itself: it reads the entries
            # -100, -96, ..., -4 and drops the first.
            feats = features[-HISTORY::SKIP][None]
            out = net.run(None, {"img": road, "big_img": wide, "features_buffer": feats,
                                 "desire_pulse": desire_in, "traffic_convention": tc})[0]
            features[:-1] = features[1:]
            features[-1] = out[0, hs:he]
            refs = [out]
        for i, ref in enumerate(refs):
            got = np.fromfile(os.path.join(folder, f"out_{k}_{i}.bin"), np.float32).reshape(ref.shape)
            scale = float(np.abs(ref).max())
            err = np.abs(got - ref) / (np.abs(ref) + scale)
            e = float(err.max())
            if e > worst[0]:
                worst = (e, f"frame {k} output {i} index {int(err.argmax())}: got "
                            f"{got.flat[err.argmax()]}, want {ref.flat[err.argmax()]}")
            if not np.all(np.abs(got - ref) <= 1e-3 * np.abs(ref) + 1e-3 * scale):
                print(f"FAIL: {worst[1]} (relative error {e:.2e})")
                return 1
    print(f"ok: {len(frames)} frames, worst relative error {worst[0]:.2e} ({worst[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
