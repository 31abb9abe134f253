"""Scene variety: every free parameter of a synthetic drive drawn from one seed.

  params = variety.draw(seed)      # a plain dict, JSON-serialisable (groundtruth.json keeps it)
  variety.apply(params)            # installs it in scene (module parameters) before rendering
  look = variety.Look(params)      # per-frame lighting and sensor noise for raster.Renderer.look

What varies (ranges per draw): road curvature (two waves, radius down to about 150 m, S-bends
where the waves change sign), lane width 3.0-3.9 m, shoulder 0.3-1.5 m, inner lines dashed or
solid, the far-left line yellow or white, dash length and period, ego speed 3-33 m/s with a
speed wave (acceleration and braking), the weave within the lane, the lead (present in 5 of 6
drives, gap 8-90 m with two waves, never under 5 m, size and colour), camera calibration (roll/pitch/yaw within
+-2 deg) and height 1.1-1.5 m, lighting (brightness 0.55-1.15: noon to dusk, warm tint at low
light) and sensor noise; then (drawn after those, so older seeds keep them) 2-4 lanes with the ego in any of
them, a double far-left line, a lane change by the ego (half the drives, 2.5-5 s long), the lead
cutting in from or out to a neighbouring lane, worn paint, hard shadows across the road and sun
glare. Not yet: several leads.

Draws use numpy's PCG64 from the seed, so the same seed gives the same drive everywhere.
"""

import math

import numpy as np

import scene

F32 = np.float32


def draw(seed):
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    u = rng.uniform
    # Curvature: total amplitude up to 1/150 m; two waves of different length.
    kmax = u(0.0, 1.0 / 150.0)
    split = u(0.3, 1.0)
    waves = [[kmax * split * float(rng.choice([-1, 1])), u(400.0, 1200.0), u(0, 2 * math.pi)],
             [kmax * (1 - split), u(150.0, 400.0), u(0, 2 * math.pi)]]
    mean = u(3.0, 33.0)
    amp = u(0.0, min(mean - 1.0, 35.0 - mean, 6.0))
    lead = bool(rng.uniform() < 5.0 / 6.0)
    gap = u(8.0, 90.0)
    # The gap never closes below 5 m: the waves' amplitudes sum to at most gap - 5.
    a1 = u(0.0, min(gap - 5.0, 20.0))
    gap_waves = [[a1, u(6.0, 20.0), u(0, 2 * math.pi)],
                 [u(0.0, min(4.0, gap - 5.0 - a1)), u(3.0, 6.0), u(0, 2 * math.pi)]]
    body = [float(v) for v in rng.choice([[0.55, 0.09, 0.08], [0.12, 0.14, 0.35], [0.8, 0.8, 0.78],
                                          [0.08, 0.08, 0.09], [0.45, 0.46, 0.48]])]
    inner_dashed = bool(rng.uniform() < 0.8)
    lim = math.radians(2.0)
    brightness = u(0.55, 1.15)
    params = {
        "seed": int(seed),
        "CURVATURE_WAVES": waves,
        "LANE_WIDTH": u(3.0, 3.9),
        "SHOULDER": u(0.3, 1.5),
        "LANE_LINE_DASHED": [False, inner_dashed, inner_dashed, False],
        "LANE_LINE_YELLOW": [bool(rng.uniform() < 0.5), False, False, False],
        "DASH_LENGTH": u(2.0, 4.0), "DASH_PERIOD": u(9.0, 15.0),
        "SPEED": [mean, amp, u(8.0, 25.0)],
        "WEAVE": [u(0.0, 0.4), u(4.0, 12.0)],
        "LEAD_PRESENT": lead,
        "LEAD_GAP": [gap, gap_waves],
        "LEAD_LENGTH": u(3.8, 5.2), "LEAD_WIDTH": u(1.6, 2.0),
        "LEAD_COLOUR": body,
        "CAMERA_HEIGHT": u(1.1, 1.5),
        "calibration_rpy": [u(-lim, lim) for _ in range(3)],
        "brightness": brightness,
        "tint": [1.0, 1.0 - 0.15 * (1.15 - brightness), 1.0 - 0.3 * (1.15 - brightness)],
        "noise": u(0.0, 0.02),
    }
    # Drawn after everything above, so that the parameters above stay those of older versions.
    lanes = int(rng.integers(2, 5))  # 2-4 lanes
    ego_lane = int(rng.integers(0, lanes))  # the ego in any of them
    params["LANES"], params["EGO_LANE"] = lanes, ego_lane
    params["LANE_LINE_DASHED"] = [False] + [inner_dashed] * (lanes - 1) + [False]
    params["LANE_LINE_YELLOW"] = [params["LANE_LINE_YELLOW"][0]] + [False] * lanes
    double_left = bool(rng.uniform() < 0.35)
    params["LANE_LINE_DOUBLE"] = [double_left] + [False] * lanes
    # A lane change in half the drives, starting between 2 s before and 8 s after the first
    # frame (short drives catch it under way), towards a lane that exists.
    change = bool(rng.uniform() < 0.5)
    side = -1 if rng.uniform() < 0.5 else 1
    if ego_lane == 0:
        side = 1
    elif ego_lane == lanes - 1:
        side = -1
    t0, dur = u(-2.0, 8.0), u(2.5, 5.0)
    params["LANE_CHANGE"] = [t0, dur, side] if change and lanes > 1 else None
    # The lead cuts in from a neighbouring lane (1 in 4) or out to one (1 in 4).
    cut = rng.uniform()
    nb = -1 if rng.uniform() < 0.5 else 1
    if not 0 <= ego_lane + nb < lanes:
        nb = -nb
    c0, cdur = u(-1.0, 6.0), u(2.0, 4.0)
    params["LEAD_CUT"] = ([c0, cdur, nb, 0] if cut < 0.25 else
                          [c0, cdur, 0, nb] if cut < 0.5 else None)
    params["PAINT_WEAR"] = u(0.0, 0.6) if rng.uniform() < 0.4 else 0.0
    shadows = [u(15.0, 60.0), u(3.0, 12.0), u(0.25, 0.6), 0.0, u(1.5, 6.0)]
    shadow_side = -1 if rng.uniform() < 0.5 else 1
    edge = params_edges(params)[0 if shadow_side < 0 else 1]
    shadows[3] = edge - shadow_side * (shadows[4] - 1.0)  # from 1 m beyond one edge inwards
    params["SHADOWS"] = shadows if rng.uniform() < 0.4 else None
    glare = [u(-0.35, 0.35), u(0.02, 0.12), u(0.2, 0.6)]
    params["GLARE"] = glare if rng.uniform() < 0.25 else None
    return params


