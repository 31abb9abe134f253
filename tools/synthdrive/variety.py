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
light) and sensor noise. Not yet: lane changes, 2 or 4 lanes, several leads, cut-ins, glare and
hard shadows.

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
    return {
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


def apply(params):
    """Installs the drawn scene parameters (the upper-case keys) in the scene module."""
    def tup(v):
        return tuple(tup(x) for x in v) if isinstance(v, list) else v
    scene.configure(**{k: tup(v) for k, v in params.items() if k.isupper()})


class Look:
    """Lighting and sensor noise, per frame and camera, deterministic in (seed, frame, camera)."""

    def __init__(self, params):
        self.seed = params["seed"]
        self.gain = [F32(params["brightness"] * t) for t in params["tint"]]
        self.noise = F32(params["noise"])

    def __call__(self, img, cam, t):
        frame = int(round(t * scene.FPS))
        rng = np.random.Generator(np.random.PCG64([self.seed, frame, int(cam.f)]))
        out = []
        for i, c in enumerate(img):
            c = c * self.gain[i]
            if self.noise > 0:
                c = c + self.noise * rng.standard_normal(c.shape, dtype=F32)
            out.append(c)
        return out
