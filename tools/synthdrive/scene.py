"""The synthetic drive's 3-D scene: road geometry, the ego car's and the lead car's motion, and the
ground truth derived from them. Pure numpy/float64; rendering lives in raster.py.

Frames (as openpilot's): the road is a curve c(s) in a flat world, parameterised by arc length s,
with heading theta(s) = integral of the curvature kappa(s). World x/y are horizontal with y to the
right of a heading-0 traveller; z points down. The ego frame is the car's calibrated frame at the
camera: origin at the camera, x along the car's heading, y right, z down (ground at z = +height).
The camera (device) frame is the ego frame rotated by the calibration: d_device = R(rpy) d_ego.

Everything is an analytic function of time so that any frame can be computed on its own and the
numbers do not depend on how many frames were rendered before.
"""

import math

import numpy as np

FPS = 20
LANE_WIDTH = 3.7
# Three lanes; the ego car drives in the middle one, whose centre is the road's centre line.
# The four lane lines openpilot predicts: far left, left, right, far right
# (docs/contract.md, "Parsing the outputs").
LANE_LINE_OFFSETS = (-1.5 * LANE_WIDTH, -0.5 * LANE_WIDTH, 0.5 * LANE_WIDTH, 1.5 * LANE_WIDTH)
LANE_LINE_DASHED = (False, True, True, False)
LINE_WIDTH = 0.15
DASH_LENGTH, DASH_PERIOD = 3.0, 12.0
SHOULDER = 0.8
ROAD_EDGE_OFFSETS = (LANE_LINE_OFFSETS[0] - SHOULDER, LANE_LINE_OFFSETS[-1] + SHOULDER)
CAMERA_HEIGHT = 1.22
# Lead vehicle: a body and a cabin box (lead frame: x forward from the rear bumper, y right,
# height above ground).
LEAD_LENGTH, LEAD_WIDTH = 4.6, 1.84
X_IDXS = [192.0 * (i / 32.0) ** 2 for i in range(33)]  # docs/contract.md, "Filling the messages"

ROAD_STEP = 0.25  # m between samples of the centre line


# The drive's free parameters. The defaults are the bundled sample drive's; variety.py draws
# other values from a seed and installs them with configure() before anything is rendered.
# Each wave is (amplitude, period, phase): amplitude * sin(2 pi * arg / period + phase).
CURVATURE_WAVES = ((1.0 / 650.0, 720.0, 0.4), (1.0 / 1600.0, 270.0, 1.3))  # 1/m over s (m)
SPEED = (24.0, 4.0, 15.0)  # mean (m/s), amplitude (m/s), period (s)
WEAVE = (0.3, 7.3)  # amplitude (m), period (s)
LEAD_GAP = (32.0, ((12.0, 11.0, 0.5), (4.0, 4.1, 0.0)))  # mean gap (m), waves over t (s)
LEAD_PRESENT = True
LANE_LINE_YELLOW = (True, False, False, False)
LEAD_COLOUR = (0.55, 0.09, 0.08)  # display RGB of the lead's body


def configure(**values):
    """Replaces module parameters (the names above, and the layout constants) for one drive and
    recomputes the derived layout. Unknown names are an error."""
    g = globals()
    for k, v in values.items():
        if k not in g or not k.isupper():
            raise KeyError(f"scene.configure: no parameter {k}")
        g[k] = v
    g["LANE_LINE_OFFSETS"] = tuple(f * g["LANE_WIDTH"] for f in (-1.5, -0.5, 0.5, 1.5))
    g["ROAD_EDGE_OFFSETS"] = (g["LANE_LINE_OFFSETS"][0] - g["SHOULDER"],
                              g["LANE_LINE_OFFSETS"][-1] + g["SHOULDER"])


