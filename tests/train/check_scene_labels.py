#!/usr/bin/env python3
"""The scene variety's labels against independent computations from the drawn parameters.

For a few seeds, builds the frame records as render.py does (scene.ground_truth, no pixels) and
the training labels from them (dataset.labels_for), and checks them against what the drawn
parameters say, computed here from the parameters alone:

- lane changes: the ego crosses the line at the frame where its offset (weave + the change's
  ramp) passes half a lane width; there, and only there, the left line's y at x = 0 jumps by one
  lane width; desire_state is laneChangeLeft/Right exactly while the change lasts, desire_pred's
  rows look 0-3 s ahead, and the blinkers in meta are on from 1 s before the change;
- cut-ins and cut-outs: the lead's y crosses into (out of) the ego's lane, and lead_prob is 1
  exactly on the frames where its centre is inside the ego's lane;
- 2 and 4 lanes: the number of lines with probability 1 is the number of road lines among the
  four around the ego's lane, and their y at x = 0 is the line's offset minus the ego's;
- road_transform's yaw is minus the car's heading to the road; its z the camera height;
- the sample's scene (no seed) still gives samples/drive/groundtruth.json's records exactly.

Exit 0 pass, 1 fail. Usage: check_scene_labels.py ROOT   (no torch, no GStreamer)
"""
import json
import math
import os
import sys

import numpy as np

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
sys.path.insert(0, os.path.join(ROOT, "tools", "synthdrive"))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import dataset  # noqa: E402
import scene  # noqa: E402
import variety  # noqa: E402

FPS = 20
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def ramp(u):
    u = min(max(u, 0.0), 1.0)
    return u - math.sin(2 * math.pi * u) / (2 * math.pi)


def drive(seed, seconds):
    """(params, truth, labels) of `seconds` of the seed's drive, without pixels."""
    p = variety.draw(seed)
    variety.apply(p)
    n = int(seconds * FPS)
    road = scene.Road(scene.ego_s(seconds + 16.0) + 600.0)
    frames = [scene.ground_truth(road, i / FPS, i, p["calibration_rpy"], extra=True) for i in range(n)]
    truth = {"drive": {"camera_height_m": p["CAMERA_HEIGHT"], "wide_from_device_euler": [0, 0, 0]},
             "frames": frames}
    return p, truth, dataset.labels_for(truth, frames[-1]["t"])


def ego_offset(p, t):
    """The ego's offset from the road's centre line, from the parameters alone."""
    a, per = p["WEAVE"]
    off = a * math.sin(2 * math.pi * t / per)
    if p["LANE_CHANGE"]:
        t0, d, sign = p["LANE_CHANGE"]
        off += sign * p["LANE_WIDTH"] * ramp((t - t0) / d)
    return off


def ego_lane(p, t):
    return p["EGO_LANE"] + int(math.floor(ego_offset(p, t) / p["LANE_WIDTH"] + 0.5))


def check_lane_change(seed, seconds):
    p, truth, lab = drive(seed, seconds)
    t0, d, sign = p["LANE_CHANGE"]
    w = p["LANE_WIDTH"]
    n = len(truth["frames"])
    lanes = [ego_lane(p, k / FPS) for k in range(n)]
    cross = [k for k in range(1, n) if lanes[k] != lanes[k - 1]]
    check(len(cross) == 1 and lanes[cross[0]] - lanes[cross[0] - 1] == sign,
          f"seed {seed}: one crossing to the {'right' if sign > 0 else 'left'} (got {cross})")
    if not cross:
        return
    c = cross[0]
    left = lab["lane_lines"][:, 1, 0, 0]
    jumps = np.abs(np.diff(left))
    # Crossing to the right, the old right line becomes the left one: y jumps by + one width.
    check(abs(float(left[c] - left[c - 1]) - sign * w) < 0.15,
          f"seed {seed}: left line jumps by {left[c] - left[c - 1]:.3f} m at frame {c}, want "
          f"{sign * w:.3f}")
    others = np.delete(jumps, c - 1)
    check(float(others.max()) < 0.2, f"seed {seed}: left line moves {others.max():.3f} m elsewhere")
    for k in (c - 1, c, n - 1):
        t = k / FPS
        line = (lanes[k] - p["EGO_LANE"] - 0.5) * w  # left line of the ego's lane
        check(abs(float(left[k]) - (line - ego_offset(p, t))) < 0.05,
              f"seed {seed} frame {k}: left line y {left[k]:.3f}, want {line - ego_offset(p, t):.3f}")
        check(truth["frames"][k]["ego"]["lane_index"] == lanes[k], f"seed {seed} frame {k}: lane index")
    want = 3 if sign < 0 else 4
    for k in range(n):
        t = k / FPS
        d_now = want if t0 <= t < t0 + d else 0
        check(int(lab["desire_state"][k].argmax()) == d_now and lab["desire_state"][k].sum() == 1,
              f"seed {seed} frame {k}: desire_state {lab['desire_state'][k].argmax()}, want {d_now}")
        for j, T in enumerate((0.0, 1.0, 2.0, 3.0)):
            dj = want if t0 <= t + T < t0 + d else 0
            check(int(lab["desire_pred"][k, j].argmax()) == dj, f"seed {seed} frame {k}: desire_pred row {j}")
        blink = t0 - 1.0 <= t < t0 + d
        check(lab["meta"][k, 31 + (2 if sign < 0 else 3)] == float(blink)
              and lab["meta"][k, 31 + (3 if sign < 0 else 2)] == 0.0,
              f"seed {seed} frame {k}: blinker in meta")
    return c


