"""Per-pixel rendering of the synthetic drive: rays through a pinhole camera onto the ground plane
(road, markings, verge), a lead car made of two boxes, sky and haze; output as NV12.

Determinism: per-pixel work uses only +, −, ×, ÷, sqrt, floor and table look-ups in float32 —
operations IEEE 754 rounds exactly — so the pixels do not depend on which SIMD path numpy picks
for transcendental functions on a given CPU. Anything needing sin/cos/exp is computed per frame as
scalars or as per-camera constants.

Anti-aliasing is analytic: each pixel knows its footprint on the ground (lateral and along the
road), markings are box-filtered over it and texture contrast fades where texels get smaller than
a pixel. Beside looking right, this keeps the HEVC stream small (no shimmering far field).
"""

import ctypes
import math
import os

import numpy as np

import scene

F32 = np.float32

# Colours (display RGB, 0..1).
ASPHALT = (0.34, 0.34, 0.35)
VERGE = (0.28, 0.38, 0.17)
WHITE = (0.88, 0.88, 0.86)
YELLOW = (0.86, 0.70, 0.18)
SKY_HORIZON = (0.78, 0.82, 0.88)
SKY_ZENITH = (0.36, 0.52, 0.82)
CAR_GLASS = (0.10, 0.11, 0.13)
TAIL_LIGHT = (0.95, 0.15, 0.10)
PLATE = (0.90, 0.90, 0.84)
BUMPER = (0.12, 0.12, 0.12)
HAZE_DISTANCE = 380.0  # m: ground farther than this is pure haze
# Faces lit by a sun high behind-left of the camera: brightness per box face.
FACE_LIGHT = {"rear": 0.80, "top": 1.00, "side_left": 0.90, "side_right": 0.62, "front": 0.5}


