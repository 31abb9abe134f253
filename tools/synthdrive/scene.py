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
# The sample: three lanes; the ego car drives in the middle one, whose centre is the road's centre
# line. LANE_LINE_OFFSETS holds every line of the road, left to right; the four lines openpilot
# predicts (far left, left, right, far right; docs/contract.md, "Parsing the outputs") are the
# four around the ego's current lane (ego_lines()).
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
# Layout and events variety.py may change (the defaults are the sample's: none of them happen).
LANES = 3
EGO_LANE = 1  # the ego's lane at the start, 0 = leftmost; the road's centre line is its centre
LANE_LINE_DOUBLE = (False, False, False, False)  # per line of the road, left to right
# The ego's lane change: (start t (s), duration (s), direction -1 left / +1 right), or None.
LANE_CHANGE = None
BLINKER_LEAD = 1.0  # s the blinker is on before the change starts
# The lead's lateral move: (start t (s), duration (s), from, to) in lanes relative to EGO_LANE
# (0 = the ego's starting lane; -1 -> 0 is a cut-in from the left), or None: it keeps lane 0.
LEAD_CUT = None
PAINT_WEAR = 0.0  # 0 = fresh paint; up to 0.6: markings fade in patches
# Hard shadows of roadside objects across the road: (period (m), length (m), darkness 0..1,
# lateral centre (m), half width (m)) or None.
SHADOWS = None
# Sun glare: (azimuth (rad, + right), elevation (rad), strength) of a low sun ahead, or None.
GLARE = None


def configure(**values):
    """Replaces module parameters (the names above, and the layout constants) for one drive and
    recomputes the derived layout. Unknown names are an error."""
    g = globals()
    for k, v in values.items():
        if k not in g or not k.isupper():
            raise KeyError(f"scene.configure: no parameter {k}")
        g[k] = v
    # Every line of the road, left to right (LANES + 1); line k is the left line of lane k.
    g["LANE_LINE_OFFSETS"] = tuple((k - g["EGO_LANE"] - 0.5) * g["LANE_WIDTH"]
                                   for k in range(g["LANES"] + 1))
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


def lane_shift(t):
    """Lateral offset (m, + right) of the lane-change manoeuvre: 0 before, one lane width after,
    a smooth ramp u − sin(2πu)/2π in between (no lateral speed at either end)."""
    if LANE_CHANGE is None:
        return 0.0
    t0, d, sign = LANE_CHANGE
    u = min(max((t - t0) / d, 0.0), 1.0)
    return sign * LANE_WIDTH * (u - math.sin(2 * math.pi * u) / (2 * math.pi))


def lane_shift_rate(t):
    if LANE_CHANGE is None:
        return 0.0
    t0, d, sign = LANE_CHANGE
    u = (t - t0) / d
    return 0.0 if not 0.0 < u < 1.0 else sign * LANE_WIDTH * (1 - math.cos(2 * math.pi * u)) / d


def ego_lateral(t):
    """Ego offset from the road's centre line (m, + right): a slow weave within the lane, plus
    the lane change if there is one."""
    a, p = WEAVE
    w = a * math.sin(2 * math.pi * t / p)
    return w if LANE_CHANGE is None else w + lane_shift(t)


def ego_lateral_rate(t):
    a, p = WEAVE
    r = a * (2 * math.pi / p) * math.cos(2 * math.pi * t / p)
    return r if LANE_CHANGE is None else r + lane_shift_rate(t)


def ego_lane(t):
    """The lane the ego car's centre is in (0 = leftmost): it changes when the car crosses the
    line, as openpilot's lane-line indices do."""
    if LANE_CHANGE is None:
        return EGO_LANE
    k = EGO_LANE + math.floor(ego_lateral(t) / LANE_WIDTH + 0.5)
    return int(min(max(k, 0), LANES - 1))


def ego_lines(lane):
    """Road line indices of openpilot's four lines around `lane` (None where the road has none)."""
    return [k if 0 <= k <= LANES else None for k in (lane - 1, lane, lane + 1, lane + 2)]


# openpilot's desires (docs/contract.md, "Policy network and temporal inputs").
DESIRE_NONE, DESIRE_LANE_CHANGE_LEFT, DESIRE_LANE_CHANGE_RIGHT = 0, 3, 4