def curvature(s):
    """Road curvature (1/m) at arc length s: slow waves, so curves tighten, relax and change
    direction (the sample: radius down to about 450 m, like a country highway)."""
    (a1, p1, f1), (a2, p2, f2) = CURVATURE_WAVES
    return a1 * np.sin(2 * np.pi * s / p1 + f1) + a2 * np.sin(2 * np.pi * s / p2 + f2)


class Road:
    """The centre line sampled every ROAD_STEP metres from s = -100 to s_max."""

    def __init__(self, s_max):
        n = int(math.ceil((s_max + 100.0) / ROAD_STEP)) + 1
        self.s0 = -100.0
        self.s = self.s0 + ROAD_STEP * np.arange(n, dtype=np.float64)
        k = curvature(self.s)
        # Trapezoid integration of kappa → heading, then of the tangent → position. Heading and
        # position are 0 at s = 0, the ego car's start.
        theta = np.concatenate([[0.0], np.cumsum(0.5 * (k[1:] + k[:-1]) * ROAD_STEP)])
        theta -= np.interp(0.0, self.s, theta)
        tx, ty = np.cos(theta), np.sin(theta)
        x = np.concatenate([[0.0], np.cumsum(0.5 * (tx[1:] + tx[:-1]) * ROAD_STEP)])
        y = np.concatenate([[0.0], np.cumsum(0.5 * (ty[1:] + ty[:-1]) * ROAD_STEP)])
        x -= np.interp(0.0, self.s, x)
        y -= np.interp(0.0, self.s, y)
        self.theta, self.x, self.y = theta, x, y

    def at(self, s):
        """(x, y, heading) of the centre line at arc length(s) s, linearly interpolated."""
        return (np.interp(s, self.s, self.x), np.interp(s, self.s, self.y),
                np.interp(s, self.s, self.theta))

    def window(self, s_from, s_to):
        """Indices of the samples covering [s_from, s_to]."""
        i0 = max(0, int(math.floor((s_from - self.s0) / ROAD_STEP)))
        i1 = min(len(self.s), int(math.ceil((s_to - self.s0) / ROAD_STEP)) + 1)
        return slice(i0, i1)


# --- motion, all analytic in t (seconds)

def ego_speed(t):
    """Ego speed (m/s): the sample drives 24 ± 4 with a 15 s period."""
    m, a, p = SPEED
    return m + a * math.sin(2 * math.pi * t / p)


def ego_accel(t):
    m, a, p = SPEED
    return a * (2 * math.pi / p) * math.cos(2 * math.pi * t / p)


def ego_s(t):
    """Arc length travelled: the integral of ego_speed."""
    m, a, p = SPEED
    return m * t - a * (p / (2 * math.pi)) * (math.cos(2 * math.pi * t / p) - 1.0)


def ego_lateral(t):
    """Ego offset from its lane centre (m, + right): a slow weave within the lane."""
    a, p = WEAVE
    return a * math.sin(2 * math.pi * t / p)


def ego_lateral_rate(t):
    a, p = WEAVE
    return a * (2 * math.pi / p) * math.cos(2 * math.pi * t / p)


def lead_gap(t):
    """Arc-length gap from the ego camera to the lead's rear bumper (m): closes and opens."""
    m, waves = LEAD_GAP
    (a1, p1, f1), (a2, p2, f2) = waves
    return m + a1 * math.sin(2 * math.pi * t / p1 + f1) + a2 * math.sin(2 * math.pi * t / p2 + f2)


def lead_gap_rate(t):
    (a1, p1, f1), (a2, p2, f2) = LEAD_GAP[1]
    return a1 * (2 * math.pi / p1) * math.cos(2 * math.pi * t / p1 + f1) + \
        a2 * (2 * math.pi / p2) * math.cos(2 * math.pi * t / p2 + f2)


def lead_gap_accel(t):
    (a1, p1, f1), (a2, p2, f2) = LEAD_GAP[1]
    return -a1 * (2 * math.pi / p1) ** 2 * math.sin(2 * math.pi * t / p1 + f1) - \
        a2 * (2 * math.pi / p2) ** 2 * math.sin(2 * math.pi * t / p2 + f2)


