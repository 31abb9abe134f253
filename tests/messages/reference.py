#!/usr/bin/env python3
"""Independent numpy reference for the output parser and message filler (docs/contract.md,
"Parsing the outputs" and "Filling the messages").

Writes OUT as lines `key count v0 v1 ...` (numbers) or `key = text` (strings). The C++ tests in
test_parse_fill.cpp feed the same inputs through op::drive and compare. Written from the contract
page in numpy's vectorised style, not from our C++, so the two can disagree.

  reference.py OUT
"""
import sys

import numpy as np

F32 = np.float32
T_IDXS = np.array([10.0 * (i / 32) ** 2 for i in range(33)])
LEAD_T_IDXS = [0, 2, 4, 6, 8, 10]

records = []


def put(key, values):
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    records.append(f"{key} {a.size} " + " ".join(repr(float(v)) for v in a))


def put_text(key, text):
    records.append(f"{key} = {text}")


def safe_exp(x):
    return np.exp(np.minimum(x, F32(11))).astype(F32)


def sigmoid(x):
    return (F32(1) / (F32(1) + safe_exp(-x))).astype(F32)


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(F32)


def mdn(raw, shape, hypotheses=0, selections=0):
    """Mixture block → (mean, std) of `shape` (selections rows first when multi-hypothesis)."""
    if hypotheses == 0:
        n = raw.size // 2
        return raw[:n].reshape(shape), safe_exp(raw[n:]).reshape(shape)
    rows = raw.reshape(hypotheses, -1)
    n = (rows.shape[1] - selections) // 2
    weights = softmax(rows[:, 2 * n:], axis=0)  # over hypotheses, per selection column
    # Highest weight wins; on a tie the later hypothesis (reverse of a stable ascending sort).
    best = [hypotheses - 1 - int(np.argmax(weights[::-1, c])) for c in range(selections)]
    mean = np.stack([rows[b, :n] for b in best])
    std = np.stack([safe_exp(rows[b, n:2 * n]) for b in best])
    out_shape = shape if selections == 1 else (selections,) + shape
    return mean.reshape(out_shape), std.reshape(out_shape), best


def make_case(name, rng, plan_width, lead_width, settings):
    sizes = {
        "plan": plan_width, "lane_lines": 528, "lane_lines_prob": 8, "road_edges": 264,
        "lead": lead_width, "lead_prob": 3, "desire_pred": 32, "desire_state": 8, "meta": 55,
        "pose": 12, "wide_from_device_euler": 6, "road_transform": 12, "hidden_state": 512,
    }
    # A shuffled order with padding in between: the parser must follow the table.
    order = list(sizes)
    rng.shuffle(order)
    slices, pos = [], 0
    for key in order:
        pos += int(rng.integers(0, 5))
        slices.append(f"{key}:{pos}:{pos + sizes[key]}")
        pos += sizes[key]
    raw = (rng.standard_normal(pos) * 2).astype(F32)
    # A few values past the safe_exp clip, to exercise it.
    raw[rng.integers(0, pos, 20)] = F32(13.5)
    put_text(f"{name}.slices", ",".join(slices))
    put(f"{name}.raw", raw)
    at = {s.split(":")[0]: raw[int(s.split(":")[1]):int(s.split(":")[2])] for s in slices}

    if plan_width == 990:
        plan, plan_std = mdn(at["plan"], (33, 15))
    else:
        plan, plan_std, best = mdn(at["plan"], (33, 15), hypotheses=5, selections=1)
        put(f"{name}.plan_hypothesis", best)
    if lead_width == 144:
        lead, lead_std = mdn(at["lead"], (3, 6, 4))
    else:
        lead, lead_std, best = mdn(at["lead"], (6, 4), hypotheses=2, selections=3)
        put(f"{name}.lead_hypotheses", best)
    lane, lane_std = mdn(at["lane_lines"], (4, 33, 2))
    edge, edge_std = mdn(at["road_edges"], (2, 33, 2))
    pose, pose_std = mdn(at["pose"], (6,))
    wide, wide_std = mdn(at["wide_from_device_euler"], (3,))
    road, road_std = mdn(at["road_transform"], (6,))
    parsed = {
        "plan": plan, "plan_std": plan_std, "lead": lead, "lead_std": lead_std,
        "lane_lines": lane, "lane_lines_std": lane_std, "road_edges": edge,
        "road_edges_std": edge_std, "pose": pose, "pose_std": pose_std,
        "wide_from_device_euler": wide, "wide_from_device_euler_std": wide_std,
        "road_transform": road, "road_transform_std": road_std,
        "lane_lines_prob": sigmoid(at["lane_lines_prob"]), "lead_prob": sigmoid(at["lead_prob"]),
        "meta": sigmoid(at["meta"]), "desire_pred": softmax(at["desire_pred"].reshape(4, 8)),
        "desire_state": softmax(at["desire_state"]),
    }
    for key, value in parsed.items():
        put(f"{name}.{key}", value)

    # Action from a zero previous action, and the path polynomial.
    v_ego, lat_delay, long_delay = settings
    put(f"{name}.settings", settings)
    accel, curv, stop = action(plan, v_ego, lat_delay, long_delay, 0.0, 0.0)
    put(f"{name}.action", [curv, accel, stop])
    coeffs = np.polynomial.polynomial.polyfit(T_IDXS, plan[:, 0:3].astype(np.float64), 4)
    put(f"{name}.path", coeffs.T)  # x coefficients, then y, then z (increasing power)
    return parsed