def rot_rpy(rpy):
    """R(rpy) = Rz(yaw)·Ry(pitch)·Rx(roll) (docs/contract.md, "The warp"), float64."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _texture(rng, n, blur):
    """A tileable n×n noise texture, box-blurred `blur` times (wrapping), zero mean, unit std."""
    t = rng.standard_normal((n, n))
    for _ in range(blur):
        t = (t + np.roll(t, 1, 0) + np.roll(t, -1, 0) + np.roll(t, 1, 1) + np.roll(t, -1, 1)) / 5.0
    t = (t - t.mean()) / t.std()
    return t.astype(F32)


class Textures:
    """Three noise scales sampled by world (s, l): asphalt grain, wear patches, cloud shadows."""

    def __init__(self, seed=7):
        rng = np.random.Generator(np.random.PCG64(seed))
        n = 256  # a power of two (sample() wraps by masking)
        # (texture, metres per texel, contrast)
        self.layers = [(_texture(rng, n, 1), 0.06, 0.06),
                       (_texture(rng, n, 2), 1.1, 0.08),
                       (_texture(rng, n, 3), 9.0, 0.16)]
        self.n = n

    def sample(self, s, l, footprint):
        """Brightness factor around 1 at ground points (s, l) seen with `footprint` metres/pixel."""
        out = np.ones_like(s)
        n = self.n
        for tex, texel, contrast in self.layers:
            u = s * F32(1.0 / texel)
            v = l * F32(1.0 / texel)
            u0 = np.floor(u)
            v0 = np.floor(v)
            fu = u - u0
            fv = v - v0
            # n is a power of two: masking wraps like a modulo, also for negative coordinates.
            mask = n - 1
            iu = (u0.astype(np.int64) & mask) * n
            iv = v0.astype(np.int64) & mask
            iu1 = ((iu + n) & (mask * n + mask))
            iv1 = (iv + 1) & mask
            flat = tex.ravel()
            t00, t10, t01, t11 = flat[iu + iv], flat[iu1 + iv], flat[iu + iv1], flat[iu1 + iv1]
            a = t00 + (t10 - t00) * fu
            b = t01 + (t11 - t01) * fu
            val = a + (b - a) * fv
            # Fade the contrast once texels are smaller than a pixel (no aliasing, no shimmer).
            q = footprint * F32(1.0 / texel)
            fade = F32(1.0) / (F32(1.0) + q * q)
            out += val * fade * F32(contrast)
        return out


class Camera:
    """A pinhole camera at the ego origin; per-pixel rays and ground hits are fixed for a drive
    (the car does not pitch or roll), so they are computed once here."""

    def __init__(self, width, height, focal, rpy, cam_height=scene.CAMERA_HEIGHT):
        self.w, self.h, self.f = width, height, focal
        self.cam_height = cam_height
        r = rot_rpy(rpy).T  # device → ego (calibrated) frame
        u = (np.arange(width, dtype=np.float64) - width / 2.0) / focal
        v = (np.arange(height, dtype=np.float64) - height / 2.0) / focal
        # Device-frame ray of pixel (u, v): x forward = 1, y right = u, z down = v. Rows and
        # columns broadcast (a pixel's value is (r0 + r1·u) + r2·v either way).
        d = [(r[i, 0] + r[i, 1] * u)[None, :] + (r[i, 2] * v)[:, None] for i in range(3)]
        norm = np.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
        self.dx, self.dy, self.dz = (c.astype(F32) for c in d)
        # Ground: z = +cam_height. Pixels looking down and not hopelessly far hit it.
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(d[2] > 1e-6, cam_height / d[2], np.inf)
        rng = t * norm
        self.ground = np.nonzero((rng < HAZE_DISTANCE).ravel())[0]
        gi = self.ground
        tg, rg = t.ravel()[gi], rng.ravel()[gi]  # per ground pixel from here on
        self.gX = (tg * d[0].ravel()[gi]).astype(F32)
        self.gY = (tg * d[1].ravel()[gi]).astype(F32)
        self.g_range = rg.astype(F32)
        # Footprint of one pixel on the ground: range/f across, range²/(f·height) along (grazing).
        fl = rg / focal
        self.g_foot_l = fl.astype(F32)
        self.g_foot_s = np.maximum(fl, fl * rg / cam_height).astype(F32)
        haze = np.clip(rg / HAZE_DISTANCE, 0.0, 1.0)
        self.g_haze = (haze * haze).astype(F32)
        # Sky gradient by elevation (ego frame), and lens vignetting, both fixed per pixel.
        elev = np.clip(-d[2] / norm * 1.8, 0.0, 1.0)
        elev = elev * elev * (3.0 - 2.0 * elev)  # smoothstep: no visible band
        self.sky = [(SKY_HORIZON[c] + (SKY_ZENITH[c] - SKY_HORIZON[c]) * elev).astype(F32)
                    for c in range(3)]
        rr = ((u * u)[None, :] + (v * v)[:, None]) * (focal / math.hypot(width / 2.0, height / 2.0)) ** 2
        self.vignette = (1.0 - 0.22 * rr).astype(F32)


def _project(cam_r, f, w, h, X, Y, Z):
    """Ego-frame points → camera pixels; cam_r is R(rpy) (ego → device)."""
    dxx = cam_r[0, 0] * X + cam_r[0, 1] * Y + cam_r[0, 2] * Z
    dyy = cam_r[1, 0] * X + cam_r[1, 1] * Y + cam_r[1, 2] * Z
    dzz = cam_r[2, 0] * X + cam_r[2, 1] * Y + cam_r[2, 2] * Z
    return w / 2.0 + f * dyy / dxx, h / 2.0 + f * dzz / dxx, dxx


def _cover(d, half, foot):
    """Fraction of a pixel footprint [d − foot/2, d + foot/2] inside [−half, half] (box filter)."""
    lo = np.maximum(d - foot * F32(0.5), -half)
    hi = np.minimum(d + foot * F32(0.5), half)
    return np.clip((hi - lo) / foot, F32(0.0), F32(1.0))


def _dash_cover(s, foot):
    """Fraction of a pixel's along-road footprint on a dash (DASH_LENGTH of every DASH_PERIOD)."""
    return _periodic_cover(s, foot, scene.DASH_PERIOD, scene.DASH_LENGTH)


def _periodic_cover(s, foot, period_m, dash_m):
    """Fraction of a pixel's along-road footprint on [0, dash_m) of every period_m metres."""
    period, dash = F32(period_m), F32(dash_m)
    m = s - np.floor(s / period) * period  # position within the period, [0, period)
    half = foot * F32(0.5)
    cov = np.zeros_like(s)
    for k in (-1.0, 0.0, 1.0):  # the dash of this period and its neighbours
        a = F32(k) * period
        lo = np.maximum(m - half, a)
        hi = np.minimum(m + half, a + dash)
        cov += np.maximum(hi - lo, F32(0.0))
    cov = cov / foot
    # Footprints longer than a period see the average.
    return np.where(foot > period, F32(dash_m / period_m), np.minimum(cov, F32(1.0)))