def desire(t):
    """The desire during the lane change (laneChangeLeft/Right while the car moves over), none
    otherwise."""
    if LANE_CHANGE is None:
        return DESIRE_NONE
    t0, d, sign = LANE_CHANGE
    if not t0 <= t < t0 + d:
        return DESIRE_NONE
    return DESIRE_LANE_CHANGE_LEFT if sign < 0 else DESIRE_LANE_CHANGE_RIGHT


def blinker(t):
    """(left, right) blinker on: from BLINKER_LEAD s before the change to its end."""
    if LANE_CHANGE is None:
        return False, False
    t0, d, sign = LANE_CHANGE
    on = t0 - BLINKER_LEAD <= t < t0 + d
    return on and sign < 0, on and sign > 0


def lead_lateral(t):
    """Lead offset from the road's centre line (m, + right): 0 unless it cuts in or out."""
    if LEAD_CUT is None:
        return 0.0
    t0, d, a, b = LEAD_CUT
    u = min(max((t - t0) / d, 0.0), 1.0)
    return LANE_WIDTH * (a + (b - a) * (u - math.sin(2 * math.pi * u) / (2 * math.pi)))


def lead_lateral_rate(t):
    if LEAD_CUT is None:
        return 0.0
    t0, d, a, b = LEAD_CUT
    u = (t - t0) / d
    return 0.0 if not 0.0 < u < 1.0 else LANE_WIDTH * (b - a) * (1 - math.cos(2 * math.pi * u)) / d


def lead_in_path(t):
    """A lead exists for the model when there is one and its centre is in the ego's lane."""
    if not LEAD_PRESENT:
        return False
    centre = (ego_lane(t) - EGO_LANE) * LANE_WIDTH
    return abs(lead_lateral(t) - centre) < LANE_WIDTH / 2


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
        cx, cy, th = road.at(self.s)  # lead keeps the ego lane's centre unless it cuts in or out
        self.lateral = lead_lateral(t)
        turn = 0.0
        if LEAD_CUT is not None:
            cx, cy = cx - math.sin(th) * self.lateral, cy + math.cos(th) * self.lateral
            turn = math.atan2(lead_lateral_rate(t), max(ego_speed(t) + lead_gap_rate(t), 1.0))
        self.X, self.Y = pose.to_ego(cx, cy)
        self.heading = th - pose.heading  # relative to the ego frame
        if LEAD_CUT is not None:
            self.heading += turn
        self.speed = ego_speed(t) + lead_gap_rate(t)
        self.accel = ego_accel(t) + lead_gap_accel(t)
        self.rel_speed = lead_gap_rate(t)


def ground_truth(road, t, frame_id, rpy, extra=False):
    """One frame's ground-truth record (see samples/drive/README.md for every field). `extra`
    adds the fields of drives with variety (the sample's records keep their old form)."""
    pose = Pose(road, t)
    lead = Lead(road, pose, t) if LEAD_PRESENT else None
    xs = np.array(X_IDXS)

    def r(v, nd=4):
        return None if v is None or not np.isfinite(v) else round(float(v), nd)

    lane = ego_lane(t)
    lines = [[None] * len(xs) if k is None else
             [r(v) for v in lateral_at(road, pose, LANE_LINE_OFFSETS[k], xs)]
             for k in ego_lines(lane)]
    edges = [[r(v) for v in lateral_at(road, pose, o, xs)] for o in ROAD_EDGE_OFFSETS]
    sof = int(round(t * 1e9))
    rec = {
        "frame_id": frame_id,
        "t": r(t, 3),
        "timestamp_sof_ns": sof,
        "timestamp_eof_ns": sof + 20_000_000,
        "ego": {
            "speed_mps": r(ego_speed(t)),
            "accel_mps2": r(ego_accel(t)),
            "lane_offset_m": r(pose.lateral if LANE_CHANGE is None else
                               pose.lateral - (lane - EGO_LANE) * LANE_WIDTH),
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
    if extra:
        rec["ego"]["lane_index"] = lane
        rec["lanes"] = LANES
        rec["desire"] = desire(t)
        rec["blinker"] = list(blinker(t))
        if lead is not None:
            rec["lead"]["in_path"] = lead_in_path(t)
            rec["lead"]["lateral_from_centre_m"] = r(lead.lateral)
    return rec