def check_cut(seed, seconds):
    p, truth, lab = drive(seed, seconds)
    c0, cd, a, b = p["LEAD_CUT"]
    w = p["LANE_WIDTH"]
    n = len(truth["frames"])
    inside, fracs = [], []
    for k in range(n):
        t = k / FPS
        lead_off = w * (a + (b - a) * ramp((t - c0) / cd))
        centre = (ego_lane(p, t) - p["EGO_LANE"]) * w
        inside.append(abs(lead_off - centre) < w / 2)
        check(lab["lead_prob"][k, 0] == float(inside[-1] and p["LEAD_PRESENT"]),
              f"seed {seed} frame {k}: lead_prob {lab['lead_prob'][k, 0]}, in lane {inside[-1]}")
        rec = truth["frames"][k]["lead"]
        # Geometry, independently of the parameters: where is the lead's centre between the ego
        # lane's lines at the lead's distance? (lines at X_IDXS, interpolated)
        x = rec["distance_m"]
        yl = np.interp(x, scene.X_IDXS, lab["lane_lines"][k, 1, :, 0])
        yr = np.interp(x, scene.X_IDXS, lab["lane_lines"][k, 2, :, 0])
        frac = (rec["y_m"] - yl) / (yr - yl)  # 0 on the left line, 1 on the right one
        fracs.append(frac)
        if abs(frac) > 0.05 and abs(frac - 1.0) > 0.05:  # clear of the lines
            check((0.0 < frac < 1.0) == inside[-1],
                  f"seed {seed} frame {k}: lead at {frac:.2f} of the ego lane, the parameters say "
                  f"{'inside' if inside[-1] else 'outside'}")
        if inside[-1]:
            check(abs(float(lab["lead"][k, 0, 0, 1]) - rec["y_m"]) < 1e-3, f"seed {seed} frame {k}: lead label y")
    f0, f1 = fracs[0], fracs[-1]
    if b == 0:  # cut-in: starts outside the ego's lane, ends inside
        check(not inside[0] and inside[-1] and not 0 < f0 < 1 and 0.3 < f1 < 0.7,
              f"seed {seed}: the cut-in lead's y does not cross into the ego lane ({f0:.2f} to {f1:.2f})")
    else:
        check(inside[0] and not inside[-1] and 0.3 < f0 < 0.7 and not 0 < f1 < 1,
              f"seed {seed}: the cut-out lead's y does not leave the ego lane ({f0:.2f} to {f1:.2f})")
    print(f"ok: seed {seed}: the lead moves from {f0:.2f} to {f1:.2f} of the ego lane's width")


def check_lanes(seed, want_lanes):
    p, truth, lab = drive(seed, 1.0)
    check(p["LANES"] == want_lanes, f"seed {seed}: {p['LANES']} lanes, test wants {want_lanes}")
    w = p["LANE_WIDTH"]
    for k in (0, len(truth["frames"]) - 1):
        t = k / FPS
        lane = ego_lane(p, t)
        exist = [0 <= i <= p["LANES"] for i in (lane - 1, lane, lane + 1, lane + 2)]
        check(list(lab["lane_lines_prob"][k]) == [float(e) for e in exist],
              f"seed {seed} frame {k}: line probabilities {lab['lane_lines_prob'][k]}, want {exist}")
        for j, i in enumerate((lane - 1, lane, lane + 1, lane + 2)):
            y = lab["lane_lines"][k, j, 0, 0]
            if exist[j]:
                want = (i - p["EGO_LANE"] - 0.5) * w - ego_offset(p, t)
                check(abs(float(y) - want) < 0.05, f"seed {seed} frame {k} line {j}: y {y:.3f}, want {want:.3f}")
            else:
                check(bool(np.all(np.isnan(lab["lane_lines"][k, j]))), f"seed {seed} frame {k} line {j}: not NaN")
        rec = truth["frames"][k]
        rt = lab["road_transform"][k]
        check(abs(float(rt[5]) + rec["ego"]["heading_to_road_rad"]) < 1e-5 and
              abs(float(rt[2]) - p["CAMERA_HEIGHT"]) < 1e-5,
              f"seed {seed} frame {k}: road_transform {rt}")


def check_sample():
    """The sample's scene (module defaults) gives the committed ground truth, record for record."""
    import importlib
    importlib.reload(scene)
    path = os.path.join(ROOT, "samples", "drive", "groundtruth.json")
    lines = open(path).read().split("\n")
    recs = [ln.rstrip(",") for ln in lines[2:] if ln.startswith("{")]
    hdr = json.loads(lines[0][len('{"drive": '):].rstrip(","))
    road = scene.Road(scene.ego_s(hdr["seconds"]) + 600.0)
    rpy = tuple(hdr["calibration_rpy"])
    bad = [i for i, r in enumerate(recs)
           if json.dumps(scene.ground_truth(road, i / FPS, i, rpy), sort_keys=True) != r]
    check(len(recs) == 200 and not bad, f"sample: {len(bad)} of {len(recs)} records differ (first {bad[:3]})")


def main():
    for seed, seconds in ((105, 3.0), (115, 5.0)):  # 3 lanes: to the right from 0.22 s, left from 1.95 s
        c = check_lane_change(seed, seconds)
        print(f"ok: seed {seed}: the lane change crosses the line at frame {c}")
    check_cut(123, 3.0)  # a lead cutting in from the left (2 lanes)
    check_cut(211, 5.0)  # a lead cutting out to the left (2 lanes)
    check_lanes(107, 2)
    check_lanes(102, 4)
    check_lanes(128, 4)  # ego in the rightmost of 4, changing left
    check_sample()
    if failures:
        print(f"FAIL: {len(failures)} checks failed")
        return 1
    print("ok: lane changes, desires, cut-ins/outs, lane counts, road_transform and the sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