class Renderer:
    def __init__(self, road, cameras, rpy, fast=None):
        """fast: a FastRaster (the compiled per-pixel code) or None for the numpy path."""
        self.road = road
        self.cameras = cameras
        self.tex = Textures()
        self.r_dev_from_ego = rot_rpy(rpy)
        # Optional per-frame lighting and noise (variety.Look): look(img, cam, t) -> img on the 3
        # float32 RGB planes. None for the sample drive.
        self.look = None
        self.fast = fast

    def _centre_table(self, pose):
        """The centre line near the car in ego coordinates, resampled on a uniform s grid so a
        look-up is an index computation, not a search: (x, y, cos, sin) tables and the table's
        origin relative to the ego's arc length."""
        road = self.road
        w = road.window(pose.s - 30.0, pose.s + scene.ROAD_STEP + HAZE_DISTANCE * 1.2)
        s_tab = road.s[w]
        cx, cy = pose.to_ego(road.x[w], road.y[w])
        th = road.theta[w] - pose.heading
        tabs = [cx.astype(F32), cy.astype(F32), np.cos(th).astype(F32), np.sin(th).astype(F32)]
        return tabs, F32(s_tab[0] - pose.s)

    def _ground(self, cam, pose, lead):
        """RGB (3 arrays) of the ground pixels of `cam` for this pose."""
        tabs, s_base = self._centre_table(pose)
        n_tab = len(tabs[0])

        X, Y = cam.gX, cam.gY

        def lookup(srel):
            pos = (srel - s_base) * F32(1.0 / scene.ROAD_STEP)
            pos = np.clip(pos, F32(0.0), F32(n_tab - 1.001))
            i = pos.astype(np.int64)
            fr = pos - i.astype(F32)
            i1 = i + 1
            out = []
            for t in tabs:
                lo = t.take(i)
                out.append(lo + (t.take(i1) - lo) * fr)
            return out

        # Newton's iteration for the foot point of each ground point on the centre line:
        # s ← s + (P − c(s))·t(s). Start from s ≈ X; two steps are exact to millimetres here.
        srel = X.copy()
        for _ in range(2):
            px, py, tx, ty = lookup(srel)
            srel = srel + (X - px) * tx + (Y - py) * ty
        px, py, tx, ty = lookup(srel)
        lat = (Y - py) * tx - (X - px) * ty  # signed distance, + right of the centre line
        s_abs = srel + F32(pose.s)

        foot_l, foot_s = cam.g_foot_l, cam.g_foot_s
        e0, e1 = scene.ROAD_EDGE_OFFSETS
        if e0 == -e1:  # symmetric about the centre line (the sample)
            on_road = _cover(lat, F32(e1), foot_l)
        else:
            on_road = _cover(lat - F32((e0 + e1) / 2), F32((e1 - e0) / 2), foot_l)
        shade = self.tex.sample(s_abs, lat, foot_l)
        rgb = [VERGE[c] + (ASPHALT[c] - VERGE[c]) * on_road for c in range(3)]
        # Tyre tracks: slightly darker bands in each lane.
        tracks = np.zeros_like(lat)
        for o in ((k - scene.EGO_LANE) * scene.LANE_WIDTH for k in range(scene.LANES)):
            for side in (-0.8, 0.8):
                tracks += _cover(lat - F32(o + side), F32(0.35), foot_l)
        dark = F32(1.0) - F32(0.07) * tracks * on_road
        rgb = [c * shade * dark for c in rgb]
        # Hard shadows of roadside objects: bands across part of the road, every period metres.
        if scene.SHADOWS is not None:
            period, length, dark, centre, half = scene.SHADOWS
            band = _periodic_cover(s_abs, foot_s, period, length) * \
                _cover(lat - F32(centre), F32(half), foot_l)
            rgb = [c * (F32(1.0) - F32(dark) * band) for c in rgb]
        wear = None
        if scene.PAINT_WEAR > 0:  # worn paint: the markings fade in patches (the wear texture)
            wear = np.clip(F32(1.0 - scene.PAINT_WEAR) + (shade - F32(1.0)) * F32(4.0 * scene.PAINT_WEAR),
                           F32(0.0), F32(1.0))
        for k, off in enumerate(scene.LANE_LINE_OFFSETS):
            if scene.LANE_LINE_DOUBLE[k]:  # two stripes with a gap of one stripe width
                gap = F32(scene.LINE_WIDTH)
                cov = _cover(lat - F32(off) - gap, F32(scene.LINE_WIDTH / 2), foot_l) + \
                    _cover(lat - F32(off) + gap, F32(scene.LINE_WIDTH / 2), foot_l)
                cov = np.minimum(cov, F32(1.0))
            else:
                cov = _cover(lat - F32(off), F32(scene.LINE_WIDTH / 2), foot_l)
            if scene.LANE_LINE_DASHED[k]:
                cov = cov * _dash_cover(s_abs, foot_s)
            if wear is not None:
                cov = cov * wear
            paint = YELLOW if scene.LANE_LINE_YELLOW[k] else WHITE
            rgb = [c + (F32(paint[i]) * shade - c) * cov for i, c in enumerate(rgb)]
        # The lead car's shadow: a soft dark patch under its footprint.
        if lead is not None:
            ls = F32(lead.s - pose.s)
            mid, half = F32(scene.LEAD_LENGTH / 2), F32(scene.LEAD_LENGTH / 2 + 0.3)
            along = _cover(srel - ls - mid, half, foot_s)
            if scene.LEAD_CUT is None:
                across = _cover(lat, F32(scene.LEAD_WIDTH / 2 + 0.15), foot_l)
            else:
                across = _cover(lat - F32(lead.lateral), F32(scene.LEAD_WIDTH / 2 + 0.15), foot_l)
            sh = F32(1.0) - F32(0.55) * along * across
            rgb = [c * sh for c in rgb]
        haze = cam.g_haze
        return [c + (F32(SKY_HORIZON[i]) - c) * haze for i, c in enumerate(rgb)]

    def _lead(self, cam, img, pose, lead):
        """Draws the lead car (a body box and a cabin box) over `img` (3 H×W arrays)."""
        rot = self.r_dev_from_ego
        h = scene.CAMERA_HEIGHT
        # Boxes in the lead frame: (x0, x1, y0, y1, height0, height1) above ground.
        boxes = [(0.0, scene.LEAD_LENGTH, -scene.LEAD_WIDTH / 2, scene.LEAD_WIDTH / 2, 0.22, 0.98),
                 (0.9, 3.4, -0.80, 0.80, 0.98, 1.46)]
        c, s = math.cos(lead.heading), math.sin(lead.heading)
        # Screen rectangle of all box corners.
        xs, ys, zs = [], [], []
        for b in boxes:
            for x in (b[0], b[1]):
                for y in (b[2], b[3]):
                    for z in (b[4], b[5]):
                        xs.append(lead.X + x * c - y * s)
                        ys.append(lead.Y + x * s + y * c)
                        zs.append(h - z)
        u, v, depth = _project(rot, cam.f, cam.w, cam.h, np.array(xs), np.array(ys), np.array(zs))
        if (depth <= 0.5).any():
            return
        u0, u1 = max(0, int(math.floor(u.min())) - 1), min(cam.w, int(math.ceil(u.max())) + 2)
        v0, v1 = max(0, int(math.floor(v.min())) - 1), min(cam.h, int(math.ceil(v.max())) + 2)
        if u0 >= u1 or v0 >= v1:
            return
        sub = (slice(v0, v1), slice(u0, u1))
        dx, dy, dz = cam.dx[sub], cam.dy[sub], cam.dz[sub]
        # Rays in the lead frame: origin and direction rotated by −heading about z.
        ox = F32(-lead.X * c - lead.Y * s)
        oy = F32(lead.X * s - lead.Y * c)
        rx = dx * F32(c) + dy * F32(s)
        ry = -dx * F32(s) + dy * F32(c)
        rz = dz
        best = np.full(dx.shape, np.inf, dtype=F32)
        color = [np.zeros_like(dx) for _ in range(3)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for bi, (x0, x1, y0, y1, z0, z1) in enumerate(boxes):
                # Slab test; heights above ground become ego z = h − height.
                tx0, tx1 = (F32(x0) - ox) / rx, (F32(x1) - ox) / rx
                ty0, ty1 = (F32(y0) - oy) / ry, (F32(y1) - oy) / ry
                tz0, tz1 = F32(h - z1) / rz, F32(h - z0) / rz  # ray origin z = 0
                nx, ny, nz = np.minimum(tx0, tx1), np.minimum(ty0, ty1), np.minimum(tz0, tz1)
                tnear = np.maximum(np.maximum(nx, ny), nz)
                tfar = np.minimum(np.minimum(np.maximum(tx0, tx1), np.maximum(ty0, ty1)),
                                  np.maximum(tz0, tz1))
                hit = (tnear <= tfar) & (tnear > 0) & (tnear < best)
                hit &= np.isfinite(tnear)
                if not hit.any():
                    continue
                # Which face: the slab that set tnear.
                face_x = hit & (nx >= ny) & (nx >= nz)
                face_z = hit & ~face_x & (nz >= ny)
                face_y = hit & ~face_x & ~face_z
                hy = oy + ry * tnear  # lateral coordinate on the hit face
                hz = F32(h) - rz * tnear  # height above ground
                light = np.where(face_x, F32(FACE_LIGHT["rear"]),
                                 np.where(face_z, F32(FACE_LIGHT["top"]),
                                          np.where(ry > 0, F32(FACE_LIGHT["side_left"]),
                                                   F32(FACE_LIGHT["side_right"]))))
                base = [np.full(dx.shape, F32(scene.LEAD_COLOUR[i])) for i in range(3)]
                if bi == 1:  # the cabin: glass on the rear and the sides
                    glass = (face_x | face_y) & (hz > F32(1.02)) & (hz < F32(1.42))
                    base = [np.where(glass, F32(CAR_GLASS[i]), b) for i, b in enumerate(base)]
                else:  # the body's rear: tail lights, plate, bumper
                    rear = face_x
                    tail = rear & (np.abs(hy) > F32(0.55)) & (np.abs(hy) < F32(0.85)) & \
                        (hz > F32(0.68)) & (hz < F32(0.86))
                    plate = rear & (np.abs(hy) < F32(0.26)) & (hz > F32(0.42)) & (hz < F32(0.55))
                    bumper = (face_x | face_y) & (hz < F32(0.36))
                    for mask, col in ((tail, TAIL_LIGHT), (plate, PLATE), (bumper, BUMPER)):
                        base = [np.where(mask, F32(col[i]), b) for i, b in enumerate(base)]
                for i in range(3):
                    color[i] = np.where(hit, base[i] * light, color[i])
                best = np.where(hit, tnear, best)
        drawn = np.isfinite(best)
        for i in range(3):
            img[i][sub] = np.where(drawn, color[i], img[i][sub])

    def render(self, cam, t):
        """The camera's image at time t as an NV12 byte string (tightly packed)."""
        pose = scene.Pose(self.road, t)
        lead = scene.Lead(self.road, pose, t) if scene.LEAD_PRESENT else None
        if self.fast is not None:
            return self.fast.render(self, cam, t, pose, lead)
        img = [c.copy() for c in cam.sky]
        ground = self._ground(cam, pose, lead)
        for i in range(3):
            img[i].ravel()[cam.ground] = ground[i]
        if lead is not None:
            self._lead(cam, img, pose, lead)
        img = [c * cam.vignette for c in img]
        if scene.GLARE is not None:
            g = _glare(cam)
            img = [c + g * F32(w) for c, w in zip(img, (1.0, 0.93, 0.78))]
        if self.look is not None:
            img = self.look(img, cam, t)
        return to_nv12(img)


def _glare(cam):
    """Sun glare of a low sun ahead (scene.GLARE), fixed relative to the car, so per camera: a
    veil over the whole image and a bright halo around the sun, falling off with the angle. Only
    arithmetic and sqrt per pixel (see the module's note on determinism); cached on the camera."""
    key = (scene.GLARE, cam.f)
    if getattr(cam, "_glare_key", None) == key:
        return cam._glare
    az, el, strength = scene.GLARE
    sun = (math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), -math.sin(el))
    dx, dy, dz = (c.astype(np.float64) for c in (cam.dx, cam.dy, cam.dz))
    c = (dx * sun[0] + dy * sun[1] + dz * sun[2]) / np.sqrt(dx * dx + dy * dy + dz * dz)
    c = np.maximum(c, 0.0)
    halo = c
    for _ in range(7):  # cos^128: about 7 deg to half strength
        halo = halo * halo
    wide = c * c * c * c
    cam._glare = (strength * (0.08 + 0.25 * wide + 0.9 * halo)).astype(F32)
    cam._glare_key = key
    return cam._glare


