#!/usr/bin/env python3
"""The C++ reference warp against an independent numpy warp written from the contract (§1-2).

numpy computes the matrices in float64 from the contract's tables, compares them with the ones
the C++ side rounds for the kernels, then warps in float32 (each product and sum rounded on its
own, as numpy does elementwise: no fused multiply-add), rounds half to even with np.rint, clamps
and gathers, and lays the six channels out. The bytes must be identical.

Usage: warp_numpy_check.py WARP_DUMP_BINARY
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

FOCAL = {('tici', 'road'): 2648.0, ('tici', 'wide'): 567.0,
         ('mici', 'road'): 1141.5, ('mici', 'wide'): 425.25}
SIZE = {'tici': (1928, 1208), 'mici': (1344, 760)}
MODEL = {'medmodel': (910.0, 256.0, 47.6), 'sbigmodel': (455.0, 256.0, 151.8)}


def rot(roll, pitch, yaw):
    cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def warp_matrix(device, role, model, rpy):
    w, h = SIZE[device]
    f = FOCAL[(device, role)]
    k_cam = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]])
    mf, mcx, mcy = MODEL[model]
    k_model = np.array([[mf, 0, mcx], [0, mf, mcy], [0, 0, 1]])
    v = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=np.float64)
    return k_cam @ v @ rot(*rpy) @ v.T @ np.linalg.inv(k_model)


def sample(plane, m, out_w, out_h):
    """Nearest-neighbour warp of one plane (H×W or H×W×2) with a float32 row-major matrix."""
    m = np.asarray(m, dtype=np.float32).reshape(3, 3)
    y, x = np.mgrid[0:out_h, 0:out_w].astype(np.float32)
    num_x = (m[0, 0] * x + m[0, 1] * y) + m[0, 2]
    num_y = (m[1, 0] * x + m[1, 1] * y) + m[1, 2]
    den = (m[2, 0] * x + m[2, 1] * y) + m[2, 2]
    sx, sy = num_x / den, num_y / den
    assert sx.dtype == np.float32
    ix = np.clip(np.rint(sx), 0, plane.shape[1] - 1).astype(np.int64)
    iy = np.clip(np.rint(sy), 0, plane.shape[0] - 1).astype(np.int64)
    return plane[iy, ix]


def main():
    dump = sys.argv[1]
    rng = np.random.default_rng(2024)
    cases = [('tici', 'road', 'medmodel', (0.0, 0.0, 0.0), 'camera'),
             ('tici', 'road', 'medmodel', (0.0, 0.02, -0.01), 'tight'),
             ('tici', 'wide', 'sbigmodel', (0.01, -0.03, 0.02), 'camera'),
             ('mici', 'road', 'medmodel', (-0.02, 0.05, 0.03), 'camera'),
             ('mici', 'wide', 'sbigmodel', (0.1, -0.08, 0.12), 'tight')]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for device, role, model, rpy, layout in cases:
            w, h = SIZE[device]
            if layout == 'camera':
                stride = (w + 127) // 128 * 128
                uv_offset = stride * ((h + 31) // 32 * 32)
            else:
                stride, uv_offset = w, w * h
            size = uv_offset + stride * (h // 2 - 1) + w
            frame = rng.integers(0, 256, size, dtype=np.uint8)
            src, dst = os.path.join(tmp, 'in.bin'), os.path.join(tmp, 'out.bin')
            frame.tofile(src)
            rpy_s = ','.join(repr(v) for v in rpy)
            res = subprocess.run([dump, device, role, model, rpy_s,
                                  f'{w},{h},0,{stride},{uv_offset},{stride}', src, dst],
                                 capture_output=True, text=True, check=True)
            mats = {line.split(':')[0]: np.array(line.split()[1:], dtype=np.float64)
                    for line in res.stdout.splitlines()}

            m = warp_matrix(device, role, model, rpy)
            s = np.diag([0.5, 0.5, 1.0])
            m_uv = s @ m @ np.linalg.inv(s)
            name = f'{device} {role} {model} rpy={rpy} {layout}'
            for key, want in (('y', m), ('uv', m_uv)):
                want32 = want.astype(np.float32).ravel()
                if not np.allclose(mats[key], want32, rtol=1e-6, atol=1e-9):
                    print(f'FAIL {name}: {key} matrix {mats[key]} != {want32}')
                    failures += 1

            y_plane = frame[:stride * h].reshape(h, stride)[:, :w]
            uv_plane = frame[uv_offset:uv_offset + stride * (h // 2 - 1) + w]
            uv_plane = np.pad(uv_plane, (0, stride * (h // 2) - uv_plane.size)).reshape(h // 2, stride)
            uv_plane = uv_plane[:, :w].reshape(h // 2, w // 2, 2)
            y_out = sample(y_plane, mats['y'], 512, 256)
            uv_out = sample(uv_plane, mats['uv'], 256, 128)
            want = np.stack([y_out[0::2, 0::2], y_out[1::2, 0::2], y_out[0::2, 1::2],
                             y_out[1::2, 1::2], uv_out[..., 0], uv_out[..., 1]])
            got = np.fromfile(dst, dtype=np.uint8).reshape(6, 128, 256)
            bad = np.argwhere(got != want)
            if bad.size:
                c, r, col = bad[0]
                print(f'FAIL {name}: {len(bad)} bytes differ, first at channel {c} row {r} '
                      f'col {col}: C++ {got[c, r, col]}, numpy {want[c, r, col]}')
                failures += 1
            else:
                print(f'ok   {name}')
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