def action(plan, v_ego, lat_delay, long_delay, prev_accel, prev_curv):
    t_long = long_delay + 0.3 + 0.05 + 0.025
    v, a = plan[:, 3].astype(np.float64), plan[:, 6].astype(np.float64)
    a_target = 2 * (np.interp(t_long, T_IDXS, v) - v[0]) / t_long - a[0]
    alpha = 1 - np.exp(-0.05 / 0.3)
    accel = alpha * a_target + (1 - alpha) * prev_accel
    stop = bool(v[0] < 0.3 and a_target < 0.1)
    if v_ego > 0.3:
        t_lat = lat_delay + 0.05 + 0.025
        speed = max(v_ego, 1.0)
        psi = np.interp(t_lat, T_IDXS, plan[:, 11].astype(np.float64))
        curv = 2 * psi / (speed * t_lat) - float(plan[0, 14]) / speed
    else:
        curv = prev_curv
    # The message stores float32, and the next frame smooths against what was stored.
    return float(F32(accel)), float(F32(curv)), stop


def sequence(rng):
    """Hard-brake and confidence rules over many frames, and the action's smoothing and hold."""
    n = 600
    frame_ids = np.arange(1, n + 1)
    frame_ids[300:] += 3  # a drop: ids 301.. jump, so the update at 320 moves to 320 - 3 etc.
    meta = np.zeros((n, 55), dtype=F32)
    levels = [0.0005, 0.004, 0.02, 0.08]
    for f in range(n):
        level = levels[(f // 90) % 4]
        meta[f] = (rng.random(55) * 2 * level).astype(F32)
        # Runs where a hard brake is likely, with noise that sometimes breaks them.
        alarm = (f // 23) % 3 == 1
        meta[f, 6] = F32(rng.uniform(0.12, 0.5) if alarm else rng.uniform(0.0, 0.2))   # brake 5
        meta[f, 4] = F32(rng.uniform(0.65, 0.99) if alarm else rng.uniform(0.3, 0.8))  # brake 3
    put("seq.frame_ids", frame_ids)
    put("seq.meta", meta)

    hist5, hist3 = np.zeros(5, dtype=F32), np.zeros(2, dtype=F32)
    buf = np.zeros(25, dtype=F32)
    hard, conf = [], []
    for f in range(n):
        hist5 = np.append(hist5[1:], meta[f, 6])
        hist3 = np.append(hist3[1:], meta[f, 4])
        hard.append(bool(np.all(hist5 > np.array([.05, .05, .15, .15, .15])) and
                         np.all(hist3 > np.array([.7, .7]))))
        if frame_ids[f] % 40 == 0:
            brake, gas, steer = meta[f, 2:31:6], meta[f, 1:31:6], meta[f, 3:31:6]
            p_any = F32(1) - (F32(1) - brake) * (F32(1) - gas) * (F32(1) - steer)
            ind = np.concatenate([p_any[:1], np.diff(p_any) / (F32(1) - p_any[:-1])]).astype(F32)
            buf = np.concatenate([buf[5:], ind])
        score = sum(float(buf[5 * i + 4 - i]) / 5 for i in range(5))
        conf.append(2 if score < 0.01165 else 1 if score < 0.06157 else 0)
    put("seq.hard_brake", hard)
    put("seq.confidence", conf)

    # Action over 40 frames: random plans, a speed that dips below 0.3 m/s (curvature held).
    m = 40
    plans = (rng.standard_normal((m, 33, 15)) * 0.5).astype(F32)
    plans[:, :, 3] += np.linspace(0, 3, m, dtype=F32)[:, None]  # speeds through the stop range
    v_ego = np.abs(rng.standard_normal(m) * 5)
    v_ego[10:14] = [0.1, 0.3, 0.25, 0.0]
    # Stopping: slowing to a halt (stop), and slow but speeding up (no stop).
    plans[20:26, :, 3] = np.linspace(0.2, 0.0, 33, dtype=F32)
    plans[20:26, :, 6] = 0
    plans[26:28, :, 3] = np.linspace(0.2, 2.0, 33, dtype=F32)
    plans[26:28, :, 6] = 0
    put("seq.plans", plans)
    put("seq.v_ego", v_ego)
    prev_a, prev_c, out = 0.0, 0.0, []
    for f in range(m):
        prev_a, prev_c, stop = action(plans[f], v_ego[f], 0.2, 0.15, prev_a, prev_c)
        out.append([prev_c, prev_a, stop])
    put("seq.actions", out)


def main():
    rng = np.random.default_rng(20260407)
    make_case("single", rng, 990, 144, (12.5, 0.2, 0.15))
    make_case("mhp", rng, 4955, 102, (0.2, 0.1, 0.0))  # v_ego below 0.3: curvature held at 0
    sequence(rng)
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(records) + "\n")


if __name__ == "__main__":
    main()
