"""Scene variety: every free parameter of a synthetic drive drawn from one seed.

  params = variety.draw(seed)      # a plain dict, JSON-serialisable (groundtruth.json keeps it)
  variety.apply(params)            # installs it in scene (module parameters) before rendering
  look = variety.Look(params)      # per-frame lighting and sensor noise for raster.Renderer.look

What varies (ranges per draw): road curvature (two waves, radius down to about 150 m, S-bends
where the waves change sign), lane width 3.0-3.9 m, shoulder 0.3-1.5 m, inner lines dashed or
solid, the far-left line yellow or white, dash length and period, ego speed 3-33 m/s with a
speed wave (acceleration and braking), the weave within the lane, the lead (present in 9 of 10
drives, mean gap 6-80 m weighted toward 15-45 m, two waves within 5-80 m, size and colour),
camera calibration (roll/pitch/yaw within +-2 deg) and height 1.1-1.5 m, lighting (brightness 0.55-1.15: noon to dusk, warm tint at low
light) and sensor noise; then (drawn after those, so older seeds keep them) 2-4 lanes with the ego in any of
them, a double far-left line, a lane change by the ego (half the drives, 2.5-5 s long), the lead
cutting in from or out to a neighbouring lane, worn paint, hard shadows across the road and sun
glare. Not yet: several leads.

Draws use numpy's PCG64 from the seed, so the same seed gives the same drive everywhere.

  python3 tools/synthdrive/variety.py --stats 101-220 --seconds 1.5   # lead label statistics
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
    lead = bool(rng.uniform() < 0.9)
    gap = lead_gap_mean(u())
    # The gap stays within 5-80 m: the waves' amplitudes sum to at most the distance from the
    # mean to either bound.
    room = min(gap - LEAD_GAP_RANGE[0], LEAD_GAP_RANGE[1] - gap)
    a1 = u(0.0, min(room, 20.0))
    gap_waves = [[a1, u(6.0, 20.0), u(0, 2 * math.pi)],
                 [u(0.0, min(4.0, room - a1)), u(3.0, 6.0), u(0, 2 * math.pi)]]
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
    # The lead cuts in from a neighbouring lane (1 in 8) or out to one (1 in 8), starting
    # between 2 s before and 3 s after the first frame, so that short drives catch it under way.
    cut = rng.uniform()
    nb = -1 if rng.uniform() < 0.5 else 1
    if not 0 <= ego_lane + nb < lanes:
        nb = -nb
    c0, cdur = u(-2.0, 3.0), u(2.0, 4.0)
    params["LEAD_CUT"] = ([c0, cdur, nb, 0] if cut < 0.125 else
                          [c0, cdur, 0, nb] if cut < 0.25 else None)
    params["PAINT_WEAR"] = u(0.0, 0.6) if rng.uniform() < 0.4 else 0.0
    shadows = [u(15.0, 60.0), u(3.0, 12.0), u(0.25, 0.6), 0.0, u(1.5, 6.0)]
    shadow_side = -1 if rng.uniform() < 0.5 else 1
    edge = params_edges(params)[0 if shadow_side < 0 else 1]
    shadows[3] = edge - shadow_side * (shadows[4] - 1.0)  # from 1 m beyond one edge inwards
    params["SHADOWS"] = shadows if rng.uniform() < 0.4 else None
    glare = [u(-0.35, 0.35), u(0.02, 0.12), u(0.2, 0.6)]
    params["GLARE"] = glare if rng.uniform() < 0.25 else None
    return params


# The lead's mean gap (m along the road): following distances, weighted toward 15-50 m.
LEAD_GAP_RANGE = (5.0, 80.0)
LEAD_GAP_BANDS = ((0.15, 6.0, 15.0), (0.70, 15.0, 45.0), (0.15, 45.0, 80.0))  # (share, from, to)


def lead_gap_mean(q):
    """The mean gap for a uniform draw q in [0, 1): uniform within each band of LEAD_GAP_BANDS,
    each band taking its share of the draws."""
    for share, lo, hi in LEAD_GAP_BANDS:
        if q < share:
            return lo + (hi - lo) * q / share
        q -= share
    return LEAD_GAP_BANDS[-1][2]


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


def lead_stats(seeds, seconds):
    """Per drive: frames with a lead in the ego's lane within 80 m, with a lead in another lane,
    and the in-lane distances (m, ego frame X), from the scene without rendering."""
    rows = []
    for seed in seeds:
        params = draw(seed)
        apply(params)
        frames = int(round(seconds * scene.FPS))
        road = scene.Road(scene.ego_s(seconds) + 600.0)
        in_lane, other, dist = 0, 0, []
        for i in range(frames):
            t = i / scene.FPS
            if not scene.LEAD_PRESENT:
                continue
            lead = scene.Lead(road, scene.Pose(road, t), t)
            if scene.lead_in_path(t) and lead.X < 80.0:
                in_lane += 1
                dist.append(lead.X)
            else:
                other += 1
        rows.append((seed, frames, in_lane, other, dist))
    return rows


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Lead label statistics of seeded drives.")
    ap.add_argument("--stats", required=True, help="seeds, e.g. 101-220")
    ap.add_argument("--seconds", type=float, default=1.5)
    a = ap.parse_args()
    lo, _, hi = a.stats.partition("-")
    rows = lead_stats(range(int(lo), int(hi or lo) + 1), a.seconds)
    frames = sum(r[1] for r in rows)
    in_lane = sum(r[2] for r in rows)
    other = sum(r[3] for r in rows)
    dist = np.array([d for r in rows for d in r[4]])
    drives = sum(1 for r in rows if r[2] > 0)
    print(f"{len(rows)} drives of {a.seconds} s, {frames} frames")
    print(f"drives with a lead in the ego's lane within 80 m (some frame): {drives} "
          f"({100.0 * drives / len(rows):.0f} %)")
    print(f"frames with a lead in the ego's lane within 80 m: {in_lane} ({100.0 * in_lane / frames:.0f} %); "
          f"with a lead elsewhere (another lane or beyond 80 m): {other} ({100.0 * other / frames:.0f} %); "
          f"no lead: {frames - in_lane - other} ({100.0 * (frames - in_lane - other) / frames:.0f} %)")
    if dist.size:
        edges = [0, 5, 15, 30, 50, 65, 80]
        hist = np.histogram(dist, edges)[0]
        print("in-lane lead distance (m): " + ", ".join(
            f"{a}-{b}: {100.0 * n / dist.size:.0f} %" for a, b, n in zip(edges, edges[1:], hist)) +
            f"; median {np.median(dist):.1f}, min {dist.min():.1f}, max {dist.max():.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