def to_nv12(rgb):
    """Display RGB (0..1) → NV12, BT.601 limited range; chroma is the mean of each 2×2 block."""
    r, g, b = rgb
    y = F32(16.0) + F32(219.0) * (F32(0.299) * r + F32(0.587) * g + F32(0.114) * b)
    u = F32(128.0) + F32(224.0) * (F32(-0.168736) * r + F32(-0.331264) * g + F32(0.5) * b)
    v = F32(128.0) + F32(224.0) * (F32(0.5) * r + F32(-0.418688) * g + F32(-0.081312) * b)

    def q(x):
        return np.clip(np.rint(x), 0, 255).astype(np.uint8)

    def down(x):
        return (x[0::2, 0::2] + x[1::2, 0::2] + x[0::2, 1::2] + x[1::2, 1::2]) * F32(0.25)

    uv = np.empty((y.shape[0] // 2, y.shape[1]), dtype=np.uint8)
    uv[:, 0::2] = q(down(u))
    uv[:, 1::2] = q(down(v))
    return q(y).tobytes() + uv.tobytes()


# --- The compiled path: synthraster.c does the per-pixel work of _ground and of the image's last
# steps (vignette, glare, look, to_nv12) with the same float32 operations as the numpy code
# above; the lead car (a small screen rectangle) stays in numpy. The structures mirror the C ones.

_MAX_LINES, _MAX_TRACKS, _LAYERS = 8, 16, 3
_PF = ctypes.POINTER(ctypes.c_float)
_PI64 = ctypes.POINTER(ctypes.c_int64)


class _GroundArgs(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64), ("idx", _PI64),
                ("gx", _PF), ("gy", _PF), ("foot_l", _PF), ("foot_s", _PF), ("haze", _PF),
                ("n_tab", ctypes.c_int64),
                ("tcx", _PF), ("tcy", _PF), ("tcos", _PF), ("tsin", _PF),
                ("s_base", ctypes.c_float), ("inv_step", ctypes.c_float),
                ("pos_max", ctypes.c_float), ("pose_s", ctypes.c_float),
                ("tex", _PF * _LAYERS), ("tex_n", ctypes.c_int64),
                ("inv_texel", ctypes.c_float * _LAYERS), ("contrast", ctypes.c_float * _LAYERS),
                ("edge_mid", ctypes.c_float), ("edge_half", ctypes.c_float),
                ("verge", ctypes.c_float * 3), ("asphalt_minus_verge", ctypes.c_float * 3),
                ("n_tracks", ctypes.c_int32), ("track_off", ctypes.c_float * _MAX_TRACKS),
                ("track_half", ctypes.c_float), ("track_dark", ctypes.c_float),
                ("has_shadows", ctypes.c_int32),
                ("sh_period", ctypes.c_float), ("sh_length", ctypes.c_float),
                ("sh_ratio", ctypes.c_float), ("sh_dark", ctypes.c_float),
                ("sh_centre", ctypes.c_float), ("sh_half", ctypes.c_float),
                ("has_wear", ctypes.c_int32), ("wear_base", ctypes.c_float),
                ("wear_k", ctypes.c_float),
                ("n_lines", ctypes.c_int32), ("line_off", ctypes.c_float * _MAX_LINES),
                ("line_double", ctypes.c_int32 * _MAX_LINES),
                ("line_dashed", ctypes.c_int32 * _MAX_LINES),
                ("paint", (ctypes.c_float * 3) * _MAX_LINES),
                ("line_half", ctypes.c_float), ("line_gap", ctypes.c_float),
                ("dash_period", ctypes.c_float), ("dash_length", ctypes.c_float),
                ("dash_ratio", ctypes.c_float),
                ("has_lead", ctypes.c_int32),
                ("lead_s", ctypes.c_float), ("lead_mid", ctypes.c_float),
                ("lead_half", ctypes.c_float), ("lead_centre", ctypes.c_float),
                ("lead_across", ctypes.c_float),
                ("sky_horizon", ctypes.c_float * 3),
                ("img", _PF * 3), ("threads", ctypes.c_int32)]


class _FinishArgs(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int64), ("height", ctypes.c_int64), ("img", _PF * 3),
                ("vignette", _PF), ("glare", _PF), ("glare_w", ctypes.c_float * 3),
                ("has_gain", ctypes.c_int32), ("gain", ctypes.c_float * 3),
                ("noise", ctypes.c_float), ("noise_table", _PF), ("row_start", _PI64),
                ("out", ctypes.POINTER(ctypes.c_uint8)), ("threads", ctypes.c_int32)]