class Pose:
    """The ego car at one instant: world position and heading of the camera, and the transform
    from world to ego coordinates."""

    def __init__(self, road, t):
        self.t = t
        self.s = ego_s(t)
        cx, cy, th = road.at(self.s)
        self.lateral = ego_lateral(t)
        # Heading follows the road plus the angle of the lateral weave.
        self.heading = th + math.atan2(ego_lateral_rate(t), ego_speed(t))
        self.x = cx - math.sin(th) * self.lateral
        self.y = cy + math.cos(th) * self.lateral
        self.road_heading = th

    def to_ego(self, wx, wy):
        """World (x, y) → ego (X forward, Y right)."""
        dx, dy = wx - self.x, wy - self.y
        c, s = math.cos(self.heading), math.sin(self.heading)
        return dx * c + dy * s, -dx * s + dy * c


def offset_curve(road, pose, offset, s_from, s_to):
    """Ego-frame polyline (X, Y) of the curve at a lateral offset from the centre line."""
    w = road.window(s_from, s_to)
    th = road.theta[w]
    wx = road.x[w] - np.sin(th) * offset
    wy = road.y[w] + np.cos(th) * offset
    return pose.to_ego(wx, wy)


def lateral_at(road, pose, offset, xs):
    """Ego-frame Y of an offset curve at ego-frame X = xs (np.nan where the curve is not known)."""
    X, Y = offset_curve(road, pose, offset, pose.s - 30.0, pose.s + 260.0)
    # X grows along the road as long as the road turns less than 90° in view, true here.
    return np.interp(xs, X, Y, left=np.nan, right=np.nan)


class Lead:
    """The lead car at one instant, in the ego frame."""

    def __init__(self, road, pose, t):
        self.s = pose.s + lead_gap(t)
        cx, cy, th = road.at(self.s)  # lead keeps the ego lane's centre
        self.X, self.Y = pose.to_ego(cx, cy)
        self.heading = th - pose.heading  # relative to the ego frame
        self.speed = ego_speed(t) + lead_gap_rate(t)
        self.accel = ego_accel(t) + lead_gap_accel(t)
        self.rel_speed = lead_gap_rate(t)


def ground_truth(road, t, frame_id, rpy):
    """One frame's ground-truth record (see samples/drive/README.md for every field)."""
    pose = Pose(road, t)
    lead = Lead(road, pose, t) if LEAD_PRESENT else None
    xs = np.array(X_IDXS)

    def r(v, nd=4):
        return None if v is None or not np.isfinite(v) else round(float(v), nd)

    lines = [[r(v) for v in lateral_at(road, pose, o, xs)] for o in LANE_LINE_OFFSETS]
    edges = [[r(v) for v in lateral_at(road, pose, o, xs)] for o in ROAD_EDGE_OFFSETS]
    sof = int(round(t * 1e9))
    return {
        "frame_id": frame_id,
        "t": r(t, 3),
        "timestamp_sof_ns": sof,
        "timestamp_eof_ns": sof + 20_000_000,
        "ego": {
            "speed_mps": r(ego_speed(t)),
            "accel_mps2": r(ego_accel(t)),
            "lane_offset_m": r(pose.lateral),
            "heading_to_road_rad": r(pose.heading - pose.road_heading, 6),
            "road_curvature_1pm": r(float(curvature(pose.s)), 7),
            "distance_m": r(pose.s, 3),
        },
        "calibration_rpy": [float(v) for v in rpy],
        "lane_lines_y_m": lines,
        "road_edges_y_m": edges,
        "lead": None if lead is None else {
            "distance_m": r(lead.X),
            "y_m": r(lead.Y),
            "gap_along_road_m": r(lead_gap(t)),
            "speed_mps": r(lead.speed),
            "rel_speed_mps": r(lead.rel_speed),
            "accel_mps2": r(lead.accel),
        },
    }