def params_edges(params):
    """Road edge offsets (m from the centre line) of drawn parameters, like scene.configure."""
    w = params["LANE_WIDTH"]
    return (-(params["EGO_LANE"] + 0.5) * w - params["SHOULDER"],
            (params["LANES"] - params["EGO_LANE"] - 0.5) * w + params["SHOULDER"])


def apply(params):
    """Installs the drawn scene parameters (the upper-case keys) in the scene module."""
    def tup(v):
        return tuple(tup(x) for x in v) if isinstance(v, list) else v
    scene.configure(**{k: tup(v) for k, v in params.items() if k.isupper()})


class Look:
    """Lighting and sensor noise, per frame and camera, deterministic in (seed, frame, camera).

    The noise is σ · a standard normal value per pixel and channel. Drawing 3 × 2.3 M normal
    values per camera frame was a large part of the render time, so they come from a table of
    NOISE_TABLE standard normal values drawn once per drive: each row of each channel of each
    frame takes a run of the table starting at a place drawn for it (from (seed, frame, camera)).
    Each pixel's value is still a standard normal draw; pixels of a row are independent, rows and
    frames take unrelated runs (2^22 values against 1928 per row)."""

    NOISE_TABLE = 1 << 22

    def __init__(self, params):
        self.seed = params["seed"]
        self.gain = [F32(params["brightness"] * t) for t in params["tint"]]
        self.noise = F32(params["noise"])
        self._table = None

    def noise_table(self, width):
        """NOISE_TABLE + width float32 standard normal values (a row may start at the last)."""
        if self._table is None or len(self._table) < self.NOISE_TABLE + width:
            rng = np.random.Generator(np.random.PCG64([self.seed, 0x6e6f697365]))  # "noise"
            self._table = rng.standard_normal(self.NOISE_TABLE + width, dtype=F32)
        return self._table

    def noise_rows(self, cam, t):
        """(3, height) int64: where each channel's row of this frame starts in the table."""
        frame = int(round(t * scene.FPS))
        rng = np.random.Generator(np.random.PCG64([self.seed, frame, int(cam.f)]))
        return rng.integers(0, self.NOISE_TABLE, size=(3, cam.h), dtype=np.int64)

    def __call__(self, img, cam, t):
        if self.noise > 0:
            table, rows = self.noise_table(cam.w), self.noise_rows(cam, t)
            cols = np.arange(cam.w, dtype=np.int64)
        out = []
        for i, c in enumerate(img):
            c = c * self.gain[i]
            if self.noise > 0:
                c = c + self.noise * table[rows[i][:, None] + cols]
            out.append(c)
        return out