def _pf(a):
    assert a.dtype == F32 and a.flags.c_contiguous
    return a.ctypes.data_as(_PF)


def _pi64(a):
    assert a.dtype == np.int64 and a.flags.c_contiguous
    return a.ctypes.data_as(_PI64)


def library_path(build_root=None):
    """Where meson builds the compiled rasteriser: BUILD/tools/synthdrive (BUILD: OP_BUILD_ROOT,
    else the source tree's build/)."""
    if build_root is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        build_root = os.environ.get("OP_BUILD_ROOT", os.path.join(root, "build"))
    return os.path.join(build_root, "tools", "synthdrive", "libsynthraster.so")


class FastRaster:
    """The compiled per-pixel code (libsynthraster.so). load() returns None where it is not
    built, and the caller renders with numpy."""

    VERSION = 1

    def __init__(self, lib, threads):
        self.lib = lib
        self.threads = max(1, int(threads))
        lib.sd_ground.argtypes = [ctypes.POINTER(_GroundArgs)]
        lib.sd_ground.restype = None
        lib.sd_finish.argtypes = [ctypes.POINTER(_FinishArgs)]
        lib.sd_finish.restype = None
        lib.sd_fill.argtypes = [_PF * 3, _PF * 3, ctypes.c_int64, ctypes.c_int32]
        lib.sd_fill.restype = None

    @classmethod
    def load(cls, path=None, threads=None):
        path = path or library_path()
        if not os.path.isfile(path):
            return None
        lib = ctypes.CDLL(path)
        lib.sd_version.restype = ctypes.c_int
        if lib.sd_version() != cls.VERSION:
            raise RuntimeError(f"{path}: version {lib.sd_version()}, raster.py needs "
                               f"{cls.VERSION} (rebuild)")
        return cls(lib, threads or os.cpu_count() or 1)

    def _buffers(self, cam):
        """Per-camera planes and NV12 output, allocated once per camera, reused every frame."""
        if getattr(cam, "_fast_planes", None) is None:
            cam._fast_planes = [np.empty((cam.h, cam.w), F32) for _ in range(3)]
            cam._fast_nv12 = np.empty(cam.w * cam.h * 3 // 2, np.uint8)
            cam._fast_ground = np.ascontiguousarray(cam.ground, dtype=np.int64)
        return cam._fast_planes, cam._fast_nv12

    def _ground_args(self, renderer, cam, pose, lead, planes):
        a = _GroundArgs()
        gi = cam._fast_ground
        a.n, a.idx = len(gi), _pi64(gi)
        a.gx, a.gy, a.foot_l, a.foot_s, a.haze = (_pf(v) for v in (cam.gX, cam.gY, cam.g_foot_l,
                                                                    cam.g_foot_s, cam.g_haze))
        tabs, s_base = renderer._centre_table(pose)
        a.n_tab = len(tabs[0])
        a.tcx, a.tcy, a.tcos, a.tsin = (_pf(t) for t in tabs)
        a.s_base, a.inv_step = s_base, F32(1.0 / scene.ROAD_STEP)
        a.pos_max, a.pose_s = F32(a.n_tab - 1.001), F32(pose.s)
        tex = renderer.tex
        for k, (t, texel, contrast) in enumerate(tex.layers):
            a.tex[k] = _pf(t)
            a.inv_texel[k], a.contrast[k] = F32(1.0 / texel), F32(contrast)
        a.tex_n = tex.n
        e0, e1 = scene.ROAD_EDGE_OFFSETS
        if e0 == -e1:
            a.edge_mid, a.edge_half = F32(0.0), F32(e1)
        else:
            a.edge_mid, a.edge_half = F32((e0 + e1) / 2), F32((e1 - e0) / 2)
        for c in range(3):
            a.verge[c] = F32(VERGE[c])
            a.asphalt_minus_verge[c] = F32(ASPHALT[c] - VERGE[c])
            a.sky_horizon[c] = F32(SKY_HORIZON[c])
        tracks = [F32(o + side) for o in ((k - scene.EGO_LANE) * scene.LANE_WIDTH
                                          for k in range(scene.LANES)) for side in (-0.8, 0.8)]
        lines = scene.LANE_LINE_OFFSETS
        if len(tracks) > _MAX_TRACKS or len(lines) > _MAX_LINES:
            raise ValueError(f"raster: {scene.LANES} lanes is more than the compiled path holds")
        a.n_tracks = len(tracks)
        for k, o in enumerate(tracks):
            a.track_off[k] = o
        a.track_half, a.track_dark = F32(0.35), F32(0.07)
        if scene.SHADOWS is not None:
            period, length, dark, centre, half = scene.SHADOWS
            a.has_shadows = 1
            a.sh_period, a.sh_length, a.sh_ratio = F32(period), F32(length), F32(length / period)
            a.sh_dark, a.sh_centre, a.sh_half = F32(dark), F32(centre), F32(half)
        if scene.PAINT_WEAR > 0:
            a.has_wear = 1
            a.wear_base, a.wear_k = F32(1.0 - scene.PAINT_WEAR), F32(4.0 * scene.PAINT_WEAR)
        a.n_lines = len(lines)
        for k, off in enumerate(lines):
            a.line_off[k] = F32(off)
            a.line_double[k] = int(bool(scene.LANE_LINE_DOUBLE[k]))
            a.line_dashed[k] = int(bool(scene.LANE_LINE_DASHED[k]))
            paint = YELLOW if scene.LANE_LINE_YELLOW[k] else WHITE
            for c in range(3):
                a.paint[k][c] = F32(paint[c])
        a.line_half, a.line_gap = F32(scene.LINE_WIDTH / 2), F32(scene.LINE_WIDTH)
        a.dash_period, a.dash_length = F32(scene.DASH_PERIOD), F32(scene.DASH_LENGTH)
        a.dash_ratio = F32(scene.DASH_LENGTH / scene.DASH_PERIOD)
        if lead is not None:
            a.has_lead = 1
            a.lead_s = F32(lead.s - pose.s)
            a.lead_mid, a.lead_half = F32(scene.LEAD_LENGTH / 2), F32(scene.LEAD_LENGTH / 2 + 0.3)
            a.lead_centre = F32(0.0) if scene.LEAD_CUT is None else F32(lead.lateral)
            a.lead_across = F32(scene.LEAD_WIDTH / 2 + 0.15)
        for c in range(3):
            a.img[c] = _pf(planes[c])
        a.threads = self.threads
        # The arrays behind the pointers must outlive the call.
        a._keep = (tabs,)
        return a

    def render(self, renderer, cam, t, pose, lead):
        planes, nv12 = self._buffers(cam)
        ptrs = (_PF * 3)(*(_pf(p) for p in planes))
        self.lib.sd_fill(ptrs, (_PF * 3)(*(_pf(s) for s in cam.sky)), cam.w * cam.h, self.threads)
        g = self._ground_args(renderer, cam, pose, lead, planes)
        self.lib.sd_ground(ctypes.byref(g))
        if lead is not None:
            renderer._lead(cam, planes, pose, lead)
        f = _FinishArgs()
        f.width, f.height, f.img = cam.w, cam.h, ptrs
        f.vignette = _pf(cam.vignette)
        keep = []
        if scene.GLARE is not None:
            f.glare = _pf(_glare(cam))
            for c, w in enumerate((1.0, 0.93, 0.78)):
                f.glare_w[c] = F32(w)
        look = renderer.look
        if look is not None:
            f.has_gain = 1
            for c in range(3):
                f.gain[c] = look.gain[c]
            f.noise = look.noise
            if look.noise > 0:
                table, rows = look.noise_table(cam.w), look.noise_rows(cam, t)
                keep += [table, rows]
                f.noise_table, f.row_start = _pf(table), _pi64(rows)
        f.out = nv12.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        f.threads = self.threads
        self.lib.sd_finish(ctypes.byref(f))
        return nv12.tobytes()
