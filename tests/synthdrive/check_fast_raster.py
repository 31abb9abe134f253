#!/usr/bin/env python3
"""The compiled rasteriser (tools/synthdrive/synthraster.c) draws the same frames as raster.py's
numpy code, byte for byte.

The compiled code repeats the numpy path's float32 operations in the same order with the same
constants, without fused multiply-adds, and IEEE 754 rounds each of them exactly; so the honest
expectation is equality, not a tolerance. Frames: the bundled sample's scene (no seed) and two
seeds chosen to use every scene feature between them (4 lanes, a double yellow line, dashes,
worn paint, shadows, sun glare, a cutting lead car, lighting and sensor noise; and a drive with
no lead), road and wide camera each. On a difference it prints where and how large.

Exit 0 pass, 1 fail. Usage: check_fast_raster.py LIBSYNTHRASTER SOURCE_ROOT
"""
import os
import sys

import numpy as np

# (seed or None for the sample's scene, frame). Seed 111: 4 lanes, double line, worn paint,
# shadows, glare, a lead cutting out, noise. Seed 198: no lead, shadows, glare, worn paint.
CASES = [(None, 100), (111, 30), (198, 10)]


def main():
    lib, root = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(root, "tools", "synthdrive"))
    import raster
    import render
    import scene
    import variety

    fast = raster.FastRaster.load(lib, threads=2)
    if fast is None:
        print(f"FAIL: no compiled rasteriser at {lib}")
        return 1
    failed = 0
    w, h = render.WIDTH, render.HEIGHT
    for seed, frame in CASES:  # the sample first: variety.apply changes the scene module
        rpy, params = render.CALIB_RPY, None
        if seed is not None:
            params = variety.draw(seed)
            variety.apply(params)
            rpy = tuple(params["calibration_rpy"])
        t = frame / scene.FPS
        road = scene.Road(scene.ego_s(t + 1.0) + 600.0)
        cams = {"road": raster.Camera(w, h, render.ROAD_FOCAL, rpy, scene.CAMERA_HEIGHT),
                "wide": raster.Camera(w, h, render.WIDE_FOCAL, rpy, scene.CAMERA_HEIGHT)}
        out = []
        for f in (None, fast):
            r = raster.Renderer(road, cams, rpy, fast=f)
            if params is not None:
                r.tex = raster.Textures(seed)
                r.look = variety.Look(params)
            out.append({name: np.frombuffer(r.render(cam, t), np.uint8) for name, cam in cams.items()})
        for name in cams:
            ref, got = out[0][name], out[1][name]
            d = np.abs(ref.astype(np.int16) - got.astype(np.int16))
            what = f"seed {seed if seed is not None else '(sample)'} frame {frame} {name}"
            if d.any():
                failed += 1
                for plane, sl in (("Y", slice(0, w * h)), ("UV", slice(w * h, None))):
                    p = d[sl]
                    first = np.flatnonzero(p)[:1]
                    print(f"FAIL: {what} {plane}: {np.count_nonzero(p)} bytes differ, max |d| "
                          f"{p.max()}, mean |d| {p.mean():.2e}, first at byte {first.tolist()}")
            else:
                print(f"ok: {what}: identical ({ref.size} bytes, mean Y {ref[:w * h].mean():.1f})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
